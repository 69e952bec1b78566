"""One namespace of one thread: its checkpoints, pending writes and blobs."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from typing import NamedTuple

from sortedcontainers import SortedDict

from engine.records import (
    Blob,
    CheckpointRecord,
    CheckpointView,
    Payload,
    Version,
    WriteKey,
    WriteRecord,
    payload_size,
)
from engine.usage import Usage

BlobKey = tuple[str, Version]
"""``(channel, version)``: the identity of a stored channel value."""

_MISSING = object()


class Removal(NamedTuple):
    """Checkpoints, with their writes, and blobs to remove from a namespace, and what that frees."""

    checkpoint_ids: list[str]
    blob_keys: list[BlobKey]
    freed: Usage


class Namespace:
    """Checkpoints kept sorted by id, writes grouped by checkpoint, blobs by version.

    Every mutating method adds what it changed to a ``delta`` it is given, so
    that the thread and the store keep their totals without recounting.
    """

    __slots__ = ("blobs", "checkpoints", "writes")

    def __init__(self) -> None:
        self.checkpoints: SortedDict[str, CheckpointRecord] = SortedDict()
        self.writes: dict[str, dict[WriteKey, WriteRecord]] = {}
        self.blobs: dict[BlobKey, Blob] = {}

    def is_empty(self) -> bool:
        """True when the namespace holds nothing. Runtime complexity: O(1)."""
        return not (self.checkpoints or self.writes or self.blobs)

    # --- reads -----------------------------------------------------------------

    def latest(self) -> CheckpointRecord | None:
        """The checkpoint with the greatest id. Runtime complexity: O(1)."""
        if not self.checkpoints:
            return None
        return self.checkpoints.peekitem(-1)[1]

    def get(self, checkpoint_id: str) -> CheckpointRecord | None:
        """The checkpoint with this id. Runtime complexity: O(1)."""
        return self.checkpoints.get(checkpoint_id)

    def ids_newest_first(self, before: str | None = None) -> Iterator[str]:
        """Checkpoint ids in descending order, only those below ``before`` if given.

        Runtime complexity: O(log n) to start, O(1) per id yielded.
        """
        return self.checkpoints.irange(maximum=before, inclusive=(True, False), reverse=True)

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
        for channel, version in record.channel_versions.items():
            payload = blobs.get((channel, version))
            if payload is not None:
                values[channel] = payload
        return values

    def ordered_writes(self, checkpoint_id: str) -> list[WriteRecord]:
        """Pending writes of a checkpoint in ``(task_path, task_id, idx)`` order.

        Runtime complexity: O(w log w) for its w writes.
        """
        stored = self.writes.get(checkpoint_id)
        if not stored:
            return []
        return sorted(stored.values(), key=_sort_key)

    def view(self, thread_id: str, namespace: str, record: CheckpointRecord) -> CheckpointView:
        """A self-contained read of one checkpoint.

        Runtime complexity: O(channels + w log w).
        """
        return CheckpointView(
            thread_id=thread_id,
            namespace=namespace,
            record=record,
            channel_values=self.channel_values(record),
            writes=self.ordered_writes(record.checkpoint_id),
        )

    # --- planning (no mutation) ---------------------------------------------------

    def plan_checkpoint(self, record: CheckpointRecord, new_blobs: Mapping[BlobKey, Blob]) -> tuple[int, int]:
        """``(state_size, growth)`` if ``put_checkpoint`` stored these, without storing them.

        ``state_size`` is the bytes of the whole state a read of ``record`` would
        return (checkpoint, metadata, every channel value it references);
        ``growth`` is what the namespace would grow by.

        Runtime complexity: O(channels of the checkpoint).
        """
        blobs = self.blobs
        size = growth = record.nbytes
        for key in record.channel_versions.items():
            blob = new_blobs.get(key, _MISSING)
            if blob is _MISSING:
                blob = blobs.get(key)
            if blob is not None:
                size += len(blob[1])  # type: ignore[index]
        replaced = self.checkpoints.get(record.checkpoint_id)
        if replaced is not None:
            growth -= replaced.nbytes
        for key, blob in new_blobs.items():
            old = blobs.get(key)
            growth += (0 if blob is None else len(blob[1])) - (0 if old is None else len(old[1]))
        return size, growth

    def plan_writes(self, checkpoint_id: str, writes: Sequence[WriteRecord]) -> tuple[dict[WriteKey, WriteRecord], int]:
        """The writes ``put_writes`` would store, and the bytes the namespace would grow by.

        Regular writes are kept only if absent, special (negative index) writes
        always, the last of a key winning.

        Runtime complexity: O(len(writes)).
        """
        stored = self.writes.get(checkpoint_id, {})
        accepted: dict[WriteKey, WriteRecord] = {}
        for write in writes:
            key = write.key
            if write.idx >= 0 and key in stored:
                continue
            accepted[key] = write
        growth = 0
        for key, write in accepted.items():
            replaced = stored.get(key)
            growth += write.nbytes if replaced is None else write.nbytes - replaced.nbytes
        return accepted, growth

    # --- mutation ------------------------------------------------------------------

    def put_checkpoint(
        self, record: CheckpointRecord, new_blobs: Mapping[BlobKey, Blob], delta: Usage
    ) -> CheckpointRecord | None:
        """Store a checkpoint and its new blobs; return the record it replaced.

        Runtime complexity: O(log n + len(new_blobs)).
        """
        for key, blob in new_blobs.items():
            self.put_blob(key, blob, delta)
        replaced = self.checkpoints.get(record.checkpoint_id)
        if replaced is None:
            delta.checkpoints += 1
        else:
            delta.nbytes -= replaced.nbytes
        self.checkpoints[record.checkpoint_id] = record
        delta.nbytes += record.nbytes
        return replaced

    def put_blob(self, key: BlobKey, blob: Blob, delta: Usage) -> None:
        """Store one blob, replacing any at the same key. Runtime complexity: O(1)."""
        old = self.blobs.get(key, _MISSING)
        if old is _MISSING:
            delta.blobs += 1
        else:
            delta.nbytes -= payload_size(old)  # type: ignore[arg-type]
        self.blobs[key] = blob
        delta.nbytes += payload_size(blob)

    def put_writes(self, checkpoint_id: str, accepted: Mapping[WriteKey, WriteRecord], delta: Usage) -> None:
        """Store writes chosen by ``plan_writes``.

        Runtime complexity: O(len(accepted)).
        """
        if not accepted:
            return
        stored = self.writes.setdefault(checkpoint_id, {})
        for key, write in accepted.items():
            replaced = stored.get(key)
            if replaced is None:
                delta.writes += 1
            else:
                delta.nbytes -= replaced.nbytes
            stored[key] = write
            delta.nbytes += write.nbytes

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
                key
                for cid, record in self.checkpoints.items()
                if cid not in gone
                for key in record.channel_versions.items()
            }
            blob_keys = [key for key in self.blobs if key not in referenced and key not in keep_blobs]
            for key in blob_keys:
                freed.blobs += 1
                freed.nbytes += payload_size(self.blobs[key])
        return Removal(ids, blob_keys, freed)

    def apply_removal(self, removal: Removal, delta: Usage) -> list[CheckpointRecord]:
        """Carry out a removal planned by ``plan_removal``; return the removed records.

        Runtime complexity: O(log n) per checkpoint, O(1) per blob.
        """
        removed = [self.checkpoints.pop(checkpoint_id) for checkpoint_id in removal.checkpoint_ids]
        for checkpoint_id in removal.checkpoint_ids:
            self.writes.pop(checkpoint_id, None)
        for key in removal.blob_keys:
            del self.blobs[key]
        delta.subtract(removal.freed)
        return removed

    def remove_checkpoints(self, checkpoint_ids: Iterable[str], delta: Usage) -> list[CheckpointRecord]:
        """Remove checkpoints with their writes, then every blob no survivor references.

        Returns the removed records. Runtime complexity: O(n * channels).
        """
        return self.apply_removal(self.plan_removal(checkpoint_ids), delta)

    def absorb(self, other: Namespace, delta: Usage) -> None:
        """Add everything ``other`` holds, its records winning on equal keys.

        Records are immutable, so they are shared, not copied.

        Runtime complexity: O(size of other).
        """
        for key, blob in other.blobs.items():
            self.put_blob(key, blob, delta)
        for record in other.checkpoints.values():
            self.put_checkpoint(record, {}, delta)
        for checkpoint_id, writes in other.writes.items():
            self.put_writes(checkpoint_id, writes, delta)

    # --- consistency -----------------------------------------------------------------

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


def _sort_key(write: WriteRecord) -> tuple[str, str, int]:
    return write.sort_key


EMPTY_NAMESPACE = Namespace()
"""A namespace that is never mutated, for planning writes to a namespace not yet created."""
