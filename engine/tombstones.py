"""Tombstones: a bounded memory of what left the store or was refused, so that late writes fail loudly.

When a thread is evicted or expires while a run is still writing to it, the
run's next write names a checkpoint the store no longer has. Storing it would
start a partial thread whose history points to nothing; instead the store
keeps a tombstone (the thread's id and newest checkpoint id) and refuses such
a write with ``ThreadEvictedError``. A fresh run on that thread id (a
checkpoint with no parent, or writes newer than anything the old thread had)
starts cleanly; the tombstone stays while the thread lives again, so a write
of its previous life that arrives late is still refused.

Checkpoint ids are time-ordered, so "newer than anything the old thread had"
is one string comparison with the newest id it held.

A checkpoint whose ``put`` was refused gets a tombstone of its own
(``RefusedCheckpoint``): its pending writes that arrive after the refusal are
refused too, so that no thread or namespace is left holding only writes of a
checkpoint that was never stored.

Pending writes that would start a namespace of a dropped thread, for a
checkpoint not stored, wait aside (``ParkedWrites``) instead: they are the early
writes of a fresh run (its put follows, and takes them in), or the last writes
of the dead run, whose put will never come (they are forgotten in turn, oldest
first). Either way no namespace exists that holds only them.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Generic, Protocol, TypeVar

from .records import WriteRecord, text_size

__all__ = ["DroppedThread", "ParkedWrites", "RefusedCheckpoint", "Tombstones"]


@dataclass(frozen=True, slots=True)
class DroppedThread:
    """Why and when a thread left the store: what a tombstone holds and what the drop hook (``on_evict``) is told.

    Attributes:
        thread_id: The thread.
        limit: The limit that removed it: ``max_threads``, ``max_total_bytes``,
            ``max_memory_bytes`` or ``idle_ttl_seconds``.
        limit_value: That limit's value.
        dropped_at: The store's clock reading when it was removed (monotonic seconds: the engine
            measures quarantines and "how long ago" with it).
        newest_checkpoint_id: The greatest checkpoint id it held, if any.
        dropped_at_wall: When it was removed, in seconds since the epoch (``time.time()``); read it
            as a date with ``dropped_at_utc``.
    """

    thread_id: str
    limit: str
    limit_value: float
    dropped_at: float
    newest_checkpoint_id: str | None
    dropped_at_wall: float

    @property
    def dropped_at_utc(self) -> datetime:
        """``dropped_at_wall`` as a timezone-aware UTC ``datetime``. Runtime complexity: O(1)."""
        return datetime.fromtimestamp(self.dropped_at_wall, UTC)

    @property
    def key(self) -> str:
        """What the record is remembered by: the thread id."""
        return self.thread_id

    @property
    def nbytes(self) -> int:
        """Bytes of the identifiers the record keeps. Runtime complexity: O(1) for ASCII ids."""
        return text_size(self.thread_id) + text_size(self.newest_checkpoint_id or "")

    def continued_by(self, checkpoint_id: str | None) -> bool:
        """Whether a write naming ``checkpoint_id`` continues the dropped thread. Runtime complexity: O(1)."""
        if checkpoint_id is None:
            return False
        return self.newest_checkpoint_id is None or checkpoint_id <= self.newest_checkpoint_id


@dataclass(frozen=True, slots=True)
class RefusedCheckpoint:
    """A checkpoint whose ``put`` was refused: its late writes are refused too.

    Attributes:
        thread_id: Its thread.
        namespace: Its namespace.
        checkpoint_id: The checkpoint.
        limit: The limit that refused it.
        limit_value: That limit's value.
    """

    thread_id: str
    namespace: str
    checkpoint_id: str
    limit: str
    limit_value: float

    @property
    def key(self) -> str:
        """What the record is remembered by: the checkpoint id (time-ordered uuids do not repeat)."""
        return self.checkpoint_id

    @property
    def nbytes(self) -> int:
        """Bytes of the identifiers the record keeps. Runtime complexity: O(1) for ASCII ids."""
        return text_size(self.thread_id) + text_size(self.namespace) + text_size(self.checkpoint_id)


@dataclass(frozen=True, slots=True)
class ParkedWrites:
    """Pending writes for a checkpoint not stored, that would start a namespace of a dropped thread.

    Attributes:
        thread_id: Their thread.
        namespace: Their namespace.
        checkpoint_id: The checkpoint they ran from.
        writes: The writes, in arrival order.
        writes_bytes: The heap the writes hold, their payloads included (the heap estimate's costs).
    """

    thread_id: str
    namespace: str
    checkpoint_id: str
    writes: tuple[WriteRecord, ...]
    writes_bytes: int

    @property
    def key(self) -> str:
        """What the record is remembered by: the checkpoint id."""
        return self.checkpoint_id

    @property
    def nbytes(self) -> int:
        """Bytes the record keeps: its identifiers and its writes. Runtime complexity: O(1) for ASCII ids."""
        return text_size(self.thread_id) + text_size(self.namespace) + text_size(self.checkpoint_id) + self.writes_bytes


class Remembered(Protocol):
    """What a tombstone holds: a key and the identifier bytes it keeps."""

    @property
    def key(self) -> str: ...

    @property
    def nbytes(self) -> int: ...


Record = TypeVar("Record", bound=Remembered)


class Tombstones(Generic[Record]):
    """The most recent ``capacity`` records, by key, the oldest forgotten first.

    Invariant (``check``): at most ``capacity`` records, each under its own key,
    and ``nbytes`` is the sum of their sizes. The store's write transactions
    test ``key in tombstones.records`` inline, only when ``records`` is not empty.

    Attributes:
        records: Key to its record, oldest first.
        capacity: How many are kept.
        nbytes: Identifier bytes the records hold.
    """

    __slots__ = ("capacity", "nbytes", "records")

    def __init__(self, capacity: float) -> None:
        self.capacity = capacity
        self.records: OrderedDict[str, Record] = OrderedDict()
        self.nbytes = 0

    def __len__(self) -> int:
        return len(self.records)

    def remember(self, record: Record) -> None:
        """Keep a record (replacing one of the same key), forgetting the oldest past capacity.

        Runtime complexity: O(1) amortized.
        """
        self.forget(record.key)
        self.records[record.key] = record
        self.nbytes += record.nbytes
        while len(self.records) > self.capacity:
            _, oldest = self.records.popitem(last=False)
            self.nbytes -= oldest.nbytes

    def forget(self, key: str) -> None:
        """Drop the record under a key, if any. Runtime complexity: O(1)."""
        record = self.records.pop(key, None)
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
        misfiled = [key for key, record in self.records.items() if record.key != key]
        if misfiled:
            raise AssertionError(f"tombstone filed under another key: {misfiled[0]!r}")
        if self.nbytes != sum(record.nbytes for record in self.records.values()):
            raise AssertionError("tombstone bytes drift")
