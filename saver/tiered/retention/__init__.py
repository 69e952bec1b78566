"""Retention: the durable tier bounded too. A ``RetentionPolicy`` (idle TTL of whole threads, ``keep_last``
checkpoints per namespace) swept in the background, a bounded number of threads a pass, each removal one
transaction of the durable database.

Modules, from the top: ``sweep`` (the passes: finding due threads, a bounded number a pass),
``threads`` (one thread's removal in both tiers), ``plan`` (what a prune removes, from ids alone),
``waiting`` (threads
waiting at an interrupt: kept resumable, or deleted with a row that refuses their resume), ``resumes`` (that
refusal, on the write path), ``policy`` and ``ids`` (the time inside a checkpoint id). The SQL of SQLite's and
PostgreSQL's tables, run in one transaction, is their backends' (``tiered/backends/``).
"""

from __future__ import annotations

from . import resumes
from .policy import RetentionPolicy, kind_problem
from .sweep import Sweeper, run_pass
from .threads import prune_threads

__all__ = ["RetentionPolicy", "Sweeper", "kind_problem", "prune_threads", "resumes", "run_pass"]
