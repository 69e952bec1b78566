"""Snapshots of a whole store in one file, for development servers that restart often.

File layout (version 2, written by this build)::

    offset  size  field
    0       8     b"LGCBSNAP"  magic: a file of this format
    8       1     0x02         format version
    9       1     flags        bit 0: signed; every other bit must be 0
    10      32    digest       SHA-256 of the body
    42      32    signature    signed: HMAC-SHA256, keyed with ``snapshot_key``, of every
                               byte of the file except these 32 (bytes 0-41, then the body);
                               unsigned: 32 zero bytes
    74      ...   body         ormsgpack: {"saved_at": unix seconds, "threads": [thread, ...]}

Version 1 (written until format 2 existed, still read) is unsigned and has
no flags or signature field: magic, ``0x01``, the digest, then the same body.

The header has one fixed layout, signed or not, so that a reader finds every
field at the same offset and can say what a file is before trusting it. The
signature covers the header too: flipping the flags, the version or the digest
of a signed file breaks it. An unsigned file must carry an all-zero signature
field, so that clearing the signed flag of a signed file is seen as damage,
not taken for an unsigned file.

Threads are listed least recently used first, each with its idle seconds, so
that a restore keeps LRU order and TTL ages. Payloads stay serialized: a
snapshot is restored with the serializer that wrote it, and nothing here ever
deserializes a payload. The body is unpacked without an extension hook, so
the file's own structure cannot name a Python callable.

The checksum only detects accidents: anyone who can write the file can
recompute it. The signature detects changes by anyone who does not hold the
key. ``decode`` enforces the rules of ``BoundedInMemorySaver.load``: a signed
file is verified (in constant time) before its body is parsed; a signed file
without a key, and an unsigned file when a key is set (unless
``allow_unsigned``), are refused.

A file is written to a temporary name in the same folder, flushed, fsynced and
renamed over the target, so a reader sees the old file or the new one, never
part of one. A truncated, corrupted, foreign, tampered or wrongly signed file
raises ``SnapshotError`` before anything is loaded.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import ormsgpack

from .engine import (
    BoundedSaverError,
    CheckpointCapacityError,
    CheckpointRecord,
    InvalidArgumentError,
    NamespaceExport,
    Store,
    ThreadExport,
    WriteRecord,
)

__all__ = [
    "FORMAT_VERSION",
    "MAGIC",
    "READABLE_VERSIONS",
    "Header",
    "LoadReport",
    "Snapshot",
    "SnapshotError",
    "SnapshotKey",
    "check_signature",
    "decode",
    "encode",
    "parse_body",
    "read",
    "read_header",
    "remove_stale_temporaries",
    "restore",
    "signature_matches",
    "signing_key",
    "write_atomically",
]

MAGIC = b"LGCBSNAP"
FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)
FLAG_SIGNED = 0x01

_DIGEST_SIZE = 32  # SHA-256 and HMAC-SHA256 alike
_VERSION_AT = len(MAGIC)
_FLAGS_AT = _VERSION_AT + 1
_DIGEST_AT = _FLAGS_AT + 1
_SIGNATURE_AT = _DIGEST_AT + _DIGEST_SIZE
_BODY_AT = _SIGNATURE_AT + _DIGEST_SIZE  # 74: the header of format 2
_VERSION_1_BODY_AT = _VERSION_AT + 1 + _DIGEST_SIZE  # 41: magic, version, digest
_UNSIGNED = bytes(_DIGEST_SIZE)

SnapshotKey = bytes | str
"""A ``snapshot_key`` as configured: bytes, or text used as its UTF-8 bytes."""


class SnapshotError(BoundedSaverError, ValueError):
    """The file is not a snapshot this saver may load: foreign, truncated, corrupted, of an unknown
    version, wrongly signed or unsigned where a signature is required, or holding refused payloads."""


def signing_key(key: object) -> bytes | None:
    """The HMAC key bytes of a ``snapshot_key`` setting (None: no key).

    Text is encoded as UTF-8, so a key set from an environment variable works.
    The error never repeats the key.

    Raises:
        ValueError: Naming ``snapshot_key``: not bytes or str, empty, or text that is not valid Unicode.

    Runtime complexity: O(length of the key).
    """
    if key is None:
        return None
    if isinstance(key, str):
        try:
            key = key.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidArgumentError("snapshot_key must be valid Unicode text (it is encoded as UTF-8)") from None
    elif not isinstance(key, bytes):
        raise InvalidArgumentError(f"snapshot_key must be bytes or str, got {type(key).__name__}")
    if not key:
        raise InvalidArgumentError("snapshot_key must not be empty")
    return key


@dataclass(frozen=True)
class Header:
    """What a snapshot file says about itself, read before anything in it is trusted.

    Attributes:
        version: Format version (1 or 2).
        signed: Whether the file carries an HMAC-SHA256 signature.
        digest: The SHA-256 checksum of the body, as stored.
        signature: The stored signature (32 zero bytes when unsigned, empty in version 1).
        body_at: Offset of the body.
    """

    version: int
    signed: bool
    digest: bytes
    signature: bytes
    body_at: int


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


def encode(threads: list[tuple[ThreadExport, float]], saved_at: float | None = None, key: bytes | None = None) -> bytes:
    """The bytes of a snapshot file in the current format, signed if ``key`` is given.

    Runtime complexity: O(size).
    """
    body = ormsgpack.packb(
        {
            "saved_at": time.time() if saved_at is None else saved_at,
            "threads": [_thread(export, idle) for export, idle in threads],
        }
    )
    prefix = MAGIC + bytes([FORMAT_VERSION, FLAG_SIGNED if key is not None else 0]) + hashlib.sha256(body).digest()
    signature = _signature(key, prefix, body) if key is not None else _UNSIGNED
    return prefix + signature + body


def _signature(key: bytes, prefix: bytes | memoryview, body: bytes | memoryview) -> bytes:
    """HMAC-SHA256 of the header before the signature field, then the body: every other byte of the file."""
    mac = hmac.new(key, prefix, hashlib.sha256)
    mac.update(body)
    return mac.digest()


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


def read_header(data: bytes) -> Header:
    """Parse and check a snapshot file's header, without looking at the body.

    Raises:
        SnapshotError: Foreign, too short, of an unknown version, with unknown
            flags, or unsigned with a non-empty signature field.

    Runtime complexity: O(1).
    """
    if len(data) <= _VERSION_AT or not data.startswith(MAGIC):
        raise SnapshotError("not a langgraph-checkpoint-bounded snapshot (wrong magic bytes or too short)")
    version = data[_VERSION_AT]
    if version not in READABLE_VERSIONS:
        raise SnapshotError(
            f"snapshot format version {version} is not supported (this build reads versions {READABLE_VERSIONS})"
        )
    if version == 1:
        if len(data) < _VERSION_1_BODY_AT:
            raise SnapshotError("snapshot is too short for its header: truncated")
        return Header(1, False, bytes(data[_VERSION_AT + 1 : _VERSION_1_BODY_AT]), b"", _VERSION_1_BODY_AT)
    if len(data) < _BODY_AT:
        raise SnapshotError("snapshot is too short for its header: truncated")
    flags = data[_FLAGS_AT]
    if flags & ~FLAG_SIGNED:
        raise SnapshotError(f"snapshot header has unknown flags {flags:#04x}: corrupted, or written by a newer build")
    signed = bool(flags & FLAG_SIGNED)
    signature = bytes(data[_SIGNATURE_AT:_BODY_AT])
    if not signed and signature != _UNSIGNED:
        raise SnapshotError("snapshot header says unsigned but carries a signature: corrupted or tampered with")
    return Header(version, signed, bytes(data[_DIGEST_AT:_SIGNATURE_AT]), signature, _BODY_AT)


def signature_matches(data: bytes, header: Header, key: bytes) -> bool:
    """Whether a signed file's signature is ``key``'s, compared in constant time.

    Runtime complexity: O(size of the file).
    """
    if not header.signed:
        return False
    view = memoryview(data)
    expected = _signature(key, view[:_SIGNATURE_AT], view[_BODY_AT:])
    return hmac.compare_digest(expected, header.signature)


def check_signature(data: bytes, header: Header, key: bytes | None, *, allow_unsigned: bool = False) -> None:
    """Apply the signing rules of ``load`` to a file whose header was read.

    A signed file needs the key and a matching signature; an unsigned file is
    refused when a key is set unless ``allow_unsigned``. Without a key an
    unsigned file passes: there is nothing to verify it with.

    Raises:
        SnapshotError: Saying which rule refused the file (never quoting the key).

    Runtime complexity: O(size of the file).
    """
    if header.signed:
        if key is None:
            raise SnapshotError(
                "snapshot is signed but no snapshot_key is set: refusing to load it unverified "
                "(set the key it was saved with)"
            )
        if not signature_matches(data, header, key):
            raise SnapshotError(
                "snapshot signature does not match: the file was changed after it was saved, "
                "or it was signed with a different snapshot_key"
            )
    elif key is not None and not allow_unsigned:
        raise SnapshotError(
            "snapshot is not signed and a snapshot_key is set: refusing it "
            "(pass allow_unsigned=True to load an unsigned file you trust, then save it to sign it)"
        )


def parse_body(data: bytes, header: Header) -> Snapshot:
    """Verify the body's checksum and parse it. Payloads are not deserialized.

    Raises:
        SnapshotError: The checksum does not match or the content is malformed.

    Runtime complexity: O(size).
    """
    body = memoryview(data)[header.body_at :]
    if not hmac.compare_digest(hashlib.sha256(body).digest(), header.digest):
        raise SnapshotError("snapshot is corrupted or truncated: its checksum does not match")
    try:
        content = ormsgpack.unpackb(body)  # no ext_hook: an extension type in the structure is an error
        parsed = Snapshot(
            saved_at=_time(content["saved_at"]),
            threads=[(_export(entry), _seconds(entry[1])) for entry in content["threads"]],
        )
    except (KeyError, IndexError, TypeError, ValueError, OverflowError, OSError, ormsgpack.MsgpackDecodeError) as error:
        raise SnapshotError(f"snapshot content is malformed: {error!r:.200}") from error
    return parsed


def _time(value: Any) -> float:
    """A Unix time a date can be made of (a NaN or a time past year 9999 is damage)."""
    seconds = float(value)
    datetime.fromtimestamp(seconds, tz=UTC)  # raises ValueError, OverflowError or OSError
    return seconds


def _seconds(value: Any) -> float:
    """Idle seconds: a finite number, at least 0."""
    seconds = float(value)
    if not 0 <= seconds < math.inf:
        raise InvalidArgumentError(f"idle seconds must be a finite number of at least 0, got {seconds!r}")
    return seconds


def decode(data: bytes, key: bytes | None = None, *, allow_unsigned: bool = False) -> Snapshot:
    """Parse and verify a snapshot file's bytes: header, signature rules, checksum, content.

    The signature is checked before the body is parsed.

    Raises:
        SnapshotError: Foreign, truncated, corrupted, of an unknown version,
            wrongly signed, signed without ``key``, or unsigned with ``key``
            and not ``allow_unsigned``.

    Runtime complexity: O(size).
    """
    header = read_header(data)
    check_signature(data, header, key, allow_unsigned=allow_unsigned)
    return parse_body(data, header)


def _payload(value: Any) -> tuple[str, bytes]:
    tag, data = value
    if not isinstance(tag, str) or not isinstance(data, bytes):
        raise TypeError(f"payload must be [str, bytes], got {value!r:.60}")
    return (tag, data)


def _export(entry: list[Any]) -> ThreadExport:
    """A thread decoded from its snapshot entry, one object per distinct identifier, near what a thread a
    graph wrote holds: decoded as they come, a checkpoint, run or version string, a channel name or a
    payload's tag would be a new object in every record naming it (``engine.memory`` counts one, and none
    for a graph's channel names and a serializer's tags). Runtime complexity: O(size of the entry).
    """
    thread_id, _, namespaces = entry
    shared: dict[Any, Any] = {}  # the thread's identifiers, names and tags: value to the one object kept
    return ThreadExport(str(thread_id), {str(name): _namespace_export(space, shared) for name, space in namespaces})


def _namespace_export(space: list[Any], shared: dict[Any, Any]) -> NamespaceExport:
    """A namespace decoded, sharing through ``shared`` its thread's checkpoint ids (a parent is its
    checkpoint's own id, and so is the key of that checkpoint's writes), run ids, versions, channel names
    and payload tags; a task's id and path one object for the writes of one checkpoint, as its put held
    them; no DeltaChannel, the records' one empty set. Content of the wrong shape fails here, as any
    malformed content does. Runtime complexity: O(size of the namespace).
    """
    one = shared.setdefault
    checkpoints, writes, blobs = space
    ids = [one(cid, cid) for cid, *_ in checkpoints]  # first: parents and writes name them
    no_delta = CheckpointRecord._field_defaults["delta_channels"]  # the one empty set records share

    def version_of(version: Any) -> Any:  # a number is keyed with its type: 1 and 1.0 are equal, not the same
        return one(version, version) if type(version) is str else one((type(version), version), version)

    def payload(value: Any) -> tuple[str, bytes]:
        tag, data = _payload(value)
        return (one(tag, tag), data)

    def task_writes(entries: list[Any]) -> tuple[WriteRecord, ...]:
        held: dict[Any, Any] = {}  # one checkpoint's: a task's id and path
        own = held.setdefault
        return tuple(
            WriteRecord.of(own(task_id, task_id), idx, one(channel, channel), payload(value), own(path, path))
            for task_id, idx, channel, value, path in entries
        )

    return NamespaceExport(
        checkpoints=tuple(
            CheckpointRecord.of(
                checkpoint_id=cid,
                parent_id=parent if parent is None else one(parent, parent),
                checkpoint=payload(checkpoint),
                metadata=payload(metadata),
                channel_versions={one(channel, channel): version_of(version) for channel, version in versions},
                run_id=run_id if run_id is None else one(run_id, run_id),
                delta_channels=frozenset(one(channel, channel) for channel in delta) if delta else no_delta,
            )
            for cid, (_, parent, checkpoint, metadata, versions, run_id, delta) in zip(ids, checkpoints, strict=True)
        ),
        writes={one(cid, cid): task_writes(ws) for cid, ws in writes},
        blobs={
            (one(channel, channel), version_of(version)): None if blob is None else payload(blob)
            for channel, version, blob in blobs
        },
    )


# --- restoring ---------------------------------------------------------------------------------


def restore(
    store: Store, snapshot: Snapshot, idle_ttl_seconds: float, check_export: Callable[[ThreadExport], None]
) -> LoadReport:
    """Restore a verified snapshot into a store, under its limits; say what happened to each thread.

    Every thread's export is checked first (``check_export`` raises ``ValueError``,
    the payload tags' check for ``BoundedInMemorySaver.load``); if one is refused,
    nothing is restored. Threads are restored least recently used first with
    their idle ages, the wall-clock time since the save included (monotonic
    clocks end with the process): one idle past ``idle_ttl_seconds`` is not
    restored; one that does not fit the limits is evicted (LRU) or rejected, as
    a write would be.

    Raises:
        SnapshotError: An export is refused; nothing was restored.

    Runtime complexity: O(size of the snapshot), and O(n log n) per thread of n
    checkpoints restored (its ids are sorted).
    """
    for export, _ in snapshot.threads:  # every thread, restorable or not, before any is restored
        try:
            check_export(export)
        except ValueError as error:
            raise SnapshotError(f"snapshot refused, nothing loaded: {error}") from error
    report = LoadReport()
    since_save = max(0.0, time.time() - snapshot.saved_at)
    for export, idle_at_save in snapshot.threads:
        idle = idle_at_save + since_save
        if idle >= idle_ttl_seconds:
            report.expired.append(export.thread_id)
            continue
        try:
            store.import_thread(export, idle_seconds=idle)
            report.loaded.append(export.thread_id)
        except (CheckpointCapacityError, ValueError) as error:
            report.rejected[export.thread_id] = str(error)
    present = set(store.thread_ids())
    report.evicted = [thread_id for thread_id in report.loaded if thread_id not in present]
    report.loaded = [thread_id for thread_id in report.loaded if thread_id in present]
    return report


# --- files -------------------------------------------------------------------------------------


def write_atomically(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file, fsync and rename.

    The temporary file is named ``.<target>.<pid>.<random>.tmp``; those a killed
    process left behind are removed first (``remove_stale_temporaries``).
    Runtime complexity: O(size of the data + files in the folder).
    """
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    remove_stale_temporaries(target)
    descriptor, temporary = tempfile.mkstemp(prefix=f".{target.name}.{os.getpid()}.", suffix=".tmp", dir=folder)
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


def read(path: str | os.PathLike[str], key: bytes | None = None, *, allow_unsigned: bool = False) -> Snapshot:
    """Read and verify a snapshot file (see ``decode``), removing the temporary files a killed writer
    left beside it first. Raises ``SnapshotError`` (or ``OSError``).

    Runtime complexity: O(size of the file + files in the folder).
    """
    remove_stale_temporaries(Path(path))
    return decode(Path(path).read_bytes(), key, allow_unsigned=allow_unsigned)


PID_LIMIT = 4_194_304
"""No process id is larger (Linux's ``PID_MAX_LIMIT``; other systems' are lower): a larger number is a name."""

STALE_UNNAMED_SECONDS = 600
"""A temporary file of the older naming (no pid) is stale once untouched this long: a save takes seconds."""


def remove_stale_temporaries(target: Path) -> list[Path]:
    """Remove the temporary files of ``target`` that no live writer owns; return them.

    Only files of this module's own naming go: ``.<target>.<pid>.<random>.tmp``
    whose process is gone (a process killed during a save), and files of the
    older naming ``.<target>.<random>.tmp`` untouched for ``STALE_UNNAMED_SECONDS``.
    A file of this process, or of a process still running, is left alone: a
    saver may be writing it. What cannot be removed is left too.

    Runtime complexity: O(files in the folder).
    """
    folder = target.parent if str(target.parent) else Path(".")
    prefix = f".{target.name}."
    removed: list[Path] = []
    try:
        candidates = [
            entry for entry in folder.iterdir() if entry.name.startswith(prefix) and entry.name.endswith(".tmp")
        ]
    except OSError:
        return removed
    for candidate in candidates:
        # ".<target>.<pid>.<random>.tmp" or ".<target>.<random>.tmp", the random part without dots: a file
        # with more parts belongs to another target whose name extends this one ("state" and "state.2024").
        parts = candidate.name[len(prefix) : -len(".tmp")].split(".")
        if len(parts) > 2 or not all(parts):
            continue
        try:
            if len(parts) == 2:
                if not parts[0].isdigit() or int(parts[0]) > PID_LIMIT or not _dead(int(parts[0])):
                    continue
            elif time.time() - candidate.stat().st_mtime < STALE_UNNAMED_SECONDS:
                continue
            candidate.unlink()
            removed.append(candidate)
        except OSError:
            continue
    return removed


def _dead(pid: int) -> bool:
    """Whether no process of that id runs (this one is alive, of course)."""
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OverflowError):
        return False
    return False
