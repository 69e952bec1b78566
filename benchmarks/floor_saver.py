"""The floor: the least a bounded saver adds to the stock saver's work.

``FloorSaver`` is LangGraph's stock ``InMemorySaver`` plus only the bookkeeping
without which no byte limit or LRU order can be kept, written inline: a lock,
type checks of the ids, the bytes of every new payload summed and compared
with a total, a byte count per thread, and an LRU move on every write and
read. It never evicts, expires, rejects for anything but the total, remembers
dropped threads, indexes runs, plans removals or checks namespaces, and its
reads scan as the stock saver's do: it is a measuring stick, not a saver to
use. The alternating benchmarks run it beside ours, so that the README can say
how much of "ours / stock" is the price of being bounded at all in Python and
how much is our engine.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer


class _Ledger:
    """Totals shared by the shallow copies LangGraph makes of a checkpointer."""

    __slots__ = ("lock", "nbytes", "threads")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.threads: OrderedDict[str, int] = OrderedDict()  # thread id -> bytes, least recently used first
        self.nbytes = 0


class FloorSaver(InMemorySaver):
    """The stock saver with the minimum of bounded bookkeeping; see the module docstring."""

    def __init__(self, max_total_bytes: float = float("inf")) -> None:
        super().__init__(serde=JsonPlusSerializer(pickle_fallback=False))
        self.max_total_bytes = max_total_bytes
        self.ledger = _Ledger()

    def _charge(self, thread_id: str, nbytes: int) -> None:
        ledger = self.ledger
        if ledger.nbytes + nbytes > self.max_total_bytes:
            raise ValueError(f"max_total_bytes is {self.max_total_bytes:,}")
        threads = ledger.threads
        threads[thread_id] = threads.get(thread_id, 0) + nbytes
        threads.move_to_end(thread_id)
        ledger.nbytes += nbytes

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        configurable = config["configurable"]
        thread_id, namespace = configurable["thread_id"], configurable.get("checkpoint_ns", "")
        checkpoint_id = checkpoint["id"]
        if type(thread_id) is not str or type(namespace) is not str or type(checkpoint_id) is not str:
            raise ValueError("thread_id, checkpoint_ns and checkpoint id must be strings")
        skeleton = checkpoint.copy()
        values: dict[str, Any] = skeleton.pop("channel_values")  # type: ignore[misc]
        dumps = self.serde.dumps_typed
        blobs = {
            (thread_id, namespace, channel, version): dumps(values[channel]) if channel in values else ("empty", b"")
            for channel, version in new_versions.items()
        }
        record = (dumps(skeleton), dumps(get_checkpoint_metadata(config, metadata)), configurable.get("checkpoint_id"))
        nbytes = len(record[0][1]) + len(record[1][1])
        for _, data in blobs.values():
            nbytes += len(data)
        with self.ledger.lock:
            self._charge(thread_id, nbytes)
            self.blobs.update(blobs)
            self.storage[thread_id][namespace][checkpoint_id] = record
        return {"configurable": {"thread_id": thread_id, "checkpoint_ns": namespace, "checkpoint_id": checkpoint_id}}

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        configurable = config["configurable"]
        key = (configurable["thread_id"], configurable.get("checkpoint_ns", ""), configurable["checkpoint_id"])
        if type(key[0]) is not str or type(key[1]) is not str or type(key[2]) is not str or type(task_id) is not str:
            raise ValueError("thread_id, checkpoint_ns, checkpoint_id and task_id must be strings")
        dumps = self.serde.dumps_typed
        encoded = [
            ((task_id, WRITES_IDX_MAP.get(channel, idx)), (task_id, channel, dumps(value), task_path))
            for idx, (channel, value) in enumerate(writes)
        ]
        nbytes = 0
        for _, (_, _, payload, _) in encoded:
            nbytes += len(payload[1]) + len(task_path)
        with self.ledger.lock:
            self._charge(key[0], nbytes)
            stored = self.writes[key]
            for inner_key, write in encoded:
                if inner_key[1] < 0 or inner_key not in stored:
                    stored[inner_key] = write

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        self._touch(config)
        return super().get_tuple(config)

    def list(self, config: RunnableConfig | None, **kwargs: Any) -> Iterator[CheckpointTuple]:
        if config is not None:
            self._touch(config)
        return super().list(config, **kwargs)

    def _touch(self, config: RunnableConfig) -> None:
        thread_id = config["configurable"]["thread_id"]
        ledger = self.ledger
        with ledger.lock:
            if thread_id in ledger.threads:
                ledger.threads.move_to_end(thread_id)
