"""The saver's settings: the engine's limits, async offloading, the eviction hook and autosave."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

from .engine import KIB, MAX_WHOLE, DroppedThread, InvalidArgumentError, StoreLimits, ThreadExport
from .snapshot import SnapshotKey, signing_key

__all__ = [
    "MIN_BYTE_LIMIT",
    "InMemoryCheckpointConfig",
]


MIN_BYTE_LIMIT = 128
"""The least ``max_checkpoint_bytes``, ``max_total_bytes`` and ``max_memory_bytes`` take: below it no checkpoint
LangGraph writes fits (an empty one, with its id, timestamp and field names, counts about 150 bytes), so the saver
would refuse every write. The engine's own ``StoreLimits`` take any positive number (it stores records, not
LangGraph checkpoints)."""

BYTE_LIMITS = ("max_checkpoint_bytes", "max_total_bytes", "max_memory_bytes")
"""The byte limits ``MIN_BYTE_LIMIT`` applies to (one pending write may be a few bytes)."""


@dataclass(frozen=True)
class InMemoryCheckpointConfig(StoreLimits):
    """Settings of ``BoundedInMemorySaver`` (and of ``TieredSaver``'s hot tier); every field has the reference
    page's default.

    Example:
        ```python
        from langgraph.checkpoint.bounded import BoundedInMemorySaver, InMemoryCheckpointConfig

        config = InMemoryCheckpointConfig(idle_ttl_seconds=30 * 60, max_threads=250)
        checkpointer = BoundedInMemorySaver(config=config)
        ```

    The limits (the configuration guide gives each unit) are:
    ``idle_ttl_seconds`` (4 hours), ``max_threads`` (1,000),
    ``max_namespaces_per_thread`` (16), ``max_checkpoints_per_thread`` (1,000),
    ``max_checkpoint_bytes`` (1 MiB), ``max_pending_write_bytes`` (512 KiB),
    ``max_total_bytes`` (64 MiB), ``max_memory_bytes`` (unbounded),
    ``max_identifier_length`` (256), ``max_namespace_depth`` (32),
    ``max_dropped_thread_records`` (1,000), ``on_checkpoint_limit``
    (``"reject"``, or ``"prune_oldest"`` for rolling history) and
    ``on_namespace_limit`` (``"reject"``, or ``"prune_oldest"`` to drop the
    oldest completed subgraph namespaces). ``math.inf`` lifts a limit.
    ``eviction_grace_seconds`` (0: off) keeps a thread used within that many
    seconds from being evicted for another (a write that would need it is
    refused instead), and ``dropped_thread_quarantine_seconds`` (0: off)
    refuses a new run on a thread dropped within that many seconds
    (``ThreadQuarantinedError``).

    Invalid values (zero, negative, NaN, ``bool``, a fraction where a count is
    expected, a byte limit below ``MIN_BYTE_LIMIT``, 128 bytes, which no checkpoint fits in) raise
    ``InvalidArgumentError`` (a ``ValueError``) naming the field.

    ``on_evict(dropped, export)`` is called for every thread the saver evicts or
    expires, with why and when (``DroppedThread``) and everything the thread
    held, still serialized (``ThreadExport``), so it can be archived or imported
    elsewhere (``BoundedInMemorySaver.import_thread``). It runs after the
    saver's lock is released, in the thread whose operation dropped the thread:
    a slow hook delays that one caller, never the others; an exception it raises
    is logged and counted (``stats().drop_hook_errors``).

    With ``autosave_path`` the saver snapshots itself there every
    ``autosave_interval_seconds`` and on ``close()`` (the serving guide's
    snapshots, and ``BoundedInMemorySaver.save``).

    With ``snapshot_key`` (bytes, or text used as its UTF-8 bytes) every
    snapshot is signed with HMAC-SHA256 and ``load`` refuses a file whose
    signature does not match, an unsigned file (unless ``allow_unsigned=True``)
    and, without a key, a signed file. The key is left out of ``repr`` and of
    every error message.
    """

    async_offload_bytes: int | float = 64 * KIB  # bytes; async calls (de)serialize larger payloads in a worker thread
    on_evict: Callable[[DroppedThread, ThreadExport], object] | None = None  # called for each evicted/expired thread
    autosave_path: str | None = None  # file to snapshot the store to periodically (None: no autosave)
    autosave_interval_seconds: float = 60.0  # seconds between autosaves
    purge_interval_seconds: float | None = None  # seconds between background sweeps of expired threads (None: none)
    snapshot_key: SnapshotKey | None = field(default=None, repr=False)  # signs snapshots; a secret, never shown

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in BYTE_LIMITS:
            if getattr(self, name) < MIN_BYTE_LIMIT:
                raise InvalidArgumentError(
                    f"{name} must be at least {MIN_BYTE_LIMIT} bytes, got {getattr(self, name)!r}: no LangGraph "
                    f"checkpoint fits in less (an empty one counts about 150 bytes), so every write would be refused"
                )
        if self.on_evict is not None and not callable(self.on_evict):
            raise InvalidArgumentError(f"on_evict must be callable, got {type(self.on_evict).__name__}")
        if self.autosave_path is not None and not isinstance(self.autosave_path, (str, os.PathLike)):
            raise InvalidArgumentError(f"autosave_path must be a path, got {type(self.autosave_path).__name__}")
        signing_key(self.snapshot_key)  # raises a ValueError naming snapshot_key, never quoting it
        interval = self.purge_interval_seconds
        if interval is not None and (
            isinstance(interval, bool)
            or not isinstance(interval, (int, float))
            or not interval > 0
            or (isinstance(interval, int) and interval > MAX_WHOLE)
        ):
            raise InvalidArgumentError(
                f"purge_interval_seconds must be a positive number of seconds (at most {MAX_WHOLE:.3g}, or math.inf) "
                f"or None, got {interval!r:.40}"
            )
