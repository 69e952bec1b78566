"""Translation between LangGraph's values and the engine's serialized records.

Every value is serialized exactly once on the way in, and every read
deserializes fresh objects, so no caller ever holds an object the store keeps.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    PendingWrite,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from .engine import (
    Blob,
    ChannelHistory,
    CheckpointRecord,
    CheckpointView,
    InvalidArgumentError,
    WriteRecord,
    identifiers,
    make_checkpoint_record,
    make_write_record,
)

__all__ = [
    "DELTA_COUNTERS_KEY",
    "decode_histories",
    "decode_view",
    "decode_writes",
    "encode_checkpoint",
    "encode_writes",
    "history_bytes",
]

DELTA_COUNTERS_KEY = "counters_since_delta_snapshot"
"""Metadata key listing the DeltaChannels not snapshotted at a checkpoint."""

_NO_DELTA_CHANNELS: frozenset[str] = frozenset()
_PLAIN_SEQUENCES = frozenset((list, tuple, deque))  # what LangGraph passes as writes (a task's deque): no ABC check


def encode_checkpoint(
    serde: SerializerProtocol,
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    new_versions: ChannelVersions,
    parent_id: str | None,
) -> tuple[CheckpointRecord, dict[tuple[str, Any], Blob]]:
    """The record and new blobs for ``put``, laid out as the stock saver lays them out.

    A channel in ``new_versions`` without a value gets an empty blob (``None``).
    The metadata is merged with the config's (``get_checkpoint_metadata``): that
    is where ``run_id`` comes from. Its ``counters_since_delta_snapshot`` names
    the DeltaChannels whose value this checkpoint does not store, which the
    engine's ancestry-aware deletions must keep rebuildable.
    """
    if type(checkpoint) is not dict or type(metadata) is not dict or type(new_versions) is not dict:
        _require_mapping("checkpoint", checkpoint)  # plain dicts, as LangGraph passes them, need no closer look
        _require_mapping("metadata", metadata)
        _require_mapping("new_versions", new_versions)
        checkpoint = dict(checkpoint)  # type: ignore[assignment]
    skeleton: dict[str, Any] = checkpoint.copy()  # type: ignore[assignment]
    values: dict[str, Any] = skeleton.pop("channel_values", None)
    channel_versions = checkpoint.get("channel_versions")
    if type(values) is not dict or type(channel_versions) is not dict:
        _require_mapping("checkpoint['channel_values']", values)
        _require_mapping("checkpoint['channel_versions']", channel_versions)
    dumps = serde.dumps_typed
    blobs: dict[tuple[str, Any], Blob] = {}
    channel: Any = None
    version: Any = None
    try:
        for channel, version in new_versions.items():
            blobs[(channel, version)] = dumps(values[channel]) if channel in values else None
    except TypeError as error:
        if isinstance(version, Hashable) and isinstance(channel, Hashable):
            raise _unserializable(f"channel {channel!r}", values.get(channel), error) from error  # type: ignore[call-overload]
        raise InvalidArgumentError(f"new_versions must map channels to str, int or float versions: {error}") from None
    merged = get_checkpoint_metadata(config, metadata)
    run_id = merged.get("run_id")
    counters = merged.get(DELTA_COUNTERS_KEY)
    try:
        checkpoint_type, checkpoint_data = dumps(skeleton)
    except TypeError:
        for channel, version in channel_versions.items():  # a version no serializer holds: say which
            identifiers.check_record_version(channel, version)
        raise
    try:
        metadata_type, metadata_data = dumps(merged)
    except TypeError as error:
        raise TypeError(f"metadata cannot be serialized: {error}") from error
    record = make_checkpoint_record(
        (
            checkpoint.get("id"),
            parent_id,
            checkpoint_type,
            checkpoint_data,
            metadata_type,
            metadata_data,
            (*channel_versions, *channel_versions.values()),
            run_id if run_id is None or type(run_id) is str else _run_id_text(run_id),
            _delta_channels(counters) if counters else _NO_DELTA_CHANNELS,
        )
    )
    return record, blobs


def encode_writes(
    serde: SerializerProtocol,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str,
) -> list[WriteRecord]:
    """Write records for ``put_writes``; special channels get their negative index."""
    if type(writes) not in _PLAIN_SEQUENCES and (isinstance(writes, (str, bytes)) or not isinstance(writes, Iterable)):
        raise InvalidArgumentError(f"writes must be a sequence of (channel, value) pairs, got {type(writes).__name__}")
    records = []
    dumps = serde.dumps_typed
    for idx, write in enumerate(writes):
        if not isinstance(write, (tuple, list)) or len(write) != 2:
            raise InvalidArgumentError(f"writes[{idx}] must be a (channel, value) pair, got {write!r:.80}")
        channel, value = write
        try:
            tag, data = dumps(value)
        except TypeError as error:
            raise _unserializable(f"write {idx} to channel {channel!r}", value, error) from error
        position = WRITES_IDX_MAP.get(channel, idx) if isinstance(channel, str) else idx
        records.append(make_write_record((task_id, position, channel, tag, data, task_path)))
    return records


def _delta_channels(counters: object) -> frozenset[str]:
    """The DeltaChannels a checkpoint's metadata says it does not store (names, checked by the engine)."""
    if isinstance(counters, (str, bytes)) or not isinstance(counters, Iterable):
        raise InvalidArgumentError(
            f"metadata[{DELTA_COUNTERS_KEY!r}] must map channel names to counts, got {type(counters).__name__}"
        )
    names = frozenset(counters)
    if any(type(name) is not str for name in names):
        raise InvalidArgumentError(
            f"metadata[{DELTA_COUNTERS_KEY!r}] must map channel names (text) to counts, "
            f"got {sorted(map(repr, names))!s:.120}"
        )
    return names


def _run_id_text(run_id: object) -> str:
    """A run id given as another type (a UUID, say), as text."""
    try:
        return str(run_id)
    except ValueError:  # an int too large to print
        raise InvalidArgumentError(f"metadata['run_id'] must be text or a UUID, got {type(run_id).__name__}") from None


def _unserializable(what: str, value: Any, error: TypeError) -> TypeError:
    return TypeError(f"{what}: a {type(value).__name__} cannot be serialized: {error}")


def _require_mapping(field: str, value: object) -> None:
    if type(value) is not dict and not isinstance(value, Mapping):
        raise InvalidArgumentError(f"{field} must be a mapping, got {type(value).__name__}")


def decode_view(
    serde: SerializerProtocol,
    view: CheckpointView,
    metadata: CheckpointMetadata | None = None,
) -> CheckpointTuple:
    """The ``CheckpointTuple`` of a read, built from fresh objects.

    ``metadata`` may be passed when the caller already deserialized it.
    """
    thread_id, namespace, record, channel_values, writes = view
    loads = serde.loads_typed
    checkpoint = loads((record.checkpoint_type, record.checkpoint_data))
    checkpoint["channel_values"] = {channel: loads(payload) for channel, payload in channel_values.items()}
    # The stored version objects (immutable: sharing them hands out nothing a caller could change), so that the
    # checkpoints a graph writes from this one hold the same objects, not copies (engine.memory counts them once).
    versions = record.versions
    half = len(versions) >> 1
    checkpoint["channel_versions"] = dict(zip(versions[:half], versions[half:], strict=True))
    parent_id = record.parent_id
    pending = []
    for write in writes:
        pending.append((write.task_id, write.channel, loads((write.value_type, write.value_data))))
    return CheckpointTuple(  # positional, dicts built inline: this runs for every checkpoint read
        {"configurable": {"thread_id": thread_id, "checkpoint_ns": namespace, "checkpoint_id": record.checkpoint_id}},
        checkpoint,
        loads((record.metadata_type, record.metadata_data)) if metadata is None else metadata,
        {"configurable": {"thread_id": thread_id, "checkpoint_ns": namespace, "checkpoint_id": parent_id}}
        if parent_id
        else None,
        pending,
    )


def decode_writes(serde: SerializerProtocol, writes: Sequence[WriteRecord]) -> list[PendingWrite]:
    """``(task_id, channel, value)`` triples in the order given."""
    loads = serde.loads_typed
    return [(write.task_id, write.channel, loads((write.value_type, write.value_data))) for write in writes]


def decode_histories(
    serde: SerializerProtocol, histories: Mapping[str, ChannelHistory]
) -> dict[str, DeltaChannelHistory]:
    """``get_delta_channel_history``'s answer from the engine's walk."""
    result: dict[str, DeltaChannelHistory] = {}
    for channel, history in histories.items():
        entry: DeltaChannelHistory = {"writes": decode_writes(serde, history.writes)}
        if history.seed is not None:
            entry["seed"] = serde.loads_typed(history.seed)
        result[channel] = entry
    return result


def history_bytes(histories: Mapping[str, ChannelHistory]) -> int:
    """Serialized bytes ``decode_histories`` would deserialize."""
    return sum(sum(len(w.value_data) for w in h.writes) + (len(h.seed[1]) if h.seed else 0) for h in histories.values())
