"""Memory of recently evicted or expired threads, so that their late writes fail loudly.

When a thread is evicted or expires while a run is still writing to it, the
run's next write names a checkpoint the store no longer has. Storing it would
start a partial thread whose history points to nothing; instead the store
remembers the dropped thread's id and newest checkpoint id, and refuses such a
write with ``ThreadEvictedError``. A fresh run on that thread id (a checkpoint
with no parent, or writes newer than anything the old thread had) starts
cleanly and clears the record.

Checkpoint ids are time-ordered, so "newer than anything the old thread had"
is one string comparison with the newest id it held.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from engine.records import text_size


@dataclass(frozen=True, slots=True)
class DroppedThread:
    """Why and when a thread left the store.

    Attributes:
        thread_id: The thread.
        limit: The limit that removed it: ``max_threads``, ``max_total_bytes`` or
            ``idle_ttl_seconds``.
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
        """Bytes of the identifiers the record keeps."""
        return text_size(self.thread_id) + text_size(self.newest_checkpoint_id or "")

    def continued_by(self, checkpoint_id: str | None) -> bool:
        """Whether a write naming ``checkpoint_id`` continues the dropped thread."""
        if checkpoint_id is None:
            return False
        return self.newest_checkpoint_id is None or checkpoint_id <= self.newest_checkpoint_id


class DroppedThreads:
    """The most recent ``capacity`` records, oldest forgotten first.

    Runtime complexity: O(1) for every method.
    """

    __slots__ = ("_records", "capacity", "nbytes")

    def __init__(self, capacity: float) -> None:
        self.capacity = capacity
        self._records: OrderedDict[str, DroppedThread] = OrderedDict()
        self.nbytes = 0

    def __len__(self) -> int:
        return len(self._records)

    def remember(self, record: DroppedThread) -> None:
        self.forget(record.thread_id)
        self._records[record.thread_id] = record
        self.nbytes += record.nbytes
        while len(self._records) > self.capacity:
            _, oldest = self._records.popitem(last=False)
            self.nbytes -= oldest.nbytes

    def get(self, thread_id: str) -> DroppedThread | None:
        return self._records.get(thread_id)

    def forget(self, thread_id: str) -> None:
        record = self._records.pop(thread_id, None)
        if record is not None:
            self.nbytes -= record.nbytes

    def clear(self) -> None:
        self._records.clear()
        self.nbytes = 0

    def recount(self) -> int:
        """Bytes recomputed from scratch, for ``check()``."""
        return sum(record.nbytes for record in self._records.values())
