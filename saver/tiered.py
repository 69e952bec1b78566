"""``TieredSaver``: the bounded store as a hot tier over a durable LangGraph saver.

The hot tier is the engine with every limit it has; the durable tier (any
``BaseCheckpointSaver``: ``SqliteSaver``, ``PostgresSaver``, their async
variants, ``RedisSaver``...) holds everything. A thread leaving memory is not a
loss: it is still durable, and the next read brings it back.

* ``write="through"`` (the default): ``put`` and ``put_writes`` return once
  the durable tier has acknowledged the write; then the hot tier holds it too.
  Per-item checks (identifiers, ``max_checkpoint_bytes``,
  ``max_pending_write_bytes``, deleted threads) come first, so a refused write
  is written nowhere; a durable failure raises and leaves the hot tier as it
  was. Store-wide limits never refuse a write: a hot write they refuse leaves
  that thread out of memory.
* ``write="back"``: writes land in the hot tier and in a ledger of unflushed
  writes (``saver.writeback``), flushed to the durable tier oldest first, parents
  first: when the thread is evicted (before its unflushed writes leave
  memory), every ``flush_interval_seconds``, on ``flush()`` and on
  ``close()``. ``max_dirty_bytes`` bounds what waits: a write that would pass it
  flushes first, and if the durable tier is down it is refused with a
  ``CheckpointCapacityError`` naming the durable failure. A crash loses at most
  what was written since the last flush.
* Reads: a hot hit is served from memory. A miss reads the durable tier (one
  read per key however many callers miss at once: ``coordination.Flights``) and
  admits what it read. The hot tier holds a recent suffix of each namespace
  (``saver.residency``); a read it cannot answer completely (``list()`` past the
  resident part, a delta-channel walk past it, a checkpoint id it lacks) goes
  to the durable tier.
* ``delete_thread``, ``delete_for_runs``, ``copy_thread`` and ``prune`` act on
  both tiers, with the durable saver's own method where it has one and
  emulated through its API where it has not (``saver.durable``). A deleted
  thread never comes back from a pending flush, a late write or a read-through.
* No durable round trip happens with the engine's lock held: other threads'
  hot reads and writes never wait behind the network.
* Several processes, one durable tier: each process's hot tier is its own. By
  default one process serves a thread at a time (sticky routing).
  ``coherence="validate"`` makes every read without a checkpoint id first ask
  the durable tier for the namespace's newest checkpoint id (one indexed query
  for SQLite and PostgreSQL) and read through when the hot copy is stale.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import logging
import math
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Collection, Hashable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Any, Literal, NamedTuple, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    PendingWrite,
)

from . import announcing, codec
from .background import JobHealth, Periodic
from .config import InMemoryCheckpointConfig
from .coordination import DeletedThreads, Flights, ThreadDeletedError, ThreadGates, WriteMarks
from .durable import DurableHealth, DurableTier, Newest
from .engine import (
    MIB,
    Blob,
    CheckpointCapacityError,
    CheckpointRecord,
    CheckpointView,
    DroppedThread,
    Store,
    ThreadExport,
    WriteRecord,
    identifiers,
)
from .engine.records import BlobKey, payload_size
from .locations import (
    channel_names,
    checkpoint_id_of,
    configurable,
    locate,
    namespace_of,
    normalize_id,
    normalize_ids,
    root_checkpoint_of,
)
from .offload import rough_size
from .residency import COMPLETE, ResidencyLedger
from .saver import PRUNE_STRATEGIES, BoundedInMemorySaver, SaverStats
from .writeback import DirtyCheckpoint, DirtyLedger, DirtyWrites, replay

__all__ = [
    "COHERENCE_MODES",
    "DEFAULT_FLUSH_INTERVAL_SECONDS",
    "DEFAULT_MAX_DIRTY_BYTES",
    "PER_ITEM_LIMITS",
    "WRITE_MODES",
    "Coherence",
    "ThreadDeletedError",
    "TieredSaver",
    "TieredStats",
    "WriteMode",
]

logger = logging.getLogger(__name__)

WriteMode = Literal["through", "back"]
Coherence = Literal["sticky", "validate"]
WRITE_MODES: tuple[WriteMode, ...] = ("through", "back")
COHERENCE_MODES: tuple[Coherence, ...] = ("sticky", "validate")

DEFAULT_FLUSH_INTERVAL_SECONDS = 1.0
"""Seconds between write-back's periodic flushes: what a crash may lose, at most."""

DEFAULT_MAX_DIRTY_BYTES = 16 * MIB
"""Bytes of unflushed writes write-back holds before a write must flush first."""

PER_ITEM_LIMITS = frozenset({"max_checkpoint_bytes", "max_pending_write_bytes"})
"""Limits about one write alone: they refuse it. Every other limit only decides what stays in memory."""

DIRTY_ROOM_ATTEMPTS = 3
"""Flushes a write-back write tries to make room with before it is written through instead."""

TTL_MARGIN_SECONDS = 1.0
"""A hot thread this close to its idle TTL is treated as leaving: the write may expire it and start it anew."""


@dataclass(frozen=True)
class TieredStats:
    """What the tiered saver holds and did, at one instant.

    Attributes:
        hot: The hot tier's own counters (``SaverStats``): threads, bytes, evictions...
        write: ``"through"`` or ``"back"``.
        coherence: ``"sticky"`` or ``"validate"``.
        hits: Reads the hot tier answered.
        misses: Reads that went to the durable tier (one per key, however many callers waited).
        flight_waits: Callers that waited for another caller's read of the same key.
        admissions: Checkpoints a read brought into the hot tier.
        left_out: Hot writes a store-wide limit refused: the thread left memory, still durable.
        dirty_threads: Threads with unflushed writes (write-back).
        dirty_bytes: Their bytes.
        max_dirty_bytes: The bound on ``dirty_bytes``.
        flushes: Flushes of a thread that wrote something to the durable tier.
        flushed_writes: Checkpoints and write batches flushed.
        flush_seconds: Time spent flushing, in all.
        flush_failures: Flushes the durable tier failed (the writes stay in memory).
        spills: Threads evicted from the hot tier with unflushed writes, flushed then.
        spill_seconds: Time spent flushing them.
        durable_calls: Calls made to the durable saver.
        durable_errors: Calls that raised.
        last_durable_error: The last of them, as ``ExceptionType: message``, or None.
        validations: Coherence checks made (``coherence="validate"``).
        stale: Checks that found the hot copy stale (it was dropped and read again).
        validation_seconds: Time spent on coherence checks, in all.
        deleted_thread_records: Deleted threads remembered so that their late writes are refused.
        rejections: Writes refused before the durable write, by limit (and ``deleted_thread``).
    """

    hot: SaverStats
    write: WriteMode
    coherence: Coherence
    hits: int
    misses: int
    flight_waits: int
    admissions: int
    left_out: int
    dirty_threads: int
    dirty_bytes: int
    max_dirty_bytes: float
    flushes: int
    flushed_writes: int
    flush_seconds: float
    flush_failures: int
    spills: int
    spill_seconds: float
    durable_calls: int
    durable_errors: int
    last_durable_error: str | None
    validations: int
    stale: int
    validation_seconds: float
    deleted_thread_records: int
    rejections: Mapping[str, int] = field(default_factory=dict)


@dataclass
class _Counters:
    """The tiered saver's own counters. Changed with the hot store's lock held, or ``spill_lock``."""

    hits: int = 0
    misses: int = 0
    flight_waits: int = 0
    admissions: int = 0
    left_out: int = 0
    flushes: int = 0
    flushed_writes: int = 0
    flush_seconds: float = 0.0
    flush_failures: int = 0
    spills: int = 0
    spill_seconds: float = 0.0
    validations: int = 0
    stale: int = 0
    validation_seconds: float = 0.0
    rejections: Counter[str] = field(default_factory=Counter)


class _HotRead(NamedTuple):
    """What the hot tier answered: the checkpoint's view, and whether its answer (a view, or none) is the
    durable tier's too (else the durable tier must be read)."""

    view: CheckpointView | None
    known: bool


_UNKNOWN = _HotRead(None, False)


class _Admission(NamedTuple):
    """A durable read encoded for the hot tier: the checkpoint, its new values and its writes (by task)."""

    record: CheckpointRecord
    blobs: dict[BlobKey, Blob]
    writes: list[list[WriteRecord]]


class _ListRequest(NamedTuple):
    """A ``list()`` call, its identifiers read out of its configs."""

    config: RunnableConfig | None
    thread_id: str
    namespace: str | None
    checkpoint_id: str | None
    filter: Mapping[str, Any] | None
    before: RunnableConfig | None
    before_id: str | None
    limit: int | None


class _Shared:
    """Every piece of state a ``TieredSaver`` and its ``with_allowlist()`` copies share.

    Invariant: the hot store's lock guards ``residency``, ``marks`` and
    ``counters``; ``dirty`` guards itself; ``spill_requests`` is guarded by the
    hot store's lock too.
    """

    hot: BoundedInMemorySaver  # set once the hook exists: it is this object's on_hot_drop

    def __init__(self, write: WriteMode, coherence: Coherence, max_dirty_bytes: float, capacity: float) -> None:
        self.write: WriteMode = write
        self.coherence: Coherence = coherence
        self.max_dirty_bytes = max_dirty_bytes
        self.residency = ResidencyLedger()
        self.dirty = DirtyLedger()
        self.marks = WriteMarks()
        self.gates = ThreadGates()
        self.flights: Flights[Any] = Flights()
        self.deleted = DeletedThreads(capacity)
        self.health = DurableHealth()
        self.counters = _Counters()
        self.spill_requests: set[str] = set()
        self.background: list[Periodic[TieredSaver]] = []
        self.flush_health = JobHealth()

    def on_hot_drop(self, dropped: DroppedThread, export: ThreadExport) -> None:
        """The hot tier evicted or expired a thread: forget what we knew of its copy and its tombstone
        (it is still durable: not a loss), and have its unflushed writes flushed now (write-back).

        Runtime complexity: O(1).
        """
        store = self.hot.store
        thread_id = dropped.thread_id
        with store.lock:
            if store.last_used(thread_id) is None:
                self.residency.forget_stored(thread_id)
                _forget_tombstone(store, thread_id)
            if self.write == "back" and self.dirty.is_dirty(thread_id):
                self.spill_requests.add(thread_id)


class TieredSaver(
    BaseCheckpointSaver[str],
    AbstractContextManager["TieredSaver"],
    AbstractAsyncContextManager["TieredSaver"],
):
    """A bounded in-memory hot tier over any durable LangGraph checkpointer.

    Pass it to ``graph.compile(checkpointer=...)``. Reads of threads in memory
    cost what the memory saver's cost; writes cost the durable saver's
    (write-through) or the memory saver's (write-back). Threads leave memory
    under the limits of ``config`` and come back from the durable tier when read.

    The runtime costs the methods state leave out the durable saver's own, and,
    when they are due, the hot tier's lazy expiry and the flush of threads a
    call evicted with unflushed writes (write-back).

    Args:
        durable: Any ``BaseCheckpointSaver``; it holds everything. Its serializer
            is used for the hot tier too.
        config: The hot tier's limits (``InMemoryCheckpointConfig``); its
            ``on_evict`` and ``autosave_path`` must be unset (a thread leaving
            memory is still durable; the durable tier is what persists).
        write: ``"through"`` (the default) or ``"back"``.
        coherence: ``"sticky"`` (the default: one process serves a thread at a
            time) or ``"validate"`` (every read without a checkpoint id checks
            the hot copy is the durable tier's newest; needs ``write="through"``).
        flush_interval_seconds: Write-back: seconds between periodic flushes
            (``math.inf``: only on eviction, backpressure, ``flush()`` and ``close()``).
        max_dirty_bytes: Write-back: bytes of unflushed writes that may wait.
        clock: Monotonic seconds for the hot tier's idle expiry (tests inject one).

    Raises:
        ValueError: A setting is invalid, naming it.

    Example:
        ```python
        durable = SqliteSaver(sqlite3.connect("threads.db", check_same_thread=False))
        checkpointer = TieredSaver(durable, config=InMemoryCheckpointConfig(max_threads=250))
        graph = builder.compile(checkpointer=checkpointer)
        ```
    """

    def __init__(
        self,
        durable: BaseCheckpointSaver[Any],
        *,
        config: InMemoryCheckpointConfig | None = None,
        write: WriteMode = "through",
        coherence: Coherence = "sticky",
        flush_interval_seconds: float = DEFAULT_FLUSH_INTERVAL_SECONDS,
        max_dirty_bytes: int | float = DEFAULT_MAX_DIRTY_BYTES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not isinstance(durable, BaseCheckpointSaver):
            raise ValueError(f"durable must be a LangGraph BaseCheckpointSaver, got {type(durable).__name__}")
        config = _checked_config(config)
        if write not in WRITE_MODES:
            raise ValueError(f"write must be one of {WRITE_MODES}, got {write!r}")
        if coherence not in COHERENCE_MODES:
            raise ValueError(f"coherence must be one of {COHERENCE_MODES}, got {coherence!r}")
        if coherence == "validate" and write == "back":
            raise ValueError(
                "coherence='validate' needs write='through': with write='back' another process cannot see this "
                "one's unflushed writes, so no check can make its reads coherent"
            )
        _check_positive("flush_interval_seconds", flush_interval_seconds)
        _check_positive("max_dirty_bytes", max_dirty_bytes)
        super().__init__(serde=durable.serde)
        self.config = config
        self.flush_interval_seconds = float(flush_interval_seconds)
        shared = _Shared(write, coherence, max_dirty_bytes, config.max_dropped_thread_records)
        # The hot tier's tombstones guard a memory-only saver's late writes: here those writes are welcome (the
        # thread is durable), so it keeps one and forgets it at once (_forget_tombstone).
        # Write-back is told of every eviction (the hook receives the thread's export, which costs O(its size)),
        # to flush an evicted thread's unflushed writes at once; write-through needs no word of it.
        hook = shared.on_hot_drop if write == "back" else None
        hot_config = replace(config, on_evict=hook, max_dropped_thread_records=1)
        shared.hot = BoundedInMemorySaver(config=hot_config, serde=self.serde, clock=clock)
        self._shared = shared
        self._durable = DurableTier(durable, shared.health)
        self.resume()

    # --- properties -----------------------------------------------------------------------------------------

    @property
    def durable(self) -> BaseCheckpointSaver[Any]:
        """The durable saver."""
        return self._durable.saver

    @property
    def hot(self) -> BoundedInMemorySaver:
        """The hot tier: a ``BoundedInMemorySaver`` whose evictions are not losses."""
        return self._shared.hot

    @property
    def store(self) -> Store:
        """The hot tier's engine store (for metrics and tests)."""
        return self._shared.hot.store

    @property
    def write(self) -> WriteMode:
        """``"through"`` or ``"back"``."""
        return self._shared.write

    @property
    def coherence(self) -> Coherence:
        """``"sticky"`` or ``"validate"``."""
        return self._shared.coherence

    @property
    def durable_sides(self) -> str:
        """Which side of the durable saver serves the sync and the async methods, in one sentence."""
        return self._durable.sides()

    def __repr__(self) -> str:
        return f"TieredSaver({self._durable.name}, write={self.write!r}, coherence={self.coherence!r})"

    # --- context managers and lifetime -------------------------------------------------------------------------

    def __enter__(self) -> TieredSaver:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> TieredSaver:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    def resume(self) -> None:
        """Start the background work: write-back's periodic flush, and the hot tier's expiry sweep when
        ``purge_interval_seconds`` asks for one. Runtime complexity: O(1).
        """
        shared = self._shared
        shared.hot.resume()
        if shared.write != "back" or shared.background:
            return
        shared.background.append(
            Periodic(
                self,
                TieredSaver._flush_in_background,
                self.flush_interval_seconds,
                "tiered-write-back-flush",
                final=False,
                health=shared.flush_health,
            )
        )

    def close(self) -> None:
        """Stop the background work, flush every unflushed write (write-back) and deliver what is queued.

        The saver stays usable; ``resume()`` starts the background work again.
        The durable saver is not closed: its connection is the caller's.

        Raises:
            Exception: The durable tier failed the last flush; the unflushed
                writes stay in memory (``stats().dirty_bytes``).

        Runtime complexity: one flush of every dirty thread.
        """
        shared = self._shared
        while shared.background:
            shared.background.pop().stop()
        shared.hot.close()
        self._deliver()
        if shared.write == "back":
            self._flush_all()

    async def aclose(self) -> None:
        """Async ``close``: the last flush runs in a worker thread. Runtime complexity: that of ``close``."""
        await asyncio.to_thread(self.close)

    def flush(self) -> int:
        """Write every unflushed write to the durable tier, thread by thread, oldest first; return how many.

        A no-op with ``write="through"``.

        Raises:
            Exception: The durable tier failed; what was not flushed stays in memory.

        Runtime complexity: one durable write per unflushed checkpoint or write batch.
        """
        return self._flush_all()

    async def aflush(self) -> int:
        """Async ``flush``, in a worker thread. Runtime complexity: that of ``flush``."""
        return await asyncio.to_thread(self._flush_all)

    # --- observation ---------------------------------------------------------------------------------------------

    def stats(self) -> TieredStats:
        """The hot tier's counters and the tiered saver's own. Runtime complexity: O(1) (plus one entry per limit
        that rejected something)."""
        shared = self._shared
        counters, health, dirty = shared.counters, shared.health, shared.dirty
        hot = shared.hot.stats()
        with shared.hot.store.lock:
            return TieredStats(
                hot=hot,
                write=shared.write,
                coherence=shared.coherence,
                hits=counters.hits,
                misses=counters.misses,
                flight_waits=counters.flight_waits,
                admissions=counters.admissions,
                left_out=counters.left_out,
                dirty_threads=len(dirty),
                dirty_bytes=dirty.nbytes,
                max_dirty_bytes=shared.max_dirty_bytes,
                flushes=counters.flushes,
                flushed_writes=counters.flushed_writes,
                flush_seconds=counters.flush_seconds,
                flush_failures=counters.flush_failures,
                spills=counters.spills,
                spill_seconds=counters.spill_seconds,
                durable_calls=health.calls,
                durable_errors=health.errors,
                last_durable_error=health.last_error,
                validations=counters.validations,
                stale=counters.stale,
                validation_seconds=counters.validation_seconds,
                deleted_thread_records=len(shared.deleted),
                rejections=dict(counters.rejections),
            )

    def check(self) -> None:
        """Assert the hot tier's invariants and the ledger's accounting (for tests).

        Runtime complexity: O(size of the hot tier and of the unflushed writes).
        """
        self._shared.hot.check()
        dirty = self._shared.dirty
        with dirty.lock:
            for thread_id, items in dirty.threads.items():
                kept = dirty.thread_bytes[thread_id]
                if kept != sum(item.nbytes for item in items) or not items:
                    raise AssertionError(f"dirty bytes of {thread_id!r} drift")
            if dirty.nbytes != sum(dirty.thread_bytes.values()):
                raise AssertionError("dirty bytes drift")

    def with_allowlist(self, extra_allowlist: Collection[tuple[str, ...]]) -> TieredSaver:
        """A shallow copy with a derived msgpack allowlist, for this saver and its durable saver; the copy
        shares every piece of state. Runtime complexity: O(1)."""
        clone = super().with_allowlist(extra_allowlist)
        if clone is self:
            return self
        assert isinstance(clone, TieredSaver)
        clone._durable = DurableTier(self._durable.saver.with_allowlist(extra_allowlist), self._shared.health)
        return clone

    def get_next_version(self, current: str | None, channel: None) -> str:
        """The durable saver's version format (every stock saver's: a counter and a random suffix).

        Runtime complexity: O(1).
        """
        return str(self._durable.saver.get_next_version(current, channel))

    # --- reads -----------------------------------------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint a config names, or the latest of its thread and namespace.

        Runtime complexity: a hit, that of ``BoundedInMemorySaver.get_tuple``; with
        ``coherence="validate"`` and no checkpoint id, plus one round trip; a
        miss, the durable saver's ``get_tuple`` plus encoding what it read.
        """
        thread_id, namespace, checkpoint_id = locate(config)
        newest = None
        if checkpoint_id is None and self._shared.coherence == "validate":
            newest = self._measured_newest(thread_id, namespace)
        view, known = self._hot_get(thread_id, namespace, checkpoint_id, newest)
        self._deliver()
        if view is not None:
            return codec.decode_view(self.serde, view)
        if known:
            return None
        return self._read_through_tuple(config, thread_id, namespace, checkpoint_id)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Async ``get_tuple``: the durable tier's async side, large payloads decoded in a worker thread."""
        thread_id, namespace, checkpoint_id = locate(config)
        newest = None
        if checkpoint_id is None and self._shared.coherence == "validate":
            newest = await self._ameasured_newest(thread_id, namespace)
        view, known = self._hot_get(thread_id, namespace, checkpoint_id, newest)
        await self._adeliver()
        if view is not None:
            return await self._decode(view)
        if known:
            return None
        return await self._aread_through_tuple(config, thread_id, namespace, checkpoint_id)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints matching the criteria, newest first, as the durable tier orders them.

        The hot tier answers when it holds every candidate: the namespace's
        whole resident suffix covers the answer (``before`` and ``limit``
        included), or the thread is entirely hot. Otherwise the durable tier
        answers, and a suffix it returned is admitted. ``config=None`` always
        reads the durable tier.

        Raises:
            ValueError: ``filter`` is not a mapping, ``limit`` not a whole number, or an identifier is invalid.

        Runtime complexity: from the hot tier, O(n) for the n checkpoints of the
        namespace (the suffix above its floor), plus deserializing the
        results' metadata (with a filter) and the results; from the durable
        tier, its ``list`` plus encoding what is admitted.
        """
        request = self._list_request(config, filter, before, limit)
        if request.config is None:
            self._flush_all()
            yield from self._durable.list(None, filter=filter, before=before, limit=limit)
            return
        answer = self._hot_list(request)
        self._deliver()
        if answer is not None:
            yield from answer
            return
        yield from self._read_through_list(request)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Async ``list``."""
        request = self._list_request(config, filter, before, limit)
        if request.config is None:
            if self._shared.write == "back":
                await asyncio.to_thread(self._flush_all)
            for item in await self._durable.alist(None, filter=filter, before=before, limit=limit):
                yield item
            return
        answer = self._hot_list(request)
        await self._adeliver()
        if answer is None:
            answer = await self._aread_through_list(request)
        for item in answer:
            yield item

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Per channel, the writes and seed along the checkpoint's parent chain, from whichever tier holds it.

        The hot tier answers when the walk stays in what it holds: the
        namespace is wholly hot, or every channel found its seed there.
        Otherwise the durable saver walks (its own fast path where it has one).

        Runtime complexity: the hot walk, O(a * (r * C + w log w)) for a
        ancestors (``engine.lineage.channel_history``); or the durable saver's.
        """
        names = channel_names(channels)
        if not names:
            return {}
        thread_id, namespace, checkpoint_id = locate(config)
        newest = None
        if checkpoint_id is None and self._shared.coherence == "validate":
            newest = self._measured_newest(thread_id, namespace)
        histories = self._hot_delta(thread_id, namespace, checkpoint_id, names, newest)
        self._deliver()
        if histories is not None:
            return codec.decode_histories(self.serde, histories)
        self._flush_thread(thread_id)
        key = ("delta", thread_id, namespace, checkpoint_id, tuple(names))
        read = lambda: self._durable.call("get_delta_channel_history", config=config, channels=names)  # noqa: E731
        return cast(Mapping[str, DeltaChannelHistory], self._flown(key, read))

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Async ``get_delta_channel_history``."""
        names = channel_names(channels)
        if not names:
            return {}
        thread_id, namespace, checkpoint_id = locate(config)
        newest = None
        if checkpoint_id is None and self._shared.coherence == "validate":
            newest = await self._ameasured_newest(thread_id, namespace)
        histories = self._hot_delta(thread_id, namespace, checkpoint_id, names, newest)
        await self._adeliver()
        if histories is not None:
            return codec.decode_histories(self.serde, histories)
        await self._aflush_thread(thread_id)
        key = ("delta", thread_id, namespace, checkpoint_id, tuple(names))
        read = lambda: self._durable.acall("get_delta_channel_history", config=config, channels=names)  # noqa: E731
        return cast(Mapping[str, DeltaChannelHistory], await self._aflown(key, read))

    # --- writes -----------------------------------------------------------------------------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint in both tiers; the config's ``checkpoint_id`` is its parent.

        Raises:
            ValueError: An identifier or the config is invalid; nothing was written.
            CheckpointCapacityError: ``max_checkpoint_bytes`` (nothing was
                written), or, write-back, ``max_dirty_bytes`` while the durable
                tier fails (the message names its failure).
            ThreadDeletedError: It continues a thread deleted since; nothing was written.
            Exception: The durable saver's failure (write-through); the hot tier is unchanged.

        Runtime complexity: write-through, the durable saver's ``put`` plus
        O(channels) and serializing the new values; write-back, that of
        ``BoundedInMemorySaver.put`` plus O(channels).
        """
        thread_id, namespace, parent_id = locate(config)
        record, blobs = codec.encode_checkpoint(self.serde, config, checkpoint, metadata, new_versions, parent_id)
        root = root_checkpoint_of(config) if namespace else None
        if self._shared.write == "back" and self._dirty_room(thread_id, _added(record, blobs)):
            refusal = self._back_put(thread_id, namespace, record, blobs, root, new_versions)
            self._deliver()
            if refusal is None:
                return _stored_config(thread_id, namespace, record.checkpoint_id)
            self._flush_thread(thread_id, refusal)
        else:
            self._precheck_put(thread_id, namespace, record, blobs, checkpoint)
        with self._shared.gates.sharing(thread_id):
            self._refuse_deleted(thread_id, parent_id)
            stored: RunnableConfig = self._durable.call("put", config, checkpoint, metadata, new_versions)
            self._through_put(thread_id, namespace, record, blobs, root)
        self._deliver()
        return stored

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Async ``put``: the durable tier's async side; large new values serialized in a worker thread."""
        thread_id, namespace, parent_id = locate(config)
        values = checkpoint.get("channel_values", {}) if isinstance(checkpoint, Mapping) else {}

        def encode() -> tuple[CheckpointRecord, dict[BlobKey, Blob]]:
            return codec.encode_checkpoint(self.serde, config, checkpoint, metadata, new_versions, parent_id)

        large = rough_size(values[channel] for channel in new_versions if channel in values)
        record, blobs = await asyncio.to_thread(encode) if large > self.config.async_offload_bytes else encode()
        root = root_checkpoint_of(config) if namespace else None
        if self._shared.write == "back" and await self._adirty_room(thread_id, _added(record, blobs)):
            refusal = self._back_put(thread_id, namespace, record, blobs, root, new_versions)
            await self._adeliver()
            if refusal is None:
                return _stored_config(thread_id, namespace, record.checkpoint_id)
            await self._aflush_thread(thread_id, refusal)
        else:
            self._precheck_put(thread_id, namespace, record, blobs, checkpoint)
        async with self._shared.gates.asharing(thread_id):
            self._refuse_deleted(thread_id, parent_id)
            stored: RunnableConfig = await self._durable.acall("put", config, checkpoint, metadata, new_versions)
            self._through_put(thread_id, namespace, record, blobs, root)
        await self._adeliver()
        return stored

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's writes in both tiers, under the config's checkpoint (which may not be stored yet).

        Raises:
            ValueError: An identifier or the config is invalid; nothing was written.
            CheckpointCapacityError: ``max_pending_write_bytes`` (nothing was
                written), or, write-back, ``max_dirty_bytes`` while the durable tier fails.
            ThreadDeletedError: They continue a thread deleted since; nothing was written.
            Exception: The durable saver's failure (write-through); the hot tier is unchanged.

        Runtime complexity: write-through, the durable saver's ``put_writes``
        plus O(len(writes)) and serializing them; write-back, that of
        ``BoundedInMemorySaver.put_writes``.
        """
        thread_id, namespace, checkpoint_id = _writes_location(config)
        records = codec.encode_writes(self.serde, writes, task_id, task_path)
        root = root_checkpoint_of(config) if namespace else None
        batch = _batch_bytes(records)
        if self._shared.write == "back" and self._dirty_room(thread_id, batch):
            refusal = self._back_put_writes(thread_id, namespace, checkpoint_id, records, task_id, task_path, root)
            self._deliver()
            if refusal is None:
                return
            self._flush_thread(thread_id, refusal)
        else:
            self._precheck_writes(thread_id, namespace, checkpoint_id, records, batch)
        with self._shared.gates.sharing(thread_id):
            self._refuse_deleted(thread_id, checkpoint_id)
            self._durable.call("put_writes", config, writes, task_id, task_path)
            self._through_put_writes(thread_id, namespace, checkpoint_id, records, root)
        self._deliver()

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Async ``put_writes``: the durable tier's async side; large writes serialized in a worker thread."""
        thread_id, namespace, checkpoint_id = _writes_location(config)
        pairs = (write[1] for write in writes if isinstance(write, (tuple, list)) and len(write) == 2)
        if rough_size(pairs) > self.config.async_offload_bytes:
            records = await asyncio.to_thread(codec.encode_writes, self.serde, writes, task_id, task_path)
        else:
            records = codec.encode_writes(self.serde, writes, task_id, task_path)
        root = root_checkpoint_of(config) if namespace else None
        batch = _batch_bytes(records)
        if self._shared.write == "back" and await self._adirty_room(thread_id, batch):
            refusal = self._back_put_writes(thread_id, namespace, checkpoint_id, records, task_id, task_path, root)
            await self._adeliver()
            if refusal is None:
                return
            await self._aflush_thread(thread_id, refusal)
        else:
            self._precheck_writes(thread_id, namespace, checkpoint_id, records, batch)
        async with self._shared.gates.asharing(thread_id):
            self._refuse_deleted(thread_id, checkpoint_id)
            await self._durable.acall("put_writes", config, writes, task_id, task_path)
            self._through_put_writes(thread_id, namespace, checkpoint_id, records, root)
        await self._adeliver()

    # --- removals and copies ----------------------------------------------------------------------------------

    def delete_thread(self, thread_id: str) -> None:
        """Delete a thread from both tiers, with its unflushed writes; its late writes are refused after.

        Waits for the writes and the flush of the thread already under way.

        Raises:
            NotImplementedError: The durable saver cannot delete a thread.
            Exception: The durable saver's failure; nothing else changed.

        Runtime complexity: two durable round trips (the thread's newest id, the deletion) plus O(runs of
        the thread) in memory.
        """
        target = normalize_id("thread_id", thread_id)
        with self._shared.gates.alone(target):
            newest = self._durable.list({"configurable": {"thread_id": target}}, limit=1)
            self._durable.call("delete_thread", target)
            self._forget_deleted(target, newest)

    async def adelete_thread(self, thread_id: str) -> None:
        """Async ``delete_thread``: the durable tier's async side; the waits never block the event loop."""
        target = normalize_id("thread_id", thread_id)
        async with self._shared.gates.aalone(target):
            newest = await self._durable.alist({"configurable": {"thread_id": target}}, limit=1)
            await self._durable.acall("delete_thread", target)
            self._forget_deleted(target, newest)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints (and their writes) these runs created, in both tiers.

        Unflushed writes go to the durable tier first. The durable saver's own
        method runs where it has one; otherwise the threads holding the runs
        are rewritten through its API, keeping the ancestors a surviving
        checkpoint needs to rebuild a ``DeltaChannel``. The threads touched
        leave memory, to be read again.

        Runtime complexity: the durable saver's, or a metadata scan of every
        thread plus O(size of the threads holding the runs) round trips.
        """
        runs = normalize_ids("run_ids", run_ids)
        if not runs:
            return
        self._flush_all()
        rewritten = self._durable.delete_for_runs(runs)
        self._leave_memory(rewritten, runs)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Async ``delete_for_runs``, in a worker thread: it reads and rewrites whole threads."""
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint, write and value of a thread, all namespaces, to another, in the durable tier.

        The durable saver's own method runs where it has one; otherwise every
        checkpoint is put again under the target, oldest first, with its
        writes, so the whole parent chain is copied (``DeltaChannel``s rebuild
        on the target). The target leaves memory, to be read again.

        Runtime complexity: the durable saver's, or O(size of the source) round trips.
        """
        source = normalize_id("source_thread_id", source_thread_id)
        target = normalize_id("target_thread_id", target_thread_id)
        self._flush_thread(source)
        self._flush_thread(target)
        with self._shared.gates.sharing(target):
            self._durable.copy_thread(source, target)
        self._shared.deleted.forget(target)
        self._leave_memory({target}, [])

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Async ``copy_thread``, in a worker thread: it copies a whole thread."""
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Prune threads in both tiers: ``"keep_latest"`` per namespace, or ``"delete"`` them.

        ``"delete"`` (or the Agent Server's ``"delete_all"``) is
        ``delete_thread`` for each. ``"keep_latest"`` uses the durable saver's
        own ``prune`` where it has one (``PostgresSaver``; where it refuses a
        thread, as for a ``DeltaChannel``, the emulation runs), else rewrites
        each thread keeping each namespace's latest checkpoint and the
        ancestors it needs. The threads leave memory, to be read again.

        Raises:
            ValueError: Unknown strategy, or an invalid thread id; nothing changed.

        Runtime complexity: the durable saver's, or O(size of the threads) round trips.
        """
        if strategy not in PRUNE_STRATEGIES:
            raise ValueError(f"strategy must be one of {PRUNE_STRATEGIES}, got {strategy!r}")
        ids = normalize_ids("thread_ids", thread_ids)
        if strategy != "keep_latest":
            for thread_id in ids:
                self.delete_thread(thread_id)
            return
        for thread_id in ids:
            self._flush_thread(thread_id)
        if ids:
            self._durable.prune(ids, strategy="keep_latest")
        self._leave_memory(set(ids), [])

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Async ``prune``, in a worker thread: it reads and rewrites whole threads."""
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)

    # --- the hot tier: reads ----------------------------------------------------------------------------------

    def _hot_get(self, thread_id: str, namespace: str, checkpoint_id: str | None, newest: Newest | None) -> _HotRead:
        """The hot tier's view of the checkpoint, and whether its answer (a view, or None) is the durable tier's.

        With ``newest`` (the coherence check), a hot copy that is not the
        durable tier's newest is dropped first.
        """
        shared = self._shared
        store = shared.hot.store
        with store.lock:
            if newest is not None:
                if not self._coherent(thread_id, namespace, newest):
                    return _UNKNOWN
                view = store.get(thread_id, namespace, None)
                shared.counters.hits += 1  # the hot copy is the durable tier's newest, or both have none
                return _HotRead(view, True)
            view = store.get(thread_id, namespace, checkpoint_id)
            if view is not None:
                shared.counters.hits += 1
                return _HotRead(view, True)
            entry = shared.residency.lookup(thread_id, store.last_used(thread_id) is not None)
            if entry is None or (checkpoint_id is not None and shared.coherence == "validate"):
                return _UNKNOWN
            if checkpoint_id is None:
                known = namespace not in entry.floors and entry.all_namespaces
            else:
                known = entry.holds(namespace, checkpoint_id)
            if known:
                shared.counters.hits += 1
            return _HotRead(None, known)

    def _coherent(self, thread_id: str, namespace: str, newest: Newest) -> bool:
        """Whether the hot copy of the namespace is the durable tier's newest; a stale thread leaves memory.

        Lock held. Runtime complexity: O(c + w log w) to read the hot latest.
        """
        shared = self._shared
        store = shared.hot.store
        view = store.get(thread_id, namespace, None)
        hot = Newest(None, 0) if view is None else Newest(view.record.checkpoint_id, len(view.writes))
        if hot == newest:
            return True
        if view is not None or shared.residency.lookup(thread_id, store.last_used(thread_id) is not None):
            shared.counters.stale += 1
            shared.marks.move(thread_id)
            store.delete_thread(thread_id)
            shared.residency.forget(thread_id)
        return False

    def _measured_newest(self, thread_id: str, namespace: str) -> Newest:
        start = time.perf_counter()
        newest = self._durable.newest(thread_id, namespace)
        self._count_validation(time.perf_counter() - start)
        return newest

    async def _ameasured_newest(self, thread_id: str, namespace: str) -> Newest:
        start = time.perf_counter()
        newest = await self._durable.anewest(thread_id, namespace)
        self._count_validation(time.perf_counter() - start)
        return newest

    def _count_validation(self, seconds: float) -> None:
        counters = self._shared.counters
        with self._shared.hot.store.lock:
            counters.validations += 1
            counters.validation_seconds += seconds

    def _hot_delta(
        self,
        thread_id: str,
        namespace: str,
        checkpoint_id: str | None,
        channels: builtins.list[str],
        newest: Newest | None,
    ) -> dict[str, Any] | None:
        """The hot tier's delta-channel walk, when it stays within what the hot tier holds; else None."""
        shared = self._shared
        store = shared.hot.store
        with store.lock:
            if newest is not None and not self._coherent(thread_id, namespace, newest):
                return None
            entry = shared.residency.lookup(thread_id, store.last_used(thread_id) is not None)
            if entry is None or not entry.stored or namespace not in entry.floors:
                return None
            if checkpoint_id is not None and not entry.holds(namespace, checkpoint_id):
                return None
            if store.get(thread_id, namespace, checkpoint_id) is None:
                return None
            histories = store.delta_history(thread_id, namespace, checkpoint_id, channels)
            if entry.floors[namespace] is not None and any(h.seed is None for h in histories.values()):
                return None
            shared.counters.hits += 1
            return histories

    def _list_request(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> _ListRequest:
        if filter is not None and not isinstance(filter, Mapping):
            raise ValueError(f"filter must be a mapping of metadata keys to values, got {type(filter).__name__}")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
            raise ValueError(f"limit must be a whole number or None, got {limit!r:.40} ({type(limit).__name__})")
        before_id = checkpoint_id_of(configurable(before)) if before else None
        if config is None:
            return _ListRequest(None, "", None, None, filter, before, before_id, limit)
        thread_id, _, checkpoint_id = locate(config)
        namespace = namespace_of(configurable(config))
        return _ListRequest(config, thread_id, namespace, checkpoint_id, filter, before, before_id, limit)

    def _hot_list(self, request: _ListRequest) -> builtins.list[CheckpointTuple] | None:
        """The hot tier's answer to a ``list()`` of one thread, when it holds every candidate; else None."""
        shared = self._shared
        store = shared.hot.store
        if shared.coherence == "validate":
            return None  # lists read the durable tier in validate mode
        thread_id, namespace = request.thread_id, request.namespace
        with store.lock:
            stored = store.last_used(thread_id) is not None
            entry = shared.residency.lookup(thread_id, stored)
            if entry is None:
                return None
            if not stored:
                shared.counters.hits += 1
                return []
            if namespace is None:
                if not entry.all_namespaces:
                    return None
                partial = [floor for floor in entry.floors.values() if floor is not None]
                floor: str | None = max(partial) if partial else None  # above it, every namespace is whole
                refs = store.list(thread_id, None, checkpoint_id=request.checkpoint_id, before=request.before_id)
                refs.sort(key=lambda ref: ref.record.checkpoint_id, reverse=True)  # the durable tiers' order
                if floor is not None:
                    refs = [ref for ref in refs if ref.record.checkpoint_id >= floor]
            else:
                described, floor = entry.floor_of(namespace)
                if not described:
                    return None
                if request.checkpoint_id is not None and not entry.holds(namespace, request.checkpoint_id):
                    return None
                refs = store.list(thread_id, namespace, checkpoint_id=request.checkpoint_id, before=request.before_id)
                if floor is not None:
                    refs = [ref for ref in refs if ref.record.checkpoint_id >= floor]
        loads = self.serde.loads_typed
        chosen: builtins.list[tuple[Any, CheckpointMetadata | None]] = []
        for ref in refs:
            if request.limit is not None and len(chosen) >= request.limit:
                break
            metadata = None
            if request.filter:
                metadata = loads((ref.record.metadata_type, ref.record.metadata_data))
                if not all(value == metadata.get(key) for key, value in request.filter.items()):
                    continue
            chosen.append((ref, metadata))
        if floor is not None and (request.limit is None or len(chosen) < request.limit):
            return None  # the answer may reach below the floor: the durable tier's
        views = store.views(ref for ref, _ in chosen)
        if any(view is None for view in views):
            return None  # removed since listed
        with store.lock:
            shared.counters.hits += 1
        return [
            codec.decode_view(self.serde, view, metadata)  # type: ignore[arg-type]
            for view, (_, metadata) in zip(views, chosen, strict=True)
        ]

    # --- the hot tier: writes ---------------------------------------------------------------------------------

    def _through_put(
        self, thread_id: str, namespace: str, record: CheckpointRecord, blobs: dict[BlobKey, Blob], root: str | None
    ) -> None:
        """Write-through, after the durable tier acknowledged: the hot tier takes the checkpoint, or the thread
        leaves memory (a store-wide limit). Runtime complexity: that of ``Store.put_checkpoint``."""
        shared = self._shared
        store = shared.hot.store
        with store.lock:
            alive = _alive(store, thread_id)
            _forget_tombstone(store, thread_id)
            churn = _churn(store)
            shared.marks.move(thread_id)
            try:
                store.put_checkpoint(thread_id, namespace, record, blobs, root)
            except (CheckpointCapacityError, ValueError):
                self._leave_out(thread_id, record.checkpoint_id)
                return
            self._note_checkpoint(thread_id, namespace, record.checkpoint_id, alive, churn)

    def _through_put_writes(
        self, thread_id: str, namespace: str, checkpoint_id: str, records: Sequence[WriteRecord], root: str | None
    ) -> None:
        """Write-through, after the durable tier acknowledged: the hot tier takes the writes, or the thread
        leaves memory. Runtime complexity: that of ``Store.put_writes``."""
        shared = self._shared
        store = shared.hot.store
        with store.lock:
            alive = _alive(store, thread_id)
            _forget_tombstone(store, thread_id)
            churn = _churn(store)
            shared.marks.move(thread_id)
            try:
                store.put_writes(thread_id, namespace, checkpoint_id, records, root)
            except (CheckpointCapacityError, ValueError):
                self._leave_out(thread_id, None)
                return
            self._note_writes(thread_id, alive, churn)

    def _back_put(
        self,
        thread_id: str,
        namespace: str,
        record: CheckpointRecord,
        blobs: dict[BlobKey, Blob],
        root: str | None,
        new_versions: ChannelVersions,
    ) -> CheckpointCapacityError | None:
        """Write-back: the hot tier and the ledger take the checkpoint; or the store-wide refusal to fall back on.

        Raises:
            ThreadDeletedError, ValueError, CheckpointCapacityError (per item): the write is refused.
        """
        shared = self._shared
        store = shared.hot.store
        with store.lock:
            self._refuse_deleted(thread_id, record.parent_id)
            alive = _alive(store, thread_id)
            _forget_tombstone(store, thread_id)
            churn = _churn(store)
            try:
                store.put_checkpoint(thread_id, namespace, record, blobs, root)
            except CheckpointCapacityError as error:
                if error.limit in PER_ITEM_LIMITS:
                    raise
                store.refusals.forget(record.checkpoint_id)
                return error
            shared.marks.move(thread_id)
            view = store.get(thread_id, namespace, record.checkpoint_id)
            shared.dirty.add(
                thread_id,
                DirtyCheckpoint(
                    namespace,
                    record,
                    {} if view is None else view.channel_values,
                    {channel: version for channel, version in blobs},
                    _added(record, blobs),
                ),
            )
            self._note_checkpoint(thread_id, namespace, record.checkpoint_id, alive, churn)
        return None

    def _back_put_writes(
        self,
        thread_id: str,
        namespace: str,
        checkpoint_id: str,
        records: Sequence[WriteRecord],
        task_id: str,
        task_path: str,
        root: str | None,
    ) -> CheckpointCapacityError | None:
        """Write-back: the hot tier and the ledger take the writes; or the store-wide refusal to fall back on."""
        shared = self._shared
        store = shared.hot.store
        with store.lock:
            self._refuse_deleted(thread_id, checkpoint_id)
            alive = _alive(store, thread_id)
            _forget_tombstone(store, thread_id)
            churn = _churn(store)
            try:
                store.put_writes(thread_id, namespace, checkpoint_id, records, root)
            except CheckpointCapacityError as error:
                if error.limit in PER_ITEM_LIMITS:
                    raise
                return error
            shared.marks.move(thread_id)
            if records:
                shared.dirty.add(
                    thread_id,
                    DirtyWrites(namespace, checkpoint_id, task_id, task_path, tuple(records), _batch_bytes(records)),
                )
            self._note_writes(thread_id, alive, churn)
        return None

    def _note_checkpoint(self, thread_id: str, namespace: str, checkpoint_id: str, alive: bool, churn: int) -> None:
        """What a stored checkpoint tells about the thread's hot copy (lock held)."""
        residency = self._shared.residency
        if not alive:
            residency.came_to_memory(thread_id, namespace, checkpoint_id)
            self._sweep()
        elif _churn(self._shared.hot.store) != churn:
            residency.reset(thread_id, namespace, checkpoint_id)  # the write pruned the thread
        else:
            residency.stored_namespace(thread_id, namespace, checkpoint_id)

    def _note_writes(self, thread_id: str, alive: bool, churn: int) -> None:
        """What stored writes tell about the thread's hot copy (lock held)."""
        shared = self._shared
        if not alive:
            if shared.hot.store.last_used(thread_id) is not None:
                shared.residency.came_with_writes_only(thread_id)
                self._sweep()
        elif _churn(shared.hot.store) != churn:
            shared.residency.forget(thread_id)  # the writes pruned namespaces: only the latest reads stay hot

    def _sweep(self) -> None:
        """Forget, now and then, what we knew of threads that left memory (lock held; amortized O(1))."""
        store = self._shared.hot.store
        self._shared.residency.sweep_if_due(lambda thread_id: store.last_used(thread_id) is not None)

    def _leave_out(self, thread_id: str, checkpoint_id: str | None) -> None:
        """Write-through: the hot tier refused a write the durable tier has: the thread leaves memory whole
        (its copy would be behind). Lock held."""
        shared = self._shared
        store = shared.hot.store
        store.delete_thread(thread_id)
        if checkpoint_id is not None:
            store.refusals.forget(checkpoint_id)
        shared.residency.forget(thread_id)
        shared.counters.left_out += 1

    def _leave_memory(self, thread_ids: Collection[str], run_ids: Sequence[str]) -> None:
        """After a change made in the durable tier: these threads (and the hot threads holding these runs)
        leave memory, to be read again. Threads with unflushed writes keep their copy (theirs is newer)."""
        shared = self._shared
        store = shared.hot.store
        with store.lock:
            holders = set(thread_ids)
            for run_id in run_ids:
                holders |= store.runs.get(run_id, set())
            for thread_id in holders:
                shared.marks.move(thread_id)
                shared.residency.forget(thread_id)
                if not shared.dirty.is_dirty(thread_id):
                    store.delete_thread(thread_id)

    def _forget_deleted(self, thread_id: str, newest: builtins.list[CheckpointTuple]) -> None:
        """After the durable deletion: the hot copy, the unflushed writes and what we knew go; a tombstone stays."""
        shared = self._shared
        store = shared.hot.store
        newest_id = str(configurable(newest[0].config)["checkpoint_id"]) if newest else None
        dirty_newest = shared.dirty.newest_id(thread_id)
        with store.lock:
            shared.marks.move(thread_id)
            hot_newest = _hot_newest(store, thread_id)
            shared.dirty.discard(thread_id)
            store.delete_thread(thread_id)
            shared.residency.known_empty(thread_id)
        candidates = [cid for cid in (newest_id, dirty_newest, hot_newest) if cid is not None]
        shared.deleted.remember(thread_id, max(candidates, default=None))

    def _refuse_deleted(self, thread_id: str, continues: str | None) -> None:
        try:
            self._shared.deleted.refuse(thread_id, continues)
        except ThreadDeletedError:
            with self._shared.hot.store.lock:
                self._shared.counters.rejections["deleted_thread"] += 1
            raise

    # --- per-item checks (write-through: before the durable write) ----------------------------------------------

    def _precheck_put(
        self,
        thread_id: str,
        namespace: str,
        record: CheckpointRecord,
        blobs: dict[BlobKey, Blob],
        checkpoint: Checkpoint,
    ) -> None:
        """Refuse, before anything is written, a checkpoint the hot tier would refuse for itself alone:
        an invalid identifier, or a whole state over ``max_checkpoint_bytes``.

        Runtime complexity: O(channels), plus a hot read of the parent when a limit is set.
        """
        limits = self.config
        try:
            identifiers.check_identifier("thread_id", thread_id, limits)
            identifiers.check_namespace(namespace, limits)
            identifiers.check_identifier("checkpoint_id", record.checkpoint_id, limits)
            if record.parent_id is not None:
                identifiers.check_identifier("parent checkpoint_id", record.parent_id, limits)
            if record.run_id is not None:
                identifiers.check_identifier("metadata['run_id']", record.run_id, limits)
            channels: set[str] = set()
            identifiers.check_versions(channels, record.versions, limits)
            identifiers.check_blob_keys(blobs.keys(), limits)
            for channel in record.delta_channels:
                identifiers.admit_channel(channels, channel, limits)
        except ValueError:
            self._count_rejection("identifier")
            raise
        limit = limits.max_checkpoint_bytes
        if limit == math.inf:
            return
        size = _added(record, blobs)
        missing = [key for key in record.blob_keys() if key not in blobs]
        if missing and size <= limit:
            size += self._unchanged_bytes(thread_id, namespace, record.parent_id, missing, checkpoint)
        if size > limit:
            self._count_rejection("max_checkpoint_bytes")
            raise CheckpointCapacityError("max_checkpoint_bytes", limit, size, thread_id=thread_id)

    def _unchanged_bytes(
        self,
        thread_id: str,
        namespace: str,
        parent_id: str | None,
        keys: builtins.list[BlobKey],
        checkpoint: Checkpoint,
    ) -> int:
        """Bytes of the values a checkpoint keeps from its parent: from the hot copy of the parent, else measured."""
        store = self._shared.hot.store
        parent = None if parent_id is None else store.get(thread_id, namespace, parent_id)
        values = checkpoint.get("channel_values", {})
        size = 0
        for channel, version in keys:
            if parent is not None and parent.record.version_of(channel) == version:
                size += payload_size(parent.channel_values.get(channel))
            elif channel in values:
                size += len(self.serde.dumps_typed(values[channel])[1])
        return size

    def _precheck_writes(
        self, thread_id: str, namespace: str, checkpoint_id: str, records: Sequence[WriteRecord], batch: int
    ) -> None:
        """Refuse, before anything is written, writes the hot tier would refuse for themselves alone."""
        limits = self.config
        try:
            identifiers.check_identifier("thread_id", thread_id, limits)
            identifiers.check_namespace(namespace, limits)
            identifiers.check_identifier("checkpoint_id", checkpoint_id, limits)
            channels: set[str] = set()
            for write in records:
                identifiers.check_identifier("task_id", write.task_id, limits)
                identifiers.check_text("task_path", write.task_path)
                if write.channel not in channels:
                    identifiers.admit_channel(channels, write.channel, limits)
        except ValueError:
            self._count_rejection("identifier")
            raise
        if batch > limits.max_pending_write_bytes:
            self._count_rejection("max_pending_write_bytes")
            raise CheckpointCapacityError(
                "max_pending_write_bytes", limits.max_pending_write_bytes, batch, thread_id=thread_id
            )

    def _count_rejection(self, limit: str) -> None:
        with self._shared.hot.store.lock:
            self._shared.counters.rejections[limit] += 1

    # --- read-through and admission ----------------------------------------------------------------------------

    def _read_through_tuple(
        self, config: RunnableConfig, thread_id: str, namespace: str, checkpoint_id: str | None
    ) -> CheckpointTuple | None:
        self._flush_thread(thread_id)
        key = ("tuple", thread_id, namespace, checkpoint_id)
        flight, leads = self._shared.flights.join(key, sync=True)
        if not leads:
            self._count_wait()
            return flight.wait()  # type: ignore[no-any-return]
        try:
            mark = self._shared.marks.read(thread_id)
            found = self._durable.get_tuple(config)
            empty = (
                found is None
                and checkpoint_id is None
                and namespace == ""
                and not self._durable.list({"configurable": {"thread_id": thread_id}}, limit=1)
            )
        except BaseException as error:
            self._shared.flights.fail(key, flight, error)
            raise
        self._shared.flights.land(key, flight, found)
        self._admit_read(thread_id, namespace, checkpoint_id, found, mark, empty)
        self._deliver()  # what admitting it evicted
        return found

    async def _aread_through_tuple(
        self, config: RunnableConfig, thread_id: str, namespace: str, checkpoint_id: str | None
    ) -> CheckpointTuple | None:
        await self._aflush_thread(thread_id)
        key = ("tuple", thread_id, namespace, checkpoint_id)
        flight, leads = self._shared.flights.join(key, sync=False)
        if not leads:
            self._count_wait()
            return await flight.await_()  # type: ignore[no-any-return]
        try:
            mark = self._shared.marks.read(thread_id)
            found = await self._durable.aget_tuple(config)
            empty = (
                found is None
                and checkpoint_id is None
                and namespace == ""
                and not await self._durable.alist({"configurable": {"thread_id": thread_id}}, limit=1)
            )
        except BaseException as error:
            self._shared.flights.fail(key, flight, error)
            raise
        self._shared.flights.land(key, flight, found)
        self._admit_read(thread_id, namespace, checkpoint_id, found, mark, empty)
        await self._adeliver()  # what admitting it evicted
        return found

    def _count_wait(self) -> None:
        with self._shared.hot.store.lock:
            self._shared.counters.flight_waits += 1

    def _flown(self, key: Hashable, read: Callable[[], Any]) -> Any:
        """``read()`` once for every caller asking ``key`` at the same time (single flight)."""
        flights = self._shared.flights
        flight, leads = flights.join(key, sync=True)
        if not leads:
            self._count_wait()
            return flight.wait()
        try:
            result = read()
        except BaseException as error:
            flights.fail(key, flight, error)
            raise
        self._count_miss()
        flights.land(key, flight, result)
        return result

    async def _aflown(self, key: Hashable, read: Callable[[], Any]) -> Any:
        flights = self._shared.flights
        flight, leads = flights.join(key, sync=False)
        if not leads:
            self._count_wait()
            return await flight.await_()
        try:
            result = await read()
        except BaseException as error:
            flights.fail(key, flight, error)
            raise
        self._count_miss()
        flights.land(key, flight, result)
        return result

    def _count_miss(self) -> None:
        with self._shared.hot.store.lock:
            self._shared.counters.misses += 1

    def _admit_read(
        self,
        thread_id: str,
        namespace: str,
        checkpoint_id: str | None,
        found: CheckpointTuple | None,
        mark: int,
        empty: bool,
    ) -> None:
        """Admit what a read-through found, before its reader gets it (the reader may change what it got)."""
        admission = None
        if found is not None:
            with contextlib.suppress(TypeError, ValueError):  # a value this serializer cannot write: not admitted
                admission = self._encode_read(found)
        self._admit(thread_id, namespace, checkpoint_id, found is not None, admission, mark, empty)

    def _admit(
        self,
        thread_id: str,
        namespace: str,
        checkpoint_id: str | None,
        found: bool,
        admission: _Admission | None,
        mark: int,
        empty: bool,
    ) -> None:
        """Bring what a read-through found into the hot tier, if nothing touched the thread since the read
        began: the namespace's latest (a new suffix), or an older checkpoint beside a suffix already hot.
        A thread the durable tier holds nothing of is remembered as such."""
        shared = self._shared
        store = shared.hot.store
        with store.lock:
            shared.counters.misses += 1
            if not found:
                if empty and shared.marks.read(thread_id) == mark and store.last_used(thread_id) is None:
                    shared.residency.known_empty(thread_id)
                return
            if admission is None or shared.marks.read(thread_id) != mark:
                return
            alive = _alive(store, thread_id)
            entry = shared.residency.lookup(thread_id, store.last_used(thread_id) is not None)
            if checkpoint_id is not None:
                if not alive or entry is None or namespace not in entry.floors:
                    return  # not beside the namespace's latest: the hot latest must stay the durable latest
            elif alive and entry is not None and namespace in entry.floors:
                return
            if not self._store_admitted(thread_id, namespace, admission):
                return
            shared.counters.admissions += 1
            if checkpoint_id is None:
                if not alive:
                    shared.residency.forget(thread_id)  # found in the durable tier: not empty after all
                    shared.residency.came_to_memory(thread_id, namespace, admission.record.checkpoint_id)
                    self._sweep()
                else:
                    shared.residency.stored_namespace(thread_id, namespace, admission.record.checkpoint_id)

    def _store_admitted(self, thread_id: str, namespace: str, admission: _Admission) -> bool:
        """Store an admitted checkpoint and its writes (lock held); on a refusal the thread leaves memory
        (it could hold the checkpoint without its writes) unless it has unflushed writes."""
        shared = self._shared
        store = shared.hot.store
        _forget_tombstone(store, thread_id)
        churn = _churn(store)
        try:
            store.put_checkpoint(thread_id, namespace, admission.record, admission.blobs, None)
            for task_writes in admission.writes:
                store.put_writes(thread_id, namespace, admission.record.checkpoint_id, task_writes, None)
        except (CheckpointCapacityError, ValueError):
            store.refusals.forget(admission.record.checkpoint_id)
            if not shared.dirty.is_dirty(thread_id):
                store.delete_thread(thread_id)
            shared.residency.forget(thread_id)
            return False
        if _churn(store) != churn:
            shared.residency.forget(thread_id)
        return True

    def _encode_read(self, found: CheckpointTuple) -> _Admission:
        """A durable read as hot records: its checkpoint with every value it holds, its writes by task, each
        task given a path that keeps the durable tier's order of writes (the API does not return task paths)."""
        checkpoint: dict[str, Any] = dict(found.checkpoint)
        versions = checkpoint.get("channel_versions", {})
        values = checkpoint.get("channel_values", {})
        new_versions = {channel: versions[channel] for channel in values if channel in versions}
        parent_id = checkpoint_id_of(configurable(found.parent_config)) if found.parent_config else None
        record, blobs = codec.encode_checkpoint(
            self.serde, found.config, cast(Checkpoint, checkpoint), found.metadata, new_versions, parent_id
        )
        return _Admission(record, blobs, _admitted_writes(self.serde, found.pending_writes or []))

    def _read_through_list(self, request: _ListRequest) -> builtins.list[CheckpointTuple]:
        self._flush_thread(request.thread_id)
        mark = self._shared.marks.read(request.thread_id)
        items = self._flown(
            _list_key(request),
            lambda: self._durable.list(
                request.config, filter=request.filter, before=request.before, limit=request.limit
            ),
        )
        self._admit_list(request, items, mark)
        self._deliver()  # what admitting it evicted
        return items  # type: ignore[no-any-return]

    async def _aread_through_list(self, request: _ListRequest) -> builtins.list[CheckpointTuple]:
        await self._aflush_thread(request.thread_id)
        mark = self._shared.marks.read(request.thread_id)
        items = await self._aflown(
            _list_key(request),
            lambda: self._durable.alist(
                request.config, filter=request.filter, before=request.before, limit=request.limit
            ),
        )
        self._admit_list(request, items, mark)
        await self._adeliver()  # what admitting it evicted
        return items  # type: ignore[no-any-return]

    def _admit_list(self, request: _ListRequest, items: builtins.list[CheckpointTuple], mark: int) -> None:
        """Admit a listed suffix of one namespace (no filter, no checkpoint id): the newest ones, or older
        ones continuing the suffix already hot; when the list was exhausted the namespace is wholly hot."""
        namespace = request.namespace
        if namespace is None or request.filter or request.checkpoint_id is not None or not items:
            return
        exhausted = request.limit is None or len(items) < request.limit
        try:
            admissions = [self._encode_read(item) for item in reversed(items)]
        except (TypeError, ValueError):
            return
        shared = self._shared
        store = shared.hot.store
        thread_id = request.thread_id
        with store.lock:
            if shared.marks.read(thread_id) != mark:
                return
            alive = _alive(store, thread_id)
            entry = shared.residency.lookup(thread_id, store.last_used(thread_id) is not None)
            current = entry.floors.get(namespace, COMPLETE) if entry is not None and alive else None
            has_suffix = entry is not None and alive and namespace in entry.floors
            if request.before_id is not None and not (has_suffix and (current is None or request.before_id >= current)):
                return  # a page below the hot suffix, with a gap: served, not admitted
            lowest = admissions[0].record.checkpoint_id
            for admission in admissions:
                if has_suffix and (current is None or admission.record.checkpoint_id >= current):
                    continue  # already hot
                if not self._store_admitted(thread_id, namespace, admission):
                    return
                shared.counters.admissions += 1
            floor = COMPLETE if exhausted else lowest
            if not alive:
                shared.residency.forget(thread_id)
                shared.residency.came_to_memory(thread_id, namespace, floor)
            elif shared.residency.lookup(thread_id, True) is not None:
                shared.residency.lower_floor(thread_id, namespace, floor)

    # --- write-back: flushing --------------------------------------------------------------------------------

    def _dirty_room(self, thread_id: str, needed: int) -> bool:
        """Write-back backpressure: flush until ``needed`` more bytes fit under ``max_dirty_bytes``.

        Returns False for a write that still does not fit (larger than the bound
        by itself, or other writers filled it again): it is written through
        instead, durable first, after the thread's own unflushed writes.

        Raises:
            CheckpointCapacityError: The flush failed, so nothing more fits; names the durable failure.
        """
        shared = self._shared
        for _ in range(DIRTY_ROOM_ATTEMPTS):
            if shared.dirty.nbytes + needed <= shared.max_dirty_bytes:
                return True
            if needed > shared.max_dirty_bytes:
                break
            try:
                for dirty in shared.dirty.dirty_threads():  # the thread dirty longest first, until it fits
                    self._flush_thread(dirty)
                    if shared.dirty.nbytes + needed <= shared.max_dirty_bytes:
                        return True
            except Exception as error:
                raise self._refusal(thread_id, "max_dirty_bytes", shared.max_dirty_bytes, needed, error) from error
        try:
            self._flush_thread(thread_id)  # its parents first
        except Exception as error:
            raise self._refusal(thread_id, "max_dirty_bytes", shared.max_dirty_bytes, needed, error) from error
        return False

    async def _adirty_room(self, thread_id: str, needed: int) -> bool:
        shared = self._shared
        if shared.dirty.nbytes + needed <= shared.max_dirty_bytes:
            return True
        return await asyncio.to_thread(self._dirty_room, thread_id, needed)

    def _refusal(
        self, thread_id: str, limit: str, value: float, needed: float, error: BaseException
    ) -> CheckpointCapacityError:
        self._count_rejection(limit)
        return CheckpointCapacityError(
            limit,
            value,
            needed,
            thread_id=thread_id,
            message=(
                f"{limit} reached for thread {thread_id!r}: the write was refused and nothing was changed, "
                f"because the durable tier ({self._durable.name}) failed to take the unflushed writes: "
                f"{type(error).__name__}: {error}. They stay in memory and are flushed once it is back."
            ),
        )

    def _flush_thread(self, thread_id: str, refusal: CheckpointCapacityError | None = None) -> int:
        """Flush one thread's unflushed writes, oldest first; return how many. With ``refusal`` (the hot
        tier refused a write-back write for a store-wide limit), a durable failure is raised as that
        refusal, naming it; then the write goes through and the thread's hot copy leaves memory.

        Runtime complexity: one durable write per unflushed item.
        """
        shared = self._shared
        if not shared.dirty.is_dirty(thread_id):
            if refusal is not None:
                self._drop_behind(thread_id)
            return 0
        start = time.perf_counter()
        flushed = 0
        try:
            with shared.gates.sharing(thread_id):
                items = shared.dirty.claim(thread_id)
                try:
                    for item in items:
                        method, args = replay(item, thread_id, self.serde)
                        self._durable.call(method, *args)
                        flushed += 1
                finally:
                    shared.dirty.release(thread_id, flushed)
        except Exception as error:
            self._count_flush(flushed, time.perf_counter() - start, failed=True)
            if refusal is not None:
                needed = refusal.needed or 0
                raise self._refusal(thread_id, refusal.limit, refusal.limit_value, needed, error) from error
            raise
        self._count_flush(flushed, time.perf_counter() - start, failed=False)
        if refusal is not None:
            self._drop_behind(thread_id)
        return flushed

    async def _aflush_thread(self, thread_id: str, refusal: CheckpointCapacityError | None = None) -> int:
        if not self._shared.dirty.is_dirty(thread_id) and refusal is None:
            return 0
        return await asyncio.to_thread(self._flush_thread, thread_id, refusal)

    def _drop_behind(self, thread_id: str) -> None:
        """The hot tier refused a write-back write that now goes through: its copy of the thread is behind."""
        shared = self._shared
        store = shared.hot.store
        with store.lock:
            shared.marks.move(thread_id)
            shared.residency.forget(thread_id)
            store.delete_thread(thread_id)
            shared.counters.left_out += 1

    def _count_flush(self, flushed: int, seconds: float, *, failed: bool) -> None:
        counters = self._shared.counters
        with self._shared.hot.store.lock:
            if flushed:
                counters.flushes += 1
                counters.flushed_writes += flushed
            counters.flush_seconds += seconds
            if failed:
                counters.flush_failures += 1

    def _flush_all(self) -> int:
        """Flush every dirty thread, the one dirty longest first; raise the first durable failure."""
        if self._shared.write != "back":
            return 0
        return sum(self._flush_thread(thread_id) for thread_id in self._shared.dirty.dirty_threads())

    @staticmethod
    def _flush_in_background(saver: TieredSaver) -> None:
        """The periodic flush. An async durable saver's loop that is not running is skipped until it runs."""
        loop = saver._durable.loop
        if loop is not None and (loop.is_closed() or not loop.is_running()):
            return
        saver._flush_all()

    def _spill(self) -> None:
        """Flush the threads the hot tier evicted with unflushed writes (their writes stay in memory until
        then). A failure is counted and logged, not raised: the caller's own write succeeded."""
        shared = self._shared
        with shared.hot.store.lock:
            thread_ids, shared.spill_requests = shared.spill_requests, set()
        for thread_id in thread_ids:
            start = time.perf_counter()
            try:
                self._flush_thread(thread_id)
            except Exception:
                logger.exception("flushing thread %r, evicted with unflushed writes, failed; kept in memory", thread_id)
                continue  # counted by the flush; retried by the next flush
            with shared.hot.store.lock:
                shared.counters.spills += 1
                shared.counters.spill_seconds += time.perf_counter() - start

    def _deliver(self) -> None:
        """Hand the hot tier's drops to the hook, then flush the dirty threads it evicted."""
        shared = self._shared
        announcements = shared.hot.store.announcements
        if announcements.queue:
            announcing.deliver(announcements)
        if shared.spill_requests:
            self._spill()

    async def _adeliver(self) -> None:
        shared = self._shared
        announcements = shared.hot.store.announcements
        if announcements.queue:
            await announcing.deliver_async(announcements)
        if shared.spill_requests:
            await asyncio.to_thread(self._spill)

    async def _decode(self, view: CheckpointView) -> CheckpointTuple:
        if view.nbytes > self.config.async_offload_bytes:
            return await asyncio.to_thread(codec.decode_view, self.serde, view)
        return codec.decode_view(self.serde, view)


# --- helpers --------------------------------------------------------------------------------------------------


def _checked_config(config: object) -> InMemoryCheckpointConfig:
    if config is None:
        return InMemoryCheckpointConfig()
    if not isinstance(config, InMemoryCheckpointConfig):
        raise ValueError(f"config must be an InMemoryCheckpointConfig, got {type(config).__name__}")
    if config.on_evict is not None:
        raise ValueError(
            "config.on_evict must be unset for a TieredSaver: a thread leaving memory is not lost, it stays in the "
            "durable tier"
        )
    if config.autosave_path is not None:
        raise ValueError(
            "config.autosave_path must be unset for a TieredSaver: the durable tier is what persists, not snapshots"
        )
    return config


def _check_positive(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or not value > 0:
        raise ValueError(f"{name} must be a positive number (or math.inf), got {value!r:.40}")


def _alive(store: Store, thread_id: str) -> bool:
    """Whether the thread is stored and not about to expire in the next operation (lock held)."""
    last_used = store.last_used(thread_id)
    if last_used is None:
        return False
    return store.clock() - last_used < store.limits.idle_ttl_seconds - TTL_MARGIN_SECONDS


def _churn(store: Store) -> int:
    """A count that moves when a write prunes its thread (rolling history, namespaces), lock held."""
    return store.pruned_checkpoints + store.pruned_namespaces


def _forget_tombstone(store: Store, thread_id: str) -> None:
    """Forget the hot tier's tombstone of a thread (lock held): it only guards a memory-only saver's late
    writes; here a thread that left memory is still durable, and its late writes are welcome."""
    if store.tombstones.records and thread_id in store.tombstones.records:
        store.tombstones.forget(thread_id)


def _hot_newest(store: Store, thread_id: str) -> str | None:
    refs = store.list(thread_id, None)
    return max((ref.record.checkpoint_id for ref in refs), default=None)


def _added(record: CheckpointRecord, blobs: Mapping[BlobKey, Blob]) -> int:
    """Bytes a put adds: its checkpoint, metadata and new values (the engine's count)."""
    return record.nbytes + sum(payload_size(blob) for blob in blobs.values())


def _batch_bytes(records: Sequence[WriteRecord]) -> int:
    """Bytes of a batch of writes: values and task paths (the engine's count for max_pending_write_bytes)."""
    return sum(len(write.value_data) + len(write.task_path) for write in records)


def _writes_location(config: RunnableConfig) -> tuple[str, str, str]:
    thread_id, namespace, checkpoint_id = locate(config)
    if checkpoint_id is None:
        raise ValueError("put_writes needs config['configurable']['checkpoint_id']")
    return thread_id, namespace, checkpoint_id


def _stored_config(thread_id: str, namespace: str, checkpoint_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": namespace, "checkpoint_id": checkpoint_id}}


def _admitted_writes(serde: Any, pending: Sequence[PendingWrite]) -> builtins.list[builtins.list[WriteRecord]]:
    """A read's pending writes as hot records, one batch per task: each task gets the index of each of its
    writes back (its position among the task's regular writes, or a special channel's fixed one) and a
    path that sorts as the durable tier returned them (the API returns no task path)."""
    tasks: dict[str, builtins.list[WriteRecord]] = {}
    paths: dict[str, str] = {}
    for task_id, channel, value in pending:
        batch = tasks.get(task_id)
        if batch is None:
            batch = tasks[task_id] = []
            paths[task_id] = f"~{len(paths):06d}"
        position = sum(1 for write in batch if write.idx >= 0)
        idx = WRITES_IDX_MAP.get(channel, position)
        batch.append(WriteRecord.of(task_id, idx, channel, serde.dumps_typed(value), paths[task_id]))
    return builtins.list(tasks.values())


def _list_key(request: _ListRequest) -> Hashable:
    shown = None if request.filter is None else repr(sorted(request.filter.items()))
    located = (request.thread_id, request.namespace, request.checkpoint_id)
    return ("list", *located, request.before_id, request.limit, shown)
