"""A resume of a thread the memory saver dropped: what the saver sees of it, and the error it raises.

LangGraph starts a thread it finds no checkpoint for afresh, even for
``Command(resume=...)``. Traced on langgraph 1.2 (``tests/saver/test_interrupts_and_eviction.py``
replays it): after ``get_tuple`` of the thread returns None, a resume run sends

* under ``durability="sync"`` and ``"async"``: the answer as a pending write to
  ``__resume__`` (under the null task id), then an ``input`` checkpoint with no
  parent whose input channel holds the ``Command`` itself, then the fresh run's
  steps. The write and the checkpoint go out from worker threads (or tasks), so
  either may arrive first;
* under ``durability="exit"``: nothing until the run ends, and then only what a
  new run sends: the answer and the ``Command`` never reach the saver.

So the engine refuses (``ResumeRefusedError``) a pending write to
``ANSWER_CHANNELS``, and a first checkpoint ``resumes_input`` says carries a
resume, for a thread that was dropped and holds nothing; and the saver re-raises
that as ``InterruptLostError``. LangGraph chains a run's checkpoint puts, so
once its first one is refused none of the others comes. What ``exit`` durability
hides, only ``dropped_thread_quarantine_seconds`` can refuse: a new run on a
recently dropped thread, refused at its first read (``starts_run``).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig

from .engine import ResumeRefusedError, dropped_how

__all__ = [
    "ANSWER_CHANNELS",
    "RUN_MARKER",
    "InterruptLostError",
    "lost",
    "resumes_input",
    "starts_run",
]

logger = logging.getLogger(__name__)

ANSWER_CHANNELS = frozenset({"__resume__"})
"""LangGraph's channel for the answer to an interrupt (a key of ``langgraph.checkpoint.base.WRITES_IDX_MAP``)."""

RUN_MARKER = "__pregel_runtime"
"""A key LangGraph puts in ``configurable`` for the length of a run: its reads carry it, ``get_state``'s do not."""


class InterruptLostError(ResumeRefusedError):
    """``Command(resume=...)`` on a thread the saver evicted or expired: the interrupt it answers is gone.

    Raised before anything is stored for the thread and before any other thread
    is evicted for it: the answer was not applied. A new run on the thread (with
    input, not a resume) starts it afresh; ``TieredSaver`` keeps interrupted
    threads through eviction, and raises it for a thread its retention deleted
    while it waited (``RetentionPolicy.interrupted_ttl_seconds``), in any process
    over the same database.

    Attributes:
        limit: The limit that dropped the thread (``max_threads``, ``idle_ttl_seconds``,
            ``interrupted_ttl_seconds``...).
        limit_value: That limit's value.
        thread_id: The thread.
        checkpoint_id: The empty checkpoint LangGraph resumed from.
        seconds_ago: How long before the resume the thread was dropped.
        dropped_at_wall: When it was dropped (``time.time()``).
    """


def lost(error: ResumeRefusedError, *, log: bool) -> InterruptLostError:
    """The saver's words for the engine's refusal of a resume; with ``log``, logged as a warning too: a run
    can end with an error of its own (a node that failed on the empty state first), and the refusal must
    still be seen. The refusal of the answer's write logs it, that of the ``input`` checkpoint does not: every
    resume LangGraph sends the saver has both, in either order, and one line says it.

    Runtime complexity: O(1).
    """
    how = dropped_how(error.limit, error.limit_value, error.dropped_at_wall, error.seconds_ago)
    message = (
        f"cannot resume thread {error.thread_id!r}: it was {how} before this resume, and the interrupt the "
        f"resume answers went with it. The answer (Command(resume=...)) was not applied: nothing was stored for "
        f"the thread and no other thread was evicted. Start a new run on the thread (with input: it starts "
        f"afresh), or use TieredSaver, which keeps interrupted threads through eviction."
    )
    if log:
        logger.warning("%s", message)
    return InterruptLostError(
        error.limit,
        error.limit_value,
        thread_id=error.thread_id or "",
        checkpoint_id=error.checkpoint_id,
        seconds_ago=error.seconds_ago,
        dropped_at_wall=error.dropped_at_wall,
        message=message,
    )


def resumes_input(checkpoint: Mapping[str, Any], metadata: Mapping[str, Any]) -> bool:
    """Whether a first checkpoint (no parent) is the ``input`` checkpoint of a resume LangGraph started afresh:
    its input channel holds a ``Command`` with a ``resume``.

    Runtime complexity: O(c) for the checkpoint's c channel values (one, an input's).
    """
    if metadata.get("source") != "input":
        return False
    command = getattr(sys.modules.get("langgraph.types"), "Command", None)  # loaded if a graph runs
    if command is None:
        return False
    values = checkpoint.get("channel_values") or {}
    return any(isinstance(value, command) and value.resume is not None for value in values.values())


def starts_run(config: RunnableConfig, namespace: str, checkpoint_id: str | None) -> bool:
    """Whether a read is a run's first: the latest checkpoint of the root namespace, read by a running graph.

    Runtime complexity: O(1).
    """
    section = config.get("configurable")
    return checkpoint_id is None and not namespace and isinstance(section, Mapping) and RUN_MARKER in section
