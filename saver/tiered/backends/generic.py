"""Any other durable saver, read and written through its public API; and ``InMemorySaver``, whose dicts it reads.

The generic format: metadata as given, every filtered list read from the durable tier, pending writes admitted
in the order the saver returned them (and a checkpoint admitted so is not kept hot once more writes land on it),
and the coherence check made by a ``get_tuple``. No SQL: conditional puts are refused (no atomic check-and-put
across processes through the API), and retention reads the saver through its API (``list(None)``, every
checkpoint, once per pass) and deletes idle threads with ``delete_thread``; ``keep_last`` and ``keep_latest``
over it rewrite the thread (``durable``'s emulation, which a crash can interrupt), so the policy refuses them
unless the saver is ``InMemorySaver`` (in-process: a crash loses it whole anyway).

``InMemorySaver`` keeps metadata as given (msgpack), filters by Python equality, and its dicts answer the
coherence check and a write's index and task path directly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointMetadata, CheckpointTuple
from langgraph.checkpoint.serde.base import SerializerProtocol

from ...engine import InvalidArgumentError, ThreadStorage, WriteRecord
from .base import Batch, ConditionalPut, Kind, MetadataFilter, Newest, Plan, digest, exact_digest, md5

__all__ = ["GenericBackend", "MemoryBackend", "estimate_storage", "python_filter"]

T = TypeVar("T")


class GenericBackend:
    """The generic backend (any saver): metadata as given, filters and the coherence check through the API.

    Attributes: as ``Backend``'s.
    """

    kind: Kind = "other"
    exact = False
    tables = False
    first_write_wins = False
    batched = False

    @property
    def sql(self) -> object | None:
        """None: no statements; retention goes through the API."""
        return None

    def normalize_metadata(self, config: RunnableConfig, metadata: CheckpointMetadata) -> CheckpointMetadata:
        """The metadata as the durable saver will read it back (merged with the config's, as every saver does).

        Raises:
            ValueError: The durable saver cannot store it (naming the saver and why).

        Runtime complexity: O(size of the metadata).
        """
        return metadata

    def hot_filter(self, filter: Mapping[Any, Any]) -> MetadataFilter | None:
        """The durable saver's filter as a predicate on metadata, or None to read the durable tier.

        Runtime complexity: O(keys of the filter).
        """
        return None

    def writes_digest(self, writes: Sequence[WriteRecord]) -> str | None:
        """The digest ``newest`` answers for these writes (a hot checkpoint's). Runtime complexity: O(size)."""
        return digest(f"{w.task_id}\x1f{w.channel}\x1f{w.value_type}\x1f{md5(w.value_data)}" for w in writes)

    def tuple_digest(self, found: CheckpointTuple | None, serde: SerializerProtocol) -> Newest:
        """``newest`` from a ``get_tuple`` (the generic coherence check). Runtime complexity: serializing its writes."""
        if found is None:
            return Newest(None, None)
        checkpoint_id = str(found.config.get("configurable", {})["checkpoint_id"])
        parts = []
        for task_id, channel, value in found.pending_writes or []:
            kind, data = serde.dumps_typed(value)
            parts.append(f"{task_id}\x1f{channel}\x1f{kind}\x1f{md5(data)}")
        return Newest(checkpoint_id, digest(parts))

    # --- the saver's own tables (None: not readable this way) -------------------------------------------------

    def newest(self, saver: Any, thread_id: str, namespace: str) -> Newest | None:
        """The coherence check by one indexed query, or None (use ``tuple_digest``). Runtime complexity: one round
        trip."""
        return None

    async def anewest(self, saver: Any, thread_id: str, namespace: str) -> Newest | None:
        """``newest`` for an async saver, on its own loop."""
        return None

    def exact_writes(
        self, saver: Any, thread_id: str, namespace: str, checkpoint_ids: Sequence[str]
    ) -> dict[str, list[WriteRecord]] | None:
        """Each checkpoint's pending writes as stored (index and task path included), or None.

        Runtime complexity: one round trip.
        """
        return None

    async def aexact_writes(
        self, saver: Any, thread_id: str, namespace: str, checkpoint_ids: Sequence[str]
    ) -> dict[str, list[WriteRecord]] | None:
        """``exact_writes`` for an async saver, on its own loop."""
        return None

    # --- no statements: retention goes through the API, conditional puts are refused ---------------------------

    def run_sync(self, saver: Any, plan: Plan[T], *, transaction: bool = True) -> T:
        """No tables to run statements on (``sql`` is None: callers use the API)."""
        raise NotImplementedError(f"{type(saver).__name__} is read through its API: it runs no SQL")

    async def run_async(self, saver: Any, plan: Plan[T], *, transaction: bool = True) -> T:
        """As ``run_sync``."""
        raise NotImplementedError(f"{type(saver).__name__} is read through its API: it runs no SQL")

    def prepare(self, saver: Any, batch: Batch) -> Any:
        """No rows (``write_batch`` is refused)."""
        return None

    def write_batch(self, saver: Any, batch: Batch, prepared: Any = None) -> set[str]:
        """No tables to write (``group_commit`` replays the items through the saver's API)."""
        raise NotImplementedError(f"{type(saver).__name__} is written through its API: no group commit")

    async def awrite_batch(self, saver: Any, batch: Batch, prepared: Any = None) -> set[str]:
        """As ``write_batch``."""
        raise NotImplementedError(f"{type(saver).__name__} is written through its API: no group commit")

    def conditional_problem(self, saver: Any) -> str | None:
        """Why conditional puts cannot guard this saver. Runtime complexity: O(1)."""
        return (
            f"{type(saver).__name__} offers no atomic check-and-put across processes through its API: conditional "
            f"writes need SqliteSaver, AsyncSqliteSaver, PostgresSaver or AsyncPostgresSaver as the durable saver"
        )

    def put_if_newest(self, saver: Any, call: ConditionalPut) -> RunnableConfig:
        """Refused (``conditional_problem``)."""
        raise InvalidArgumentError(self.conditional_problem(saver))

    async def aput_if_newest(self, saver: Any, call: ConditionalPut) -> RunnableConfig:
        """Refused (``conditional_problem``)."""
        raise InvalidArgumentError(self.conditional_problem(saver))

    def reader(self, saver: Any) -> Any:
        """The saver itself. Runtime complexity: O(1)."""
        return saver

    def verify_now(self, saver: Any) -> None:
        """No tables of ours to check."""

    def storage(self, saver: Any, thread_id: str) -> ThreadStorage | None:
        """None: no tables to sum; the caller estimates through the API (``estimate_storage``)."""
        return None

    async def astorage(self, saver: Any, thread_id: str) -> ThreadStorage | None:
        """As ``storage``."""
        return None


def python_filter(filter: Mapping[Any, Any]) -> MetadataFilter:
    """Python equality of each filtered key's value (a missing key is None)."""
    items = list(filter.items())
    return lambda metadata: all(value == metadata.get(key) for key, value in items)


class MemoryBackend(GenericBackend):
    """``InMemorySaver``: metadata kept as given (msgpack), Python equality for filters, its dicts read directly."""

    kind: Kind = "memory"
    exact = True
    tables = True

    def hot_filter(self, filter: Mapping[Any, Any]) -> MetadataFilter | None:
        return python_filter(filter)

    def writes_digest(self, writes: Sequence[WriteRecord]) -> str | None:
        return exact_digest((w.task_id, w.idx, w.channel, w.value_type, w.value_data) for w in writes)

    def newest(self, saver: Any, thread_id: str, namespace: str) -> Newest | None:
        checkpoints = saver.storage.get(thread_id, {}).get(namespace, {})  # .get: a read creates nothing
        if not checkpoints:
            return Newest(None, None)
        newest_id = max(checkpoints)
        writes = saver.writes.get((thread_id, namespace, newest_id), {})
        rows = [(task_id, idx, channel, *value) for (task_id, idx), (_, channel, value, _) in writes.items()]
        return Newest(newest_id, exact_digest(rows))

    def exact_writes(
        self, saver: Any, thread_id: str, namespace: str, checkpoint_ids: Sequence[str]
    ) -> dict[str, list[WriteRecord]] | None:
        found: dict[str, list[WriteRecord]] = {}
        for checkpoint_id in checkpoint_ids:
            writes = saver.writes.get((thread_id, namespace, checkpoint_id), {})
            found[checkpoint_id] = [
                WriteRecord.of(task_id, idx, channel, value, path)
                for (task_id, idx), (_, channel, value, path) in writes.items()
            ]
        return found


def estimate_storage(thread_id: str, tuples: Sequence[CheckpointTuple], serde: SerializerProtocol) -> ThreadStorage:
    """A thread's size estimated from what the saver's ``list`` returned, re-serialized with its serializer:
    each checkpoint without its values plus its metadata, each channel value once per (namespace, channel,
    version), each pending write. Marked ``estimated``: the saver may store more (indexes, its own framing) or
    less (its own compression).

    Runtime complexity: O(size of the thread), every value serialized once.
    """
    seen: set[tuple[str, str, object]] = set()
    by_channel: dict[str, int] = {}
    namespaces: set[str] = set()
    checkpoint_bytes = write_bytes = writes = values = 0
    for item in tuples:
        namespace = str(item.config.get("configurable", {}).get("checkpoint_ns", ""))
        namespaces.add(namespace)
        checkpoint: dict[str, Any] = dict(item.checkpoint)
        channel_values: Mapping[str, Any] = checkpoint.pop("channel_values", None) or {}
        checkpoint_bytes += len(serde.dumps_typed(checkpoint)[1]) + len(serde.dumps_typed(item.metadata)[1])
        versions = item.checkpoint.get("channel_versions", {})
        for channel, value in channel_values.items():
            key = (namespace, channel, versions.get(channel))
            if key not in seen:
                seen.add(key)
                values += 1
                by_channel[channel] = by_channel.get(channel, 0) + len(serde.dumps_typed(value)[1])
        for write in item.pending_writes or ():
            writes += 1
            write_bytes += len(serde.dumps_typed(write[2])[1])
    return ThreadStorage(
        thread_id,
        "durable",
        namespaces=len(namespaces),
        checkpoints=len(tuples),
        checkpoint_bytes=checkpoint_bytes,
        channel_values=values,
        channel_bytes=sum(by_channel.values()),
        by_channel=by_channel,
        pending_writes=writes,
        pending_write_bytes=write_bytes,
        estimated=True,
    )
