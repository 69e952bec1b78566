"""Tombstones: a bounded memory of threads that were evicted or expired, so their late writes fail loudly.

When a thread is evicted or expires while a run is still writing to it, the
run's next write names a checkpoint the store no longer has. Storing it would
start a partial thread whose history points to nothing; instead the store
keeps a tombstone (the thread's id and newest checkpoint id) and refuses such
a write with ``ThreadEvictedError``. A fresh run on that thread id (a
checkpoint with no parent, or writes newer than anything the old thread had)
starts cleanly and clears the tombstone.

Checkpoint ids are time-ordered, so "newer than anything the old thread had"
is one string comparison with the newest id it held.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from .records import text_size

__all__ = ["DroppedThread", "Tombstones"]


@dataclass(frozen=True, slots=True)
class DroppedThread:
    """Why and when a thread left the store: what a tombstone holds and what ``on_drop`` is told.

    Attributes:
        thread_id: The thread.
        limit: The limit that removed it: ``max_threads``, ``max_total_bytes``,
            ``max_memory_bytes`` or ``idle_ttl_seconds``.
        limit_value: That limit's value.
        dropped_at: The store's clock reading when it was removed.
        newest_checkpoint_id: The greatest checkpoint id it held, if any.
    """

    thread_id: str
    limit: str
    limit_value: float
    dropped_at: float
    newest_checkpoint_id: str | None

    @property
    def nbytes(self) -> int:
        """Bytes of the identifiers the record keeps. Runtime complexity: O(1) for ASCII ids."""
        return text_size(self.thread_id) + text_size(self.newest_checkpoint_id or "")

    def continued_by(self, checkpoint_id: str | None) -> bool:
        """Whether a write naming ``checkpoint_id`` continues the dropped thread. Runtime complexity: O(1)."""
        if checkpoint_id is None:
            return False
        return self.newest_checkpoint_id is None or checkpoint_id <= self.newest_checkpoint_id


class Tombstones:
    """The most recent ``capacity`` dropped threads, by thread id, the oldest forgotten first.

    Invariant (``check``): at most ``capacity`` records, and ``nbytes`` is the
    sum of their sizes. The store's write transactions test ``thread_id in
    tombstones.records`` inline, only when ``records`` is not empty.

    Attributes:
        records: Thread id to its ``DroppedThread``, oldest first.
        capacity: How many are kept.
        nbytes: Identifier bytes the records hold.
    """

    __slots__ = ("capacity", "nbytes", "records")

    def __init__(self, capacity: float) -> None:
        self.capacity = capacity
        self.records: OrderedDict[str, DroppedThread] = OrderedDict()
        self.nbytes = 0

    def __len__(self) -> int:
        return len(self.records)

    def remember(self, record: DroppedThread) -> None:
        """Keep a record, forgetting the oldest past capacity. Runtime complexity: O(1) amortized."""
        self.forget(record.thread_id)
        self.records[record.thread_id] = record
        self.nbytes += record.nbytes
        while len(self.records) > self.capacity:
            _, oldest = self.records.popitem(last=False)
            self.nbytes -= oldest.nbytes

    def forget(self, thread_id: str) -> None:
        """Drop the record of a thread, if any. Runtime complexity: O(1)."""
        record = self.records.pop(thread_id, None)
        if record is not None:
            self.nbytes -= record.nbytes

    def forget_oldest(self) -> bool:
        """Drop the oldest record, if any (to make room under ``max_memory_bytes``); return whether one went.

        Runtime complexity: O(1).
        """
        if not self.records:
            return False
        _, oldest = self.records.popitem(last=False)
        self.nbytes -= oldest.nbytes
        return True

    def clear(self) -> None:
        """Forget everything. Runtime complexity: O(n) to free the records."""
        self.records.clear()
        self.nbytes = 0

    def check(self) -> None:
        """Assert the invariant. Runtime complexity: O(n) for n records."""
        if len(self.records) > self.capacity:
            raise AssertionError(f"{len(self.records)} tombstones kept, max_dropped_thread_records is {self.capacity}")
        if self.nbytes != sum(record.nbytes for record in self.records.values()):
            raise AssertionError("tombstone bytes drift")
