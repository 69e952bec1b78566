"""The store: the lock, threads in least-recently-used order, the totals, and the public transactions.

Each write is one straight-line transaction: identifiers, byte planning, limits,
LRU order and totals are handled inline. Rare work lives in modules of its own
and is reached through one cheap test on the way:

* ``now >= next_expiry``: ``policy.expire``;
* a new thread or namespace: ``policy.admit_location``;
* a tombstone for the thread: ``policy.refuse_continuation``;
* a thread at ``max_namespaces_per_thread`` or ``max_checkpoints_per_thread``:
  ``policy.plan_namespaces``, ``policy.plan_rolling`` (prune or reject);
* over a byte or thread limit: ``policy.make_room`` (evict, or reject);
* snapshots taken: ``changed.add``.

Cold operations (deletions by run, prune, copies, imports, snapshots, the
invariant check) live in ``engine.lineage``, ``engine.moves`` and
``engine.check``.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping, Sequence

from . import check, identifiers, lineage, memory, moves, policy, reads
from .export import ThreadExport
from .hooks import Announcements, DropHook
from .limits import StoreLimits
from .namespace import EMPTY_NAMESPACE, Namespace
from .records import Blob, BlobKey, CheckpointRecord, CheckpointView, WriteRecord
from .stats import StoreStats
from .thread import Thread
from .tombstones import Tombstones

_MISSING = object()


class Store:
    """Threads of checkpoints, pending writes and blobs, within ``StoreLimits``.

    Threads sit in an ``OrderedDict`` in least-recently-used order, which is
    also idle order: expiry (``policy.expire``) and eviction (``policy.make_room``)
    both take from the front. Totals are kept incrementally, so ``stats()`` is O(1)
    but for one entry per limit that rejected something. Every public method
    holds ``lock`` (re-entrant). A rejected operation raises
    ``CheckpointCapacityError`` and changes nothing but lazy expiry: no eviction,
    no partial write, no change of LRU order. Threads evicted or expired are
    queued in ``announcements`` for ``on_drop``; the caller delivers them once
    the lock is released (``announce()``, or the saver's async-aware delivery).

    Costs: ``get``, ``list``, ``views``, ``delta_history``, ``export_thread``,
    the writes, ``copy_thread`` and ``import_thread`` first expire when
    ``next_expiry`` has passed (``policy.expire``: at most ``EXPIRY_BUDGET`` + 1
    idle threads, each O(namespaces + runs), plus its export when a hook is
    set). The runtime complexity each method states leaves that out.

    The attributes set in ``__init__`` are engine-internal state, read and
    changed under ``lock`` by the engine's modules.

    Args:
        limits: The bounds to enforce; the reference defaults if omitted.
        clock: Monotonic seconds, injectable for tests of expiry.
        on_drop: Called with why and when each thread was evicted or expired,
            and a complete export of what it held.
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
        self.threads: OrderedDict[str, Thread] = OrderedDict()  # least recently used first
        self.runs: dict[str, set[str]] = {}  # run id -> ids of the threads holding its checkpoints
        # totals: payload bytes, counts, and the varying part of the heap estimate (engine.memory)
        self.nbytes = self.checkpoints = self.writes = self.blobs = self.namespaces = self.extra = 0
        self.memory_limited = self.limits.max_memory_bytes != math.inf
        self.next_expiry = math.inf  # never later than the least recently used thread's expiry
        self.creation = itertools.count()  # thread creation order, for list(None)
        self.evicted_for_threads = self.evicted_for_bytes = self.evicted_for_memory = 0
        self.expired = self.pruned_checkpoints = self.pruned_namespaces = 0
        self.rejections: Counter[str] = Counter()
        self.tombstones = Tombstones(self.limits.max_dropped_thread_records)
        self.announcements = Announcements(on_drop)
        self.changed: set[str] | None = None  # threads changed since the last snapshot (None: none taken)
        self.exports: dict[str, ThreadExport] | None = None  # each thread's export at the last snapshot
        self.known_channels: set[str] = set()  # channel names already checked (identifiers.KNOWN_CHANNELS)

    @property
    def on_drop(self) -> DropHook | None:
        """The hook told of every thread evicted or expired."""
        return self.announcements.hook

    # --- reads -----------------------------------------------------------------------------

    def get(self, thread_id: str, namespace: str, checkpoint_id: str | None = None) -> CheckpointView | None:
        """Read one checkpoint, the latest of the namespace if no id is given.

        Marks the thread as used when it finds something.

        Raises:
            ValueError: An identifier that is not stored is also invalid.

        Runtime complexity: O(1) to find it, plus O(c + w log w) to read its c
        channel values and w writes; plus expiry when due (see the class).
        """
        lock = self.lock
        lock.acquire()  # not `with`: half the cost, on the path of every read of a graph's state
        try:
            now = self.clock()
            if now >= self.next_expiry:
                policy.expire(self, now, thread_id)
            thread = self.threads.get(thread_id)
            space = None if thread is None else thread.namespaces.get(namespace)
            record = None
            if space is not None:
                if checkpoint_id is None:
                    ids = space.ids
                    record = space.records[ids[-1]] if ids else None
                else:
                    record = space.records.get(checkpoint_id)
            if record is None:
                identifiers.check_location(thread_id, namespace, checkpoint_id, self.limits)
                return None
            thread.last_used = now  # type: ignore[union-attr]
            self.threads.move_to_end(thread_id)
            return space.view(thread_id, namespace, record)  # type: ignore[union-attr]
        finally:
            lock.release()

    # --- writes ------------------------------------------------------------------------------

    def put_checkpoint(
        self, thread_id: str, namespace: str, record: CheckpointRecord, new_blobs: Mapping[BlobKey, Blob]
    ) -> None:
        """Store a checkpoint and the channel values that changed with it.

        Over ``max_checkpoints_per_thread`` the checkpoint is rejected, or with
        ``on_checkpoint_limit="prune_oldest"`` the thread's oldest checkpoints
        make room (``policy.plan_rolling``); the pruning is planned before
        anything changes, so a put rejected for another limit prunes nothing.

        Raises:
            ValueError: A new identifier is invalid.
            CheckpointCapacityError: ``max_namespaces_per_thread``,
                ``max_checkpoints_per_thread``, ``max_checkpoint_bytes``,
                ``max_total_bytes``, ``max_threads`` or ``max_memory_bytes``
                would be exceeded.
            ThreadEvictedError: The parent checkpoint belonged to the thread
                before it was evicted or expired.

        Runtime complexity: O(c) for a checkpoint of c channels whose id sorts
        last in its namespace (ids are time-ordered), else one O(n) memory move.
        Plus, when they happen: O(namespaces + runs) per thread evicted or
        expired (and its export, with a hook); under rolling history, about
        O(n log n) for the n checkpoints of the thread once per a tenth of the
        limit (``policy.plan_rolling`` states the exact bound); the size of a namespace pruned whole
        (``policy.plan_namespaces``); O(n) to recount the thread's runs when a
        re-put changes a checkpoint's run.
        """
        checkpoint_id, parent_id, _, checkpoint_data, _, metadata_data, versions, run_id, _ = record
        limits = self.limits
        max_length = limits.max_identifier_length
        pruning = None  # what the write prunes from its own thread, planned before anything changes
        revived = False
        lock = self.lock
        lock.acquire()  # not `with`: half the cost, on the path every step of every graph takes
        try:
            now = self.clock()
            if now >= self.next_expiry:
                policy.expire(self, now, thread_id)
            threads = self.threads
            thread = threads.get(thread_id)
            space = None if thread is None else thread.namespaces.get(namespace)
            target = space
            if target is None:
                pruning = policy.admit_location(self, thread, thread_id, namespace)
                target = EMPTY_NAMESPACE
            if self.tombstones.records and thread_id in self.tombstones.records:
                revived = policy.refuse_continuation(self, thread_id, target, parent_id, now)
            records = target.records
            blobs = target.blobs
            replaced = records.get(checkpoint_id)
            known_channels = self.known_channels
            # The record's channel versions outlive this call: channels checked once (remembered), every
            # version of an allowed type; one C pass each, the precise error from the slow path.
            half = len(versions) >> 1
            if not known_channels.issuperset(versions[:half]) or not _VERSION_TYPES.issuperset(
                map(type, versions[half:])
            ):
                identifiers.check_versions(self, versions)
            if replaced is None:
                if (
                    type(checkpoint_id) is not str
                    or not 0 < len(checkpoint_id) <= max_length
                    or not checkpoint_id.isprintable()
                ):
                    identifiers.refuse("checkpoint_id", checkpoint_id, limits)
                if thread is not None and thread.checkpoints >= limits.max_checkpoints_per_thread:
                    pruning = policy.plan_rolling(self, thread, namespace, record, new_blobs, pruning)
            if (
                parent_id is not None
                and parent_id not in records
                and (type(parent_id) is not str or not 0 < len(parent_id) <= max_length or not parent_id.isprintable())
            ):
                identifiers.refuse("parent checkpoint_id", parent_id, limits)
            record_bytes = len(checkpoint_data) + len(metadata_data)
            new_bytes = old_bytes = replaced_blobs = 0
            # the heap estimate's varying part (engine.memory): the record's id and version slots
            extra = _SLOT * len(versions) + (
                len(checkpoint_id) if replaced is None else -_SLOT * len(replaced.versions)
            )
            for key, blob in new_blobs.items():
                old = blobs.get(key, _MISSING)
                if old is _MISSING:  # a new key of the store: checked here, once
                    channel, version = key
                    if channel not in known_channels:
                        identifiers.admit_channel(self, channel)
                    if type(version) is str:
                        size = len(version)
                        if not 0 < size <= max_length or not version.isprintable():
                            identifiers.check_version(channel, version, limits)
                        extra += _TEXT + size
                    elif type(version) is not int and type(version) is not float:
                        identifiers.check_version(channel, version, limits)
                else:
                    replaced_blobs += 1
                    if old is not None:
                        old_bytes += len(old[1])  # type: ignore[index]
                        extra -= _VALUE
                if blob is not None:
                    new_bytes += len(blob[1])
                    extra += _VALUE
            growth = record_bytes + new_bytes - old_bytes
            if replaced is not None:
                growth -= len(replaced.checkpoint_data) + len(replaced.metadata_data)
            # The whole state read back is at most the record, its new values and all the thread
            # holds: only when that bound breaks max_checkpoint_bytes is the exact state summed.
            if record_bytes + new_bytes + (0 if thread is None else thread.nbytes) > limits.max_checkpoint_bytes:
                state = target.state_size(record, new_blobs)
                if state > limits.max_checkpoint_bytes:
                    policy.reject(self, "max_checkpoint_bytes", limits.max_checkpoint_bytes, state, thread_id)
            if space is None:
                extra += len(namespace)
            net = growth if pruning is None else growth - pruning.freed.nbytes
            if (
                self.nbytes + net > limits.max_total_bytes
                or (thread is None and len(threads) >= limits.max_threads)
                or self.memory_limited
            ):
                run_cost = 0  # a run new to the thread adds to the run index (lineage.index_run counts it)
                if run_id is not None and (thread is None or run_id not in thread.runs):
                    run_cost = memory.RUN + len(run_id)
                footprint = memory.change(
                    net, extra + run_cost, pruning, checkpoints=replaced is None,
                    blobs=len(new_blobs) - replaced_blobs, namespaces=space is None,
                    thread_id=thread_id if thread is None else None,
                )  # fmt: skip
                policy.make_room(
                    self, net, footprint, (thread,) if thread is not None else (), thread_id, now, thread is None
                )
            # --- every check passed: apply --------------------------------------------------------
            if thread is None:
                thread = self.new_thread(thread_id, now)
            else:
                thread.last_used = now
                threads.move_to_end(thread_id)
                if pruning is not None:
                    policy.carry_out(self, thread, pruning)
                    if space is not None and namespace not in thread.namespaces:  # pruning emptied it: anew
                        space = None
                        extra += len(namespace)
            if space is None:
                space = thread.namespaces[namespace] = Namespace()
                self.namespaces += 1
            if new_blobs:
                space.blobs.update(new_blobs)
            space.records[checkpoint_id] = record
            thread.nbytes += growth
            self.nbytes += growth
            thread.extra += extra
            self.extra += extra
            added_blobs = len(new_blobs) - replaced_blobs
            if added_blobs:
                thread.blobs += added_blobs
                self.blobs += added_blobs
            if replaced is None:
                ids = space.ids
                if not ids or checkpoint_id > ids[-1]:
                    ids.append(checkpoint_id)
                else:
                    space.place_id(checkpoint_id)
                thread.checkpoints += 1
                self.checkpoints += 1
                if run_id is not None and run_id not in thread.runs:
                    lineage.index_run(self, thread, run_id)
            elif replaced.run_id != run_id:
                lineage.reindex_runs(self, thread)
            if revived:
                self.tombstones.forget(thread_id)  # the thread lives again, from this checkpoint
            if self.changed is not None:
                self.changed.add(thread_id)
        finally:
            lock.release()

    def put_writes(self, thread_id: str, namespace: str, checkpoint_id: str, writes: Sequence[WriteRecord]) -> None:
        """Store a task's pending writes under the checkpoint it ran from.

        The checkpoint need not be stored yet. In order, a regular write is
        kept only if its ``(task_id, idx)`` is not stored yet; a special write
        (negative ``idx``) replaces.

        Raises:
            ValueError: A new identifier is invalid, or a task path is not a string.
            CheckpointCapacityError: ``max_pending_write_bytes``,
                ``max_namespaces_per_thread``, ``max_total_bytes``,
                ``max_threads`` or ``max_memory_bytes`` would be exceeded.
            ThreadEvictedError: The checkpoint belonged to the thread before it
                was evicted or expired.

        Runtime complexity: O(len(writes)). Plus, when they happen: O(namespaces
        + runs) per thread evicted or expired (and its export, with a hook); the
        size of a namespace pruned whole (``policy.plan_namespaces``) and O(n) for
        the thread's n checkpoints to recount its runs then.
        """
        limits = self.limits
        max_length = limits.max_identifier_length
        lock = self.lock
        lock.acquire()  # not `with`: half the cost, on the path every task of every graph takes
        try:
            now = self.clock()
            if now >= self.next_expiry:
                policy.expire(self, now, thread_id)
            threads = self.threads
            thread = threads.get(thread_id)
            space = None if thread is None else thread.namespaces.get(namespace)
            target = space
            pruning = None  # namespaces the write prunes from its own thread, planned before anything changes
            if target is None:
                pruning = policy.admit_location(self, thread, thread_id, namespace)
                target = EMPTY_NAMESPACE
            if self.tombstones.records and thread_id in self.tombstones.records:
                policy.refuse_continuation(self, thread_id, target, checkpoint_id, now)
            stored = target.writes.get(checkpoint_id)
            if (
                stored is None
                and checkpoint_id not in target.records
                and (
                    type(checkpoint_id) is not str
                    or not 0 < len(checkpoint_id) <= max_length
                    or not checkpoint_id.isprintable()
                )
            ):
                identifiers.refuse("checkpoint_id", checkpoint_id, limits)
            accepted: dict[tuple[str, int], WriteRecord] = {}
            batch = growth = added = 0
            extra = 0  # the heap estimate's varying part (engine.memory)
            last_task = None if stored is None else next(reversed(stored))[0]  # whose strings a new write shares
            checked_task: object = _MISSING
            checked_path: object = _MISSING
            known_channels = self.known_channels
            for write in writes:
                task_id, idx, channel, _, value_data, task_path = write
                if task_id is not checked_task:
                    if type(task_id) is not str or not 0 < len(task_id) <= max_length or not task_id.isprintable():
                        identifiers.refuse("task_id", task_id, limits)
                    checked_task = task_id
                if task_path is not checked_path:
                    if type(task_path) is not str:
                        raise ValueError(f"task_path must be a string, got {type(task_path).__name__}")
                    path_text = len(task_path)
                    checked_path = task_path
                if channel not in known_channels:
                    identifiers.admit_channel(self, channel)
                size = len(value_data) + path_text  # pyright: ignore[reportPossiblyUnboundVariable]  # set by the first write
                batch += size
                key = (task_id, idx)
                if key in accepted or (stored is not None and key in stored):
                    if idx >= 0:
                        continue  # a regular write is kept once
                    old = accepted.get(key) or stored[key]  # type: ignore[index]
                    growth -= len(old.value_data) + len(old.task_path)
                    added -= 1  # it replaces a write of this batch or a stored one, in place
                elif task_id != last_task:  # a new run of one task's writes: its id and path strings
                    extra += _TASK + len(task_id)
                    last_task = task_id
                accepted[key] = write
                growth += size
                added += 1
            if batch > limits.max_pending_write_bytes:
                policy.reject(self, "max_pending_write_bytes", limits.max_pending_write_bytes, batch, thread_id)
            if not accepted:
                if thread is not None:  # every write was already stored: still a use of the thread
                    thread.last_used = now
                    threads.move_to_end(thread_id)
                return
            if stored is None:
                extra += _WRITE_SET
            if space is None:
                extra += len(namespace)
            net = growth if pruning is None else growth - pruning.freed.nbytes
            if (
                self.nbytes + net > limits.max_total_bytes
                or (thread is None and len(threads) >= limits.max_threads)
                or self.memory_limited
            ):
                footprint = memory.change(
                    net, extra, pruning, writes=added, namespaces=space is None,
                    thread_id=thread_id if thread is None else None,
                )  # fmt: skip
                policy.make_room(
                    self, net, footprint, (thread,) if thread is not None else (), thread_id, now, thread is None
                )
            # --- every check passed: apply --------------------------------------------------------
            if thread is None:
                thread = self.new_thread(thread_id, now)
            else:
                thread.last_used = now
                threads.move_to_end(thread_id)
                if pruning is not None:
                    policy.carry_out(self, thread, pruning)
            if space is None:
                space = thread.namespaces[namespace] = Namespace()
                self.namespaces += 1
            if stored is None:
                space.writes[checkpoint_id] = accepted
            else:
                stored.update(accepted)
            thread.writes += added
            self.writes += added
            thread.nbytes += growth
            self.nbytes += growth
            thread.extra += extra
            self.extra += extra
            if self.changed is not None:
                self.changed.add(thread_id)
        finally:
            lock.release()

    def new_thread(self, thread_id: str, now: float) -> Thread:
        """Create a thread at the most recently used end. Runtime complexity: O(1)."""
        thread = self.threads[thread_id] = Thread(thread_id, now, next(self.creation))
        self.extra += thread.extra
        self.next_expiry = min(self.next_expiry, now + self.limits.idle_ttl_seconds)
        return thread

    # --- deletions, copies and moves -------------------------------------------------------------

    def delete_thread(self, thread_id: str) -> bool:
        """Remove a thread whole, and its tombstone; return whether it was stored.

        Runtime complexity: O(runs of the thread) plus freeing its objects; no
        other thread is visited.
        """
        with self.lock:
            self.tombstones.forget(thread_id)
            thread = self.threads.get(thread_id)
            if thread is None:
                identifiers.check_identifier("thread_id", thread_id, self.limits)
                return False
            self.unlink(thread)
            return True

    def clear(self) -> None:
        """Remove every thread and tombstone (not counted as eviction).

        Runtime complexity: O(1) bookkeeping plus freeing everything.
        """
        with self.lock:
            self.threads = OrderedDict()
            self.runs = {}
            self.nbytes = self.checkpoints = self.writes = self.blobs = self.namespaces = self.extra = 0
            self.next_expiry = math.inf
            self.tombstones.clear()
            if self.exports is not None:
                self.exports, self.changed = {}, set()  # the next snapshot holds no thread

    # --- observation -------------------------------------------------------------------------------

    def stats(self) -> StoreStats:
        """Counters of the store. Runtime complexity: O(L) for L distinct limits that rejected something."""
        with self.lock:
            return StoreStats(
                threads=len(self.threads),
                namespaces=self.namespaces,
                checkpoints=self.checkpoints,
                pending_writes=self.writes,
                blobs=self.blobs,
                total_bytes=self.nbytes,
                max_total_bytes=self.limits.max_total_bytes,
                memory_bytes=memory.of_store(self),
                max_memory_bytes=self.limits.max_memory_bytes,
                evicted_threads=self.evicted_for_threads + self.evicted_for_bytes + self.evicted_for_memory,
                evicted_for_threads=self.evicted_for_threads,
                evicted_for_bytes=self.evicted_for_bytes,
                evicted_for_memory=self.evicted_for_memory,
                expired_threads=self.expired,
                pruned_checkpoints=self.pruned_checkpoints,
                pruned_namespaces=self.pruned_namespaces,
                dropped_thread_records=len(self.tombstones),
                dropped_thread_record_bytes=self.tombstones.nbytes,
                drop_hook_errors=self.announcements.errors,
                rejections=dict(self.rejections),
            )

    def thread_ids(self) -> list[str]:
        """Thread ids from least to most recently used (expired ones not yet removed included).

        Runtime complexity: O(T).
        """
        with self.lock:
            return list(self.threads)

    def last_used(self, thread_id: str) -> float | None:
        """The clock reading of the thread's last use, or None if it is not stored.

        Does not mark the thread as used. Runtime complexity: O(1).
        """
        with self.lock:
            thread = self.threads.get(thread_id)
            return None if thread is None else thread.last_used

    def announce(self) -> None:
        """Hand the threads dropped so far to ``on_drop``, in drop order (``Announcements.deliver``).

        Call it after operations, outside the lock. Runtime complexity: the hook's, per thread.
        """
        self.announcements.deliver()

    def check(self) -> None:
        """Assert every invariant of the store (``engine.check``); ``AssertionError`` names the first broken one.

        Runtime complexity: O(size of the store).
        """
        with self.lock:
            check.check_store(self)

    # --- the cold transactions: each lives in the module of its job, bound here as a method ---------------

    list = reads.list_checkpoints
    views = reads.views
    delta_history = reads.delta_history
    delete_runs = lineage.delete_runs
    prune = lineage.prune
    copy_thread = moves.copy_thread
    export_thread = moves.export_thread
    import_thread = moves.import_thread
    snapshot = moves.snapshot
    purge_expired = policy.purge_expired

    # --- the one mutation every removal goes through ---------------------------------------------------

    def unlink(self, thread: Thread) -> None:
        """Take a whole thread out of the store and its totals and run index.

        Runtime complexity: O(runs of the thread); freeing its objects follows.
        """
        thread_id = thread.thread_id
        del self.threads[thread_id]
        self.nbytes -= thread.nbytes
        self.checkpoints -= thread.checkpoints
        self.writes -= thread.writes
        self.blobs -= thread.blobs
        self.namespaces -= len(thread.namespaces)
        self.extra -= thread.extra
        for run_id in thread.runs:
            lineage.unindex_run(self, run_id, thread_id)
        if self.changed is not None:
            self.changed.add(thread_id)


_SLOT, _TEXT, _VALUE, _WRITE_SET, _TASK = memory.LIST_SLOT, memory.STR, memory.VALUE, memory.WRITE_SET, memory.TASK
_VERSION_TYPES = frozenset((str, int, float))
