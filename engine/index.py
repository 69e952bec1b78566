"""The checkpoints of one namespace, by id and in id order."""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Collection, Iterable, Iterator

from engine.records import CheckpointRecord


class CheckpointIndex:
    """Checkpoint records by id, with their ids kept sorted: a dict and a sorted list.

    Checkpoint ids are time-ordered (uuid6), so a new checkpoint's id is the
    greatest and the list grows by appending. Two plain containers per
    namespace keep a store of many small threads light: a ``SortedDict`` costs
    about twenty objects (its bound methods and sub-lists), each one visited
    by every pass of the garbage collector.

    Iteration yields ids in ascending order.
    """

    __slots__ = ("_ids", "_records")

    def __init__(self, records: Iterable[CheckpointRecord] = ()) -> None:
        self._records: dict[str, CheckpointRecord] = {}
        self._ids: list[str] = []
        self.update(records)

    def __len__(self) -> int:
        return len(self._records)

    def __contains__(self, checkpoint_id: object) -> bool:
        return checkpoint_id in self._records

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)

    def __getitem__(self, checkpoint_id: str) -> CheckpointRecord:
        return self._records[checkpoint_id]

    # --- reads -----------------------------------------------------------------------

    def get(self, checkpoint_id: str | None) -> CheckpointRecord | None:
        """The record with this id, or None. Runtime complexity: O(1)."""
        return self._records.get(checkpoint_id)  # type: ignore[arg-type]

    def latest(self) -> CheckpointRecord | None:
        """The record with the greatest id, or None. Runtime complexity: O(1)."""
        return self._records[self._ids[-1]] if self._ids else None

    def values(self) -> Iterator[CheckpointRecord]:
        """Records in ascending id order. Runtime complexity: O(1) per record."""
        records = self._records
        return (records[checkpoint_id] for checkpoint_id in self._ids)

    def items(self) -> Iterator[tuple[str, CheckpointRecord]]:
        """``(id, record)`` in ascending id order. Runtime complexity: O(1) per record."""
        records = self._records
        return ((checkpoint_id, records[checkpoint_id]) for checkpoint_id in self._ids)

    def newest_first(self, before: str | None = None) -> Iterator[str]:
        """Ids in descending order, only those below ``before`` if given.

        The ids are read when iteration starts: the caller holds the store's
        lock while it iterates. Runtime complexity: O(log n) to start, O(1) per id.
        """
        ids = self._ids
        end = len(ids) if before is None else bisect_left(ids, before)
        return (ids[position] for position in range(end - 1, -1, -1))

    # --- mutation ----------------------------------------------------------------------

    def put(self, record: CheckpointRecord) -> CheckpointRecord | None:
        """Store a record, replacing one with the same id; return the replaced one.

        Runtime complexity: O(1) for an id greater than every stored id (the
        usual case: ids are time-ordered), O(log n) search plus an O(n) memory
        move for one that is not.
        """
        checkpoint_id = record.checkpoint_id
        records = self._records
        replaced = records.get(checkpoint_id)
        records[checkpoint_id] = record
        if replaced is None:
            ids = self._ids
            if not ids or checkpoint_id > ids[-1]:
                ids.append(checkpoint_id)
            else:
                insort(ids, checkpoint_id)
        return replaced

    def update(self, records: Iterable[CheckpointRecord]) -> None:
        """Store many records (later ones winning on equal ids), sorting once.

        Runtime complexity: O((n + m) log(n + m)) for m records added to n;
        O(n + m) when both arrive in id order (the sort merges sorted runs).
        """
        stored = self._records
        before = len(stored)
        for record in records:
            stored[record.checkpoint_id] = record
        if len(stored) != before:
            self._ids = sorted(stored)

    def remove(self, checkpoint_ids: Collection[str]) -> list[CheckpointRecord]:
        """Remove the records with these ids (each must be stored); return them.

        Runtime complexity: O(log n) search plus an O(n) memory move for one id;
        O(n) for several.
        """
        records = self._records
        removed = [records.pop(checkpoint_id) for checkpoint_id in checkpoint_ids]
        if len(removed) == 1:
            del self._ids[bisect_left(self._ids, removed[0].checkpoint_id)]
        elif removed:
            self._ids = [checkpoint_id for checkpoint_id in self._ids if checkpoint_id in records]
        return removed

    # --- consistency -------------------------------------------------------------------

    def check(self) -> None:
        """Assert that the ids are sorted, unique and those of the records, each filed under its own id.

        Runtime complexity: O(n).
        """
        ids = self._ids
        if any(ids[i] >= ids[i + 1] for i in range(len(ids) - 1)):
            raise AssertionError("checkpoint ids are out of order")
        if len(ids) != len(self._records) or any(checkpoint_id not in self._records for checkpoint_id in ids):
            raise AssertionError("the sorted ids and the records disagree")
        for checkpoint_id, record in self._records.items():
            if record.checkpoint_id != checkpoint_id:
                raise AssertionError(f"{record.checkpoint_id!r} is filed under {checkpoint_id!r}")
