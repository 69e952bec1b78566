"""``BoundedInMemorySaver``: LangGraph's checkpointer interface over the engine."""

from __future__ import annotations

import asyncio
import builtins
import itertools
import logging
import math
import os
import random
import threading
import time
from collections.abc import AsyncIterator, Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any
from uuid import UUID

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from . import announcing, codec, interrupts, payload_tags, snapshot
from .background import JobHealth, Periodic, Resumable
from .config import InMemoryCheckpointConfig
from .engine import (
    ChannelHistory,
    CheckpointRecord,
    CheckpointRef,
    CheckpointView,
    DroppedThread,
    InvalidArgumentError,
    ResumeRefusedError,
    Store,
    StoreLimits,
    StoreStats,
    ThreadExport,
    ThreadStorage,
)
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
from .snapshot import LoadReport

logger = logging.getLogger(__name__)

__all__ = [
    "LIST_BATCH",
    "PRUNE_STRATEGIES",
    "BoundedInMemorySaver",
    "InMemorySaver",
    "SaverStats",
]


@dataclass(frozen=True)
class SaverStats(StoreStats):
    """The store's counters (``StoreStats``) and how the saver's background work fared.

    Attributes:
        autosave_failures: Autosaves that raised (each logged); ``close()``
            raises when its last save fails.
        last_autosave_error: The last of them, as ``ExceptionType: message``, or None.
        expiry_sweep_failures: Background expiry sweeps that raised (each logged).
    """

    autosave_failures: int = 0
    last_autosave_error: str | None = None
    expiry_sweep_failures: int = 0

    def rows(self) -> builtins.list[tuple[str, str]]:
        """The store's readable lines (``StoreStats.rows``) and the background work's.

        Runtime complexity: O(L) for L limits that rejected something.
        """
        last = f" (last: {self.last_autosave_error})" if self.last_autosave_error else ""
        return [
            *super().rows(),
            (
                "background",
                f"{self.autosave_failures:,} autosave failures{last}, "
                f"{self.expiry_sweep_failures:,} expiry sweep failures",
            ),
        ]


def _version_counter(current: object) -> int:
    """The counter of a channel version in the stock formats: None, an int, or ``"<digits>.<suffix>"``."""
    if current is None:
        return 0
    if type(current) is int and 0 <= current < 2**63:
        return current
    if type(current) is str:
        digits = current.partition(".")[0]
        if digits.isascii() and digits.isdigit() and len(digits) <= 64:
            return int(digits)
    shown = f"an int of {current.bit_length()} bits" if type(current) is int else f"{current!r:.60}"
    raise InvalidArgumentError(
        f"current version must be None, an int from 0 to 2**63, or '<digits>.<suffix>' text, got {shown} "
        f"({type(current).__name__})"
    )


def _autosave(saver: BoundedInMemorySaver) -> None:
    """The autosave job: a snapshot to ``config.autosave_path``."""
    if saver.config.autosave_path is not None:
        saver.save(saver.config.autosave_path)


PRUNE_STRATEGIES = ("keep_latest", "keep_last", "delete", "delete_all")  # "delete_all": the Agent Server's "delete"
LIST_BATCH = 32  # listed checkpoints read per hold of the store's lock


class BoundedInMemorySaver(BaseCheckpointSaver[str], Resumable):
    """An in-memory checkpointer with limits, LRU eviction and idle expiry.

    A drop-in for LangGraph's ``InMemorySaver``: pass it to
    ``graph.compile(checkpointer=...)``. State lives as long as the process.
    Threads are evicted or expired whole, never in part; an operation that
    would exceed a limit raises ``CheckpointCapacityError`` and changes nothing.

    All state lives in one ``engine.Store`` (``self.store``), so the shallow
    copies LangGraph makes with ``with_allowlist()`` share it, lock included.
    Sync methods may be called from any thread.

    The runtime costs stated by the methods leave out two things a call may add
    when they are due: the lazy expiry of idle threads (see ``engine.Store``),
    and handing the threads that call dropped to ``on_evict`` in the calling
    thread (the hook's cost per thread; see ``announcing``).

    Args:
        config: Limits and settings; the reference defaults if omitted.
        serde: Serializer; ``JsonPlusSerializer(pickle_fallback=False)`` if omitted.
        clock: Monotonic seconds for idle expiry; inject one to drive time in tests.

    Example:
        ```python
        from typing import TypedDict

        from langgraph.graph import START, StateGraph

        from langgraph.checkpoint.bounded import InMemoryCheckpointConfig, InMemorySaver


        class State(TypedDict):
            count: int


        builder = StateGraph(State)
        builder.add_node("tick", lambda state: {"count": state["count"] + 1})
        builder.add_edge(START, "tick")
        checkpointer = InMemorySaver(config=InMemoryCheckpointConfig(max_threads=250))
        graph = builder.compile(checkpointer=checkpointer)
        graph.invoke({"count": 0}, {"configurable": {"thread_id": "user-1"}})
        ```
    """

    def __init__(
        self,
        *,
        config: InMemoryCheckpointConfig | None = None,
        serde: SerializerProtocol | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(serde=serde or JsonPlusSerializer(pickle_fallback=False))
        if config is None:
            config = InMemoryCheckpointConfig()
        elif not isinstance(config, InMemoryCheckpointConfig):
            if not isinstance(config, StoreLimits):
                raise InvalidArgumentError(f"config must be an InMemoryCheckpointConfig, got {type(config).__name__}")
            config = InMemoryCheckpointConfig(**vars(config))  # engine limits, saver defaults
        if not callable(clock):
            raise InvalidArgumentError(f"clock must be a callable returning seconds, got {type(clock).__name__}")
        self.config = config
        self.store = Store(config, clock=clock, on_drop=config.on_evict, answer_channels=interrupts.ANSWER_CHANNELS)
        self.load_report: LoadReport | None = None
        # Mutable containers, so that with_allowlist() copies share them.
        self._background: list[Periodic[BoundedInMemorySaver]] = []
        self._background_lock = threading.Lock()  # close() and resume() never interleave
        self.autosave_health = JobHealth()
        self.sweep_health = JobHealth()
        self.resume()

    # --- lifetime (entered and left as a context: background.Resumable) ------------------------

    @announcing.announces
    def close(self) -> None:
        """Stop the background work (autosave, after one last save; the expiry sweep), and deliver the
        dropped threads still queued for ``on_evict`` (those a cancelled caller left, say). The store
        stays usable, and ``resume()`` starts the work again.

        With ``autosave_path``, every ``close()`` ends with a save, also one called again after the
        work stopped: writes made after an earlier ``close()`` reach the file (a process-wide saver
        written to after its server's lifespan closed it, then closed at interpreter exit).

        Raises:
            Exception: The last save failed (``OSError``, say); the background work is stopped anyway,
                and the failure is counted in ``stats().autosave_failures``.

        Runtime complexity: one save, and the hook's per thread still queued.
        """
        with self._background_lock:
            while self._background:
                self._background.pop().stop()
            if self.config.autosave_path is not None:
                try:
                    _autosave(self)
                    self.autosave_health.runs += 1
                except Exception as error:
                    logger.exception("the last autosave failed, on close()")
                    self.autosave_health.failed(error)
                    raise

    @announcing.announces_async
    async def aclose(self) -> None:
        """Async ``close``: the last save in a worker thread, the queued drops delivered without blocking
        the event loop. Runtime complexity: that of ``close``."""
        await asyncio.to_thread(self._close)

    def resume(self) -> None:
        """Start the background work ``config`` asks for, if it is not running: autosaving with
        ``autosave_path``, sweeping expired threads with ``purge_interval_seconds``.

        Runtime complexity: O(1).
        """
        config = self.config
        with self._background_lock:
            if self._background:
                return
            if config.autosave_path is not None:
                self._background.append(
                    Periodic(
                        self,
                        _autosave,
                        config.autosave_interval_seconds,
                        "checkpoint-autosave",
                        health=self.autosave_health,
                    )
                )
            if config.purge_interval_seconds is not None:
                self._background.append(
                    Periodic(
                        self,
                        BoundedInMemorySaver.purge_expired,
                        config.purge_interval_seconds,
                        "checkpoint-expiry-sweep",
                        health=self.sweep_health,
                    )
                )

    # --- snapshots ---------------------------------------------------------------------------

    def save(self, path: str | os.PathLike[str]) -> int:
        """Write the whole store (LRU order and idle ages included) to one file, atomically.

        The store's lock is held only to copy the threads changed since the
        previous save; serializing and writing happen outside it. With
        ``config.snapshot_key`` the file is signed (HMAC-SHA256). Returns how
        many threads were saved.

        Runtime complexity: O(T + size of changed threads) under the lock, O(size) in all.
        """
        threads, _ = self.store.snapshot()
        key = snapshot.signing_key(self.config.snapshot_key)
        snapshot.write_atomically(path, snapshot.encode(threads, key=key))
        return len(threads)

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        *,
        config: InMemoryCheckpointConfig | None = None,
        serde: SerializerProtocol | None = None,
        clock: Callable[[], float] = time.monotonic,
        allow_unsigned: bool = False,
    ) -> BoundedInMemorySaver:
        """A saver restored from a ``save`` file, under the limits of ``config``.

        The file is verified whole before anything is restored: its checksum;
        its signature, with ``config.snapshot_key`` (a signed file needs the
        key; with a key, an unsigned file is refused unless ``allow_unsigned``);
        and every payload's type tag (a ``"pickle"`` payload is refused unless
        the serializer has ``pickle_fallback=True``).

        Threads are restored least recently used first with their idle ages (the
        wall-clock time since the save included): one idle past
        ``idle_ttl_seconds`` is not restored, one that does not fit the
        limits is evicted (LRU) or rejected, as a write would be. What happened
        to each thread is in ``saver.load_report``.

        Raises:
            SnapshotError: The file is foreign, truncated, corrupted or of an
                unknown version; its signature does not match; it is signed and
                no key is set, or unsigned and a key is set (without
                ``allow_unsigned``); or a payload's tag is refused. Nothing is loaded.
            ValueError: ``allow_unsigned`` is not a bool.

        Runtime complexity: O(size of the file), and O(n log n) per thread of
        n checkpoints restored (its ids are sorted).
        """
        if not isinstance(allow_unsigned, bool):
            raise InvalidArgumentError(f"allow_unsigned must be a bool, got {type(allow_unsigned).__name__}")
        config = config if config is not None else InMemoryCheckpointConfig()
        parsed = snapshot.read(path, snapshot.signing_key(config.snapshot_key), allow_unsigned=allow_unsigned)
        quiet = replace(config, autosave_path=None, purge_interval_seconds=None)  # no background work while loading
        saver = cls(config=quiet, serde=serde, clock=clock)
        saver._restore(parsed)
        saver.config = config
        saver.resume()
        return saver

    @announcing.announces
    def _restore(self, parsed: snapshot.Snapshot) -> None:
        """Restore a verified snapshot into this saver's empty store (``snapshot.restore``), keeping the report;
        threads that did not fit were evicted while restoring, and are delivered to ``on_evict``."""
        serde = self.serde
        self.load_report = snapshot.restore(
            self.store,
            parsed,
            self.config.idle_ttl_seconds,
            lambda export: payload_tags.check_export(export, serde),
        )

    # --- observation and maintenance ------------------------------------------------------

    def with_allowlist(self, extra_allowlist: Collection[tuple[str, ...]]) -> BoundedInMemorySaver:
        """A shallow copy with a derived msgpack allowlist (LangGraph's ``compile()`` makes one under
        ``LANGGRAPH_STRICT_MSGPACK``); it shares the store and the background work.

        The copy keeps this saver alive: the background jobs hold the saver that started them weakly
        and stop once it is garbage, which must not happen while a copy (the compiled graph's) is in
        use. Runtime complexity: O(1).
        """
        clone = super().with_allowlist(extra_allowlist)
        if clone is not self:
            clone._source = self  # type: ignore[attr-defined]
        return clone  # type: ignore[return-value]

    def stats(self) -> SaverStats:
        """Counters of what is stored, what the limits did, and how the background work fared.

        Runtime complexity: O(1) (plus one entry per limit that rejected something).
        """
        return SaverStats(
            **vars(self.store.stats()),
            autosave_failures=self.autosave_health.failures,
            last_autosave_error=self.autosave_health.last_error,
            expiry_sweep_failures=self.sweep_health.failures,
        )

    def dropped_thread(self, thread_id: str | int | UUID) -> DroppedThread | None:
        """Why, when and under which limit a thread was evicted or expired, or None if it was not.

        The record keeps the limit, when (``dropped_at_wall``, ``dropped_at_utc``)
        and the newest checkpoint id the thread held. A thread started afresh since
        (a new run on its id) still has the record of its previous life: the
        writes of that life are refused with ``ThreadEvictedError``, so the record
        alone does not say that nothing waits. A resume (``Command(resume=...)``)
        of a dropped thread fails with ``InterruptLostError``: check first that a
        run waits, with ``graph.get_state(config).interrupts`` (``.next`` is also
        non-empty after a run that failed), and if none does and the saver holds
        nothing of the thread, this says why. Records are kept for the last
        ``max_dropped_thread_records`` threads.

        Runtime complexity: O(1).
        """
        return self.store.dropped_thread(normalize_id("thread_id", thread_id))

    def thread_storage(self, thread_id: str | int | UUID) -> ThreadStorage:
        """The bytes a thread occupies in memory (tier ``"memory"``): checkpoints, channel values (per
        channel) and pending writes, as the byte accounting counts them (compressed when ``serde``
        compresses). A thread not stored reports zeros; the report creates nothing and marks nothing used.

        Runtime complexity: O(the thread's checkpoints, channel values and writes); nothing is re-serialized.
        """
        return self.store.thread_storage(normalize_id("thread_id", thread_id))

    async def athread_storage(self, thread_id: str | int | UUID) -> ThreadStorage:
        """Async ``thread_storage`` (in memory: it waits for nothing)."""
        return self.thread_storage(thread_id)

    @announcing.announces
    def purge_expired(self) -> int:
        """Remove every thread idle for ``idle_ttl_seconds``; return how many.

        Operations remove idle threads on their own (the one they touch, and a
        few of the oldest); this removes all of them, in batches between which
        other callers get the lock.

        Runtime complexity: O(expired threads).
        """
        return self.store.purge_expired()

    def clear(self) -> None:
        """Remove every thread (not announced to ``on_evict``). Runtime complexity: O(1) plus freeing them."""
        self.store.clear()

    @announcing.announces
    def export_thread(self, thread_id: str) -> ThreadExport | None:
        """Everything a thread holds (all namespaces, checkpoints, metadata, writes,
        blobs), still serialized, or None if it is not stored or has expired
        (then it is removed, and announced as expired).

        Runtime complexity: O(size of the thread).
        """
        return self.store.export_thread(normalize_id("thread_id", thread_id))

    @announcing.announces
    def import_thread(self, export: ThreadExport, thread_id: str | None = None) -> None:
        """Store an export made by ``export_thread`` (or given to ``on_evict``).

        Checkpoint ids, parent links, metadata, writes and channel values are kept,
        so a graph resumes on it as before. Payloads must have been written with
        a compatible serializer; a ``"pickle"`` payload is refused unless this
        saver's serializer has ``pickle_fallback=True``. Merges into an existing
        thread, the export winning.

        Raises:
            PayloadTagError: A payload's tag is refused (a ``ValueError`` naming
                the thread, the payload and the tag); nothing changed.
            ValueError: Malformed export or invalid identifier.
            CheckpointCapacityError: It does not fit the limits; nothing changed.

        Runtime complexity: O(size of the export), and O(s log s) for the s
        checkpoints of the export and of the thread it merges into (the merged
        ids are sorted).
        """
        target = None if thread_id is None else normalize_id("thread_id", thread_id)
        payload_tags.check_export(export, self.serde)
        self.store.import_thread(export, target)

    def check(self) -> None:
        """Assert the engine's invariants (for tests and post-mortems).

        Runtime complexity: O(size of the store).
        """
        self.store.check()

    # --- reads ---------------------------------------------------------------------------------

    @announcing.announces
    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint a config names, or the latest of its thread and namespace.

        Runtime complexity: O(1) to find it, O(c + w log w) to read its c channel
        values and w pending writes, plus deserializing them.
        """
        thread_id, namespace, checkpoint_id = locate(config)
        view = self.store.get(thread_id, namespace, checkpoint_id)
        if view is None:
            if self.config.dropped_thread_quarantine_seconds:
                self._admit_run(config, thread_id, namespace, checkpoint_id)
            return None
        return codec.decode_view(self.serde, view)

    @announcing.announces
    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints matching the criteria, newest first within each namespace.

        ``config=None`` lists every thread, oldest created first. A config
        without ``checkpoint_ns`` lists every namespace of its thread. The
        candidates of one thread are fixed when iteration starts, and its
        metadata matched against ``filter`` outside the store's lock. With
        ``config=None`` and a filter, the threads are fixed when iteration
        starts and matched in one pass, a batch of threads under each hold of
        the lock (``Store.select_every_thread``), so a listing that stops at its
        ``limit`` visits no more. Matches are read ``LIST_BATCH`` at a time
        under one hold of the lock. A checkpoint deleted while the caller iterates is
        skipped unless its batch was already read, and every tuple yielded is
        whole.

        Raises:
            ValueError: ``filter`` is not a mapping, or an identifier is invalid.

        Runtime complexity: O(log n + k) per namespace listed for k results
        (``config=None``: plus O(T log T) to order the T threads, and their
        namespaces visited), and O(c + w log w) to read each result's c channel
        values and w writes, plus deserializing them. With ``filter``, every
        candidate (every checkpoint of the thread, or of the store with
        ``config=None``) is listed under one hold of the lock and its metadata
        deserialized.
        """
        for view, metadata in self._listed(config, filter, before, limit):
            yield codec.decode_view(self.serde, view, metadata)

    @announcing.announces
    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Per channel, the writes and seed along the checkpoint's parent chain.

        A direct walk of the engine's parent links: each ancestor is visited once
        for all channels.

        Raises:
            ValueError: ``channels`` is a lone string, or holds a name that is not one.

        Runtime complexity: O(a * (r * C + w log w)) for a ancestors walked, r
        channels asked for, C channels per checkpoint and w writes per ancestor
        (``engine.lineage.channel_history``), plus deserializing what is found.
        """
        channels = channel_names(channels)
        if not channels:
            return {}
        return codec.decode_histories(self.serde, self._delta_histories(config, channels))

    # --- writes ----------------------------------------------------------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint; the config's ``checkpoint_id`` is its parent.

        Raises:
            CheckpointCapacityError: A limit would be exceeded; nothing changed.
            ValueError: An identifier or the config is invalid.

        Runtime complexity: O(channels) plus serializing the new values (a new
        checkpoint's uuid6 id sorts last; an older id costs one O(n) memory
        move); plus, when it happens, the eviction or expiry of other threads
        (``engine.Store.put_checkpoint``).
        """
        # announcing.announces by hand, its twin: positional arguments cost half what the generic
        # wrapper's *args and **kwargs do, on every write (tests/saver/test_hot_path_copies.py)
        try:
            return self._put(config, checkpoint, metadata, new_versions)
        finally:
            if self.store.announcements.queue:
                announcing.deliver(self.store.announcements)

    def _put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """``put`` without delivering the threads it dropped: the body ``put`` and ``aput`` share."""
        # locations.locate's fast path, inline: a frame less on every write (tests/saver/test_hot_path_copies.py)
        section = config.get("configurable") if type(config) is dict else None
        if (
            type(section) is dict
            and type(thread_id := section.get("thread_id")) is str
            and type(namespace := section.get("checkpoint_ns", "")) is str
            and ((parent_id := section.get("checkpoint_id")) is None or type(parent_id) is str)
        ):
            parent_id = parent_id or None
        else:
            thread_id, namespace, parent_id = locate(config)
        record, blobs = codec.encode_checkpoint(self.serde, config, checkpoint, metadata, new_versions, parent_id)
        root = root_checkpoint_of(config) if namespace else None  # a subgraph's: for namespace pruning
        # A run's first checkpoint on a dropped thread may be a resume LangGraph started afresh (saver.interrupts):
        # asked only then. The tombstone is read without the lock, as put reads the announcement queue: a resume
        # found no checkpoint, so its thread's tombstone was there before this put, and the engine decides under it.
        resumes = (
            parent_id is None
            and thread_id in self.store.tombstones.records
            and interrupts.resumes_input(checkpoint, metadata)
        )
        try:
            self.store.put_checkpoint(thread_id, namespace, record, blobs, root, resumes)
        except ResumeRefusedError as error:
            raise interrupts.lost(error, log=False) from None
        return {
            "configurable": {"thread_id": thread_id, "checkpoint_ns": namespace, "checkpoint_id": record.checkpoint_id}
        }

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's writes under the config's checkpoint (which may not be stored yet).

        Raises:
            CheckpointCapacityError: A limit would be exceeded; nothing changed.
            ValueError: An identifier or the config is invalid.

        Runtime complexity: O(len(writes)) plus serializing them; plus, when
        they happen, the eviction or expiry of other threads and the pruning of
        a namespace (``engine.Store.put_writes``).
        """
        # announcing.announces by hand, as in put
        try:
            self._put_writes(config, writes, task_id, task_path)
        finally:
            if self.store.announcements.queue:
                announcing.deliver(self.store.announcements)

    def _put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """``put_writes`` without delivering the threads it dropped: the body ``put_writes`` and ``aput_writes``
        share."""
        # locations.locate's fast path, inline: a frame less on every write (tests/saver/test_hot_path_copies.py)
        section = config.get("configurable") if type(config) is dict else None
        if (
            type(section) is dict
            and type(thread_id := section.get("thread_id")) is str
            and type(namespace := section.get("checkpoint_ns", "")) is str
            and ((checkpoint_id := section.get("checkpoint_id")) is None or type(checkpoint_id) is str)
        ):
            checkpoint_id = checkpoint_id or None
        else:
            thread_id, namespace, checkpoint_id = locate(config)
        if checkpoint_id is None:
            raise InvalidArgumentError("put_writes needs config['configurable']['checkpoint_id']")
        records = codec.encode_writes(self.serde, writes, task_id, task_path)
        root = root_checkpoint_of(config) if namespace else None  # a subgraph's: for namespace pruning
        try:
            self.store.put_writes(thread_id, namespace, checkpoint_id, records, root)
        except ResumeRefusedError as error:
            raise interrupts.lost(error, log=True) from None

    def delete_thread(self, thread_id: str) -> None:
        """Delete a thread with all its namespaces, checkpoints, writes and blobs.

        Runtime complexity: O(runs of the thread) plus freeing it; no other
        thread is visited.
        """
        self.store.delete_thread(normalize_id("thread_id", thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints (and their writes) created by these runs.

        Ancestors that a surviving checkpoint needs to rebuild a ``DeltaChannel``
        are kept.

        Runtime complexity: O(size of the threads holding those runs), with a
        factor d * C for d delta channels and C channels per checkpoint
        (``engine.lineage.required_ancestors``); each thread's runs recounted once.
        """
        self.store.delete_runs(normalize_ids("run_ids", run_ids))

    @announcing.announces
    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint, write and blob of a thread, all namespaces, to another.

        The whole parent chain is copied, so ``DeltaChannel`` state rebuilds on
        the target as on the source.

        Raises:
            CheckpointCapacityError: The copy does not fit; nothing changed.

        Runtime complexity: O(s log s) for the s checkpoints of both threads
        (the merged ids are sorted), plus evictions it makes room with.
        """
        source = normalize_id("source_thread_id", source_thread_id)
        target = normalize_id("target_thread_id", target_thread_id)
        self.store.copy_thread(source, target)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest", keep_last: int | None = None) -> None:
        """Prune threads: ``"keep_latest"`` or ``"keep_last"`` checkpoints per namespace, or ``"delete"`` them.

        ``"delete_all"`` (the LangGraph Agent Server's name) is ``"delete"``;
        an empty list of threads does nothing. ``"keep_latest"`` keeps each
        namespace's newest checkpoint, ``"keep_last"`` its newest ``keep_last``;
        either also keeps the pending writes of what it keeps (so an interrupted
        run resumes, and completed tasks are not run again) and every ancestor a
        kept checkpoint needs to rebuild its ``DeltaChannel`` values.

        Raises:
            ValueError: Unknown strategy, ``keep_last`` missing or not a whole
                number of at least 1 (given with another strategy), an invalid
                thread id, or ``thread_ids`` a lone string or not iterable;
                nothing changed.

        Runtime complexity: O(size of the named threads), each thread's runs
        recounted once.
        """
        self.store.prune(normalize_ids("thread_ids", thread_ids), keep_last=kept_per_namespace(strategy, keep_last))

    def get_next_version(self, current: str | int | None, channel: None) -> str:
        """The stock saver's version format: a zero-padded counter and a random suffix.

        The random suffix keeps a fork from an old checkpoint from overwriting
        the other branch's blobs. Runtime complexity: O(1).
        """
        return f"{_version_counter(current) + 1:032}.{random.random():016}"

    # --- async twins ------------------------------------------------------------------------------
    # Engine work is short and bounded, so it runs on the event loop. Serializing
    # or deserializing a large payload does not: above `async_offload_bytes` it
    # moves to a worker thread (see saver.offload for why and how it is measured).
    # Dropped threads are announced without blocking the loop (announcing.announces_async).

    @announcing.announces_async
    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Async ``get_tuple``; deserializes large checkpoints in a worker thread."""
        thread_id, namespace, checkpoint_id = locate(config)
        view = self.store.get(thread_id, namespace, checkpoint_id)
        if view is None:
            if self.config.dropped_thread_quarantine_seconds:
                self._admit_run(config, thread_id, namespace, checkpoint_id)
            return None
        return await self._decode(view)

    @announcing.announces_async
    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Async ``list``; deserializes large checkpoints in a worker thread."""
        for view, metadata in self._listed(config, filter, before, limit):
            yield await self._decode(view, metadata)

    @announcing.announces_async
    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Async ``get_delta_channel_history``."""
        channels = channel_names(channels)
        if not channels:
            return {}
        histories = self._delta_histories(config, channels)
        if codec.history_bytes(histories) > self.config.async_offload_bytes:
            return await asyncio.to_thread(codec.decode_histories, self.serde, histories)
        return codec.decode_histories(self.serde, histories)

    @announcing.announces_async
    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Async ``put``; serializes large new values in a worker thread."""
        values = checkpoint.get("channel_values", {})
        if (
            rough_size(values[channel] for channel in new_versions if channel in values)
            > self.config.async_offload_bytes
        ):
            return await asyncio.to_thread(self._put, config, checkpoint, metadata, new_versions)
        return self._put(config, checkpoint, metadata, new_versions)

    @announcing.announces_async
    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Async ``put_writes``; serializes large writes in a worker thread."""
        pairs = (write[1] for write in writes if isinstance(write, (tuple, list)) and len(write) == 2)
        if rough_size(pairs) > self.config.async_offload_bytes:
            await asyncio.to_thread(self._put_writes, config, writes, task_id, task_path)
        else:
            self._put_writes(config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        """Async ``delete_thread``."""
        self.delete_thread(thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Async ``delete_for_runs``, in a worker thread: it walks whole threads."""
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    @announcing.announces_async
    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Async ``copy_thread``, in a worker thread: it copies a whole thread."""
        await asyncio.to_thread(self._copy_thread, source_thread_id, target_thread_id)

    async def aprune(
        self, thread_ids: Sequence[str], *, strategy: str = "keep_latest", keep_last: int | None = None
    ) -> None:
        """Async ``prune``, in a worker thread: it walks whole threads."""
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy, keep_last=keep_last)

    # The sync bodies the async twins run, without the sync delivery (they deliver asynchronously);
    # put's and put_writes' are methods of their own (_put, _put_writes), their wrappers written by hand.
    _close = announcing.unannounced(close)
    _copy_thread = announcing.unannounced(copy_thread)

    # --- internals ----------------------------------------------------------------------------------

    def _admit_run(self, config: RunnableConfig, thread_id: str, namespace: str, checkpoint_id: str | None) -> None:
        """After a read found nothing, with ``dropped_thread_quarantine_seconds``: a run's first read of a thread
        in quarantine fails there, before any node of the run runs (its first write would be refused anyway,
        but a node could fail first and its error would hide the refusal)."""
        if interrupts.starts_run(config, namespace, checkpoint_id):
            self.store.admit_run(thread_id)

    def _delta_histories(self, config: RunnableConfig, channels: Sequence[str]) -> dict[str, ChannelHistory]:
        thread_id, namespace, checkpoint_id = locate(config)
        return self.store.delta_history(thread_id, namespace, checkpoint_id, list(channels))

    def _list_refs(
        self, config: RunnableConfig | None, *, before: RunnableConfig | None, limit: int | None
    ) -> builtins.list[CheckpointRef]:
        before_id = checkpoint_id_of(configurable(before)) if before else None
        if config is None:
            return self.store.list(None, before=before_id, limit=limit)
        thread_id, _, checkpoint_id = locate(config)
        return self.store.list(
            thread_id,
            namespace_of(configurable(config)),
            checkpoint_id=checkpoint_id,
            before=before_id,
            limit=limit,
        )

    def _listed(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> Iterator[tuple[CheckpointView, CheckpointMetadata | None]]:
        """The views ``list`` and ``alist`` yield, lazily: matched against ``filter``, at most ``limit``.

        Candidates are matched against ``filter`` one by one outside the lock
        (their metadata is deserialized); the matches, or the candidates when
        there is no filter, are read ``LIST_BATCH`` at a time, each batch under
        one hold of the store's lock.
        """
        if filter is not None and not isinstance(filter, Mapping):
            raise InvalidArgumentError(
                f"filter must be a mapping of metadata keys to values, got {type(filter).__name__}"
            )
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
            raise InvalidArgumentError(
                f"limit must be a whole number or None, got {limit!r:.40} ({type(limit).__name__})"
            )
        candidates: Iterator[tuple[CheckpointRef, Any]]
        if config is None and filter:  # every thread: matched in one pass, a batch of threads at a time
            before_id = checkpoint_id_of(configurable(before)) if before else None
            candidates = self.store.select_every_thread(self._selector(filter), before=before_id)
        elif filter:
            candidates = self._matching(iter(self._list_refs(config, before=before, limit=None)), filter)
        else:
            candidates = ((ref, None) for ref in self._list_refs(config, before=before, limit=limit))
        remaining = math.inf if limit is None else limit
        while remaining > 0:
            size = int(min(LIST_BATCH, remaining))
            batch = builtins.list(itertools.islice(candidates, size))
            if not batch:
                return
            for (_, metadata), view in zip(batch, self.store.views(ref for ref, _ in batch), strict=True):
                if view is not None and remaining > 0:
                    remaining -= 1
                    yield view, metadata

    def _matching(
        self, refs: Iterator[CheckpointRef], filter: Mapping[str, Any]
    ) -> Iterator[tuple[CheckpointRef, CheckpointMetadata]]:
        """The listed checkpoints whose metadata matches ``filter``, with that metadata, lazily."""
        select = self._selector(filter)
        for ref in refs:
            metadata = select(ref.record)
            if metadata is not None:
                yield ref, metadata

    def _selector(self, filter: Mapping[str, Any]) -> Callable[[CheckpointRecord], CheckpointMetadata | None]:
        """A checkpoint's metadata if it matches ``filter`` (the stock saver's test: each value equal to the
        metadata's), else None."""
        loads = self.serde.loads_typed
        items = tuple(filter.items())

        def select(record: CheckpointRecord) -> CheckpointMetadata | None:
            metadata: CheckpointMetadata = loads((record.metadata_type, record.metadata_data))
            for key, value in items:
                if not value == metadata.get(key):  # noqa: SIM201 (the stock saver asks ==, not !=)
                    return None
            return metadata

        return select

    async def _decode(self, view: CheckpointView, metadata: CheckpointMetadata | None = None) -> CheckpointTuple:
        if view.nbytes > self.config.async_offload_bytes:
            return await asyncio.to_thread(codec.decode_view, self.serde, view, metadata)
        return codec.decode_view(self.serde, view, metadata)


def kept_per_namespace(strategy: str, keep_last: int | None) -> int | None:
    """How many checkpoints a prune keeps per namespace (None: it deletes the threads), its arguments checked.

    Raises:
        ValueError: Unknown strategy, or ``keep_last`` missing, not a whole number of at least 1, or given
            with a strategy other than ``"keep_last"``.

    Runtime complexity: O(1).
    """
    if strategy not in PRUNE_STRATEGIES:
        raise InvalidArgumentError(f"strategy must be one of {PRUNE_STRATEGIES}, got {strategy!r:.40}")
    if strategy != "keep_last":
        if keep_last is not None:
            raise InvalidArgumentError(f"keep_last goes with strategy='keep_last', not {strategy!r}")
        return 1 if strategy == "keep_latest" else None
    if isinstance(keep_last, bool) or not isinstance(keep_last, int) or keep_last < 1:
        raise InvalidArgumentError(
            f"keep_last must be a whole number of at least 1 with strategy='keep_last', got {keep_last!r:.40}"
        )
    return keep_last


InMemorySaver = BoundedInMemorySaver
"""The same class, under the stock saver's name, for drop-in imports."""
