"""A self-contained, still-serialized copy of one thread, for archiving or moving it.

An export holds the thread's records themselves (they are immutable, so an
export shares them with the store rather than copying bytes): every namespace
with its checkpoints, pending writes and blobs. ``Store.export_thread`` makes
one, ``Store.import_thread`` stores one, and the ``on_drop`` hook receives one
for each thread the store evicts or expires.
"""

from __future__ import annotations

from typing import NamedTuple

from .errors import InvalidArgumentError
from .identifiers import check_blob_keys, check_identifier, check_namespace, check_version
from .limits import StoreLimits
from .namespace import Namespace
from .records import Blob, BlobKey, CheckpointRecord, WriteRecord, payload_size
from .thread import Thread

__all__ = ["NamespaceExport", "ThreadExport", "checked_namespace"]


class NamespaceExport(NamedTuple):
    """One namespace: checkpoints oldest first, writes by checkpoint id, blobs by (channel, version)."""

    checkpoints: tuple[CheckpointRecord, ...]
    writes: dict[str, tuple[WriteRecord, ...]]
    blobs: dict[BlobKey, Blob]

    @classmethod
    def of(cls, space: Namespace) -> NamespaceExport:
        """The records of a namespace. Runtime complexity: O(size of the namespace)."""
        records = space.records
        return cls(
            checkpoints=tuple(records[checkpoint_id] for checkpoint_id in space.ids),
            writes={cid: tuple(writes.values()) for cid, writes in space.writes.items()},
            blobs=dict(space.blobs),
        )

    def to_namespace(self) -> Namespace:
        """A namespace holding these records, later ones winning on equal keys.

        Runtime complexity: O(n log n) for n checkpoints (O(n) when in id order), O(size) besides.
        """
        space = Namespace()
        for record in self.checkpoints:
            space.records[record.checkpoint_id] = record
        space.ids = sorted(space.records)
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

    @classmethod
    def of(cls, thread: Thread) -> ThreadExport:
        """Everything a thread holds; the records are shared, not copied. Runtime complexity: O(size of the thread)."""
        return cls(thread.thread_id, {name: NamespaceExport.of(space) for name, space in thread.namespaces.items()})

    @property
    def nbytes(self) -> int:
        """Counted bytes, as the store counts them."""
        return sum(space.nbytes for space in self.namespaces.values())

    @property
    def checkpoint_count(self) -> int:
        return sum(len(space.checkpoints) for space in self.namespaces.values())


def checked_namespace(name: str, export: NamespaceExport, limits: StoreLimits) -> Namespace:
    """An imported namespace, with every identifier, record and payload checked.

    Raises:
        ValueError: Naming what is malformed.

    Runtime complexity: O(size of the namespace).
    """
    check_namespace(name, limits)
    if not isinstance(export, NamespaceExport):
        raise InvalidArgumentError(f"namespace {name!r} must be a NamespaceExport, got {type(export).__name__}")
    for record in export.checkpoints:
        if not isinstance(record, CheckpointRecord):
            raise InvalidArgumentError(
                f"checkpoints of {name!r} must be CheckpointRecords, got {type(record).__name__}"
            )
        check_identifier("checkpoint_id", record.checkpoint_id, limits)
        if record.parent_id is not None:
            check_identifier("parent checkpoint_id", record.parent_id, limits)
        _check_payload("checkpoint", record.checkpoint)
        _check_payload("metadata", record.metadata)
        if not isinstance(record.versions, tuple) or len(record.versions) % 2:
            raise InvalidArgumentError(
                f"versions of {record.checkpoint_id!r} must be a flat (channel, ..., version, ...) tuple"
            )
        check_blob_keys(record.blob_keys(), limits)
    for checkpoint_id, writes in export.writes.items():
        check_identifier("checkpoint_id", checkpoint_id, limits)
        for write in writes:
            if not isinstance(write, WriteRecord):
                raise InvalidArgumentError(f"writes of {name!r} must be WriteRecords, got {type(write).__name__}")
            check_identifier("task_id", write.task_id, limits)
            check_identifier("channel", write.channel, limits)
            if type(write.idx) is not int:
                raise InvalidArgumentError(f"idx of a write of {name!r} must be an int, got {type(write.idx).__name__}")
            if type(write.task_path) is not str:
                raise InvalidArgumentError(f"task_path must be a string, got {type(write.task_path).__name__}")
            _check_payload("write value", write.value)
    for (channel, version), blob in export.blobs.items():
        check_identifier("channel", channel, limits)
        check_version(channel, version, limits)
        if blob is not None:
            _check_payload("blob", blob)
    return export.to_namespace()


def _check_payload(field: str, payload: object) -> None:
    if not (
        isinstance(payload, tuple)
        and len(payload) == 2
        and isinstance(payload[0], str)
        and isinstance(payload[1], (bytes, bytearray))
    ):
        raise InvalidArgumentError(f"{field} must be a (type, bytes) payload, got {type(payload).__name__}")
