"""The settings table: every bound the store enforces, with its unit."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, Literal, get_args

from .errors import InvalidArgumentError

__all__ = [
    "CHECKPOINT_LIMIT_POLICIES",
    "KIB",
    "MIB",
    "NAMESPACE_LIMIT_POLICIES",
    "LimitPolicy",
    "MAX_WHOLE",
    "NOT_LIMITS",
    "StoreLimits",
]

KIB = 1024
MIB = 1024 * KIB

LimitPolicy = Literal["reject", "prune_oldest"]
"""What a per-thread limit does when a write would pass it: refuse the write, or drop the oldest."""

CHECKPOINT_LIMIT_POLICIES: tuple[LimitPolicy, ...] = get_args(LimitPolicy)
NAMESPACE_LIMIT_POLICIES: tuple[LimitPolicy, ...] = get_args(LimitPolicy)

COUNT = "int | float"
"""The annotation of a count or a byte size: a whole number, or ``math.inf`` to lift the limit."""

SECONDS = "float"
"""The annotation of a duration: a positive number of seconds, or ``math.inf``."""

NOT_LIMITS = frozenset({"eviction_grace_seconds", "dropped_thread_quarantine_seconds"})
"""Numeric settings that are not bounds: 0 is allowed, and ``unbounded()`` leaves them as they are."""

MAX_WHOLE = 2**53
"""The largest whole number a setting takes (floats count exactly to here); larger ones are refused: use math.inf."""


@dataclass(frozen=True)
class StoreLimits:
    """Bounds enforced by the engine's ``Store``.

    Defaults are the contract of the reference page. Every numeric field must be
    a positive number; ``bool``, zero, negative and NaN values are rejected with
    a ``ValueError`` that names the field. ``math.inf`` lifts a limit.

    ``on_checkpoint_limit`` says what ``max_checkpoints_per_thread`` does:
    ``"reject"`` an additional checkpoint (the reference behaviour), or
    ``"prune_oldest"``: drop the thread's oldest checkpoints, a tenth of the
    limit at a time, keeping every ancestor a surviving checkpoint needs to
    rebuild its delta channels (see ``Store.put_checkpoint``).

    ``on_namespace_limit`` says what ``max_namespaces_per_thread`` does:
    ``"reject"`` an additional namespace (the reference behaviour), or
    ``"prune_oldest"``: drop the thread's least recently written completed
    subgraph namespaces whole (see ``engine.pruning.plan_namespaces``).

    ``eviction_grace_seconds`` keeps threads in use: a thread used within that
    many seconds is never evicted for ``max_threads``, ``max_total_bytes`` or
    ``max_memory_bytes``; a write that needs room only such threads could give
    is refused instead. 0 (the default, the reference contract) evicts the
    least recently used thread whatever its age. Under overload, a grace turns
    thrashing (every running thread evicted by the next) into refusal at
    admission (new threads wait; running ones finish).

    ``dropped_thread_quarantine_seconds`` refuses new runs on a dropped thread:
    for that many seconds after a thread is evicted or expired, a checkpoint
    that would start it afresh (no parent) is refused with
    ``ThreadQuarantinedError``, and so is ``Store.admit_run``; 0 (the default)
    lets a new run start afresh at once; ``math.inf`` refuses while the
    thread's record is kept (``max_dropped_thread_records``). Deleting the
    thread ends its quarantine.
    """

    idle_ttl_seconds: float = 4 * 60 * 60  # seconds a thread may stay unused
    max_threads: int | float = 1_000  # threads; a new one evicts the least recently used
    max_namespaces_per_thread: int | float = 16  # namespaces; one more is rejected
    max_checkpoints_per_thread: int | float = 1_000  # checkpoints, all namespaces; one more is rejected
    max_checkpoint_bytes: int | float = 1 * MIB  # bytes of one checkpoint's whole state
    max_pending_write_bytes: int | float = 512 * KIB  # bytes of one put_writes batch
    max_total_bytes: int | float = 64 * MIB  # bytes of every thread; evicts LRU threads, then rejects
    max_memory_bytes: int | float = math.inf  # bytes of heap (stats().memory_bytes); as above
    max_identifier_length: int | float = 256  # characters per id, or per namespace segment
    max_namespace_depth: int | float = 32  # segments in one namespace path (nested subgraphs)
    max_dropped_thread_records: int | float = 1_000  # evicted/expired threads remembered: late writes fail loudly
    on_checkpoint_limit: LimitPolicy = "reject"  # or "prune_oldest": drop a thread's oldest checkpoints
    on_namespace_limit: LimitPolicy = "reject"  # or "prune_oldest": drop a thread's oldest completed subgraphs
    eviction_grace_seconds: float = 0.0  # seconds; a thread used this recently is never evicted to make room
    dropped_thread_quarantine_seconds: float = 0.0  # seconds after a drop during which no new run starts it afresh

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if field.name in NOT_LIMITS:
                _check_non_negative(field.name, value)
            elif field.type == COUNT:
                _check_count(field.name, value)
            elif field.type == SECONDS:
                _check_positive(field.name, value)
        if self.on_checkpoint_limit not in CHECKPOINT_LIMIT_POLICIES:
            raise InvalidArgumentError(
                f"on_checkpoint_limit must be one of {CHECKPOINT_LIMIT_POLICIES}, got {self.on_checkpoint_limit!r}"
            )
        if self.on_namespace_limit not in NAMESPACE_LIMIT_POLICIES:
            raise InvalidArgumentError(
                f"on_namespace_limit must be one of {NAMESPACE_LIMIT_POLICIES}, got {self.on_namespace_limit!r}"
            )

    @classmethod
    def unbounded(cls) -> StoreLimits:
        """Limits that never evict, expire or reject (for tests and migrations).

        Runtime complexity: O(1).
        """
        lifted: dict[str, Any] = {
            field.name: math.inf
            for field in fields(cls)
            if field.type in (COUNT, SECONDS) and field.name not in NOT_LIMITS
        }
        return cls(**lifted)


def _check_positive(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidArgumentError(f"{name} must be a positive number, got {value!r:.80} ({type(value).__name__})")
    _check_finite_or_inf(name, value)
    if math.isnan(value) or value <= 0:
        raise InvalidArgumentError(f"{name} must be a positive number, got {value!r}")


def _check_non_negative(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidArgumentError(f"{name} must be a number of at least 0, got {value!r:.80} ({type(value).__name__})")
    _check_finite_or_inf(name, value)
    if math.isnan(value) or value < 0:
        raise InvalidArgumentError(f"{name} must be a number of at least 0, got {value!r}")


def _check_finite_or_inf(name: str, value: int | float) -> None:
    """A whole number too large for a float would overflow the arithmetic of expiry and eviction."""
    if isinstance(value, int) and value > MAX_WHOLE:
        raise InvalidArgumentError(f"{name} is larger than {MAX_WHOLE:.3g}; use math.inf to lift the limit")


def _check_count(name: str, value: object) -> None:
    if value == math.inf and isinstance(value, float):
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentError(
            f"{name} must be a whole number of at least 1 (or math.inf), got {value!r:.80} ({type(value).__name__})"
        )
    _check_finite_or_inf(name, value)
    if value < 1:
        raise InvalidArgumentError(f"{name} must be at least 1, got {value!r}")
