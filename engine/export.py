"""A self-contained, still-serialized copy of one thread, for archiving or moving it.

An export holds the thread's records themselves (they are immutable, so an
export shares them with the store rather than copying bytes): every namespace
with its checkpoints, pending writes and blobs. ``Store.export_thread`` makes
one, ``Store.import_thread`` stores one, and the ``on_drop`` hook receives one
for each thread the store evicts or expires.
"""

from __future__ import annotations

from typing import NamedTuple

from engine.identifiers import IdentifierCheck
from engine.namespace import Namespace
from engine.records import Blob, BlobKey, CheckpointRecord, WriteRecord, payload_size


class NamespaceExport(NamedTuple):
    """One namespace: checkpoints oldest first, writes by checkpoint id, blobs by (channel, version)."""

    checkpoints: tuple[CheckpointRecord, ...]
    writes: dict[str, tuple[WriteRecord, ...]]
    blobs: dict[BlobKey, Blob]

    @classmethod
    def of(cls, space: Namespace) -> NamespaceExport:
        """Runtime complexity: O(size of the namespace)."""
        return cls(
            checkpoints=tuple(space.checkpoints.values()),
            writes={cid: tuple(writes.values()) for cid, writes in space.writes.items()},
            blobs=dict(space.blobs),
        )

    def to_namespace(self) -> Namespace:
        """A namespace holding these records. Runtime complexity: O(size)."""
        space = Namespace()
        space.checkpoints.update(self.checkpoints)
        for checkpoint_id, writes in self.writes.items():
            if writes:
                space.writes[checkpoint_id] = {write.key: write for write in writes}
        space.blobs.update(self.blobs)
        return space

    @property
    def nbytes(self) -> int:
        """Counted bytes, as the store counts them."""
        return (
            sum(record.nbytes for record in self.checkpoints)
            + sum(write.nbytes for writes in self.writes.values() for write in writes)
            + sum(payload_size(blob) for blob in self.blobs.values())
        )


class ThreadExport(NamedTuple):
    """Every namespace of one thread."""

    thread_id: str
    namespaces: dict[str, NamespaceExport]

    @property
    def nbytes(self) -> int:
        """Counted bytes, as the store counts them."""
        return sum(space.nbytes for space in self.namespaces.values())

    @property
    def checkpoint_count(self) -> int:
        return sum(len(space.checkpoints) for space in self.namespaces.values())


def checked_namespace(name: str, export: NamespaceExport, ids: IdentifierCheck) -> tuple[Namespace, int]:
    """An imported namespace with every identifier, record and payload checked, and the
    largest whole state of its checkpoints (for ``max_checkpoint_bytes``).

    Raises:
        ValueError: Naming what is malformed.

    Runtime complexity: O(size of the namespace).
    """
    ids.namespace(name)
    if not isinstance(export, NamespaceExport):
        raise ValueError(f"namespace {name!r} must be a NamespaceExport, got {type(export).__name__}")
    space = export.to_namespace()
    largest = 0
    for record in space.checkpoints.values():
        if not isinstance(record, CheckpointRecord):
            raise ValueError(f"checkpoints of {name!r} must be CheckpointRecords, got {type(record).__name__}")
        ids.unique("checkpoint_id", record.checkpoint_id)
        if record.parent_id is not None:
            ids.unique("parent checkpoint_id", record.parent_id)
        _check_payload("checkpoint", record.checkpoint)
        _check_payload("metadata", record.metadata)
        if not isinstance(record.versions, tuple) or len(record.versions) % 2:
            raise ValueError(f"versions of {record.checkpoint_id!r} must be a flat (channel, version, ...) tuple")
        for channel, version in record.blob_keys():
            ids.name("channel", channel)
            ids.version(channel, version)
        largest = max(largest, space.plan_checkpoint(record, {})[0])
    for writes in space.writes.values():
        for write in writes.values():
            if not isinstance(write, WriteRecord):
                raise ValueError(f"writes of {name!r} must be WriteRecords, got {type(write).__name__}")
            ids.unique("task_id", write.task_id)
            ids.name("channel", write.channel)
            _check_payload("write value", write.value)
    for (channel, version), blob in space.blobs.items():
        ids.name("channel", channel)
        ids.version(channel, version)
        if blob is not None:
            _check_payload("blob", blob)
    return space, largest


def _check_payload(field: str, payload: object) -> None:
    if not (
        isinstance(payload, tuple)
        and len(payload) == 2
        and isinstance(payload[0], str)
        and isinstance(payload[1], (bytes, bytearray))
    ):
        raise ValueError(f"{field} must be a (type, bytes) payload, got {type(payload).__name__}")
