"""Benchmarks compare savers side by side: for each operation and size, every saver
runs back to back in the same session, and ``report.py`` turns medians into ratios."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
