"""``TieredSaver``: the class users hold. Each method chooses a path; the modules beside this one carry it out
(the package's docstring says which does what)."""

from __future__ import annotations

import time
import uuid
import warnings
from collections.abc import AsyncIterator, Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)

from .. import codec
from ..background import Periodic, Resumable
from ..config import InMemoryCheckpointConfig
from ..engine import DroppedThread, InvalidArgumentError, Store
from ..locations import channel_names, locate, normalize_id, normalize_ids
from ..saver import BoundedInMemorySaver, kept_per_namespace
from . import flushing, hot_reads, puts, read_through, removal, storage
from .backends import kind_of
from .durable import DurableTier
from .pools import in_jobs_pool
from .retention import RetentionPolicy, Sweeper, kind_problem, prune_threads, resumes, run_pass
from .settings import Oversize, Processes, WriteBack, WriteThrough, check_arguments
from .state import Shared, Tiers, read_stats
from .stats import SweepReport, TieredStats
from .storage import TieredThreadStorage

__all__ = ["TieredSaver"]


class TieredSaver(BaseCheckpointSaver[str], Resumable):
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
        write: ``"through"`` (the default, ``WriteThrough()``: a write returns once the durable tier has it),
            ``"back"`` (``WriteBack()``: writes land in memory and are flushed in the background), or either
            object with its settings: ``WriteBack(flush_interval_seconds=..., max_dirty_bytes=...,
            max_dirty_seconds=...)``, or ``WriteThrough(processes="many")`` when several processes write one
            SQLite or PostgreSQL durable tier (fresh reads and conditional puts: a put another process's write
            made stale raises ``CheckpointConflictError``).
        oversize: What a write past ``max_checkpoint_bytes`` or ``max_pending_write_bytes`` does:
            ``"durable"`` (the default) stores it in the durable tier, the store of record, and keeps its
            thread out of memory (``stats().oversize``); ``"refuse"`` refuses it with a
            ``CheckpointCapacityError``, as the memory saver does, written nowhere.
        retention: How long the durable tier keeps a thread, and how many checkpoints of it
            (``RetentionPolicy``: an idle TTL, ``keep_last``), swept in the background every
            ``sweep_interval_seconds`` and by ``sweep()``. None (the default): everything is kept.
        clock: Monotonic seconds for the hot tier's idle expiry and the age of unflushed writes (tests inject one).
        wall_clock: Unix seconds for retention's idle TTL (checkpoint ids hold the wall time of their put;
            tests inject one).

    Raises:
        InvalidArgumentError: A setting is invalid, naming it: among others a ``BoundedInMemorySaver`` or
            another ``TieredSaver`` as ``durable`` (neither persists: a thread leaving memory would be lost), an
            empty ``RetentionPolicy()``, ``WriteThrough(processes="many")`` over a saver other than SQLite or
            PostgreSQL.

    Warns:
        UserWarning: ``durable`` is LangGraph's ``InMemorySaver`` (nothing persists), or ``retention``'s
            ``idle_ttl_seconds`` is shorter than ``config.idle_ttl_seconds`` (a thread still in memory is
            removed from the durable tier, and memory, by a sweep: the hot tier's TTL never applies).

    Example:
        ```python
        import sqlite3
        from typing import TypedDict

        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.graph import START, StateGraph

        from langgraph.checkpoint.bounded import InMemoryCheckpointConfig, TieredSaver


        class State(TypedDict):
            count: int


        builder = StateGraph(State)
        builder.add_node("tick", lambda state: {"count": state["count"] + 1})
        builder.add_edge(START, "tick")
        durable = SqliteSaver(sqlite3.connect("threads.db", check_same_thread=False))
        with TieredSaver(durable, config=InMemoryCheckpointConfig(max_threads=250)) as checkpointer:
            graph = builder.compile(checkpointer=checkpointer)
            graph.invoke({"count": 0}, {"configurable": {"thread_id": "user-1"}})
        ```
    """

    def __init__(
        self,
        durable: BaseCheckpointSaver[Any],
        *,
        config: InMemoryCheckpointConfig | None = None,
        write: Literal["through", "back"] | WriteThrough | WriteBack = "through",
        oversize: Oversize = "durable",
        retention: RetentionPolicy | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        if isinstance(durable, TieredSaver):
            raise InvalidArgumentError(
                "durable must be a saver that persists (SqliteSaver, PostgresSaver...), got a TieredSaver: give "
                "this TieredSaver its durable saver instead (a tier over a tier holds every thread twice in memory)"
            )
        config, policy, settings = check_arguments(durable, config, write, oversize)
        problem = kind_problem(retention, kind_of(durable))
        if problem is not None:
            raise InvalidArgumentError(problem)
        if retention is not None:
            _warn_if_shorter(retention, config)
        super().__init__(serde=durable.serde)
        self.config = config
        self._write = policy
        shared = Shared(settings, config.max_dropped_thread_records, clock)
        shared.write_policy = policy
        # The hot tier's tombstones guard a memory-only saver's late writes: here those writes are welcome (the
        # thread is durable), so it keeps one and forgets it at once (Store.forget_tombstone).
        # Write-back is told of every eviction (the hook receives the thread's export, which costs O(its size)),
        # to flush an evicted thread's unflushed writes at once; write-through needs no word of it.
        hook = shared.on_hot_drop if settings.write == "back" else None
        hot_config = replace(config, on_evict=hook, max_dropped_thread_records=1)
        shared.hot = BoundedInMemorySaver(config=hot_config, serde=self.serde, clock=clock)
        shared.deleted.wall_clock = wall_clock  # a tombstone's time, as retention's deletions read it
        self._shared = shared
        self._tiers = Tiers(shared, DurableTier(durable, shared.health, landings=shared.landings), self.serde, config)
        shared.first_write_wins = self._tiers.durable.format.first_write_wins
        self._sweeper = None if retention is None else Sweeper.for_tiers(retention, self._tiers, wall_clock)
        if settings.write == "back":
            flushing.flush_at_exit_later(self._tiers)  # a program that never closes it loses nothing at exit
        self.resume()

    # --- properties -----------------------------------------------------------------------------------------

    @property
    def durable(self) -> BaseCheckpointSaver[Any]:
        """The durable saver."""
        return self._tiers.durable.saver

    @property
    def _hot(self) -> BoundedInMemorySaver:
        """The hot tier: a ``BoundedInMemorySaver`` whose evictions are not losses (for metrics and tests)."""
        return self._shared.hot

    @property
    def _store(self) -> Store:
        """The hot tier's engine store (for metrics and tests)."""
        return self._shared.hot.store

    @property
    def write(self) -> WriteThrough | WriteBack:
        """The write policy: ``WriteThrough(...)`` or ``WriteBack(...)`` (``"through"`` and ``"back"`` given as
        their defaults)."""
        return self._write

    @property
    def processes(self) -> Processes:
        """``"one"`` or ``"many"``: whether several processes write one durable tier (``WriteThrough``'s
        ``processes``; write-back is ``"one"``)."""
        return self._write.processes if isinstance(self._write, WriteThrough) else "one"

    @property
    def oversize(self) -> Oversize:
        """``"durable"`` or ``"refuse"``: what a write past a per-item limit does."""
        return self._shared.oversize

    @property
    def _durable_sides(self) -> str:
        """Which side of the durable saver serves the sync and the async methods, in one sentence."""
        return self._tiers.durable.sides()

    def __repr__(self) -> str:
        return f"TieredSaver({self._tiers.durable.name}, write={self.write!r})"

    # --- lifetime (entered and left as a context: background.Resumable) ----------------------------------------

    def resume(self) -> None:
        """Start the background work: write-back's periodic flush, retention's sweeps, and the hot tier's
        expiry sweep when ``purge_interval_seconds`` asks for one. Runtime complexity: O(1).
        """
        shared = self._shared
        shared.hot.resume()
        if shared.background:
            return
        if shared.write == "back":
            shared.background.append(
                Periodic(
                    self._tiers,
                    flushing.flush_in_background,
                    shared.settings.flush_interval_seconds,
                    "tiered-write-back-flush",
                    health=shared.flush_health,
                )
            )
        sweeper = self._sweeper
        if sweeper is not None:
            shared.background.append(
                Periodic(
                    self._tiers,
                    lambda tiers: run_pass(tiers, sweeper, max_threads=sweeper.policy.max_threads_per_sweep),
                    sweeper.policy.sweep_interval_seconds,
                    "tiered-retention-sweep",
                    health=shared.sweep_health,
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
        self._stop_background()
        flushing.deliver(self._tiers)
        flushing.flush_round(self._tiers)

    async def aclose(self) -> None:
        """Async ``close``: the background threads are stopped from the saver's own jobs pool, and the last
        flush awaits the durable tier. Runtime complexity: that of ``close``."""
        await in_jobs_pool(self._stop_background)
        await flushing.adeliver(self._tiers)
        await flushing.aflush_round(self._tiers)

    def _stop_background(self) -> None:
        """Stop the periodic flush and the hot tier's own background work (waiting for a run under way)."""
        shared = self._shared
        while shared.background:
            shared.background.pop().stop()
        shared.hot.close()

    @property
    def retention(self) -> RetentionPolicy | None:
        """The retention policy (None: the durable tier keeps everything)."""
        return None if self._sweeper is None else self._sweeper.policy

    def sweep(self, *, max_threads: int | None = None) -> SweepReport:
        """Run a retention pass now: every thread due under the policy (or at most ``max_threads`` of them),
        each removed from both tiers in one durable transaction; return what it removed and what it left due
        (past ``max_threads``, in use in this process, or whose removal failed: ``SweepReport.due``).

        Raises:
            ValueError: The saver has no retention policy, or ``max_threads`` is not a whole number of at
                least 1.
            Exception: The durable tier failed to find due threads (counted in ``stats().retention``); what
                was removed before stays removed.

        Runtime complexity: SQL savers: an index range over the checkpoint ids written since the last pass,
        plus one transaction per due thread reading its ids and deleting what goes; other savers: a
        ``list(None)`` of everything stored, plus O(size of each due thread) round trips.
        """
        if self._sweeper is None:
            raise InvalidArgumentError(
                "sweep() needs a retention policy: TieredSaver(durable, retention=RetentionPolicy(...))"
            )
        if max_threads is not None and (type(max_threads) is not int or max_threads < 1):
            raise InvalidArgumentError(
                f"max_threads must be a whole number of at least 1 or None, got {max_threads!r:.40}"
            )
        return run_pass(self._tiers, self._sweeper, max_threads=max_threads)

    async def asweep(self, *, max_threads: int | None = None) -> SweepReport:
        """Async ``sweep``, in a worker thread of the saver's jobs pool. Runtime complexity: that of ``sweep``."""
        return await in_jobs_pool(lambda: self.sweep(max_threads=max_threads))

    def flush(self) -> int:
        """Write every unflushed write to the durable tier, thread by thread, oldest first; return how many.

        A no-op with ``write="through"``.

        Raises:
            Exception: The durable tier failed; what was not flushed stays in memory.

        Runtime complexity: one durable write per unflushed checkpoint or write batch.
        """
        return flushing.flush_round(self._tiers)  # one round: writers needing room wait for it

    async def aflush(self) -> int:
        """Async ``flush``: each write awaits the durable tier. Runtime complexity: that of ``flush``."""
        return await flushing.aflush_round(self._tiers)

    # --- observation ---------------------------------------------------------------------------------------------

    def stats(self) -> TieredStats:
        """The hot tier's counters (``.hot``) and the tiered saver's own, read at one instant.

        Runtime complexity: O(1) (plus one entry per limit that rejected something).
        """
        return read_stats(self._shared)

    def thread_storage(self, thread_id: str | int | uuid.UUID) -> TieredThreadStorage:
        """The bytes a thread occupies in each tier (``.hot``, ``.durable``; ``total_bytes`` is the durable
        tier's): checkpoints, channel values per channel, pending writes. Reads only: an unknown thread
        reports zeros, and nothing is created, admitted into memory or marked used. Under write-back the
        thread's unflushed writes are flushed first, as a read flushes them (an evicted thread's are held by
        nothing else, and ``total_bytes`` is the durable tier's).

        Raises:
            ValueError: The thread id is invalid.
            Exception: The durable tier's failure.

        Runtime complexity: O(the thread's hot entries), plus one aggregate query per table for a SQLite or
        PostgreSQL durable saver; another saver is read whole through its API and re-serialized
        (``durable.estimated``).
        """
        thread_id = normalize_id("thread_id", thread_id)
        flushing.flush_thread(self._tiers, thread_id)  # none under write-through: O(1)
        return storage.thread_storage(self._store, self._tiers.durable, thread_id)

    async def athread_storage(self, thread_id: str | int | uuid.UUID) -> TieredThreadStorage:
        """Async ``thread_storage``: the durable tier's async side."""
        thread_id = normalize_id("thread_id", thread_id)
        await flushing.aflush_thread(self._tiers, thread_id)
        return await storage.athread_storage(self._store, self._tiers.durable, thread_id)

    def check(self) -> None:
        """Assert the hot tier's invariants and the ledger's accounting (for tests).

        Runtime complexity: O(size of the hot tier and of the unflushed writes).
        """
        self._shared.hot.check()
        self._shared.dirty.check()
        with self._shared.hot.store.exclusive():
            self._shared.early.check()

    def dropped_thread(self, thread_id: str | int | uuid.UUID) -> DroppedThread | None:
        """Why, when and by what a thread was deleted from both tiers in this process, or None if it was not.

        Answers as ``BoundedInMemorySaver.dropped_thread``, for the deletions that lose a thread here (a thread
        leaving the hot tier is still durable: not a drop): ``limit`` is ``"delete_thread"`` (a call, or
        ``prune(strategy="delete")``; ``limit_value`` 0), or the retention policy's field that deleted it,
        ``"idle_ttl_seconds"`` or ``"interrupted_ttl_seconds"`` (it waited at an interrupt), with its value;
        ``dropped_at_wall`` is when (by ``wall_clock``), ``newest_checkpoint_id`` the newest checkpoint it held.
        A thread started afresh since keeps the record of its previous life; a ``copy_thread`` into it ends
        it. Records are kept for the last ``max_dropped_thread_records`` threads.

        Across processes it knows only this process's deletions, and the threads whose resume it refused. A
        resume of a thread retention deleted while it waited is refused in every process over the same SQLite
        or PostgreSQL database all the same (``InterruptLostError``, from the row retention wrote:
        ``RetentionPolicy.interrupted_ttl_seconds``); after that refusal this process's record says so too.

        Runtime complexity: O(1).
        """
        record = self._shared.deleted.get(normalize_id("thread_id", thread_id))
        if record is None:
            return None
        return DroppedThread(
            record.thread_id,
            record.limit,
            record.limit_value,
            record.deleted_at,
            record.newest_checkpoint_id,
            record.deleted_at_wall,
        )

    def with_allowlist(self, extra_allowlist: Collection[tuple[str, ...]]) -> TieredSaver:
        """A shallow copy with a derived msgpack allowlist, for this saver and its durable saver; the copy
        shares every piece of state, and keeps this saver alive (the periodic flush stops once the saver
        that started it is garbage). Runtime complexity: O(1)."""
        clone = super().with_allowlist(extra_allowlist)
        if clone is self:
            return self
        assert isinstance(clone, TieredSaver)
        durable = DurableTier(
            self._tiers.durable.saver.with_allowlist(extra_allowlist),
            self._shared.health,
            landings=self._shared.landings,
        )
        clone._tiers = Tiers(self._shared, durable, clone.serde, self.config)
        clone._source = self  # type: ignore[attr-defined]  # the periodic flush holds this saver's tiers weakly
        if self._shared.write == "back":
            flushing.flush_at_exit_later(clone._tiers)
        return clone

    def get_next_version(self, current: str | None, channel: None) -> str:
        """The durable saver's version format (every stock saver's: a counter and a random suffix).

        Runtime complexity: O(1).
        """
        return str(self._tiers.durable.saver.get_next_version(current, channel))

    # --- reads: the hot tier first (hot_reads), else the durable tier (read_through) --------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint a config names, or the latest of its thread and namespace.

        Runtime complexity: a hit, that of ``BoundedInMemorySaver.get_tuple``; with
        ``processes="many"`` and no checkpoint id, plus one round trip; a
        miss, the durable saver's ``get_tuple`` plus encoding what it read.
        """
        tiers = self._tiers
        thread_id, namespace, checkpoint_id = locate(config)
        if tiers.shared.deleted.refused_runs:  # a resume was refused: is this the next run's first read?
            resumes.run_starts(tiers, config, thread_id, namespace, checkpoint_id)
        newest = None
        if checkpoint_id is None and tiers.shared.coherence == "validate":
            newest = hot_reads.measured_newest(tiers, thread_id, namespace)
        view, known = hot_reads.hot_get(tiers, thread_id, namespace, checkpoint_id, newest)
        flushing.deliver(tiers)
        if view is not None:
            return codec.decode_view(self.serde, view)
        if known:
            return None
        return read_through.read_tuple(tiers, config, thread_id, namespace, checkpoint_id)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Async ``get_tuple``: the durable tier's async side, large payloads decoded in a worker thread."""
        tiers = self._tiers
        thread_id, namespace, checkpoint_id = locate(config)
        if tiers.shared.deleted.refused_runs:  # a resume was refused: is this the next run's first read?
            resumes.run_starts(tiers, config, thread_id, namespace, checkpoint_id)
        newest = None
        if checkpoint_id is None and tiers.shared.coherence == "validate":
            newest = await hot_reads.ameasured_newest(tiers, thread_id, namespace)
        view, known = hot_reads.hot_get(tiers, thread_id, namespace, checkpoint_id, newest)
        await flushing.adeliver(tiers)
        if view is not None:
            return await hot_reads.decode(tiers, view)
        if known:
            return None
        return await read_through.aread_tuple(tiers, config, thread_id, namespace, checkpoint_id)

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
        tiers = self._tiers
        request = hot_reads.list_request(config, filter, before, limit)
        if request.config is None:
            flushing.flush_all(tiers)
            yield from tiers.durable.list(None, filter=filter, before=before, limit=limit)
            return
        answer = hot_reads.hot_list(tiers, request)
        flushing.deliver(tiers)
        if answer is not None:
            yield from answer
            return
        yield from read_through.read_list(tiers, request)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Async ``list``."""
        tiers = self._tiers
        request = hot_reads.list_request(config, filter, before, limit)
        if request.config is None:
            await flushing.aflush_all(tiers)
            for item in await tiers.durable.alist(None, filter=filter, before=before, limit=limit):
                yield item
            return
        answer = hot_reads.hot_list(tiers, request)
        await flushing.adeliver(tiers)
        if answer is None:
            answer = await read_through.aread_list(tiers, request)
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
        tiers = self._tiers
        thread_id, namespace, checkpoint_id = locate(config)
        newest = None
        if checkpoint_id is None and tiers.shared.coherence == "validate":
            newest = hot_reads.measured_newest(tiers, thread_id, namespace)
        histories = hot_reads.hot_delta(tiers, thread_id, namespace, checkpoint_id, names, newest)
        flushing.deliver(tiers)
        if histories is not None:
            return codec.decode_histories(self.serde, histories)
        mark = tiers.shared.marks.read(thread_id)  # before the flush: a write after it moves the mark
        flushing.flush_thread(tiers, thread_id)
        key = ("delta", thread_id, namespace, checkpoint_id, tuple(names), mark)
        read = lambda: tiers.durable.get_delta_channel_history(config, names)  # noqa: E731
        return cast(Mapping[str, DeltaChannelHistory], read_through.flown(tiers.shared, key, read))

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Async ``get_delta_channel_history``."""
        names = channel_names(channels)
        if not names:
            return {}
        tiers = self._tiers
        thread_id, namespace, checkpoint_id = locate(config)
        newest = None
        if checkpoint_id is None and tiers.shared.coherence == "validate":
            newest = await hot_reads.ameasured_newest(tiers, thread_id, namespace)
        histories = hot_reads.hot_delta(tiers, thread_id, namespace, checkpoint_id, names, newest)
        await flushing.adeliver(tiers)
        if histories is not None:
            return codec.decode_histories(self.serde, histories)
        mark = tiers.shared.marks.read(thread_id)  # before the flush: a write after it moves the mark
        await flushing.aflush_thread(tiers, thread_id)
        key = ("delta", thread_id, namespace, checkpoint_id, tuple(names), mark)
        read = lambda: tiers.durable.aget_delta_channel_history(config, names)  # noqa: E731
        return cast(Mapping[str, DeltaChannelHistory], await read_through.aflown(tiers.shared, key, read))

    # --- writes: back into memory and the ledger (flushing makes room), or through, durable first ----------

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
            UnstorableWriteError: It continues write-back writes the durable tier refused, which were dropped.
            CheckpointConflictError: ``processes="many"``: another process wrote the namespace since.
            Exception: The durable saver's failure (write-through); the hot tier is unchanged.

        Runtime complexity: write-through, the durable saver's ``put`` plus
        O(channels) and serializing the new values; write-back, that of
        ``BoundedInMemorySaver.put`` plus O(channels).
        """
        return puts.run(self._tiers, puts.put_plan(self._tiers, config, checkpoint, metadata, new_versions, sync=True))

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Async ``put``: the durable tier's async side; large new values serialized in a worker thread."""
        plan = puts.put_plan(self._tiers, config, checkpoint, metadata, new_versions, sync=False)
        return await puts.arun(self._tiers, plan)

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
        puts.run(self._tiers, puts.put_writes_plan(self._tiers, config, writes, task_id, task_path, sync=True))

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Async ``put_writes``: the durable tier's async side; large writes serialized in a worker thread."""
        await puts.arun(self._tiers, puts.put_writes_plan(self._tiers, config, writes, task_id, task_path, sync=False))

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
        removal.delete_thread(self._tiers, thread_id)

    async def adelete_thread(self, thread_id: str) -> None:
        """Async ``delete_thread``: the durable tier's async side; the waits never block the event loop."""
        await removal.adelete_thread(self._tiers, thread_id)

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
        removal.delete_for_runs(self._tiers, run_ids)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Async ``delete_for_runs``, in a worker thread of the saver's jobs pool (never the event loop's default
        executor): it reads and rewrites whole threads."""
        await in_jobs_pool(lambda: self.delete_for_runs(run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint, write and value of a thread, all namespaces, to another, in the durable tier.

        The durable saver's own method runs where it has one; otherwise every
        checkpoint is put again under the target, oldest first, with its
        writes, so the whole parent chain is copied (``DeltaChannel``s rebuild
        on the target). The target leaves memory, to be read again.

        Runtime complexity: the durable saver's, or O(size of the source) round trips.
        """
        removal.copy_thread(self._tiers, source_thread_id, target_thread_id)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Async ``copy_thread``, in a worker thread of the saver's jobs pool: it copies a whole thread."""
        await in_jobs_pool(lambda: self.copy_thread(source_thread_id, target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest", keep_last: int | None = None) -> None:
        """Prune threads in both tiers: ``"keep_latest"`` or ``"keep_last"`` checkpoints per namespace, or
        ``"delete"`` them.

        ``"delete"`` (or the Agent Server's ``"delete_all"``) is
        ``delete_thread`` for each. ``"keep_latest"`` uses the durable saver's
        own ``prune`` where it has one (``PostgresSaver``; where it refuses a
        thread, as for a ``DeltaChannel``, the emulation runs), else rewrites
        each thread keeping each namespace's latest checkpoint and the
        ancestors it needs. ``"keep_last"`` keeps each namespace's newest
        ``keep_last`` checkpoints with their pending writes and the ancestors
        their ``DeltaChannel`` values need, and removes the subgraph calls
        that started from a removed root checkpoint: for SQLite and
        PostgreSQL in one transaction per thread, for other savers by
        rewriting the thread (counted in ``stats().retention``). The threads
        leave memory, to be read again; their unflushed writes are flushed first.

        Raises:
            ValueError: Unknown strategy, ``keep_last`` missing or not a whole number of at least 1 (or given
                with another strategy), or an invalid thread id; nothing changed.

        Runtime complexity: the durable saver's, or O(size of the threads) round trips.
        """
        kept = kept_per_namespace(strategy, keep_last)
        ids = normalize_ids("thread_ids", thread_ids)
        if kept is None:
            for thread_id in ids:
                self.delete_thread(thread_id)
        elif strategy == "keep_latest":
            removal.keep_latest(self._tiers, ids)
        else:
            prune_threads(self._tiers, ids, kept)

    async def aprune(
        self, thread_ids: Sequence[str], *, strategy: str = "keep_latest", keep_last: int | None = None
    ) -> None:
        """Async ``prune``, in a worker thread of the saver's jobs pool: it reads and rewrites whole threads."""
        await in_jobs_pool(lambda: self.prune(thread_ids, strategy=strategy, keep_last=keep_last))


def _warn_if_shorter(retention: RetentionPolicy, config: InMemoryCheckpointConfig) -> None:
    """Warn when the hot tier's idle TTL can never apply: retention removes an idle thread from both tiers first.
    Runtime complexity: O(1)."""
    ttl = retention.idle_ttl_seconds
    if ttl is not None and ttl < config.idle_ttl_seconds:
        warnings.warn(
            f"retention.idle_ttl_seconds={ttl!r} is shorter than config.idle_ttl_seconds="
            f"{config.idle_ttl_seconds!r}: a thread still in memory is removed from the durable tier (and from "
            "memory with it) by the next sweep once idle for retention's TTL, so the hot tier's idle TTL never "
            "applies; set config.idle_ttl_seconds to at most retention's",
            stacklevel=3,
        )
