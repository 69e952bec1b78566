"""Snapshots of a whole store in one file, for development servers that restart often.

File layout (version 1)::

    b"LGCBSNAP"  8 bytes   magic: a file of this format
    0x01         1 byte    format version
    digest       32 bytes  SHA-256 of the body
    body         ...       ormsgpack: {"saved_at": unix seconds, "threads": [thread, ...]}

Threads are listed least recently used first, each with its idle seconds, so
that a restore keeps LRU order and TTL ages. Payloads stay serialized: a
snapshot is restored with the serializer that wrote it.

A file is written to a temporary name in the same folder, flushed, fsynced and
renamed over the target, so a reader sees the old file or the new one, never
part of one. A truncated, corrupted or foreign file raises ``SnapshotError``
before anything is loaded.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ormsgpack

from engine import CheckpointRecord, NamespaceExport, ThreadExport, WriteRecord

MAGIC = b"LGCBSNAP"
FORMAT_VERSION = 1
_HEADER = len(MAGIC) + 1 + 32


class SnapshotError(ValueError):
    """The file is not a readable snapshot: foreign, truncated, corrupted or of an unknown version."""


@dataclass(frozen=True)
class Snapshot:
    """A parsed snapshot: threads least recently used first, with their idle seconds."""

    saved_at: float
    threads: list[tuple[ThreadExport, float]]

    @property
    def nbytes(self) -> int:
        return sum(export.nbytes for export, _ in self.threads)


@dataclass
class LoadReport:
    """What restoring a snapshot under the current limits kept and dropped.

    Attributes:
        loaded: Threads restored.
        expired: Threads idle longer than ``idle_ttl_seconds``: not restored.
        evicted: Threads restored, then evicted (least recently used) to fit the limits.
        rejected: Thread id to the reason it could not be restored.
    """

    loaded: list[str] = field(default_factory=list)
    expired: list[str] = field(default_factory=list)
    evicted: list[str] = field(default_factory=list)
    rejected: dict[str, str] = field(default_factory=dict)


# --- encoding ----------------------------------------------------------------------------------


def encode(threads: list[tuple[ThreadExport, float]], saved_at: float | None = None) -> bytes:
    """The bytes of a snapshot file. Runtime complexity: O(size)."""
    body = ormsgpack.packb(
        {
            "saved_at": time.time() if saved_at is None else saved_at,
            "threads": [_thread(export, idle) for export, idle in threads],
        }
    )
    return MAGIC + bytes([FORMAT_VERSION]) + hashlib.sha256(body).digest() + body


def _thread(export: ThreadExport, idle: float) -> list[Any]:
    return [export.thread_id, idle, [[name, _namespace(space)] for name, space in export.namespaces.items()]]


def _namespace(space: NamespaceExport) -> list[Any]:
    checkpoints = [
        [
            r.checkpoint_id,
            r.parent_id,
            list(r.checkpoint),
            list(r.metadata),
            [[channel, version] for channel, version in r.blob_keys()],
            r.run_id,
            sorted(r.delta_channels),
        ]
        for r in space.checkpoints
    ]
    writes = [
        [cid, [[w.task_id, w.idx, w.channel, list(w.value), w.task_path] for w in ws]]
        for cid, ws in space.writes.items()
    ]
    blobs = [
        [channel, version, None if blob is None else list(blob)] for (channel, version), blob in space.blobs.items()
    ]
    return [checkpoints, writes, blobs]


# --- decoding ----------------------------------------------------------------------------------


def decode(data: bytes) -> Snapshot:
    """Parse and verify a snapshot file's bytes.

    Raises:
        SnapshotError: Foreign, truncated, corrupted, or of an unknown version.

    Runtime complexity: O(size).
    """
    if len(data) < _HEADER or not data.startswith(MAGIC):
        raise SnapshotError("not a langgraph-checkpoint-bounded snapshot (wrong magic bytes or too short)")
    version = data[len(MAGIC)]
    if version != FORMAT_VERSION:
        raise SnapshotError(f"snapshot format version {version} is not supported (this build reads {FORMAT_VERSION})")
    digest, body = data[len(MAGIC) + 1 : _HEADER], data[_HEADER:]
    if hashlib.sha256(body).digest() != digest:
        raise SnapshotError("snapshot is corrupted or truncated: its checksum does not match")
    try:
        content = ormsgpack.unpackb(body)
        return Snapshot(
            saved_at=float(content["saved_at"]),
            threads=[(_export(entry), float(entry[1])) for entry in content["threads"]],
        )
    except (KeyError, IndexError, TypeError, ValueError, ormsgpack.MsgpackDecodeError) as error:
        raise SnapshotError(f"snapshot content is malformed: {error!r}") from error


def _payload(value: Any) -> tuple[str, bytes]:
    tag, data = value
    if not isinstance(tag, str) or not isinstance(data, bytes):
        raise TypeError(f"payload must be [str, bytes], got {value!r:.60}")
    return (tag, data)


def _export(entry: list[Any]) -> ThreadExport:
    thread_id, _, namespaces = entry
    return ThreadExport(str(thread_id), {str(name): _namespace_export(space) for name, space in namespaces})


def _namespace_export(space: list[Any]) -> NamespaceExport:
    checkpoints, writes, blobs = space
    return NamespaceExport(
        checkpoints=tuple(
            CheckpointRecord.of(
                checkpoint_id=cid,
                parent_id=parent,
                checkpoint=_payload(checkpoint),
                metadata=_payload(metadata),
                channel_versions={channel: version for channel, version in versions},
                run_id=run_id,
                delta_channels=frozenset(delta),
            )
            for cid, parent, checkpoint, metadata, versions, run_id, delta in checkpoints
        ),
        writes={
            cid: tuple(
                WriteRecord.of(task_id, idx, channel, _payload(value), path)
                for task_id, idx, channel, value, path in ws
            )
            for cid, ws in writes
        },
        blobs={(channel, version): None if blob is None else _payload(blob) for channel, version, blob in blobs},
    )


# --- files -------------------------------------------------------------------------------------


def write_atomically(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file, fsync and rename."""
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    descriptor, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    directory = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def read(path: str | os.PathLike[str]) -> Snapshot:
    """Read and verify a snapshot file. Raises ``SnapshotError`` (or ``OSError``)."""
    return decode(Path(path).read_bytes())
