"""A snapshot of the store's counters."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = [
    "StoreStats",
]


@dataclass(frozen=True)
class StoreStats:
    """What the store holds and what its limits have done, at one instant.

    Attributes:
        threads: Threads stored.
        namespaces: Namespaces stored, over all threads.
        checkpoints: Checkpoints stored.
        pending_writes: Pending writes stored.
        blobs: Channel values stored (one per channel version, empty ones included).
        total_bytes: Counted bytes: serialized checkpoints, metadata, channel
            values and write values, plus write task paths.
        max_total_bytes: The byte limit, for convenience.
        memory_bytes: An estimate of the heap the store holds: ``total_bytes``
            plus what every thread, namespace, checkpoint, blob, write and
            stored identifier costs around its payload, the tombstones, and the
            exports waiting for the hook (``engine.memory``).
        max_memory_bytes: The limit on ``memory_bytes`` (``inf``: none).
        evicted_threads: Threads evicted since creation (least recently used, for any limit).
        evicted_for_threads: Of those, evicted to respect ``max_threads``.
        evicted_for_bytes: Of those, evicted to respect ``max_total_bytes``.
        evicted_for_memory: Of those, evicted to respect ``max_memory_bytes``.
        expired_threads: Threads removed after ``idle_ttl_seconds`` unused.
        pruned_checkpoints: Oldest checkpoints dropped by ``on_checkpoint_limit="prune_oldest"``.
        pruned_namespaces: Completed subgraph namespaces dropped by ``on_namespace_limit="prune_oldest"``.
        dropped_thread_records: Evicted or expired threads remembered so that
            their late writes raise ``ThreadEvictedError``.
        dropped_thread_record_bytes: Identifier bytes those records hold.
        refused_checkpoint_records: Checkpoints whose put was refused, remembered
            so that their late writes are refused too.
        parked_write_records: Checkpoints of dropped threads whose pending
            writes wait aside for their put (``engine.tombstones``).
        drop_hook_errors: Exceptions raised by the ``on_drop`` hook (logged, not propagated).
        queued_drops: Dropped threads waiting for the ``on_drop`` hook.
        queued_drop_bytes: The heap their exports hold (in ``memory_bytes``).
        rejections: Rejected operations since creation, by limit name.
    """

    threads: int
    namespaces: int
    checkpoints: int
    pending_writes: int
    blobs: int
    total_bytes: int
    max_total_bytes: float
    memory_bytes: int
    max_memory_bytes: float
    evicted_threads: int
    evicted_for_threads: int
    evicted_for_bytes: int
    evicted_for_memory: int
    expired_threads: int
    pruned_checkpoints: int
    pruned_namespaces: int
    dropped_thread_records: int
    dropped_thread_record_bytes: int
    refused_checkpoint_records: int = 0
    parked_write_records: int = 0
    drop_hook_errors: int = 0
    queued_drops: int = 0
    queued_drop_bytes: int = 0
    rejections: Mapping[str, int] = field(default_factory=dict)
