"""The store: threads in least-recently-used order, limits, eviction and expiry."""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import NamedTuple

from engine import ancestry
from engine.dropped import DroppedThread, DroppedThreads
from engine.errors import CheckpointCapacityError, ThreadEvictedError
from engine.export import NamespaceExport, ThreadExport, checked_namespace
from engine.identifiers import IdentifierCheck
from engine.limits import StoreLimits
from engine.namespace import EMPTY_NAMESPACE, Namespace, Removal
from engine.records import Blob, BlobKey, ChannelHistory, CheckpointRecord, CheckpointView, WriteRecord, tuple_builder
from engine.rolling import plan_rolling
from engine.stats import StoreStats
from engine.thread import Thread
from engine.usage import Usage

logger = logging.getLogger(__name__)

_UNCHECKED = object()

DropHook = Callable[[DroppedThread, ThreadExport], object]
"""Called with why and when a thread was evicted or expired, and everything it held."""


class CheckpointRef(NamedTuple):
    """Where a listed checkpoint lives; ``Store.view`` turns it into a read."""

    thread_id: str
    namespace: str
    record: CheckpointRecord


_new_ref = tuple_builder(CheckpointRef)


class Store:
    """Threads of checkpoints, pending writes and blobs, within ``StoreLimits``.

    Threads sit in an ``OrderedDict`` in least-recently-used order, which is
    also idle order: expiry pops from the front, and so does eviction. Every
    total is kept incrementally, so evicting a whole thread is O(1)
    bookkeeping plus freeing its objects, and ``stats()`` is O(1).

    Every public method takes ``lock`` (re-entrant), so the store may be shared
    by threads. Every operation first removes the threads whose idle time has
    reached ``idle_ttl_seconds``. A rejected operation raises
    ``CheckpointCapacityError`` and changes nothing else: no eviction, no
    partial write, no change of LRU order. A read that finds nothing changes
    nothing.

    Args:
        limits: The bounds to enforce; the reference defaults if omitted.
        clock: Monotonic seconds, injectable for tests of expiry.
        on_drop: Called for each thread evicted or expired, with the reason and a
            complete export of what it held. It runs after the store's lock is
            released, in the thread of the operation that dropped the thread (so
            a slow hook delays that caller only); an exception it raises is
            logged and counted in ``stats().drop_hook_errors``, never propagated.
    """

    def __init__(
        self,
        limits: StoreLimits | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        on_drop: DropHook | None = None,
    ) -> None:
        self.limits = limits if limits is not None else StoreLimits()
        self.clock = clock
        self.lock = threading.RLock()
        self._threads: OrderedDict[str, Thread] = OrderedDict()
        self._runs: dict[str, set[str]] = {}
        self._usage = Usage()
        self._creation = itertools.count()
        self._evicted_for_threads = 0
        self._evicted_for_bytes = 0
        self._expired = 0
        self._pruned_checkpoints = 0
        self._rejections: Counter[str] = Counter()
        self._dropped = DroppedThreads(self.limits.max_dropped_thread_records)
        self._ids = IdentifierCheck(self.limits)
        self.on_drop = on_drop
        self._drops_to_announce: list[tuple[DroppedThread, ThreadExport]] | None = None
        self._drop_hook_errors = 0
        self._snapshot_cache: dict[str, ThreadExport] | None = None  # exports as of the last snapshot
        self._changed: set[str] = set()  # threads changed since then

    # --- reads ---------------------------------------------------------------------

    def get(self, thread_id: str, namespace: str, checkpoint_id: str | None = None) -> CheckpointView | None:
        """Read one checkpoint, the latest of the namespace if no id is given.

        Runtime complexity: O(1) to find it, plus O(channels + w log w) to read
        its c channel values and w writes.
        """
        self._ids.location(thread_id, namespace)
        with self._operation():
            now = self._expire()
            thread, space = self._find(thread_id, namespace)
            if space is None:
                return None
            record = space.latest() if checkpoint_id is None else space.get(checkpoint_id)
            if record is None:
                return None
            self._touch(thread, now)
            return space.view(thread_id, namespace, record)

    def list(
        self,
        thread_id: str | None,
        namespace: str | None = None,
        *,
        checkpoint_id: str | None = None,
        before: str | None = None,
        limit: int | None = None,
    ) -> list[CheckpointRef]:
        """Checkpoints newest first within each namespace.

        Args:
            thread_id: The thread, or None for every thread in creation order.
            namespace: Only this namespace, or None for all of them.
            checkpoint_id: Only the checkpoint with this id.
            before: Only checkpoints whose id sorts below this one.
            limit: At most this many.

        Runtime complexity: O(log n + k) per namespace for k checkpoints
        returned; with ``thread_id=None``, O(T log T) more to order T threads.
        """
        if thread_id is not None:
            self._ids.name("thread_id", thread_id)
        with self._operation():
            now = self._expire()
            if thread_id is None:
                threads = sorted(self._threads.values(), key=lambda t: t.created)
            else:
                found = self._threads.get(thread_id)
                threads = [found] if found is not None else []
            refs = self._collect(threads, namespace, checkpoint_id, before, limit)
            if thread_id is not None and refs:
                self._touch(threads[0], now)
            return refs

    def _collect(
        self,
        threads: Iterable[Thread],
        namespace: str | None,
        checkpoint_id: str | None,
        before: str | None,
        limit: int | None,
    ) -> list[CheckpointRef]:
        refs: list[CheckpointRef] = []
        if limit is not None and limit <= 0:
            return refs
        for thread in threads:
            for name, space in thread.namespaces.items():
                if namespace is not None and name != namespace:
                    continue
                for found_id in self._matching_ids(space, checkpoint_id, before):
                    refs.append(_new_ref((thread.thread_id, name, space.checkpoints[found_id])))
                    if len(refs) == limit:
                        return refs
        return refs

    def views(self, refs: Iterable[CheckpointRef]) -> list[CheckpointView | None]:
        """Read listed checkpoints under one lock: a view each, or None for one removed since it was listed.

        Runtime complexity: O(channels + w log w) per checkpoint.
        """
        views: list[CheckpointView | None] = []
        with self._operation():
            for ref in refs:
                _, space = self._find(ref.thread_id, ref.namespace)
                if space is None or space.get(ref.record.checkpoint_id) is not ref.record:
                    views.append(None)
                else:
                    views.append(space.view(ref.thread_id, ref.namespace, ref.record))
        return views

    def delta_history(
        self,
        thread_id: str,
        namespace: str,
        checkpoint_id: str | None,
        channels: Sequence[str],
    ) -> dict[str, ChannelHistory]:
        """Writes and seed of each channel along a checkpoint's ancestor chain.

        See ``engine.ancestry.delta_history``. Runtime complexity: O(a * (c + w
        log w)) for the a ancestors walked, never more than the thread holds.
        """
        self._ids.location(thread_id, namespace)
        with self._operation():
            now = self._expire()
            thread, space = self._find(thread_id, namespace)
            target = None
            if space is not None:
                target = space.latest() if checkpoint_id is None else space.get(checkpoint_id)
            if target is None:
                return ancestry.delta_history(EMPTY_NAMESPACE, None, channels)
            self._touch(thread, now)
            return ancestry.delta_history(space, target, channels)

    # --- writes ----------------------------------------------------------------------

    def put_checkpoint(
        self,
        thread_id: str,
        namespace: str,
        record: CheckpointRecord,
        new_blobs: Mapping[BlobKey, Blob],
    ) -> None:
        """Store a checkpoint and the channel values that changed with it.

        Over ``max_checkpoints_per_thread`` the checkpoint is rejected, or with
        ``on_checkpoint_limit="prune_oldest"`` the thread's oldest checkpoints
        make room (see ``engine.rolling``); the pruning is planned before
        anything changes, so a put rejected for another limit prunes nothing.

        Raises:
            ValueError: An identifier is invalid.
            CheckpointCapacityError: ``max_namespaces_per_thread``,
                ``max_checkpoints_per_thread``, ``max_checkpoint_bytes`` or
                ``max_total_bytes`` would be exceeded.
            ThreadEvictedError: The parent checkpoint belonged to the thread
                before it was evicted or expired.

        Runtime complexity: O(c) for c channels when the id is the namespace's
        greatest (ids are time-ordered), else one O(n) memory move of its sorted
        ids; plus O(1) per thread evicted; a put that prunes pays O(n) for n
        checkpoints of the thread, once per a tenth of the limit.
        """
        limits = self.limits
        ids = self._ids
        ids.location(thread_id, namespace)
        ids.unique("checkpoint_id", record.checkpoint_id)
        parent_id = record.parent_id
        if parent_id is not None:
            ids.unique("parent checkpoint_id", parent_id)
        ids.blob_keys(new_blobs)
        with self._operation():
            now = self._expire()
            thread = self._threads.get(thread_id)
            space = self._namespace_for_write(thread, thread_id, namespace)
            self._refuse_if_dropped(thread_id, space, parent_id, now)
            rolling: dict[str, Removal] = {}
            if (
                thread is not None
                and thread.usage.checkpoints >= limits.max_checkpoints_per_thread
                and record.checkpoint_id not in space.checkpoints
            ):
                rolling = plan_rolling(limits, thread, namespace, record, new_blobs)
                if not rolling:
                    count = thread.usage.checkpoints + 1
                    self._reject("max_checkpoints_per_thread", limits.max_checkpoints_per_thread, count, thread_id)
            size, change = space.plan_checkpoint(record, new_blobs)
            if size > limits.max_checkpoint_bytes:
                self._reject("max_checkpoint_bytes", limits.max_checkpoint_bytes, size, thread_id)
            freed = sum(removal.freed.nbytes for removal in rolling.values())
            self._make_room(
                change.nbytes - freed, adds_thread=thread is None, keep=(thread,) if thread else (), now=now
            )
            thread = self._use(thread_id, now)
            for name, removal in rolling.items():
                self._remove_checkpoints(thread, name, removal, drop_if_empty=False)
                self._pruned_checkpoints += len(removal.checkpoint_ids)
            replaced = thread.put_checkpoint(namespace, record, new_blobs, change)
            self._usage.add(change)
            if replaced is None or replaced.run_id != record.run_id:
                self._count_run(thread, replaced, -1)
                self._count_run(thread, record, +1)
            self._dropped.forget(thread_id)  # the thread lives again, from this checkpoint

    def put_writes(
        self,
        thread_id: str,
        namespace: str,
        checkpoint_id: str,
        writes: Sequence[WriteRecord],
    ) -> None:
        """Store a task's pending writes under the checkpoint it ran from.

        The checkpoint need not be stored yet. A regular write is kept once per
        ``(task_id, idx)``; a special write (negative ``idx``) replaces.

        Raises:
            ValueError: An identifier is invalid.
            CheckpointCapacityError: ``max_pending_write_bytes``,
                ``max_namespaces_per_thread`` or ``max_total_bytes`` would be
                exceeded.
            ThreadEvictedError: The checkpoint belonged to the thread before it
                was evicted or expired.

        Runtime complexity: O(len(writes)), plus O(1) per thread evicted.
        """
        limits = self.limits
        ids = self._ids
        ids.location(thread_id, namespace)
        ids.unique("checkpoint_id", checkpoint_id)
        batch = 0
        checked_task: object = _UNCHECKED
        for write in writes:
            if write.task_id is not checked_task:
                checked_task = ids.unique("task_id", write.task_id)
            ids.name("channel", write.channel)
            if type(write.task_path) is not str:
                raise ValueError(f"task_path must be a string, got {type(write.task_path).__name__}")
            batch += write.nbytes
        with self._operation():
            now = self._expire()
            if batch > limits.max_pending_write_bytes:
                self._reject("max_pending_write_bytes", limits.max_pending_write_bytes, batch, thread_id)
            if not writes:
                return
            thread = self._threads.get(thread_id)
            space = self._namespace_for_write(thread, thread_id, namespace)
            self._refuse_if_dropped(thread_id, space, checkpoint_id, now)
            accepted, change = space.plan_writes(checkpoint_id, writes)
            self._make_room(change.nbytes, adds_thread=thread is None, keep=(thread,) if thread else (), now=now)
            thread = self._use(thread_id, now)
            thread.put_writes(namespace, checkpoint_id, accepted, change)
            self._usage.add(change)

    def delete_thread(self, thread_id: str) -> bool:
        """Remove a thread whole; return whether it existed.

        Runtime complexity: O(1) bookkeeping plus freeing the thread's objects.
        """
        self._ids.name("thread_id", thread_id)
        with self._operation():
            self._expire()
            self._dropped.forget(thread_id)
            thread = self._threads.get(thread_id)
            if thread is None:
                return False
            self._drop(thread)
            return True

    def delete_runs(self, run_ids: Iterable[str]) -> int:
        """Remove the checkpoints created by these runs, with their writes.

        An ancestor that a surviving checkpoint needs to rebuild a delta channel
        is kept (see ``engine.ancestry.required_ancestors``). Blobs no surviving
        checkpoint references are freed. Returns how many checkpoints went.

        Runtime complexity: O(size of the threads holding those runs); other
        threads are not visited.
        """
        runs = set(run_ids)
        with self._operation():
            self._expire()
            thread_ids = sorted(set().union(*(self._runs.get(run, ()) for run in runs)))
            removed = 0
            for thread_id in thread_ids:
                thread = self._threads[thread_id]
                for name, space in list(thread.namespaces.items()):
                    doomed = {cid for cid, r in space.checkpoints.items() if r.run_id in runs}
                    if not doomed:
                        continue
                    survivors = [r for cid, r in space.checkpoints.items() if cid not in doomed]
                    doomed -= ancestry.required_ancestors(space, survivors)
                    removed += self._remove_checkpoints(thread, name, doomed)
            return removed

    def prune(self, thread_ids: Iterable[str], *, keep_latest: bool) -> None:
        """Keep only the latest checkpoint of each namespace, or delete the threads.

        With ``keep_latest``, the latest checkpoint of each namespace is kept
        with its writes and every ancestor it needs to rebuild a delta channel;
        the rest goes, and so do blobs nothing kept references.

        Runtime complexity: O(size of the named threads).
        """
        ids = [self._ids.name("thread_id", tid) for tid in thread_ids]
        with self._operation():
            self._expire()
            for thread_id in ids:
                thread = self._threads.get(thread_id)
                if thread is None:
                    continue
                if not keep_latest:
                    self._drop(thread)
                    self._dropped.forget(thread_id)
                    continue
                for name, space in list(thread.namespaces.items()):
                    latest = space.latest()
                    if latest is None:
                        continue
                    keep = ancestry.required_ancestors(space, [latest])
                    keep.add(latest.checkpoint_id)
                    self._remove_checkpoints(thread, name, [c for c in space.checkpoints if c not in keep])

    def copy_thread(self, source_id: str, target_id: str) -> None:
        """Copy every namespace, checkpoint, write and blob of one thread into another.

        Records already in the target stay unless the source has the same key,
        which wins. A missing source copies nothing. The target's bytes are
        counted in full even though it shares immutable payloads with the source,
        so that evicting either frees what the accounting says.

        Raises:
            CheckpointCapacityError: The target would exceed a per-thread limit,
                or there is no room for it without evicting the source.

        Runtime complexity: O(size of both threads), plus O(1) per thread evicted.
        """
        self._ids.name("source thread_id", source_id)
        self._ids.name("target thread_id", target_id)
        with self._operation():
            now = self._expire()
            source = self._threads.get(source_id)
            if source is None or source_id == target_id:
                return
            self._install(target_id, source.namespaces, now, keep=[source])
            self._touch(source, now)

    def export_thread(self, thread_id: str) -> ThreadExport | None:
        """Everything a thread holds, still serialized, or None if it is not stored.

        The export shares the store's immutable records; it does not mark the
        thread as used. Runtime complexity: O(size of the thread).
        """
        self._ids.name("thread_id", thread_id)
        with self._operation():
            self._expire()
            thread = self._threads.get(thread_id)
            return None if thread is None else self._export(thread)

    def import_thread(self, export: ThreadExport, thread_id: str | None = None, *, idle_seconds: float = 0.0) -> None:
        """Store an export as a thread (its own id unless ``thread_id`` is given).

        Merges into an existing thread as ``copy_thread`` does, the export's
        records winning. Every identifier and payload is checked first, and the
        limits hold as for any write. ``idle_seconds`` backdates its last use
        (restoring a snapshot keeps threads' ages; the thread goes to the most
        recently used end, so import oldest first).

        Raises:
            ValueError: The export is malformed or holds an invalid identifier.
            CheckpointCapacityError: The thread would exceed a limit; nothing changed.

        Runtime complexity: O(size of the export and of the existing thread).
        """
        if not isinstance(export, ThreadExport):
            raise ValueError(f"export must be a ThreadExport, got {type(export).__name__}")
        target_id = self._ids.name("thread_id", export.thread_id if thread_id is None else thread_id)
        namespaces: dict[str, Namespace] = {}
        largest = 0
        for name, space in export.namespaces.items():
            namespaces[name], size = checked_namespace(name, space, self._ids)
            largest = max(largest, size)
        with self._operation():
            now = self._expire()
            if largest > self.limits.max_checkpoint_bytes:
                self._reject("max_checkpoint_bytes", self.limits.max_checkpoint_bytes, largest, target_id)
            if namespaces:
                self._install(target_id, namespaces, now, keep=[])
                self._threads[target_id].last_used = now - max(0.0, idle_seconds)

    def _install(self, target_id: str, namespaces: Mapping[str, Namespace], now: float, keep: list[Thread]) -> None:
        """Merge namespaces into the thread ``target_id`` (created if absent), within the limits.

        Builds the merged thread aside, decides feasibility, evicts what must go,
        then swaps it in. ``keep`` are threads that must not be evicted for it.
        """
        limits = self.limits
        target = self._threads.get(target_id)
        merged = Thread(target_id, now=now, created=-1)
        if target is not None:
            merged.absorb(target)
            keep = [*keep, target]
        incoming = Thread(target_id, now=now, created=-1)
        incoming.namespaces = dict(namespaces)
        merged.absorb(incoming)
        if len(merged.namespaces) > limits.max_namespaces_per_thread:
            self._reject(
                "max_namespaces_per_thread", limits.max_namespaces_per_thread, len(merged.namespaces), target_id
            )
        if merged.usage.checkpoints > limits.max_checkpoints_per_thread:
            self._reject(
                "max_checkpoints_per_thread", limits.max_checkpoints_per_thread, merged.usage.checkpoints, target_id
            )
        kept_before = target.usage.nbytes if target is not None else 0
        self._make_room(merged.usage.nbytes - kept_before, adds_thread=target is None, keep=keep, now=now)
        if target is not None:
            self._drop(target)
        merged.created = target.created if target is not None else next(self._creation)
        self._threads[target_id] = merged
        self._mark_changed(target_id)
        self._dropped.forget(target_id)
        self._usage.add(merged.usage)
        for run_id in merged.runs:
            self._runs.setdefault(run_id, set()).add(target_id)
        self._touch(merged, now)

    def snapshot(self) -> tuple[list[tuple[ThreadExport, float]], float]:
        """Every thread's export with its idle seconds, least recently used first, and the clock.

        Only threads changed since the previous snapshot are exported under the
        lock (the others' exports are reused: records are immutable), so a
        periodic snapshot holds writers up for a copy of the changed threads,
        not of the store. Runtime complexity: O(T + size of changed threads).
        """
        with self._operation():
            now = self._expire()
            cache = self._snapshot_cache
            if cache is None:
                cache = self._snapshot_cache = {}
                self._changed.update(self._threads)
            for thread_id in self._changed:
                thread = self._threads.get(thread_id)
                if thread is None:
                    cache.pop(thread_id, None)
                else:
                    cache[thread_id] = self._export(thread)
            self._changed.clear()
            return [(cache[tid], now - thread.last_used) for tid, thread in self._threads.items()], now

    def purge_expired(self) -> int:
        """Remove every thread idle for ``idle_ttl_seconds``; return how many.

        Runtime complexity: O(expired threads): they are at the front of the LRU order.
        """
        with self._operation():
            before = self._expired
            self._expire()
            return self._expired - before

    def clear(self) -> None:
        """Remove every thread (not counted as eviction). Runtime complexity: O(1) + freeing."""
        with self._operation():
            for thread_id in self._threads:
                self._mark_changed(thread_id)
            self._threads.clear()
            self._runs.clear()
            self._dropped.clear()
            self._usage = Usage()

    # --- observation ---------------------------------------------------------------------

    def stats(self) -> StoreStats:
        """Counters of the store. Runtime complexity: O(1) (plus the rejection table)."""
        with self._operation():
            usage = self._usage
            return StoreStats(
                threads=len(self._threads),
                namespaces=usage.namespaces,
                checkpoints=usage.checkpoints,
                pending_writes=usage.writes,
                blobs=usage.blobs,
                total_bytes=usage.nbytes,
                max_total_bytes=self.limits.max_total_bytes,
                evicted_threads=self._evicted_for_threads + self._evicted_for_bytes,
                evicted_for_threads=self._evicted_for_threads,
                evicted_for_bytes=self._evicted_for_bytes,
                expired_threads=self._expired,
                pruned_checkpoints=self._pruned_checkpoints,
                dropped_thread_records=len(self._dropped),
                dropped_thread_record_bytes=self._dropped.nbytes,
                drop_hook_errors=self._drop_hook_errors,
                rejections=dict(self._rejections),
            )

    def thread_ids(self) -> list[str]:
        """Thread ids from least to most recently used. Runtime complexity: O(T)."""
        with self._operation():
            return list(self._threads)

    def last_used(self, thread_id: str) -> float | None:
        """The clock reading of the thread's last use, or None if it is not stored.

        Does not mark the thread as used. Runtime complexity: O(1).
        """
        with self._operation():
            thread = self._threads.get(thread_id)
            return None if thread is None else thread.last_used

    def check(self) -> None:
        """Assert every invariant of the store; raise ``AssertionError`` on the first broken one.

        Checks that totals equal a recount at every level, that the LRU index
        equals the thread map and is in idle order, that no thread or namespace
        is empty, that the run index matches the records, that checkpoint and
        write keys match their records, and that the limits hold.

        Runtime complexity: O(size of the store).
        """
        with self._operation():
            limits = self.limits
            total = Usage()
            runs: dict[str, set[str]] = {}
            previous_use = float("-inf")
            for thread_id, thread in self._threads.items():
                _require(thread.thread_id == thread_id, f"LRU key {thread_id!r} holds thread {thread.thread_id!r}")
                _require(thread.last_used >= previous_use, f"thread {thread_id!r} is out of LRU order")
                previous_use = thread.last_used
                _require(bool(thread.namespaces), f"thread {thread_id!r} is empty")
                for name, space in thread.namespaces.items():
                    _check_namespace(thread_id, name, space)
                _require(thread.usage == thread.recount(), f"thread {thread_id!r} totals drift")
                counted = Counter(
                    r.run_id for s in thread.namespaces.values() for r in s.checkpoints.values() if r.run_id is not None
                )
                _require(thread.runs == counted, f"thread {thread_id!r} run counts drift")
                for run_id in counted:
                    runs.setdefault(run_id, set()).add(thread_id)
                _require(
                    len(thread.namespaces) <= limits.max_namespaces_per_thread,
                    f"thread {thread_id!r} exceeds max_namespaces_per_thread",
                )
                _require(
                    thread.usage.checkpoints <= limits.max_checkpoints_per_thread,
                    f"thread {thread_id!r} exceeds max_checkpoints_per_thread",
                )
                total = total + thread.usage
            _require(total == self._usage, f"store totals drift: kept {self._usage}, recounted {total}")
            _require(runs == self._runs, "run index drifts from the records")
            _require(len(self._threads) <= limits.max_threads, "max_threads exceeded")
            _require(len(self._dropped) <= limits.max_dropped_thread_records, "too many dropped-thread records")
            _require(self._dropped.nbytes == self._dropped.recount(), "dropped-thread record bytes drift")
            _require(self._usage.nbytes <= limits.max_total_bytes, "max_total_bytes exceeded")

    # --- internals -------------------------------------------------------------------------

    def _operation(self) -> AbstractContextManager[object]:
        """Hold the lock for one operation, then hand the threads it dropped to ``on_drop``.

        The hook runs after the lock is released, even when the operation
        raised. Without a hook this is the bare lock.
        """
        return self.lock if self.on_drop is None else _Announcing(self)

    def _announce(self, drops: list[tuple[DroppedThread, ThreadExport]]) -> None:
        hook = self.on_drop
        for record, export in drops:
            try:
                hook(record, export)  # type: ignore[misc]
            except Exception:
                logger.exception("on_drop hook failed for thread %r", record.thread_id)
                with self.lock:
                    self._drop_hook_errors += 1

    def _find(self, thread_id: str, namespace: str) -> tuple[Thread | None, Namespace | None]:
        thread = self._threads.get(thread_id)
        if thread is None:
            return None, None
        return thread, thread.namespaces.get(namespace)

    @staticmethod
    def _matching_ids(space: Namespace, checkpoint_id: str | None, before: str | None) -> Iterable[str]:
        if checkpoint_id is None:
            return space.ids_newest_first(before)
        if checkpoint_id in space.checkpoints and (before is None or checkpoint_id < before):
            return (checkpoint_id,)
        return ()

    def _namespace_for_write(self, thread: Thread | None, thread_id: str, namespace: str) -> Namespace:
        """The namespace a write goes to, or an empty stand-in if it must be created.

        Rejects the write if creating it would exceed ``max_namespaces_per_thread``.
        """
        if thread is not None and (space := thread.namespaces.get(namespace)) is not None:
            return space
        count = (len(thread.namespaces) if thread is not None else 0) + 1
        if count > self.limits.max_namespaces_per_thread:
            self._reject("max_namespaces_per_thread", self.limits.max_namespaces_per_thread, count, thread_id)
        return EMPTY_NAMESPACE

    def _make_room(self, growth: int, *, adds_thread: bool, keep: Sequence[Thread], now: float) -> None:
        """Evict least-recently-used threads, never those in ``keep``, so that the
        store can grow by ``growth`` bytes (and one thread if ``adds_thread``).

        Decides feasibility first and rejects without evicting anyone.
        """
        if self._overflow(growth, adds_thread) is None:
            return  # fits as it is (and so do the threads kept)
        limits = self.limits
        kept_bytes = sum(thread.usage.nbytes for thread in keep) + growth
        if kept_bytes > limits.max_total_bytes:
            thread_id = keep[0].thread_id if keep else None
            self._reject("max_total_bytes", limits.max_total_bytes, kept_bytes, thread_id)
        if adds_thread and len(keep) + 1 > limits.max_threads:
            self._reject("max_threads", limits.max_threads, len(keep) + 1, keep[0].thread_id)
        threads = self._threads
        for thread in keep:
            threads.move_to_end(thread.thread_id)
        while (limit := self._overflow(growth, adds_thread)) is not None:
            self._remove_for(next(iter(threads.values())), limit, getattr(limits, limit), now)
            if limit == "max_threads":
                self._evicted_for_threads += 1
            else:
                self._evicted_for_bytes += 1

    def _overflow(self, growth: int, adds_thread: bool) -> str | None:
        """The limit the store would exceed by growing so (thread count first), or None."""
        if adds_thread and len(self._threads) + 1 > self.limits.max_threads:
            return "max_threads"
        if self._usage.nbytes + growth > self.limits.max_total_bytes:
            return "max_total_bytes"
        return None

    def _mark_changed(self, thread_id: str) -> None:
        """Note a changed thread for the next ``snapshot`` (only once snapshots are taken)."""
        if self._snapshot_cache is not None:
            self._changed.add(thread_id)

    def _use(self, thread_id: str, now: float) -> Thread:
        """The thread a write goes to, created if absent, marked most recently used."""
        self._mark_changed(thread_id)
        thread = self._threads.get(thread_id)
        if thread is None:
            thread = self._threads[thread_id] = Thread(thread_id, now=now, created=next(self._creation))
        else:
            self._touch(thread, now)
        return thread

    def _touch(self, thread: Thread | None, now: float) -> None:
        if thread is None:
            return
        if now > thread.last_used:
            thread.last_used = now
        self._threads.move_to_end(thread.thread_id)

    def _expire(self) -> float:
        now = self.clock()
        ttl = self.limits.idle_ttl_seconds
        threads = self._threads
        while threads:
            oldest = next(iter(threads.values()))
            if now - oldest.last_used < ttl:
                break
            self._remove_for(oldest, "idle_ttl_seconds", ttl, now)
            self._expired += 1
        return now

    def _remove_for(self, thread: Thread, limit: str, limit_value: float, now: float) -> None:
        """Evict or expire a thread whole, remembering it so late writes fail loudly."""
        newest = max((s.latest().checkpoint_id for s in thread.namespaces.values() if s.checkpoints), default=None)
        record = DroppedThread(thread.thread_id, limit, limit_value, now, newest)
        self._dropped.remember(record)
        if self.on_drop is not None and self._drops_to_announce is not None:
            self._drops_to_announce.append((record, self._export(thread)))
        self._drop(thread)

    @staticmethod
    def _export(thread: Thread) -> ThreadExport:
        return ThreadExport(
            thread.thread_id, {name: NamespaceExport.of(space) for name, space in thread.namespaces.items()}
        )

    def _refuse_if_dropped(self, thread_id: str, space: Namespace, continues: str | None, now: float) -> None:
        """Refuse a write that continues a checkpoint of a thread since evicted or expired."""
        record = self._dropped.get(thread_id)
        if record is None or not record.continued_by(continues) or continues in space.checkpoints:
            return
        self._rejections[record.limit] += 1
        raise ThreadEvictedError(
            record.limit,
            record.limit_value,
            thread_id=thread_id,
            checkpoint_id=continues or "",
            seconds_ago=now - record.dropped_at,
        )

    def _drop(self, thread: Thread) -> None:
        self._mark_changed(thread.thread_id)
        del self._threads[thread.thread_id]
        self._usage.subtract(thread.usage)
        for run_id in thread.runs:
            self._unindex_run(run_id, thread.thread_id)

    def _remove_checkpoints(
        self, thread: Thread, namespace: str, removal: Iterable[str] | Removal, *, drop_if_empty: bool = True
    ) -> int:
        """Remove checkpoints (ids, or a planned ``Removal``) from a namespace of a thread.

        A thread left empty is dropped, unless the caller is about to write to it.
        """
        self._mark_changed(thread.thread_id)
        if not isinstance(removal, Removal):
            removal = thread.namespaces[namespace].plan_removal(removal)
        removed = thread.remove(namespace, removal)
        self._usage.subtract(removal.freed)
        for record in removed:
            self._count_run(thread, record, -1)
        if drop_if_empty and not thread.namespaces:
            self._drop(thread)
        return len(removed)

    def _count_run(self, thread: Thread, record: CheckpointRecord | None, delta: int) -> None:
        run_id = thread.count_run(record, delta)
        if run_id is None:
            return
        if run_id in thread.runs:
            self._runs.setdefault(run_id, set()).add(thread.thread_id)
        else:
            self._unindex_run(run_id, thread.thread_id)

    def _unindex_run(self, run_id: str, thread_id: str) -> None:
        holders = self._runs.get(run_id)
        if holders is not None:
            holders.discard(thread_id)
            if not holders:
                del self._runs[run_id]

    def _reject(self, limit: str, limit_value: float, needed: float, thread_id: str | None) -> None:
        self._rejections[limit] += 1
        raise CheckpointCapacityError(limit, limit_value, needed, thread_id=thread_id)


class _Announcing:
    """The store's lock, plus announcing the threads dropped meanwhile once it is released."""

    __slots__ = ("outermost", "store")

    def __init__(self, store: Store) -> None:
        self.store = store
        self.outermost = False

    def __enter__(self) -> None:
        store = self.store
        store.lock.acquire()
        self.outermost = store._drops_to_announce is None
        if self.outermost:
            store._drops_to_announce = []

    def __exit__(self, *exc_info: object) -> None:
        store = self.store
        drops = None
        if self.outermost:
            drops, store._drops_to_announce = store._drops_to_announce, None
        store.lock.release()
        if drops:
            store._announce(drops)


def _check_namespace(thread_id: str, name: str, space: Namespace) -> None:
    where = f"thread {thread_id!r} namespace {name!r}"
    _require(not space.is_empty(), f"{where} is empty")
    try:
        space.check()
    except AssertionError as error:
        raise AssertionError(f"{where}: {error}") from None


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)
