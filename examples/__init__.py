"""Examples, installed with the package: ``demo.py`` (``python -m langgraph.checkpoint.bounded.examples.demo``)
and the serving recipes in ``serving/`` (``langgraph.json`` and ``graph.py`` for ``langgraph dev``,
``fastapi_app.py`` for fastapi-langgraph-server), which ``langgraph-bounded examples DIR`` copies out."""
