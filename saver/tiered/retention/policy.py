"""``RetentionPolicy``: how long the durable tier keeps a thread, and how much of it.

LangGraph's savers keep every checkpoint of every thread forever. A retention
policy bounds what ``TieredSaver``'s durable tier holds, swept in the
background (``retention.sweep``):

* ``idle_ttl_seconds``: a thread with no write for longer than this (its newest
  checkpoint is older: LangGraph's checkpoint ids are uuid6, the time of their
  put inside) is deleted (``strategy="delete"``), or keeps its newest
  checkpoint per namespace with that checkpoint's pending writes
  (``strategy="keep_latest"``), the Agent Server's two strategies;
* ``keep_last``: every namespace keeps its newest ``keep_last`` checkpoints;
* either way, every checkpoint a kept one needs survives: the ancestors that
  rebuild its ``DeltaChannel`` values, and its pending writes, so an
  interrupted run resumes and completed tasks do not run again;
* a thread waiting at an ``interrupt()`` (its newest root checkpoint holds an
  ``__interrupt__`` write) is never deleted by the idle TTL alone: under
  ``strategy="delete"`` it is pruned as ``"keep_latest"`` prunes, so it stays
  resumable, until ``interrupted_ttl_seconds`` (None: never) passes too; then it
  is deleted, and a resume of it raises ``InterruptLostError`` in every
  process over the same database (``retention.waiting``).

The Agent Server's ``langgraph.json`` says the same in minutes
(``"checkpointer": {"ttl": {"strategy": "delete", "default_ttl": 43200,
"sweep_interval_minutes": 60}}``): ``RetentionPolicy.from_agent_server_ttl``
reads that block.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ...engine import InvalidArgumentError
from ..backends.base import Kind

__all__ = ["DEFAULT_SWEEP_INTERVAL_SECONDS", "STRATEGIES", "RetentionPolicy", "Strategy", "kind_problem"]

Strategy = Literal["delete", "keep_latest"]
STRATEGIES: tuple[Strategy, ...] = ("delete", "keep_latest")

DEFAULT_SWEEP_INTERVAL_SECONDS = 3600.0
"""The Agent Server's default ``sweep_interval_minutes`` (60)."""


@dataclass(frozen=True)
class RetentionPolicy:
    """How long ``TieredSaver``'s durable tier keeps a thread, and how many checkpoints of it.

    Attributes:
        idle_ttl_seconds: A thread with no write for longer than this is swept (None: never).
        strategy: What sweeping an idle thread does: ``"delete"`` it from both tiers, or ``"keep_latest"``:
            keep each namespace's newest checkpoint, its pending writes and the ancestors it needs. A thread
            waiting at an ``interrupt()`` is never deleted for idleness alone: ``"delete"`` prunes it as
            ``"keep_latest"`` does (its resume works), until ``interrupted_ttl_seconds`` passes too.
        interrupted_ttl_seconds: ``strategy="delete"``: a thread waiting at an ``interrupt()`` (its newest root
            checkpoint holds an ``__interrupt__`` write) with no write for longer than this is deleted too
            (None, the default: a waiting thread is never deleted, only pruned). At least ``idle_ttl_seconds``.
            A resume of a thread it deleted raises ``InterruptLostError`` naming this field, in this process
            and in any other over the same SQLite or PostgreSQL database (a row of the table
            ``bounded_retention_removed``, kept for ``interrupted_ttl_seconds`` after the deletion); the
            answer is not applied and nothing is stored. A new run on the thread (input, not a resume) starts
            it afresh. ``strategy="keep_latest"`` and ``keep_last`` keep a waiting thread resumable anyway.
        keep_last: Every namespace keeps its newest ``keep_last`` checkpoints, their pending writes and the
            ancestors they need (None: no count).
        max_thread_bytes: A thread's bytes in the durable tier (``TieredSaver.thread_storage``'s
            ``durable.total_bytes``) above which a sweep prunes it: each namespace keeps its newest checkpoints,
            as many as fit (at most ``keep_last``), their pending writes and the ancestors they need; never fewer
            than ``keep_last=1`` keeps. A thread whose newest checkpoint alone passes the bound stays over it,
            counted (``SweepReport.over_bytes``) and logged. Checked in the threads written since the last pass
            (None: no byte bound). SQLite and PostgreSQL durable savers only (their tables are summed).
        sweep_interval_seconds: Seconds between background sweeps (``math.inf``: only ``sweep()``).
        max_threads_per_sweep: Threads one background pass removes from at most (bounded work; a thread
            in use is skipped at no cost to it); the rest wait for the next pass, counted as due
            (``stats().retention.due_threads``). ``sweep()`` takes them all. Both counts are at most
            2,147,483,647.

    Raises:
        InvalidArgumentError: A value is invalid, naming the field, or neither ``idle_ttl_seconds`` nor
            ``keep_last`` is set (the policy would remove nothing).

    Example:
        ```python
        from langgraph.checkpoint.bounded import RetentionPolicy

        policy = RetentionPolicy(idle_ttl_seconds=30 * 24 * 3600, keep_last=50, sweep_interval_seconds=600)
        ```
    """

    idle_ttl_seconds: float | None = None
    strategy: Strategy = "delete"
    keep_last: int | None = None
    sweep_interval_seconds: float = DEFAULT_SWEEP_INTERVAL_SECONDS
    max_threads_per_sweep: int = 10_000
    interrupted_ttl_seconds: float | None = None
    max_thread_bytes: int | None = None

    def __post_init__(self) -> None:
        if self.idle_ttl_seconds is not None:
            _positive("idle_ttl_seconds", self.idle_ttl_seconds, allow_inf=False)
        if self.strategy not in STRATEGIES:
            raise InvalidArgumentError(f"strategy must be one of {STRATEGIES}, got {self.strategy!r:.40}")
        if self.keep_last is not None:
            _whole("keep_last", self.keep_last)
        _positive("sweep_interval_seconds", self.sweep_interval_seconds, allow_inf=True)
        _whole("max_threads_per_sweep", self.max_threads_per_sweep)
        if self.interrupted_ttl_seconds is not None:
            _positive("interrupted_ttl_seconds", self.interrupted_ttl_seconds, allow_inf=False)
            if self.idle_ttl_seconds is None or self.strategy != "delete":
                raise InvalidArgumentError(
                    "interrupted_ttl_seconds needs idle_ttl_seconds and strategy='delete' (it is how long a thread "
                    "waiting at an interrupt may stay idle before that deletion takes it too), got "
                    f"idle_ttl_seconds={self.idle_ttl_seconds!r:.40}, strategy={self.strategy!r:.40}"
                )
            if self.interrupted_ttl_seconds < self.idle_ttl_seconds:
                raise InvalidArgumentError(
                    f"interrupted_ttl_seconds must be at least idle_ttl_seconds ({self.idle_ttl_seconds:,}), got "
                    f"{self.interrupted_ttl_seconds!r:.40}"
                )
        if self.max_thread_bytes is not None:
            _bytes("max_thread_bytes", self.max_thread_bytes)
        if self.idle_ttl_seconds is None and self.keep_last is None and self.max_thread_bytes is None:
            raise InvalidArgumentError(
                "RetentionPolicy() removes nothing: set idle_ttl_seconds (sweep threads idle for longer), keep_last "
                "(keep each namespace's newest checkpoints), max_thread_bytes (prune threads larger), or several; "
                "or pass retention=None to keep everything"
            )

    @property
    def keeps_checkpoints(self) -> bool:
        """Whether a sweep prunes threads (keeps some checkpoints) rather than only deleting whole ones.
        Runtime complexity: O(1)."""
        return (
            self.keep_last is not None
            or self.max_thread_bytes is not None
            or (self.idle_ttl_seconds is not None and self.strategy == "keep_latest")
        )

    @classmethod
    def from_agent_server_ttl(cls, ttl: Mapping[str, Any], **overrides: Any) -> RetentionPolicy:
        """The policy a ``langgraph.json`` ``checkpointer.ttl`` block describes (minutes), with ``overrides``.

        ``default_ttl`` (minutes) is ``idle_ttl_seconds``, ``strategy`` the strategy (``"delete"`` or
        ``"keep_latest"``), ``sweep_interval_minutes`` the sweep interval (60 by default).

        Raises:
            ValueError: A key this policy does not know, or a value out of range, naming it.

        Runtime complexity: O(1).
        """
        unknown = sorted(set(ttl) - {"default_ttl", "strategy", "sweep_interval_minutes"})
        if unknown:
            raise InvalidArgumentError(
                f"checkpointer.ttl: unknown keys {unknown}: expected default_ttl, strategy, sweep_interval_minutes"
            )
        settings: dict[str, Any] = {}
        if ttl.get("default_ttl") is not None:
            settings["idle_ttl_seconds"] = _minutes("checkpointer.ttl.default_ttl", ttl["default_ttl"])
        if "strategy" in ttl:
            settings["strategy"] = ttl["strategy"]
        if ttl.get("sweep_interval_minutes") is not None:
            settings["sweep_interval_seconds"] = _minutes(
                "checkpointer.ttl.sweep_interval_minutes", ttl["sweep_interval_minutes"]
            )
        return cls(**{**settings, **overrides})


def kind_problem(policy: object, kind: Kind) -> str | None:
    """Why ``policy`` cannot be a ``TieredSaver``'s ``retention`` over a durable saver of ``kind``, or None.

    Pruning a thread of a saver retention has no SQL for means rewriting it (delete it, put back what
    stays), which a crash can interrupt: allowed for ``InMemorySaver`` (a crash loses it whole anyway),
    refused for other savers; deleting whole idle threads works on any saver that deletes threads.

    Runtime complexity: O(1).
    """
    if policy is None:
        return None
    if not isinstance(policy, RetentionPolicy):
        return f"retention must be a RetentionPolicy or None, got {type(policy).__name__}"
    if policy.max_thread_bytes is not None and kind not in SUMMED_KINDS:
        return (
            "retention: max_thread_bytes needs a SQLite or PostgreSQL durable saver (the database sums a thread's "
            "bytes); over another saver, bound threads by count (keep_last) or age (idle_ttl_seconds)"
        )
    if kind == "other" and policy.keeps_checkpoints:
        return (
            "retention: keep_last and strategy='keep_latest' need a SQLite, PostgreSQL or InMemory durable saver "
            "(a thread of another saver can only be pruned by rewriting it, which a crash could interrupt); "
            "strategy='delete' with idle_ttl_seconds works with any saver"
        )
    return None


def _number(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) and not math.isnan(value)


def _positive(name: str, value: object, *, allow_inf: bool) -> None:
    if not _number(value) or not value > 0 or (not allow_inf and value == math.inf):  # type: ignore[operator]
        what = "a positive number of seconds" + (" (or math.inf)" if allow_inf else "")
        raise InvalidArgumentError(f"{name} must be {what}, got {value!r:.40}")


SUMMED_KINDS: tuple[Kind, ...] = ("sqlite", "async_sqlite", "postgres", "async_postgres")
"""The durable savers whose threads' bytes the database sums (``max_thread_bytes``)."""

MAX_BYTES = 2**63 - 1
"""The largest byte bound (a parameter of SQL statements: a signed 64-bit integer)."""


def _bytes(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_BYTES:
        raise InvalidArgumentError(f"{name} must be a whole number of bytes from 1 to 2**63 - 1, got {value!r:.40}")


MAX_WHOLE = 2**31 - 1
"""The largest ``keep_last`` (a parameter of SQL statements) and ``max_threads_per_sweep``."""


def _whole(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_WHOLE:
        raise InvalidArgumentError(f"{name} must be a whole number from 1 to {MAX_WHOLE:,}, got {value!r:.40}")


def _minutes(name: str, value: object) -> float:
    if not _number(value) or not value > 0:  # type: ignore[operator]
        raise InvalidArgumentError(f"{name} must be a positive number of minutes, got {value!r:.40}")
    return float(value) * 60  # type: ignore[arg-type]
