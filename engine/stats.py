"""A snapshot of the store's counters, and its readable form."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

__all__ = [
    "StoreStats",
    "ThreadStorage",
    "render_rows",
    "size_text",
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
            exports waiting for the hook (the heap estimate's per-object costs).
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
            writes wait aside for their put.
        drop_hook_errors: Exceptions raised by the drop hook (the saver's ``on_evict``), logged, not propagated.
        queued_drops: Dropped threads waiting for the drop hook (``on_evict``).
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

    def rows(self) -> list[tuple[str, str]]:
        """The readable form's lines, as ``(label, text)``: what ``str()`` prints, one topic a line.

        Runtime complexity: O(L) for L limits that rejected something.
        """
        evicted = ", ".join(
            f"{count:,} for {limit}"
            for limit, count in (
                ("max_threads", self.evicted_for_threads),
                ("max_total_bytes", self.evicted_for_bytes),
                ("max_memory_bytes", self.evicted_for_memory),
            )
            if count
        )
        return [
            (
                "stored",
                f"{self.threads:,} threads: {self.namespaces:,} namespaces, {self.checkpoints:,} checkpoints, "
                f"{self.pending_writes:,} pending writes, {self.blobs:,} blobs",
            ),
            ("bytes", f"{size_text(self.total_bytes)} of max_total_bytes {size_text(self.max_total_bytes)}"),
            ("heap", f"{size_text(self.memory_bytes)} estimated, max_memory_bytes {size_text(self.max_memory_bytes)}"),
            (
                "dropped",
                f"{self.evicted_threads:,} evicted{f' ({evicted})' if evicted else ''}, "
                f"{self.expired_threads:,} expired",
            ),
            ("pruned", f"{self.pruned_checkpoints:,} checkpoints, {self.pruned_namespaces:,} namespaces"),
            (
                "remembered",
                f"{self.dropped_thread_records:,} dropped threads ({size_text(self.dropped_thread_record_bytes)}), "
                f"{self.refused_checkpoint_records:,} refused checkpoints, {self.parked_write_records:,} parked writes",
            ),
            (
                "drop hook",
                f"{self.queued_drops:,} drops waiting for it ({size_text(self.queued_drop_bytes)}), "
                f"{self.drop_hook_errors:,} errors",
            ),
            (
                "rejections",
                ", ".join(f"{count:,} for {limit}" for limit, count in sorted(self.rejections.items())) or "none",
            ),
        ]

    def __str__(self) -> str:
        """The readable form: one topic a line (``repr()`` keeps the dataclass's one-line form).

        Runtime complexity: O(L) for L limits that rejected something.
        """
        return render_rows(self.rows())


@dataclass(frozen=True)
class ThreadStorage:
    """The bytes one thread occupies in one tier, from what that tier stores: a thread's size.

    Bytes are the stored (serialized, compressed when the serializer compresses) lengths: what the
    store's byte accounting counts in memory, what the tables hold on disk. A thread the tier does
    not hold reports zeros (``ThreadStorage.empty``).

    Attributes:
        thread_id: The thread.
        tier: ``"memory"`` (``BoundedInMemorySaver``), ``"hot"`` or ``"durable"`` (``TieredSaver``).
        namespaces: Namespaces holding something (the root and each subgraph's).
        checkpoints: Checkpoints stored.
        checkpoint_bytes: Bytes of the serialized checkpoints and their metadata, channel values aside.
        channel_values: Channel values stored (one per channel version).
        channel_bytes: Bytes of those values.
        by_channel: Channel name to the bytes of its stored values, over every version and namespace.
        pending_writes: Pending writes stored.
        pending_write_bytes: Bytes of their values (in memory, plus each write's task path).
        estimated: True when the figures are an estimate, not a count of stored bytes: a durable
            saver whose storage cannot be summed (no SQL), measured through its API by
            re-serializing what it returns with the saver's serializer.
    """

    thread_id: str
    tier: str
    namespaces: int = 0
    checkpoints: int = 0
    by_channel: Mapping[str, int] = field(default_factory=dict)
    checkpoint_bytes: int = 0
    estimated: bool = False
    channel_values: int = 0
    channel_bytes: int = 0
    pending_writes: int = 0
    pending_write_bytes: int = 0

    @property
    def total_bytes(self) -> int:
        """Checkpoints, channel values and pending writes together. Runtime complexity: O(1)."""
        return self.checkpoint_bytes + self.channel_bytes + self.pending_write_bytes

    @property
    def rows(self) -> int:
        """Stored entries: checkpoints, channel values and pending writes. Runtime complexity: O(1)."""
        return self.checkpoints + self.channel_values + self.pending_writes

    def as_dict(self) -> dict[str, object]:
        """The report as JSON-ready data, in the shape of the Agent Server's ``GET /threads/{id}/storage``
        (``total_bytes``, ``checkpoints``, ``channel_values`` with ``by_channel``, ``pending_writes``),
        plus ``tier``, ``namespaces`` and ``estimated``.

        Runtime complexity: O(channels).
        """
        return {
            "thread_id": self.thread_id,
            "tier": self.tier,
            "total_bytes": self.total_bytes,
            "estimated": self.estimated,
            "namespaces": self.namespaces,
            "checkpoints": {"count": self.checkpoints, "bytes": self.checkpoint_bytes},
            "channel_values": {
                "count": self.channel_values,
                "bytes": self.channel_bytes,
                "by_channel": dict(self.by_channel),
            },
            "pending_writes": {"count": self.pending_writes, "bytes": self.pending_write_bytes},
        }

    def __str__(self) -> str:
        """One line: the tier, the total and where the bytes are. Runtime complexity: O(1)."""
        estimate = " (estimated)" if self.estimated else ""
        return (
            f"{self.tier}: {size_text(self.total_bytes)}{estimate} in {self.checkpoints:,} checkpoints "
            f"({size_text(self.checkpoint_bytes)}), {self.channel_values:,} channel values "
            f"({size_text(self.channel_bytes)}), {self.pending_writes:,} pending writes "
            f"({size_text(self.pending_write_bytes)})"
        )


def size_text(nbytes: float) -> str:
    """A byte count as people read it: ``512 B``, ``1.5 KiB``, ``64 MiB``; ``math.inf`` is ``none`` (no limit).

    Runtime complexity: O(1).
    """
    if math.isinf(nbytes):
        return "none"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(nbytes) >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes:,.0f} B"


def render_rows(rows: Sequence[tuple[str, str]], indent: str = "") -> str:
    """Rows of ``(label, text)`` as aligned lines. Runtime complexity: O(total length)."""
    width = max((len(label) for label, _ in rows), default=0)
    return "\n".join(f"{indent}{label:<{width}}  {text}" for label, text in rows)
