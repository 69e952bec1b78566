"""What the store keeps: immutable records of opaque serialized payloads.

Records are named tuples: immutable, cheap to create on every write, and read
by field name.

The store never looks inside a payload. A payload is the ``(type_tag, data)``
pair that a serializer produced; the store only measures ``data``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from functools import partial
from typing import Any, NamedTuple

__all__ = [
    "Blob",
    "BlobKey",
    "ChannelHistory",
    "CheckpointRecord",
    "CheckpointView",
    "Payload",
    "Version",
    "WriteKey",
    "WriteRecord",
    "make_checkpoint_record",
    "make_view",
    "make_write_record",
    "payload_size",
    "text_size",
]

Payload = tuple[str, bytes]
"""A serialized value: the serializer's type tag and its bytes."""

Version = str | int | float
"""A channel version, opaque except for equality."""

Blob = Payload | None
"""A stored channel value; ``None`` marks a version whose channel held no value."""

WriteKey = tuple[str, int]
"""``(task_id, idx)``: the identity of one pending write of a checkpoint."""


def payload_size(payload: Blob) -> int:
    """Bytes counted for a payload: the length of its data (0 for no value).

    Runtime complexity: O(1).
    """
    return 0 if payload is None else len(payload[1])


def text_size(text: str) -> int:
    """UTF-8 length of ``text``.

    Runtime complexity: O(1) for ASCII text, O(length) otherwise.
    """
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


BlobKey = tuple[str, Version]
"""``(channel, version)``: the identity of a stored channel value."""

_NO_CHANNELS: frozenset[str] = frozenset()

# Records keep their fields flat (a payload's tag and data side by side, channel
# versions as one tuple) because they are the store's most numerous objects:
# every nested tuple or dict would cost its own header per checkpoint or write.


class CheckpointRecord(NamedTuple):
    """One stored checkpoint of one namespace; build one with ``CheckpointRecord.of``.

    Attributes:
        checkpoint_id: Time-ordered id; the greatest id is the latest checkpoint.
        parent_id: The checkpoint this one continues from, if any.
        checkpoint_type: Type tag of the serialized checkpoint (without its channel values).
        checkpoint_data: Its bytes.
        metadata_type: Type tag of the serialized metadata.
        metadata_data: Its bytes.
        versions: Flat ``(channel, ..., channel, version, ..., version)``: the
            checkpoint's channels, then the version of each one's value, in the
            same order; values live in the namespace's blobs. Read it through
            ``blob_keys`` or ``version_of``.
        run_id: The run that created the checkpoint, for ``delete_runs``.
        delta_channels: Channels whose value at this checkpoint, when not stored
            as a blob, must be rebuilt from ancestors' writes. Ancestry-aware
            deletions (``prune``, ``delete_runs``) keep what they need.
    """

    checkpoint_id: str
    parent_id: str | None
    checkpoint_type: str
    checkpoint_data: bytes
    metadata_type: str
    metadata_data: bytes
    versions: tuple[str | Version, ...] = ()
    run_id: str | None = None
    delta_channels: frozenset[str] = _NO_CHANNELS

    @classmethod
    def of(
        cls,
        checkpoint_id: str,
        parent_id: str | None,
        checkpoint: Payload,
        metadata: Payload,
        channel_versions: Mapping[str, Version],
        run_id: str | None = None,
        delta_channels: frozenset[str] = _NO_CHANNELS,
    ) -> CheckpointRecord:
        """A record from payloads and a channel-to-version mapping. Runtime complexity: O(channels)."""
        return tuple.__new__(  # in C, as make_checkpoint_record
            cls,
            (
                checkpoint_id,
                parent_id,
                checkpoint[0],
                checkpoint[1],
                metadata[0],
                metadata[1],
                (*channel_versions, *channel_versions.values()),
                run_id,
                delta_channels,
            ),
        )

    @property
    def checkpoint(self) -> Payload:
        """The serialized checkpoint, without its channel values."""
        return (self.checkpoint_type, self.checkpoint_data)

    @property
    def metadata(self) -> Payload:
        """The serialized metadata."""
        return (self.metadata_type, self.metadata_data)

    @property
    def channel_versions(self) -> dict[str, Version]:
        """Channel name to version, as a new dict. Runtime complexity: O(channels)."""
        return dict(self.blob_keys())

    def blob_keys(self) -> Iterator[BlobKey]:
        """``(channel, version)`` of each channel. Runtime complexity: O(1) per key."""
        versions = self.versions
        half = len(versions) // 2
        return zip(versions[:half], versions[half:], strict=True)  # type: ignore[arg-type]

    def version_of(self, channel: str) -> Version | None:
        """The version of ``channel``'s value, or None. Runtime complexity: O(channels), in C."""
        versions = self.versions
        half = len(versions) // 2
        try:
            return versions[half + versions.index(channel, 0, half)]
        except ValueError:
            return None

    @property
    def nbytes(self) -> int:
        """Bytes counted for the record: serialized checkpoint plus metadata."""
        return len(self.checkpoint_data) + len(self.metadata_data)


class WriteRecord(NamedTuple):
    """One pending write, stored under the checkpoint its task ran from; build one with ``WriteRecord.of``.

    ``idx`` is the write's index in its batch, or a negative index for the
    special channels that overwrite instead of being kept once.
    """

    task_id: str
    idx: int
    channel: str
    value_type: str
    value_data: bytes
    task_path: str = ""

    @classmethod
    def of(cls, task_id: str, idx: int, channel: str, value: Payload, task_path: str = "") -> WriteRecord:
        """A record from a payload. Runtime complexity: O(1)."""
        return cls(task_id, idx, channel, value[0], value[1], task_path)

    @property
    def value(self) -> Payload:
        """The serialized value."""
        return (self.value_type, self.value_data)

    @property
    def key(self) -> WriteKey:
        return (self.task_id, self.idx)

    @property
    def sort_key(self) -> tuple[str, str, int]:
        """``(task_path, task_id, idx)``: the order a super-step applies writes in."""
        return (self.task_path, self.task_id, self.idx)

    @property
    def nbytes(self) -> int:
        """Bytes counted: the serialized value plus the free-form task path (one per character)."""
        return len(self.value_data) + len(self.task_path)


class CheckpointView(NamedTuple):
    """A consistent read of one checkpoint, taken under the store's lock.

    Attributes:
        thread_id: The thread it belongs to.
        namespace: Its namespace.
        record: The stored record.
        channel_values: Every non-empty channel value it references.
        writes: Its pending writes in ``(task_path, task_id, idx)`` order.
    """

    thread_id: str
    namespace: str
    record: CheckpointRecord
    channel_values: dict[str, Payload]
    writes: list[WriteRecord]

    @property
    def nbytes(self) -> int:
        """Serialized bytes a reader will deserialize for this view."""
        return (
            self.record.nbytes
            + sum(len(p[1]) for p in self.channel_values.values())
            + sum(len(w.value_data) for w in self.writes)
        )


class ChannelHistory(NamedTuple):
    """What one channel contributed along a checkpoint's ancestor chain.

    Attributes:
        writes: The channel's writes, oldest first, in super-step order within
            each ancestor.
        seed: The non-empty value stored at the nearest ancestor that has one,
            or ``None`` if the walk reached the root without one.
    """

    writes: list[WriteRecord]
    seed: Payload | None


# A NamedTuple's own constructor is a Python function that costs about twice as
# much as building the tuple in C; records made on every write use these.
make_checkpoint_record: Callable[[tuple[Any, ...]], CheckpointRecord] = partial(tuple.__new__, CheckpointRecord)
"""A ``CheckpointRecord`` from a tuple of all nine fields, in field order, built in C. Runtime complexity: O(1)."""

make_write_record: Callable[[tuple[Any, ...]], WriteRecord] = partial(tuple.__new__, WriteRecord)
"""A ``WriteRecord`` from a tuple of all six fields, in field order, built in C. Runtime complexity: O(1)."""

make_view: Callable[[tuple[Any, ...]], CheckpointView] = partial(tuple.__new__, CheckpointView)
"""A ``CheckpointView`` from a tuple of all five fields, in field order, built in C. Runtime complexity: O(1)."""
