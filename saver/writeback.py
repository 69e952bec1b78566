"""Write-back's unflushed writes: what the durable tier has not acknowledged yet, in the order it came.

With ``TieredSaver(..., write="back")`` a write lands in the hot tier and here.
The ledger keeps each unflushed write as the hot tier stored it (immutable
records, shared with the hot store, not copied), so a thread that leaves memory
before it is flushed loses nothing: its unflushed writes stay here until the
durable tier has them. A flush replays a thread's writes oldest first (parents
before children, a checkpoint before the writes that came after it), each
through the durable saver's public ``put`` / ``put_writes``.

What waits is bounded by ``max_dirty_bytes``: the caller makes room (flushes)
before adding, never queueing past the bound. The bytes counted are what each
write added: a checkpoint, its metadata and its new channel values, or a batch
of pending writes with their task paths (the engine's counting). The values an
unflushed checkpoint keeps from its parent are shared with the hot tier or with
the parent's own entry.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Mapping
from typing import Any, NamedTuple

from langgraph.checkpoint.serde.base import SerializerProtocol

from .engine import CheckpointRecord, Payload, Version, WriteRecord

__all__ = ["DirtyCheckpoint", "DirtyItem", "DirtyLedger", "DirtyWrites", "Replay", "replay"]


class DirtyCheckpoint(NamedTuple):
    """An unflushed ``put``.

    Attributes:
        namespace: Its namespace.
        record: The checkpoint as the hot tier stored it (metadata merged, parent id).
        values: Every non-empty channel value it references, as a read returns them.
        new_versions: The channels the put stored new values for, and their versions.
        nbytes: What it added (checkpoint, metadata, new values).
    """

    namespace: str
    record: CheckpointRecord
    values: Mapping[str, Payload]
    new_versions: Mapping[str, Version]
    nbytes: int


class DirtyWrites(NamedTuple):
    """An unflushed ``put_writes``: one task's batch, in the order it was given.

    Attributes:
        namespace: Its namespace.
        checkpoint_id: The checkpoint its task ran from.
        task_id: The task.
        task_path: The task's path.
        writes: The records, in the order of the call (so each gets its index back).
        nbytes: What it added (values and task paths).
    """

    namespace: str
    checkpoint_id: str
    task_id: str
    task_path: str
    writes: tuple[WriteRecord, ...]
    nbytes: int


DirtyItem = DirtyCheckpoint | DirtyWrites


class DirtyLedger:
    """Each thread's unflushed writes, oldest first, and their bytes.

    Invariant: ``nbytes`` is the sum of every item's ``nbytes`` and each
    thread's ``thread_bytes`` the sum of its own; a thread with no item has no
    entry; threads sit in the order they first became dirty; a thread is being
    flushed by at most one caller (``flushing``). Everything is guarded by
    ``lock``; nobody holds it across a durable round trip.
    """

    def __init__(self) -> None:
        self.lock = threading.Condition(threading.Lock())
        self.threads: OrderedDict[str, deque[DirtyItem]] = OrderedDict()
        self.thread_bytes: dict[str, int] = {}
        self.nbytes = 0
        self.flushing: set[str] = set()

    def add(self, thread_id: str, item: DirtyItem) -> None:
        """Note an unflushed write. Runtime complexity: O(1)."""
        with self.lock:
            items = self.threads.get(thread_id)
            if items is None:
                items = self.threads[thread_id] = deque()
                self.thread_bytes[thread_id] = 0
            items.append(item)
            self.thread_bytes[thread_id] += item.nbytes
            self.nbytes += item.nbytes

    def is_dirty(self, thread_id: str) -> bool:
        """Whether the thread has unflushed writes. Runtime complexity: O(1)."""
        return thread_id in self.threads

    def dirty_threads(self) -> list[str]:
        """The threads with unflushed writes, the one dirty longest first. Runtime complexity: O(threads)."""
        with self.lock:
            return list(self.threads)

    def claim(self, thread_id: str) -> list[DirtyItem]:
        """Become the thread's flusher (waiting for another one to finish) and take its unflushed writes in order.

        The caller must ``release`` after flushing, saying how many it flushed.
        Runtime complexity: O(items of the thread), plus the wait.
        """
        with self.lock:
            self.lock.wait_for(lambda: thread_id not in self.flushing)
            self.flushing.add(thread_id)
            return list(self.threads.get(thread_id, ()))

    def release(self, thread_id: str, flushed: int) -> None:
        """The flusher is done: the first ``flushed`` items taken are durable now. Runtime complexity: O(flushed)."""
        with self.lock:
            items = self.threads.get(thread_id)
            for _ in range(flushed if items is not None else 0):
                item = items.popleft()  # type: ignore[union-attr]
                self.thread_bytes[thread_id] -= item.nbytes
                self.nbytes -= item.nbytes
            if items is not None and not items:
                del self.threads[thread_id], self.thread_bytes[thread_id]
            self.flushing.discard(thread_id)
            self.lock.notify_all()

    def discard(self, thread_id: str) -> int:
        """Forget a deleted thread's unflushed writes; return their bytes. A flush under way for it
        finishes first (its deletion then removes what it wrote). Runtime complexity: O(items of the thread).
        """
        with self.lock:
            self.lock.wait_for(lambda: thread_id not in self.flushing)
            items = self.threads.pop(thread_id, None)
            freed = self.thread_bytes.pop(thread_id, 0)
            self.nbytes -= freed
            return freed if items is not None else 0

    def newest_id(self, thread_id: str) -> str | None:
        """The greatest checkpoint id among the thread's unflushed puts. Runtime complexity: O(items)."""
        with self.lock:
            items = self.threads.get(thread_id, ())
            ids = [item.record.checkpoint_id for item in items if isinstance(item, DirtyCheckpoint)]
        return max(ids, default=None)

    def check(self) -> None:
        """Assert the invariant's accounting: each thread's bytes, and the total. Runtime complexity: O(items).

        Raises:
            AssertionError: Naming the first drift found.
        """
        with self.lock:
            for thread_id, items in self.threads.items():
                kept = self.thread_bytes[thread_id]
                if kept != sum(item.nbytes for item in items) or not items:
                    raise AssertionError(f"dirty bytes of {thread_id!r} drift")
            if self.nbytes != sum(self.thread_bytes.values()):
                raise AssertionError("dirty bytes drift")

    def __len__(self) -> int:
        return len(self.threads)


class Replay(NamedTuple):
    """A durable saver's method (``put`` or ``put_writes``) and the arguments that store an unflushed write."""

    method: str
    arguments: tuple[Any, ...]


def replay(item: DirtyItem, thread_id: str, serde: SerializerProtocol) -> Replay:
    """The durable saver's method and arguments that store an unflushed write as it was first made.

    A checkpoint is put with every value it holds, its merged metadata, its
    parent link and the versions its put stored new values for; a batch of
    pending writes is put again whole, in its order, so each write gets its
    index back (a special channel its fixed one). Values are deserialized
    afresh. Runtime complexity: O(size of the item) to deserialize.
    """
    loads = serde.loads_typed
    if isinstance(item, DirtyCheckpoint):
        record = item.record
        checkpoint = loads(record.checkpoint)
        checkpoint["channel_values"] = {channel: loads(payload) for channel, payload in item.values.items()}
        target: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": item.namespace}
        if record.parent_id is not None:
            target["checkpoint_id"] = record.parent_id
        return Replay("put", ({"configurable": target}, checkpoint, loads(record.metadata), dict(item.new_versions)))
    located = {"thread_id": thread_id, "checkpoint_ns": item.namespace, "checkpoint_id": item.checkpoint_id}
    writes = [(write.channel, loads(write.value)) for write in item.writes]
    return Replay("put_writes", ({"configurable": located}, writes, item.task_id, item.task_path))
