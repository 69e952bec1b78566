"""One namespace of one thread: its checkpoints, pending writes and blobs."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from operator import attrgetter
from typing import NamedTuple

from engine.index import CheckpointIndex
from engine.records import (
    Blob,
    BlobKey,
    CheckpointRecord,
    CheckpointView,
    Payload,
    Version,
    WriteKey,
    WriteRecord,
    payload_size,
    tuple_builder,
)
from engine.usage import Usage

_MISSING = object()
_new_view = tuple_builder(CheckpointView)


class Removal(NamedTuple):
    """Checkpoints, with their writes, and blobs to remove from a namespace, and what that frees."""

    checkpoint_ids: list[str]
    blob_keys: list[BlobKey]
    freed: Usage


class Namespace:
    """Checkpoints kept sorted by id, writes grouped by checkpoint, blobs by version.

    Writes are planned, then applied: a ``plan_*`` method changes nothing and
    returns the exact ``Usage`` change, which the thread and the store add to
    their totals once the operation is known to fit; the matching mutation
    just stores.
    """

    __slots__ = ("blobs", "checkpoints", "writes")

    def __init__(self) -> None:
        self.checkpoints = CheckpointIndex()
        self.writes: dict[str, dict[WriteKey, WriteRecord]] = {}
        self.blobs: dict[BlobKey, Blob] = {}

    def is_empty(self) -> bool:
        """True when the namespace holds nothing. Runtime complexity: O(1)."""
        return not (self.checkpoints or self.writes or self.blobs)

    # --- reads -----------------------------------------------------------------

    def latest(self) -> CheckpointRecord | None:
        """The checkpoint with the greatest id. Runtime complexity: O(1)."""
        return self.checkpoints.latest()

    def get(self, checkpoint_id: str) -> CheckpointRecord | None:
        """The checkpoint with this id. Runtime complexity: O(1)."""
        return self.checkpoints.get(checkpoint_id)

    def ids_newest_first(self, before: str | None = None) -> Iterator[str]:
        """Checkpoint ids in descending order, only those below ``before`` if given.

        Runtime complexity: O(log n) to start, O(1) per id yielded.
        """
        return self.checkpoints.newest_first(before)

    def blob(self, channel: str, version: Version) -> Payload | None:
        """The non-empty value of ``channel`` at ``version``, or None.

        Runtime complexity: O(1).
        """
        return self.blobs.get((channel, version))

    def channel_values(self, record: CheckpointRecord) -> dict[str, Payload]:
        """Every non-empty value a checkpoint references.

        Runtime complexity: O(channels of the checkpoint).
        """
        values: dict[str, Payload] = {}
        blobs = self.blobs
        versions = record.versions
        for position in range(0, len(versions), 2):
            channel = versions[position]
            payload = blobs.get((channel, versions[position + 1]))
            if payload is not None:
                values[channel] = payload  # type: ignore[index]
        return values

    def ordered_writes(self, checkpoint_id: str) -> list[WriteRecord]:
        """Pending writes of a checkpoint in ``(task_path, task_id, idx)`` order.

        Runtime complexity: O(w log w) for its w writes.
        """
        stored = self.writes.get(checkpoint_id)
        return sorted(stored.values(), key=_sort_key) if stored else []

    def view(self, thread_id: str, namespace: str, record: CheckpointRecord) -> CheckpointView:
        """A self-contained read of one checkpoint.

        Runtime complexity: O(channels + w log w).
        """
        return _new_view(
            (thread_id, namespace, record, self.channel_values(record), self.ordered_writes(record.checkpoint_id))
        )

    # --- planning (no mutation) ---------------------------------------------------

    def plan_checkpoint(self, record: CheckpointRecord, new_blobs: Mapping[BlobKey, Blob]) -> tuple[int, Usage]:
        """``(state_size, change)`` if ``put_checkpoint`` stored these, without storing them.

        ``state_size`` is the bytes of the whole state a read of ``record`` would
        return (checkpoint, metadata, every channel value it references);
        ``change`` is what the namespace's totals would change by.

        Runtime complexity: O(channels of the checkpoint).
        """
        blobs = self.blobs
        size = growth = record.nbytes
        for key in record.blob_keys():
            blob = new_blobs.get(key, _MISSING)
            if blob is _MISSING:
                blob = blobs.get(key)
            if blob is not None:
                size += len(blob[1])  # type: ignore[index]
        replaced = self.checkpoints.get(record.checkpoint_id)
        if replaced is not None:
            growth -= replaced.nbytes
        added_blobs = 0
        for key, blob in new_blobs.items():
            old = blobs.get(key, _MISSING)
            if old is _MISSING:
                added_blobs += 1
            elif old is not None:
                growth -= len(old[1])  # type: ignore[index]
            if blob is not None:
                growth += len(blob[1])
        return size, Usage(growth, 0 if replaced else 1, 0, added_blobs)

    def plan_writes(
        self, checkpoint_id: str, writes: Sequence[WriteRecord]
    ) -> tuple[dict[WriteKey, WriteRecord], Usage]:
        """The writes ``put_writes`` would store, and what the namespace's totals would change by.

        Regular writes are kept only if absent, special (negative index) writes
        always, the last of a key winning.

        Runtime complexity: O(len(writes)).
        """
        stored = self.writes.get(checkpoint_id, _NO_WRITES)
        accepted: dict[WriteKey, WriteRecord] = {}
        for write in writes:
            key = write.key
            if write.idx >= 0 and key in stored:
                continue
            accepted[key] = write
        nbytes = added = 0
        for key, write in accepted.items():
            replaced = stored.get(key)
            if replaced is None:
                added += 1
            else:
                nbytes -= replaced.nbytes
            nbytes += write.nbytes
        return accepted, Usage(nbytes, writes=added)

    # --- mutation ------------------------------------------------------------------

    def put_checkpoint(self, record: CheckpointRecord, new_blobs: Mapping[BlobKey, Blob]) -> CheckpointRecord | None:
        """Store a checkpoint and its new blobs, as planned by ``plan_checkpoint``; return the record it replaced.

        Runtime complexity: O(len(new_blobs)), plus ``CheckpointIndex.put``'s
        O(1) for a new latest id.
        """
        self.blobs.update(new_blobs)
        return self.checkpoints.put(record)

    def put_writes(self, checkpoint_id: str, accepted: Mapping[WriteKey, WriteRecord]) -> None:
        """Store writes chosen by ``plan_writes``.

        Runtime complexity: O(len(accepted)).
        """
        if not accepted:
            return
        stored = self.writes.get(checkpoint_id)
        if stored is None:
            self.writes[checkpoint_id] = dict(accepted)
        else:
            stored.update(accepted)

    def plan_removal(self, checkpoint_ids: Iterable[str], keep_blobs: Collection[BlobKey] = ()) -> Removal:
        """What removing these checkpoints (with their writes) would take away, without removing it.

        Blobs that no surviving checkpoint references go too, except ``keep_blobs``.

        Runtime complexity: O(n * channels) for the blob sweep.
        """
        ids = [cid for cid in dict.fromkeys(checkpoint_ids) if cid in self.checkpoints]
        freed = Usage()
        for checkpoint_id in ids:
            freed.checkpoints += 1
            freed.nbytes += self.checkpoints[checkpoint_id].nbytes
            for write in self.writes.get(checkpoint_id, {}).values():
                freed.writes += 1
                freed.nbytes += write.nbytes
        blob_keys: list[BlobKey] = []
        if ids:
            gone = set(ids)
            referenced = {
                key for cid, record in self.checkpoints.items() if cid not in gone for key in record.blob_keys()
            }
            blob_keys = [key for key in self.blobs if key not in referenced and key not in keep_blobs]
            for key in blob_keys:
                freed.blobs += 1
                freed.nbytes += payload_size(self.blobs[key])
        return Removal(ids, blob_keys, freed)

    def apply_removal(self, removal: Removal) -> list[CheckpointRecord]:
        """Carry out a removal planned by ``plan_removal``; return the removed records.

        Its ``freed`` is what the namespace's totals went down by.
        Runtime complexity: O(n) for a namespace of n checkpoints (one memory
        move of the sorted ids for a single removal), O(1) per blob.
        """
        removed = self.checkpoints.remove(removal.checkpoint_ids)
        for checkpoint_id in removal.checkpoint_ids:
            self.writes.pop(checkpoint_id, None)
        for key in removal.blob_keys:
            del self.blobs[key]
        return removed

    def absorb(self, other: Namespace) -> None:
        """Add everything ``other`` holds, its records winning on equal keys.

        Records are immutable, so they are shared, not copied. The caller
        recounts its totals.

        Runtime complexity: O((n + m) log(n + m)) for the merged ids, O(size of other) besides.
        """
        self.blobs.update(other.blobs)
        self.checkpoints.update(other.checkpoints.values())
        for checkpoint_id, writes in other.writes.items():
            self.put_writes(checkpoint_id, writes)

    # --- consistency -----------------------------------------------------------------

    def check(self) -> None:
        """Assert that every checkpoint and write is filed under its own key. Runtime complexity: O(size)."""
        self.checkpoints.check()
        for stored in self.writes.values():
            if not stored:
                raise AssertionError("an empty write set is kept")
            for key, write in stored.items():
                if write.key != key:
                    raise AssertionError(f"write {write.key!r} is filed under {key!r}")

    def recount(self) -> Usage:
        """What the namespace holds, counted from scratch, for ``check()``. Runtime complexity: O(size)."""
        writes = [w for stored in self.writes.values() for w in stored.values()]
        return Usage(
            nbytes=sum(r.nbytes for r in self.checkpoints.values())
            + sum(w.nbytes for w in writes)
            + sum(payload_size(b) for b in self.blobs.values()),
            checkpoints=len(self.checkpoints),
            writes=len(writes),
            blobs=len(self.blobs),
            namespaces=1,
        )


_sort_key = attrgetter("task_path", "task_id", "idx")  # WriteRecord.sort_key, computed in C


_NO_WRITES: dict[WriteKey, WriteRecord] = {}


EMPTY_NAMESPACE = Namespace()
"""A namespace that is never mutated, for planning writes to a namespace not yet created."""
