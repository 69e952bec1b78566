"""The settings table: every bound the store enforces, with its unit."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

KIB = 1024
MIB = 1024 * KIB
CHECKPOINT_LIMIT_POLICIES = ("reject", "prune_oldest")
NAMESPACE_LIMIT_POLICIES = ("reject", "prune_oldest")


@dataclass(frozen=True)
class StoreLimits:
    """Bounds enforced by :class:`engine.Store`.

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
    subgraph namespaces whole (see ``engine.policy.plan_namespaces``).
    """

    idle_ttl_seconds: float = 4 * 60 * 60  # seconds a thread may stay unused
    max_threads: int = 1_000  # threads; a new one evicts the least recently used
    max_namespaces_per_thread: int = 16  # namespaces; one more is rejected
    max_checkpoints_per_thread: int = 1_000  # checkpoints, all namespaces; one more is rejected
    max_checkpoint_bytes: int = 1 * MIB  # bytes of one checkpoint's whole state
    max_pending_write_bytes: int = 512 * KIB  # bytes of one put_writes batch
    max_total_bytes: int = 64 * MIB  # bytes of every thread; evicts LRU threads, then rejects
    max_memory_bytes: int = math.inf  # type: ignore[assignment]  # bytes of heap (stats().memory_bytes); as above
    max_identifier_length: int = 256  # characters per id, or per namespace segment
    max_namespace_depth: int = 32  # segments in one namespace path (nested subgraphs)
    max_dropped_thread_records: int = 1_000  # evicted/expired threads remembered so their late writes fail loudly
    on_checkpoint_limit: str = "reject"  # or "prune_oldest": drop a thread's oldest checkpoints to make room
    on_namespace_limit: str = "reject"  # or "prune_oldest": drop a thread's oldest completed subgraph namespaces

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if field.type == "int":
                _check_count(field.name, value)
            elif field.type == "float":
                _check_positive(field.name, value)
        if self.on_checkpoint_limit not in CHECKPOINT_LIMIT_POLICIES:
            raise ValueError(
                f"on_checkpoint_limit must be one of {CHECKPOINT_LIMIT_POLICIES}, got {self.on_checkpoint_limit!r}"
            )
        if self.on_namespace_limit not in NAMESPACE_LIMIT_POLICIES:
            raise ValueError(
                f"on_namespace_limit must be one of {NAMESPACE_LIMIT_POLICIES}, got {self.on_namespace_limit!r}"
            )

    @classmethod
    def unbounded(cls) -> StoreLimits:
        """Limits that never evict, expire or reject (for tests and migrations).

        Runtime complexity: O(1).
        """
        return cls(**{field.name: math.inf for field in fields(cls) if field.type in ("int", "float")})


def _check_positive(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a positive number, got {value!r} ({type(value).__name__})")
    if math.isnan(value) or value <= 0:
        raise ValueError(f"{name} must be a positive number, got {value!r}")


def _check_count(name: str, value: object) -> None:
    if value == math.inf and isinstance(value, float):
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(
            f"{name} must be a whole number of at least 1 (or math.inf), got {value!r} ({type(value).__name__})"
        )
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {value!r}")
