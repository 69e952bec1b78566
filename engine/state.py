"""The store's state: its fields, and the primitives that change several of them at once.

``State`` owns every field of the store. Its primitives keep them in step:
linking and unlinking a thread, applying or releasing a ``Totals`` at thread and
store level, carrying out a planned removal or pruning, the run index, and
marking a thread changed for the next snapshot. The cold operations
(``engine.reads``, ``moves``, ``removal``, ``eviction``, ``check``) take a
``State`` and change it only through these primitives and the containers they
own; the two write transactions in ``engine.store`` inline copies of
``apply`` and ``mark_changed``, each marked as such.

Everything here runs with the store's lock held: ``engine.store.Store`` builds on
``State``, adds the lock, and is the only module that takes it.
"""

from __future__ import annotations

import itertools
import math
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable

from . import memory
from .export import ThreadExport
from .hooks import Announcements, DropHook
from .limits import StoreLimits
from .plans import Pruning, Removal
from .stats import StoreStats
from .thread import Thread
from .tombstones import DroppedThread, ParkedWrites, RefusedCheckpoint, Tombstones
from .totals import Totals

__all__ = ["State"]


class State:
    """Threads in least-recently-used order, their totals, indexes and the memory of dropped threads.

    Attributes:
        limits: The bounds to enforce.
        clock: Monotonic seconds.
        wall_clock: Seconds since the epoch, for the dates people read (``DroppedThread.dropped_at_wall``).
        threads: Thread id to thread, least recently used first (also least
            recently used by the clock: LRU order is idle order).
        runs: Run id to the ids of the threads holding its checkpoints.
        nbytes, checkpoints, writes, blobs, namespaces, variable_overhead: The
            totals over every thread (``Totals``).
        memory_limited: Whether ``max_memory_bytes`` is set.
        next_expiry: Never later than the least recently used thread's expiry.
        creation: Thread creation order, for ``list(None)``.
        evicted_for_threads, evicted_for_bytes, evicted_for_memory, expired,
            pruned_checkpoints, pruned_namespaces: What the limits did.
        rejections: Rejected operations by limit name.
        tombstones: Threads evicted or expired, remembered for their late writes.
        refusals: Checkpoints whose put was refused, remembered for their late writes.
        parked: Pending writes waiting for a checkpoint that would start a
            namespace of a dropped thread (``engine.tombstones``).
        announcements: Dropped threads waiting for the ``on_drop`` hook.
        changed: Stored threads changed since the last snapshot (None: none taken).
        exports: Each stored thread's export at the last snapshot (None: none taken).
        known_channels: Channel names already checked (``identifiers.KNOWN_CHANNELS``).
        answer_channels: Channels whose pending writes answer what a thread's state waits for: such a
            write for a dropped thread that holds nothing is refused (``eviction.refuse_dropped``).
    """

    def __init__(
        self,
        limits: StoreLimits | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        on_drop: DropHook | None = None,
        wall_clock: Callable[[], float] = time.time,
        answer_channels: Iterable[str] = (),
    ) -> None:
        self.limits = limits if limits is not None else StoreLimits()
        self.clock = clock
        self.wall_clock = wall_clock
        self.threads: OrderedDict[str, Thread] = OrderedDict()
        self.runs: dict[str, set[str]] = {}
        self.nbytes = self.checkpoints = self.writes = self.blobs = self.namespaces = self.variable_overhead = 0
        self.memory_limited = self.limits.max_memory_bytes != math.inf
        self.next_expiry = math.inf
        self.creation = itertools.count()
        self.evicted_for_threads = self.evicted_for_bytes = self.evicted_for_memory = 0
        self.expired = self.pruned_checkpoints = self.pruned_namespaces = 0
        self.rejections: Counter[str] = Counter()
        self.tombstones: Tombstones[DroppedThread] = Tombstones(self.limits.max_dropped_thread_records)
        self.refusals: Tombstones[RefusedCheckpoint] = Tombstones(self.limits.max_dropped_thread_records)
        self.parked: Tombstones[ParkedWrites] = Tombstones(self.limits.max_dropped_thread_records)
        self.announcements = Announcements(on_drop)
        self.changed: set[str] | None = None
        self.exports: dict[str, ThreadExport] | None = None
        self.known_channels: set[str] = set()
        self.answer_channels = frozenset(answer_channels)

    # --- threads in and out ----------------------------------------------------------------------

    def new_thread(self, thread_id: str, now: float) -> Thread:
        """Create an empty thread at the most recently used end. Runtime complexity: O(1), or O(length) of a
        non-ASCII id (``memory.text``)."""
        thread = self.threads[thread_id] = Thread(thread_id, now, next(self.creation))
        if not thread_id.isascii():  # a Thread counts a byte per character of its id: memory.text counts the rest
            thread.variable_overhead = memory.text(thread_id)
        self.variable_overhead += thread.variable_overhead
        self.next_expiry = min(self.next_expiry, now + self.limits.idle_ttl_seconds)
        return thread

    def link(self, thread: Thread) -> None:
        """Add a thread built aside, with its totals and runs, at the most recently used end.

        Runtime complexity: O(runs of the thread).
        """
        thread_id = thread.thread_id
        self.threads[thread_id] = thread
        self.nbytes += thread.nbytes
        self.checkpoints += thread.checkpoints
        self.writes += thread.writes
        self.blobs += thread.blobs
        self.namespaces += len(thread.namespaces)
        self.variable_overhead += thread.variable_overhead
        for run_id in thread.runs:
            self.runs.setdefault(run_id, set()).add(thread_id)
        self.next_expiry = min(self.next_expiry, thread.last_used + self.limits.idle_ttl_seconds)
        self.mark_changed(thread_id)

    def unlink(self, thread: Thread) -> None:
        """Take a whole thread out of the store, its totals and the run index.

        Runtime complexity: O(runs of the thread); freeing its objects follows.
        """
        thread_id = thread.thread_id
        del self.threads[thread_id]
        self.nbytes -= thread.nbytes
        self.checkpoints -= thread.checkpoints
        self.writes -= thread.writes
        self.blobs -= thread.blobs
        self.namespaces -= len(thread.namespaces)
        self.variable_overhead -= thread.variable_overhead
        for run_id in thread.runs:
            self.unindex_run(run_id, thread_id)
        self.forget_snapshot_of(thread_id)

    def touch(self, thread: Thread, now: float) -> None:
        """Mark a thread as used now: the most recently used end. Runtime complexity: O(1)."""
        thread.last_used = now
        self.threads.move_to_end(thread.thread_id)

    # --- totals ----------------------------------------------------------------------------------

    def apply(self, thread: Thread, totals: Totals) -> None:
        """Add what a thread gained to its counters and the store's.

        ``totals.namespaces`` counts at store level only: a thread's namespaces
        are its dictionary's entries. The write transactions inline this.
        Runtime complexity: O(1).
        """
        thread.nbytes += totals.nbytes
        thread.checkpoints += totals.checkpoints
        thread.writes += totals.writes
        thread.blobs += totals.blobs
        thread.variable_overhead += totals.variable_overhead
        self.nbytes += totals.nbytes
        self.checkpoints += totals.checkpoints
        self.writes += totals.writes
        self.blobs += totals.blobs
        self.namespaces += totals.namespaces
        self.variable_overhead += totals.variable_overhead

    def release(self, thread: Thread, totals: Totals) -> None:
        """Take what a thread lost off its counters and the store's (see ``apply``). Runtime complexity: O(1)."""
        thread.nbytes -= totals.nbytes
        thread.checkpoints -= totals.checkpoints
        thread.writes -= totals.writes
        thread.blobs -= totals.blobs
        thread.variable_overhead -= totals.variable_overhead
        self.nbytes -= totals.nbytes
        self.checkpoints -= totals.checkpoints
        self.writes -= totals.writes
        self.blobs -= totals.blobs
        self.namespaces -= totals.namespaces
        self.variable_overhead -= totals.variable_overhead

    # --- removals planned elsewhere ----------------------------------------------------------------

    def remove_checkpoints(self, thread: Thread, namespace: str, removal: Removal) -> bool:
        """Carry out a removal ``lineage.plan_removal`` planned in one namespace of a stored thread.

        A namespace left empty goes too (the thread stays, even empty: the
        caller unlinks it). Returns whether a removed checkpoint belonged to a
        run: then the caller calls ``reindex_runs`` once it has removed all it
        will from the thread, if the thread is still stored.

        Runtime complexity: that of ``Namespace.drop``.
        """
        space = thread.namespaces[namespace]
        removed = space.drop(removal.checkpoint_ids, removal.blob_keys)
        self.release(thread, removal.freed)
        if space.is_empty():
            del thread.namespaces[namespace]
            self.release(thread, Totals(namespaces=1, variable_overhead=memory.namespace_text(namespace)))
        self.mark_changed(thread.thread_id)
        return any(record.run_id is not None for record in removed)

    def remove_writes(self, thread: Thread, namespace: str, checkpoint_id: str) -> None:
        """Remove the pending writes stored under one checkpoint of a stored thread; a namespace
        left empty goes too (the thread stays, even empty: the caller unlinks it).

        Runtime complexity: O(writes removed).
        """
        space = thread.namespaces[namespace]
        stored = space.writes.pop(checkpoint_id)
        nbytes = sum(write.nbytes for write in stored.values())
        self.release(thread, Totals(nbytes, 0, len(stored), 0, 0, memory.write_set_overhead(stored)))
        if space.is_empty():
            del thread.namespaces[namespace]
            self.release(thread, Totals(namespaces=1, variable_overhead=memory.namespace_text(namespace)))
        self.mark_changed(thread.thread_id)

    def remove_namespace(self, thread: Thread, namespace: str, freed: Totals) -> bool:
        """Remove a namespace of a stored thread whole; ``freed`` is what planning it counted
        (``pruning.plan_namespaces``). Returns whether it held a run's checkpoint (see
        ``remove_checkpoints``).

        Runtime complexity: O(checkpoints of the namespace) to look for runs.
        """
        space = thread.namespaces.pop(namespace)
        self.release(thread, freed)
        self.mark_changed(thread.thread_id)
        return any(record.run_id is not None for record in space.records.values())

    def apply_pruning(self, thread: Thread, pruning: Pruning) -> None:
        """Carry out what ``pruning.plan_namespaces`` or ``plan_rolling`` planned, counting what it pruned.

        Runtime complexity: O(size of what it removes), plus O(checkpoints of
        the thread), once, to recount its runs when a removed checkpoint
        belonged to one.
        """
        runs_changed = False
        for name, freed in pruning.namespaces.items():
            runs_changed |= self.remove_namespace(thread, name, freed)
            self.pruned_namespaces += 1
        for name, removal in pruning.removals.items():
            runs_changed |= self.remove_checkpoints(thread, name, removal)
            self.pruned_checkpoints += len(removal.checkpoint_ids)
        if runs_changed:
            self.reindex_runs(thread)

    # --- the run index -------------------------------------------------------------------------------

    def index_run(self, thread: Thread, run_id: str) -> None:
        """Note that a thread now holds checkpoints of a run. Runtime complexity: O(1), or O(length) of a
        non-ASCII id (``memory.run_overhead``)."""
        thread.runs.add(run_id)
        cost = memory.run_overhead(run_id)
        thread.variable_overhead += cost
        self.variable_overhead += cost
        holders = self.runs.get(run_id)
        if holders is None:
            self.runs[run_id] = {thread.thread_id}
        else:
            holders.add(thread.thread_id)

    def reindex_runs(self, thread: Thread) -> None:
        """Recount which runs a thread holds after checkpoints left it or changed run, and fix the index.

        Runtime complexity: O(checkpoints of the thread).
        """
        held = thread.recount_runs()
        for run_id in thread.runs - held:
            self.unindex_run(run_id, thread.thread_id)
            cost = memory.run_overhead(run_id)
            thread.variable_overhead -= cost
            self.variable_overhead -= cost
        for run_id in held - thread.runs:
            self.runs.setdefault(run_id, set()).add(thread.thread_id)
            cost = memory.run_overhead(run_id)
            thread.variable_overhead += cost
            self.variable_overhead += cost
        thread.runs = held

    def unindex_run(self, run_id: str, thread_id: str) -> None:
        """Forget that a thread holds checkpoints of a run. Runtime complexity: O(1)."""
        holders = self.runs.get(run_id)
        if holders is not None:
            holders.discard(thread_id)
            if not holders:
                del self.runs[run_id]

    # --- snapshots -------------------------------------------------------------------------------------

    def mark_changed(self, thread_id: str) -> None:
        """Note that a stored thread changed since the last snapshot, once one was taken.

        The write transactions inline this. Runtime complexity: O(1).
        """
        if self.changed is not None:
            self.changed.add(thread_id)

    def forget_snapshot_of(self, thread_id: str) -> None:
        """A thread left the store: the next snapshot has nothing of it to hold. Its cached export goes
        now (not pinned until then) and it leaves the change set, which so holds stored threads only.

        Runtime complexity: O(1).
        """
        if self.changed is not None:
            self.changed.discard(thread_id)
        if self.exports is not None:
            self.exports.pop(thread_id, None)

    # --- observation -----------------------------------------------------------------------------------

    def memory_bytes(self) -> int:
        """The heap the store holds: what ``max_memory_bytes`` bounds, and the exports queued for the
        hook (bounded by ``hooks.QUEUE_BOUND``). Runtime complexity: O(1).
        """
        return self.bounded_memory_bytes() + self.announcements.queued_bytes

    def remembered_bytes(self) -> int:
        """The heap the tombstones and the parked writes hold (``memory.of_tombstones``). Runtime complexity: O(1)."""
        return memory.of_tombstones(self.tombstones, self.refusals, self.parked)

    def bounded_memory_bytes(self) -> int:
        """The heap ``max_memory_bytes`` bounds: the threads and the tombstones (``engine.memory``).

        Runtime complexity: O(1).
        """
        return self.remembered_bytes() + memory.of_contents(
            self.nbytes,
            self.variable_overhead,
            self.checkpoints,
            self.writes,
            self.blobs,
            self.namespaces,
            len(self.threads),
        )

    def stats(self) -> StoreStats:
        """Counters of the store. Runtime complexity: O(L) for L distinct limits that rejected something."""
        return StoreStats(
            threads=len(self.threads),
            namespaces=self.namespaces,
            checkpoints=self.checkpoints,
            pending_writes=self.writes,
            blobs=self.blobs,
            total_bytes=self.nbytes,
            max_total_bytes=self.limits.max_total_bytes,
            memory_bytes=self.memory_bytes(),
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
            refused_checkpoint_records=len(self.refusals),
            parked_write_records=len(self.parked),
            drop_hook_errors=self.announcements.errors,
            queued_drops=len(self.announcements.queue),
            queued_drop_bytes=self.announcements.queued_bytes,
            rejections=dict(self.rejections),
        )
