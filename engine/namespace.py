"""One namespace of one thread: its checkpoints, pending writes and blobs.

The write transactions in ``engine.store`` fill these containers inline. What
lives here is what they share with the rarer operations: reading a checkpoint
as a view, walking ids newest first, placing an id that does not sort last,
dropping what a removal planned (``engine.lineage.plan_removal``).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterator, Mapping, Sequence
from operator import attrgetter

from .records import (
    Blob,
    BlobKey,
    CheckpointRecord,
    CheckpointView,
    Payload,
    WriteKey,
    WriteRecord,
    make_view,
    payload_size,
)
from .totals import Totals

__all__ = ["EMPTY_NAMESPACE", "Namespace", "write_order"]

_NO_BLOBS: Mapping[BlobKey, Blob] = {}

write_order = attrgetter("task_path", "task_id", "idx")
"""``WriteRecord.sort_key``, computed in C: the order a super-step applies writes in."""


class Namespace:
    """Checkpoints by id with their ids in sorted order, writes grouped by checkpoint, blobs by version.

    Checkpoint ids are time-ordered (uuid6), so a new checkpoint's id is the
    greatest and ``ids`` grows by appending; an id that sorts elsewhere costs
    one O(n) memory move (``place_id``). Two plain containers keep a store of
    many small threads light: a ``SortedDict`` costs about twenty objects per
    namespace, each visited by every pass of the garbage collector.

    Invariant (``check``): ``ids`` is the sorted list of the keys of
    ``records``; every record and write is filed under its own key; no write
    set is empty; the namespace is not empty.

    Attributes:
        records: Checkpoint id to its record.
        ids: The same ids, ascending.
        writes: Checkpoint id to its pending writes by ``(task_id, idx)``; a
            checkpoint's writes may arrive before the checkpoint.
        blobs: ``(channel, version)`` to the stored value, ``None`` for a
            version whose channel held no value.
    """

    __slots__ = ("blobs", "ids", "records", "writes")

    def __init__(self) -> None:
        self.records: dict[str, CheckpointRecord] = {}
        self.ids: list[str] = []
        self.writes: dict[str, dict[WriteKey, WriteRecord]] = {}
        self.blobs: dict[BlobKey, Blob] = {}

    def is_empty(self) -> bool:
        """True when the namespace holds nothing. Runtime complexity: O(1)."""
        return not (self.records or self.writes or self.blobs)

    def latest(self) -> CheckpointRecord | None:
        """The checkpoint with the greatest id. Runtime complexity: O(1)."""
        ids = self.ids
        return self.records[ids[-1]] if ids else None

    def newest_first(self, before: str | None = None) -> Iterator[str]:
        """Checkpoint ids in descending order, only those below ``before`` if given.

        The caller holds the store's lock while it iterates. Runtime
        complexity: O(log n) to start, O(1) per id.
        """
        ids = self.ids
        end = len(ids) if before is None else bisect_left(ids, before)
        return (ids[position] for position in range(end - 1, -1, -1))

    def place_id(self, checkpoint_id: str) -> None:
        """Insert a new id that does not sort after every stored id.

        Runtime complexity: O(log n) search plus an O(n) memory move.
        """
        insort(self.ids, checkpoint_id)

    def drop(self, checkpoint_ids: Sequence[str], blob_keys: Sequence[BlobKey]) -> list[CheckpointRecord]:
        """Remove stored checkpoints with their writes, and blobs; return the removed records.

        The totals are the caller's (``State.remove_checkpoints``). Runtime
        complexity: O(log n) plus one O(n) memory move for a single checkpoint,
        O(n) for several; O(1) per write set and blob.
        """
        records = self.records
        removed = [records.pop(checkpoint_id) for checkpoint_id in checkpoint_ids]
        if len(removed) == 1:
            del self.ids[bisect_left(self.ids, removed[0].checkpoint_id)]
        elif removed:
            self.ids = [checkpoint_id for checkpoint_id in self.ids if checkpoint_id in records]
        for checkpoint_id in checkpoint_ids:
            self.writes.pop(checkpoint_id, None)
        for key in blob_keys:
            del self.blobs[key]
        return removed

    def ordered_writes(self, checkpoint_id: str) -> list[WriteRecord]:
        """Pending writes of a checkpoint in ``(task_path, task_id, idx)`` order.

        Runtime complexity: O(w log w) for its w writes.
        """
        stored = self.writes.get(checkpoint_id)
        return sorted(stored.values(), key=write_order) if stored else []

    def view(self, thread_id: str, namespace: str, record: CheckpointRecord) -> CheckpointView:
        """A self-contained read of one checkpoint: every non-empty value it references, and its
        pending writes in ``(task_path, task_id, idx)`` order.

        Runtime complexity: O(c + w log w) for c channels and w writes.
        """
        values: dict[str, Payload] = {}
        blobs = self.blobs
        versions = record.versions
        half = len(versions) // 2
        for position in range(half):
            channel = versions[position]
            payload = blobs.get((channel, versions[half + position]))  # type: ignore[arg-type]
            if payload is not None:
                values[channel] = payload  # type: ignore[index]
        stored = self.writes.get(record.checkpoint_id)
        return make_view(
            (thread_id, namespace, record, values, sorted(stored.values(), key=write_order) if stored else [])
        )

    def state_size(self, record: CheckpointRecord, new_blobs: Mapping[BlobKey, Blob] = _NO_BLOBS) -> int:
        """Bytes of the whole state a read of ``record`` returns once ``new_blobs`` are stored
        with it: checkpoint, metadata and every channel value it references.

        Runtime complexity: O(channels of the checkpoint).
        """
        size = record.nbytes
        blobs = self.blobs
        for key in record.blob_keys():
            size += payload_size(new_blobs[key] if key in new_blobs else blobs.get(key))
        return size

    def check(self) -> None:
        """Assert the invariant; raise ``AssertionError`` naming what is broken. Runtime complexity: O(size)."""
        ids, records = self.ids, self.records
        if self.is_empty():
            raise AssertionError("namespace is empty")
        if any(ids[i] >= ids[i + 1] for i in range(len(ids) - 1)):
            raise AssertionError("checkpoint ids are out of order")
        if len(ids) != len(records) or any(checkpoint_id not in records for checkpoint_id in ids):
            raise AssertionError("the sorted ids and the records disagree")
        for checkpoint_id, record in records.items():
            if record.checkpoint_id != checkpoint_id:
                raise AssertionError(f"checkpoint {record.checkpoint_id!r} is filed under {checkpoint_id!r}")
        for stored in self.writes.values():
            if not stored:
                raise AssertionError("an empty write set is kept")
            for key, write in stored.items():
                if write.key != key:
                    raise AssertionError(f"write {write.key!r} is filed under {key!r}")

    def recount(self) -> Totals:
        """What the namespace holds, counted from scratch. Runtime complexity: O(size)."""
        writes = [write for stored in self.writes.values() for write in stored.values()]
        return Totals(
            nbytes=sum(record.nbytes for record in self.records.values())
            + sum(write.nbytes for write in writes)
            + sum(payload_size(blob) for blob in self.blobs.values()),
            checkpoints=len(self.records),
            writes=len(writes),
            blobs=len(self.blobs),
            namespaces=1,
        )


EMPTY_NAMESPACE = Namespace()
"""A namespace that is never mutated: what a write plans against when its namespace does not exist yet."""
