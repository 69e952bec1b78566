"""``python -m langgraph.checkpoint.bounded``: the ``langgraph-bounded`` command (``cli.main``)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
