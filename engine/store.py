"""The store: the lock, and the transactions that run under it.

``Store`` builds on ``State`` (the fields and the primitives that change several
of them at once) and is the only class that takes the lock. The read on every
step of a graph (``get``) and the two writes (``put_checkpoint``, ``put_writes``)
are straight-line transactions here: identifiers, byte planning, limits, LRU
order and totals are handled inline. Rare work lives in modules of its own and
is reached through one cheap test on the way:

* ``now >= next_expiry``: ``eviction.expire``;
* a new thread or namespace: ``pruning.admit_location``;
* a tombstone for the thread: ``eviction.refuse_dropped`` (a write that continues
  or resumes the dropped thread, or restarts it within its quarantine);
* a thread at ``max_namespaces_per_thread`` or ``max_checkpoints_per_thread``:
  ``pruning.plan_namespaces``, ``pruning.plan_rolling`` (prune or reject);
* over a byte or thread limit: ``eviction.make_room`` (evict, or reject);
* snapshots taken: ``changed.add``.

Every other operation is a few lines here that take the lock, expire what is
due, and call the module of its job (``reads``, ``moves``, ``removal``,
``eviction``, ``check``) with the state.
"""

from __future__ import annotations

import builtins
import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

from . import check, identifiers, memory, moves, reads, removal
from .errors import CheckpointCapacityError, CheckpointRefusedError, InvalidArgumentError
from .eviction import (
    expire,
    expire_oldest,
    make_room,
    park,
    refuse_checkpoint,
    refuse_dropped,
    refuse_restart,
    refuse_writes_of_refused,
)
from .export import ThreadExport
from .hooks import Announcements, DropHook
from .limits import StoreLimits
from .namespace import EMPTY_NAMESPACE, Namespace
from .pruning import admit_location, plan_rolling
from .reads import CheckpointRef
from .records import Blob, BlobKey, ChannelHistory, CheckpointRecord, CheckpointView, WriteRecord
from .state import State
from .stats import StoreStats, ThreadStorage
from .tombstones import DroppedThread

__all__ = ["PURGE_BATCH", "Store"]

PURGE_BATCH = 256
"""Idle threads ``purge_expired`` removes per hold of the lock."""

_MISSING = object()


class Store(State):
    """Threads of checkpoints, pending writes and blobs, within ``StoreLimits``.

    Threads sit in least-recently-used order, which is also idle order: expiry
    and eviction both take from the front. Totals are kept incrementally, so
    ``stats()`` is O(1) but for one entry per limit that rejected something.
    Every public method holds ``lock`` (re-entrant). A rejected operation raises
    ``CheckpointCapacityError``, counted in ``stats().rejections``, and changes
    nothing but lazy expiry: no eviction, no partial write, no change of LRU
    order. Threads evicted or expired are queued in ``announcements`` for
    ``on_drop``; the caller delivers them once the lock is released
    (``pending_drops()``, then ``Announcements.deliver`` or the saver's async-aware delivery).

    Costs: ``get``, ``list``, ``delta_history``, ``export_thread``, the writes,
    ``copy_thread`` and ``import_thread`` first expire when ``next_expiry`` has
    passed (``eviction.expire``: at most ``EXPIRY_BUDGET`` idle threads, those
    the call names first, each O(namespaces + runs), plus its export when a
    hook is set). The runtime complexity each method states leaves that out.

    Args:
        limits: The bounds to enforce; the reference defaults if omitted.
        clock: Monotonic seconds, injectable for tests of expiry.
        on_drop: Called with why and when each thread was evicted or expired,
            and a complete export of what it held.
        wall_clock: Seconds since the epoch, for the dates of drops (``DroppedThread.dropped_at_wall``).
        answer_channels: Channels whose pending writes answer what a thread's state waits for (a
            graph's resume): such a write for a dropped thread that holds nothing is refused
            (``ResumeRefusedError``) instead of starting the thread afresh.
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
        super().__init__(limits, clock=clock, on_drop=on_drop, wall_clock=wall_clock, answer_channels=answer_channels)
        self.lock = threading.RLock()

    # --- the hot read ---------------------------------------------------------------------------

    def get(self, thread_id: str, namespace: str, checkpoint_id: str | None = None) -> CheckpointView | None:
        """Read one checkpoint, the latest of the namespace if no id is given.

        Marks the thread as used when it finds something.

        Raises:
            ValueError: An identifier that is not stored is also invalid.

        Runtime complexity: O(1) to find it, plus O(c + w log w) to read its c
        channel values and w writes.
        """
        lock = self.lock
        lock.acquire()  # not `with`: half the cost, on the path of every read of a graph's state
        try:
            now = self.clock()
            if now >= self.next_expiry:  # the same as _expire_due, inline
                expire(self, now, thread_id)
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
            thread.last_used = now  # type: ignore[union-attr]  # the same as State.touch, inline
            self.threads.move_to_end(thread_id)
            return space.view(thread_id, namespace, record)  # type: ignore[union-attr]
        finally:
            lock.release()

    # --- the hot writes -----------------------------------------------------------------------------

    def put_checkpoint(
        self,
        thread_id: str,
        namespace: str,
        record: CheckpointRecord,
        new_blobs: Mapping[BlobKey, Blob],
        root_checkpoint_id: str | None = None,
        resumes: bool = False,
    ) -> None:
        """Store a checkpoint and the channel values that changed with it.

        Over ``max_checkpoints_per_thread`` the checkpoint is rejected, or with
        ``on_checkpoint_limit="prune_oldest"`` the thread's oldest checkpoints
        make room (``pruning.plan_rolling``); the pruning is planned before
        anything changes, so a put rejected for another limit prunes nothing.
        ``root_checkpoint_id`` is the root namespace's checkpoint a subgraph's
        write runs under, when the caller knows it (``pruning.plan_namespaces``).
        ``resumes``: the checkpoint resumes the thread's state (a graph's resume
        that found no checkpoint to resume): it is refused if the thread was
        dropped and the store holds nothing of it.

        A refused put changes nothing but this: its pending writes that arrived
        before it go, and its later ones are refused (``eviction.refuse_checkpoint``).

        Raises:
            ValueError: A new identifier is invalid.
            CheckpointCapacityError: ``max_namespaces_per_thread``,
                ``max_checkpoints_per_thread``, ``max_checkpoint_bytes``,
                ``max_total_bytes``, ``max_threads`` or ``max_memory_bytes``
                would be exceeded.
            ThreadEvictedError: The parent checkpoint belonged to the thread
                before it was evicted or expired; or, the thread being dropped and
                holding nothing, the put resumes it (``ResumeRefusedError``) or
                starts it afresh within its quarantine (``ThreadQuarantinedError``).

        Runtime complexity: O(c) for a checkpoint of c channels whose id sorts
        last in its namespace (ids are time-ordered), else one O(n) memory move.
        Plus, when they happen: O(namespaces + runs) per thread evicted or
        expired (and its export, with a hook); under rolling history, about
        O(n log n) for the n checkpoints of the thread once per a tenth of the
        limit (``pruning.plan_rolling`` states the exact bound); the size of a
        namespace pruned whole (``pruning.plan_namespaces``); O(n) to recount
        the thread's runs when a re-put changes a checkpoint's run.
        """
        checkpoint_id, parent_id, _, checkpoint_data, _, metadata_data, versions, run_id, delta_channels = record
        limits = self.limits
        max_length = limits.max_identifier_length
        plan = None  # what the write prunes from its own thread, planned before anything changes
        lock = self.lock
        lock.acquire()  # not `with`: half the cost, on the path every step of every graph takes
        try:
            now = self.clock()
            if now >= self.next_expiry:  # the same as _expire_due, inline
                expire(self, now, thread_id)
            threads = self.threads
            thread = threads.get(thread_id)
            space = None if thread is None else thread.namespaces.get(namespace)
            planned = space  # the namespace the write is planned against: an empty one if it is new
            if planned is None:
                plan = admit_location(limits, thread, thread_id, namespace, root_checkpoint_id)
                planned = EMPTY_NAMESPACE
            if self.tombstones.records and thread_id in self.tombstones.records:
                refuse_dropped(self, thread_id, thread, planned, parent_id, now, resumes)
            records = planned.records
            blobs = planned.blobs
            replaced = records.get(checkpoint_id)
            known_channels = self.known_channels
            # The record's channel versions outlive this call: channels checked once (remembered), every
            # version one a snapshot can hold; one C pass each, the precise error from the slow path.
            half = len(versions) >> 1
            try:  # every version printable text, the common case (the rule of identifiers.check_record_version)
                plain = "".join(versions[half:]).isprintable()  # type: ignore[arg-type]
            except TypeError:  # a number among them: checked one by one
                plain = False
            if not plain or len(versions) & 1 or not known_channels.issuperset(versions[:half]):
                identifiers.check_versions(known_channels, versions, limits)
            if delta_channels and not known_channels.issuperset(delta_channels):
                for channel in delta_channels:
                    identifiers.admit_channel(known_channels, channel, limits)
            if replaced is None:
                if (  # the rule of identifiers.check_identifier, inline
                    type(checkpoint_id) is not str
                    or not 0 < len(checkpoint_id) <= max_length
                    or not checkpoint_id.isprintable()
                ):
                    identifiers.refuse("checkpoint_id", checkpoint_id, limits)
                if thread is not None and thread.checkpoints >= limits.max_checkpoints_per_thread:
                    plan = plan_rolling(thread, namespace, record, new_blobs, plan, limits)
            if (
                parent_id is not None
                and parent_id not in records
                and (type(parent_id) is not str or not 0 < len(parent_id) <= max_length or not parent_id.isprintable())
            ):
                identifiers.refuse("parent checkpoint_id", parent_id, limits)
            record_bytes = len(checkpoint_data) + len(metadata_data)
            new_bytes = old_bytes = replaced_blobs = 0
            # the heap estimate's variable overhead (engine.memory): the record's id and version slots
            overhead = _SLOT * len(versions) + (
                (len(checkpoint_id) if checkpoint_id.isascii() else memory.text(checkpoint_id))  # memory.text, inline
                if replaced is None
                else -_SLOT * len(replaced.versions)
            )
            # the version objects of new keys (memory.blobs_overhead): each once per run of keys holding it
            last_version = (
                next(reversed(blobs), _NO_KEY)[1] if plan is None else memory.last_version(blobs, plan, namespace)
            )
            for key, blob in new_blobs.items():
                old = blobs.get(key, _MISSING)
                if old is _MISSING:  # a new key of the store: checked here, once
                    channel, version = key
                    if channel not in known_channels:
                        identifiers.admit_channel(known_channels, channel, limits)
                    if type(version) is str:  # the rule of identifiers.check_version, inline
                        size = len(version)
                        if not 0 < size <= max_length or not version.isprintable():
                            identifiers.check_version(channel, version, limits)
                        if version is not last_version:  # memory.version_cost, inline
                            overhead += _TEXT + size
                            last_version = version
                    elif type(version) is int:
                        if not _MIN_INT <= version <= _MAX_INT:
                            identifiers.check_version(channel, version, limits)
                        if version is not last_version:
                            overhead += 0 if version in _SMALL_INTS else _INT  # memory.number, inline
                            last_version = version
                    elif type(version) is float and version - version == 0.0:  # NaN and infinities: refused below
                        if version is not last_version:
                            overhead += _FLOAT  # memory.number, inline
                            last_version = version
                    else:
                        identifiers.check_version(channel, version, limits)
                else:
                    replaced_blobs += 1
                    if old is not None:
                        old_bytes += len(old[1])  # type: ignore[index]
                        overhead -= _VALUE
                if blob is not None:
                    new_bytes += len(blob[1])
                    overhead += _VALUE
            growth = record_bytes + new_bytes - old_bytes
            if replaced is not None:
                growth -= len(replaced.checkpoint_data) + len(replaced.metadata_data)
            # The whole state read back is at most the record, its new values and all the thread
            # holds: only when that bound breaks max_checkpoint_bytes is the exact state summed.
            if record_bytes + new_bytes + (0 if thread is None else thread.nbytes) > limits.max_checkpoint_bytes:
                whole = planned.state_size(record, new_blobs)
                if whole > limits.max_checkpoint_bytes:
                    raise CheckpointCapacityError(
                        "max_checkpoint_bytes", limits.max_checkpoint_bytes, whole, thread_id=thread_id
                    )
            if space is None and namespace:  # the same as memory.namespace_text, inline
                overhead += _TEXT + len(namespace) if namespace.isascii() else memory.namespace_text(namespace)
            new_run = run_id is not None and (thread is None or run_id not in thread.runs)
            if new_run and (  # the rule of identifiers.check_identifier, inline
                type(run_id) is not str or not 0 < len(run_id) <= max_length or not run_id.isprintable()
            ):
                identifiers.refuse("metadata['run_id']", run_id, limits)
            net = growth if plan is None else growth - plan.freed.nbytes
            if (
                self.nbytes + net > limits.max_total_bytes
                or (thread is None and len(threads) >= limits.max_threads)
                or self.memory_limited
            ):
                run_cost = memory.run_overhead(run_id) if new_run else 0  # type: ignore[arg-type]  # State.index_run
                footprint = memory.change(
                    net, overhead + run_cost, plan, checkpoints=replaced is None,
                    blobs=len(new_blobs) - replaced_blobs, namespaces=space is None,
                    thread_id=thread_id if thread is None else None,
                )  # fmt: skip
                make_room(self, net, footprint, (thread,) if thread is not None else (), thread_id, now, thread is None)
            # --- every check passed: apply --------------------------------------------------------
            if thread is None:
                thread = self.new_thread(thread_id, now)
            else:
                thread.last_used = now  # the same as State.touch, inline
                threads.move_to_end(thread_id)
                if plan is not None:
                    self.apply_pruning(thread, plan)
                    if space is not None and namespace not in thread.namespaces:  # pruning emptied it: anew
                        space = None
                        overhead += memory.namespace_text(namespace)
            if space is None:
                space = thread.namespaces[namespace] = Namespace()
                self.namespaces += 1
            if new_blobs:
                space.blobs.update(new_blobs)
            space.records[checkpoint_id] = record
            # the same as State.apply, inline
            thread.nbytes += growth
            self.nbytes += growth
            thread.variable_overhead += overhead
            self.variable_overhead += overhead
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
                if run_id is not None and run_id not in thread.runs:  # pruning may have taken its older ones
                    self.index_run(thread, run_id)
            elif replaced.run_id != run_id:
                self.reindex_runs(thread)
            if self.refusals.records and checkpoint_id in self.refusals.records:
                self.refusals.forget(checkpoint_id)  # refused once, stored now
            if self.changed is not None:  # the same as State.mark_changed, inline
                self.changed.add(thread_id)
            if self.parked.records and checkpoint_id in self.parked.records:
                self._take_parked(thread_id, namespace, checkpoint_id)
        except CheckpointCapacityError as error:
            self.rejections[error.limit] += 1
            refuse_checkpoint(self, thread_id, namespace, checkpoint_id, error)
            raise
        finally:
            lock.release()

    def put_writes(
        self,
        thread_id: str,
        namespace: str,
        checkpoint_id: str,
        writes: Sequence[WriteRecord],
        root_checkpoint_id: str | None = None,
    ) -> None:
        """Store a task's pending writes under the checkpoint it ran from.

        The checkpoint need not be stored yet, but its put must not have been
        refused. In order, a regular write is kept only if its ``(task_id, idx)``
        is not stored yet; a special write (negative ``idx``) replaces.
        ``root_checkpoint_id``: as for ``put_checkpoint``.

        Raises:
            ValueError: A new identifier is invalid, or a task path is not a string.
            CheckpointCapacityError: ``max_pending_write_bytes``,
                ``max_namespaces_per_thread``, ``max_total_bytes``,
                ``max_threads`` or ``max_memory_bytes`` would be exceeded.
            ThreadEvictedError: The checkpoint belonged to the thread before it
                was evicted or expired; or, the thread being dropped and holding
                nothing, a write goes to one of ``answer_channels``
                (``ResumeRefusedError``).

        A ``CheckpointCapacityError`` also refuses writes for a checkpoint whose
        put was refused, under the limit that refused it.

        Runtime complexity: O(len(writes)). Plus, when they happen: O(namespaces
        + runs) per thread evicted or expired (and its export, with a hook); the
        size of a namespace pruned whole (``pruning.plan_namespaces``) and O(n) for
        the thread's n checkpoints to recount its runs then.
        """
        limits = self.limits
        max_length = limits.max_identifier_length
        lock = self.lock
        lock.acquire()  # not `with`: half the cost, on the path every task of every graph takes
        try:
            now = self.clock()
            if now >= self.next_expiry:  # the same as _expire_due, inline
                expire(self, now, thread_id)
            threads = self.threads
            thread = threads.get(thread_id)
            space = None if thread is None else thread.namespaces.get(namespace)
            planned = space  # the namespace the write is planned against: an empty one if it is new
            plan = None  # namespaces the write prunes from its own thread, planned before anything changes
            if planned is None:
                plan = admit_location(limits, thread, thread_id, namespace, root_checkpoint_id)
                planned = EMPTY_NAMESPACE
            if self.tombstones.records and thread_id in self.tombstones.records:
                refuse_dropped(self, thread_id, thread, planned, checkpoint_id, now, False, writes)
            if self.refusals.records and checkpoint_id in self.refusals.records:
                refuse_writes_of_refused(self, thread_id, namespace, checkpoint_id, planned)
            stored = planned.writes.get(checkpoint_id)
            if (
                stored is None
                and checkpoint_id not in planned.records
                and (  # the rule of identifiers.check_identifier, inline
                    type(checkpoint_id) is not str
                    or not 0 < len(checkpoint_id) <= max_length
                    or not checkpoint_id.isprintable()
                )
            ):
                identifiers.refuse("checkpoint_id", checkpoint_id, limits)
            accepted: dict[tuple[str, int], WriteRecord] = {}
            batch = growth = added = 0
            overhead = 0  # the heap estimate's variable overhead (engine.memory)
            last_task = None if stored is None else next(reversed(stored))[0]  # whose strings a new write shares
            checked_task: object = _MISSING
            checked_path: object = _MISSING
            known_channels = self.known_channels
            for write in writes:
                task_id, idx, channel, _, value_data, task_path = write
                if task_id is not checked_task:
                    if (  # the rule of identifiers.check_identifier, inline
                        type(task_id) is not str or not 0 < len(task_id) <= max_length or not task_id.isprintable()
                    ):
                        identifiers.refuse("task_id", task_id, limits)
                    checked_task = task_id
                    task_text = len(task_id) if task_id.isascii() else memory.text(task_id)  # memory.text, inline
                if task_path is not checked_path:
                    if type(task_path) is not str or not task_path.isascii():  # the rule of check_text, inline
                        identifiers.check_text("task_path", task_path)
                    path_text = len(task_path)
                    checked_path = task_path
                if channel not in known_channels:
                    identifiers.admit_channel(known_channels, channel, limits)
                size = len(value_data) + path_text  # pyright: ignore[reportPossiblyUnboundVariable]  # set by the first write
                batch += size
                key = (task_id, idx)
                if key in accepted or (stored is not None and key in stored):
                    if idx >= 0:
                        continue  # a regular write is kept once
                    old = accepted.get(key) or stored[key]  # type: ignore[index]
                    growth -= len(old.value_data) + len(old.task_path)
                    added -= 1  # it replaces a write of this batch or a stored one, in place
                else:  # a new key (memory.write_set_overhead)
                    if task_id != last_task:  # a new run of one task's writes: its id and path strings
                        overhead += _TASK + task_text  # pyright: ignore[reportPossiblyUnboundVariable]  # set above
                        last_task = task_id
                    if idx > _TOP_INT:  # an index past the shared small ints
                        overhead += _INT
                accepted[key] = write
                growth += size
                added += 1
            if batch > limits.max_pending_write_bytes:
                raise CheckpointCapacityError(
                    "max_pending_write_bytes", limits.max_pending_write_bytes, batch, thread_id=thread_id
                )
            if space is None and self.tombstones.records and thread_id in self.tombstones.records:
                park(self, thread_id, namespace, checkpoint_id, accepted)  # a dropped thread's: wait for the put
                return
            if not accepted:
                if thread is not None:  # every write was already stored: still a use of the thread
                    thread.last_used = now  # the same as State.touch, inline
                    threads.move_to_end(thread_id)
                return
            if stored is None:
                overhead += _WRITE_SET
            if space is None and namespace:  # the same as memory.namespace_text, inline
                overhead += _TEXT + len(namespace) if namespace.isascii() else memory.namespace_text(namespace)
            net = growth if plan is None else growth - plan.freed.nbytes
            if (
                self.nbytes + net > limits.max_total_bytes
                or (thread is None and len(threads) >= limits.max_threads)
                or self.memory_limited
            ):
                footprint = memory.change(
                    net, overhead, plan, writes=added, namespaces=space is None,
                    thread_id=thread_id if thread is None else None,
                )  # fmt: skip
                make_room(self, net, footprint, (thread,) if thread is not None else (), thread_id, now, thread is None)
            # --- every check passed: apply --------------------------------------------------------
            if thread is None:
                thread = self.new_thread(thread_id, now)
            else:
                thread.last_used = now  # the same as State.touch, inline
                threads.move_to_end(thread_id)
                if plan is not None:
                    self.apply_pruning(thread, plan)
            if space is None:
                space = thread.namespaces[namespace] = Namespace()
                self.namespaces += 1
            if stored is None:
                space.writes[checkpoint_id] = accepted
            else:
                stored.update(accepted)
            # the same as State.apply, inline
            thread.writes += added
            self.writes += added
            thread.nbytes += growth
            self.nbytes += growth
            thread.variable_overhead += overhead
            self.variable_overhead += overhead
            if self.changed is not None:  # the same as State.mark_changed, inline
                self.changed.add(thread_id)
        except CheckpointCapacityError as error:
            if type(error) is not CheckpointRefusedError:  # the put's refusal was counted already
                self.rejections[error.limit] += 1
            raise
        finally:
            lock.release()

    # --- cold reads ---------------------------------------------------------------------------------------

    def list(
        self,
        thread_id: str | None,
        namespace: str | None = None,
        *,
        checkpoint_id: str | None = None,
        before: str | None = None,
        limit: int | None = None,
    ) -> list[CheckpointRef]:
        """Checkpoints newest first within each namespace (``reads.list_checkpoints``).

        Runtime complexity: that of ``reads.list_checkpoints``.
        """
        with self.lock:
            now = self._expire_due(thread_id)
            return reads.list_checkpoints(
                self, now, thread_id, namespace, checkpoint_id=checkpoint_id, before=before, limit=limit
            )

    def select_every_thread(
        self, select: Callable[[CheckpointRecord], object], *, before: str | None = None
    ) -> Iterator[tuple[CheckpointRef, object]]:
        """Every thread's checkpoints for which ``select`` returns something (not None), with what it returned,
        lazily, in ``list(None)``'s order: the threads are taken in creation order when iteration starts, and
        visited ``reads.SELECT_THREADS_PER_HOLD`` at a time, each batch under one hold of the lock (a thread
        written meanwhile is visited as it is then; one gone is skipped). One pass, nothing kept for the whole
        store: ``list(None, filter=...)`` matches metadata as it goes, and stops at its ``limit``. ``select``
        runs with the lock held: it must not call the store. Marks no thread as used.

        Runtime complexity: O(T log T) to order the T threads, then one ``select`` per checkpoint visited.
        """
        with self.lock:
            self._expire_due(None)
            threads = reads.threads_by_creation(self)
        step = reads.SELECT_THREADS_PER_HOLD
        for start in range(0, len(threads), step):
            with self.lock:
                found = reads.select_in_threads(self, threads[start : start + step], None, before, select)
            yield from found

    def views(self, refs: Iterable[CheckpointRef]) -> builtins.list[CheckpointView | None]:
        """Read listed checkpoints under one hold of the lock (``reads.views``); expires nothing.

        Runtime complexity: that of ``reads.views``.
        """
        with self.lock:
            return reads.views(self, self.clock(), refs)

    def delta_history(
        self, thread_id: str, namespace: str, checkpoint_id: str | None, channels: Sequence[str]
    ) -> dict[str, ChannelHistory]:
        """Writes and seed of each channel along a checkpoint's ancestor chain (``reads.delta_history``).

        Runtime complexity: that of ``reads.delta_history``.
        """
        with self.lock:
            now = self._expire_due(thread_id)
            return reads.delta_history(self, now, thread_id, namespace, checkpoint_id, channels)

    def thread_ids(self) -> builtins.list[str]:
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

    def dropped_thread(self, thread_id: str) -> DroppedThread | None:
        """The tombstone of a thread evicted or expired (why, which limit, when, its newest checkpoint),
        or None if none is remembered. Runtime complexity: O(1).
        """
        with self.lock:
            return self.tombstones.records.get(thread_id)

    def admit_run(self, thread_id: str) -> None:
        """Refuse, before it does anything, a new run on a thread dropped within
        ``dropped_thread_quarantine_seconds`` that the store no longer holds; else do nothing.

        A caller that starts runs asks first, so that a refused run fails before
        any of its work: its first write would be refused the same way.

        Raises:
            ThreadQuarantinedError: The thread is in quarantine; nothing changed.

        Runtime complexity: O(1).
        """
        with self.lock:
            record = self.tombstones.records.get(thread_id)
            if record is not None and thread_id not in self.threads:
                refuse_restart(self, record, self.clock())

    def threads_holding(self, run_ids: Iterable[str]) -> set[str]:
        """The ids of the stored threads holding checkpoints these runs created (the run index).

        Expires nothing and marks no thread as used. Runtime complexity: O(r + t) for r run ids and the t
        thread ids found.
        """
        with self.lock:
            holders: set[str] = set()
            for run_id in run_ids:
                found = self.runs.get(run_id)
                if found:
                    holders |= found
            return holders

    def missing_values(
        self, thread_id: str, namespace: str, record: CheckpointRecord, new_blobs: Mapping[BlobKey, Blob]
    ) -> builtins.list[BlobKey]:
        """The ``(channel, version)`` keys a checkpoint references that neither the namespace nor ``new_blobs`` holds.

        A writer that stores a checkpoint with only its new values (as LangGraph's
        ``put`` hands them) relies on the namespace holding the others; a tier
        that holds only part of a thread (one built on the store, whose copy of
        the thread may have left memory or begin above the checkpoint's parent)
        asks first, and adds the missing ones. Expires nothing and marks no
        thread as used. Runtime complexity: O(c) for the checkpoint's c channels.
        """
        with self.lock:
            thread = self.threads.get(thread_id)
            space = None if thread is None else thread.namespaces.get(namespace)
            blobs = EMPTY_NAMESPACE.blobs if space is None else space.blobs
            versions = record.versions
            half = len(versions) >> 1
            names: tuple[str, ...] = versions[:half]  # type: ignore[assignment]  # a record's channel names
            return [
                key for key in zip(names, versions[half:], strict=True) if key not in new_blobs and key not in blobs
            ]

    def held_writes(self, thread_id: str, namespace: str, checkpoint_id: str) -> int:
        """How many pending writes the store holds for a checkpoint, stored or not yet.

        Expires nothing and marks no thread as used. Runtime complexity: O(1).
        """
        with self.lock:
            thread = self.threads.get(thread_id)
            space = None if thread is None else thread.namespaces.get(namespace)
            writes = None if space is None else space.writes.get(checkpoint_id)
            return 0 if writes is None else len(writes)

    def absent_writes(
        self, thread_id: str, namespace: str, checkpoint_id: str, records: Sequence[WriteRecord]
    ) -> builtins.list[WriteRecord]:
        """The records whose ``(task_id, idx)`` the checkpoint does not hold yet, each key's first in the batch.

        For a layer over a store whose rule keeps the first write of a key in a batch that mixes regular and
        special channels (SQL savers insert such a batch only where absent), where this store's ``put_writes``
        overwrites a special channel's. Expires nothing and marks no thread as used.
        Runtime complexity: O(len(records)).
        """
        with self.lock:
            thread = self.threads.get(thread_id)
            space = None if thread is None else thread.namespaces.get(namespace)
            held = (None if space is None else space.writes.get(checkpoint_id)) or {}
            seen: set[tuple[str, int]] = set()
            absent = []
            for record in records:
                key = (record.task_id, record.idx)
                if key not in held and key not in seen:
                    seen.add(key)
                    absent.append(record)
            return absent

    def holds_checkpoint(self, thread_id: str, namespace: str, checkpoint_id: str) -> bool:
        """Whether the store holds the checkpoint. Expires nothing and marks no thread as used.

        Runtime complexity: O(1).
        """
        with self.lock:
            thread = self.threads.get(thread_id)
            space = None if thread is None else thread.namespaces.get(namespace)
            return space is not None and checkpoint_id in space.records

    def newest_id(self, thread_id: str, namespace: str) -> str | None:
        """The greatest checkpoint id the namespace holds, or None. Expires nothing and marks no thread as used.

        Runtime complexity: O(1).
        """
        with self.lock:
            thread = self.threads.get(thread_id)
            space = None if thread is None else thread.namespaces.get(namespace)
            return space.ids[-1] if space is not None and space.ids else None

    def peek(self, thread_id: str, namespace: str, checkpoint_id: str) -> CheckpointView | None:
        """Read one stored checkpoint as it is: expires nothing, marks no thread as used, and reads a
        thread idle past its TTL too (a layer built on the store reading back, under ``exclusive``,
        what it has just stored, which a clock past the TTL must not turn into nothing).

        Runtime complexity: O(c + w log w) to read its c channel values and w writes.
        """
        with self.lock:
            thread = self.threads.get(thread_id)
            space = None if thread is None else thread.namespaces.get(namespace)
            record = None if space is None else space.records.get(checkpoint_id)
            return None if record is None else space.view(thread_id, namespace, record)  # type: ignore[union-attr]

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the store's lock across several calls, for a layer built on the store whose own state must
        change with it (the tiered saver's ledgers). The lock is reentrant: the store's own methods take it
        again inside. Nothing else may be waited for inside: no I/O, no other lock that waits for this one.
        Runtime complexity: O(1).
        """
        with self.lock:
            yield

    def pruned_count(self) -> int:
        """Checkpoints and namespaces the limits have pruned so far (rolling history, namespace limits).

        The count moves whenever a write prunes its own thread, so a caller that
        reads it before and after a write learns whether the write pruned.
        Runtime complexity: O(1).
        """
        lock = self.lock
        lock.acquire()  # not `with`: half the cost, on the path of every write of a tier built on the store
        try:
            return self.pruned_checkpoints + self.pruned_namespaces
        finally:
            lock.release()

    def thread_storage(self, thread_id: str, tier: str = "memory") -> ThreadStorage:
        """The bytes one thread occupies (``reads.thread_storage``): zeros for a thread not stored.

        Expires what is due (a thread idle past its TTL reports zeros, as a read would find nothing), creates
        nothing and marks no thread as used. Runtime complexity: O(k + b + w) for the thread's checkpoints,
        channel values and writes.
        """
        with self.lock:
            self._expire_due(thread_id)
            return reads.thread_storage(self, thread_id, tier)

    def stats(self) -> StoreStats:
        """Counters of the store (``State.stats``). Runtime complexity: O(L) for L limits that rejected something."""
        with self.lock:
            return super().stats()

    def check(self) -> None:
        """Assert every invariant of the store (``engine.check``); ``AssertionError`` names the first broken one.

        Runtime complexity: O(size of the store).
        """
        with self.lock:
            check.check_state(self)

    # --- removals ---------------------------------------------------------------------------------------

    def delete_thread(self, thread_id: str) -> bool:
        """Remove a thread whole, and its tombstone; return whether it was stored (``removal.delete_thread``).

        Runtime complexity: O(runs of the thread) plus freeing it; no other thread is visited.
        """
        with self.lock:
            return removal.delete_thread(self, thread_id)

    def delete_runs(self, run_ids: Iterable[str]) -> int:
        """Remove the checkpoints created by these runs; return how many went (``removal.delete_runs``).

        Runtime complexity: that of ``removal.delete_runs``.
        """
        with self.lock:
            return removal.delete_runs(self, run_ids)

    def prune(self, thread_ids: Iterable[str], *, keep_last: int | None) -> None:
        """Keep the newest ``keep_last`` checkpoints of each namespace and what they need, or delete the
        threads (``keep_last=None``) (``removal.prune``).

        Raises:
            ValueError: A thread id is invalid, or ``keep_last`` not a positive whole number; nothing changed.

        Runtime complexity: that of ``removal.prune``.
        """
        if keep_last is not None and (type(keep_last) is not int or keep_last < 1):
            raise InvalidArgumentError(f"keep_last must be a whole number of at least 1, got {keep_last!r:.40}")
        ids = [identifiers.check_identifier("thread_id", thread_id, self.limits) for thread_id in thread_ids]
        with self.lock:
            removal.prune(self, ids, keep_last=keep_last)

    def remove_planned(self, thread_id: str, planned: Mapping[str, Sequence[str]]) -> int:
        """Remove exactly these checkpoints (namespace to ids) of one thread, as another store pruned them; a
        remaining checkpoint whose parent went is left with none; return how many went (``removal.remove_planned``).

        Nothing is validated: only what is stored is looked up, and what is not is skipped.
        Runtime complexity: that of ``removal.remove_planned``.
        """
        with self.lock:
            return removal.remove_planned(self, thread_id, planned)

    def clear(self) -> None:
        """Remove every thread and tombstone (not counted as eviction). Runtime complexity: O(1) plus freeing them."""
        with self.lock:
            removal.clear(self)

    def purge_expired(self) -> int:
        """Remove every expired thread, ``PURGE_BATCH`` per hold of the lock; return how many.

        Runtime complexity: O(expired threads): they are at the front of the LRU
        order. No other caller waits longer than one batch.
        """
        removed = 0
        while True:
            with self.lock:
                batch = expire_oldest(self, self.clock(), PURGE_BATCH)
            removed += batch
            if batch < PURGE_BATCH:
                return removed

    # --- threads moving whole ----------------------------------------------------------------------------

    def copy_thread(self, source_id: str, target_id: str) -> None:
        """Copy every namespace, checkpoint, write and blob of one thread into another (``moves.copy_thread``).

        Raises:
            ValueError: An id is invalid.
            CheckpointCapacityError: The copy does not fit; nothing changed.

        Runtime complexity: that of ``moves.copy_thread``.
        """
        identifiers.check_identifier("source thread_id", source_id, self.limits)
        identifiers.check_identifier("target thread_id", target_id, self.limits)
        with self.lock:
            now = self._expire_due(source_id, target_id)
            try:
                moves.copy_thread(self, now, source_id, target_id)
            except CheckpointCapacityError as error:
                self.rejections[error.limit] += 1
                raise

    def export_thread(self, thread_id: str) -> ThreadExport | None:
        """Everything a thread holds, still serialized, or None (``moves.export_thread``).

        Runtime complexity: O(size of the thread).
        """
        with self.lock:
            self._expire_due(thread_id)
            return moves.export_thread(self, thread_id)

    def import_thread(self, export: ThreadExport, thread_id: str | None = None, *, idle_seconds: float = 0.0) -> None:
        """Store an export as a thread (its own id unless ``thread_id`` is given; ``moves.import_thread``).

        The export is checked before the lock is taken (``moves.prepare_import``).

        Raises:
            ValueError: The export is malformed or holds an invalid identifier.
            CheckpointCapacityError: The thread would exceed a limit; nothing changed.

        Runtime complexity: O(size of the export) to check it; that of ``moves.import_thread`` under the lock.
        """
        prepared = moves.prepare_import(export, thread_id, self.limits)
        with self.lock:
            now = self._expire_due(prepared.thread_id)
            try:
                moves.import_thread(self, now, prepared, idle_seconds)
            except CheckpointCapacityError as error:
                self.rejections[error.limit] += 1
                raise

    def snapshot(self) -> tuple[builtins.list[tuple[ThreadExport, float]], float]:
        """Every live thread's export with its idle seconds, least recently used first, and the clock
        (``moves.snapshot``). Runtime complexity: O(T + size of the threads changed since the last one).
        """
        with self.lock:
            now = self.clock()
            return moves.snapshot(self, now), now

    # --- dropped threads ---------------------------------------------------------------------------------

    def forget_tombstone(self, thread_id: str) -> None:
        """Forget the tombstone of a thread evicted or expired, if one is remembered.

        Its later writes are then taken as a new thread's: none is refused as
        continuing the dropped thread, and none is parked waiting for a put.
        Runtime complexity: O(1).
        """
        lock = self.lock
        lock.acquire()  # not `with`: half the cost, on the path of every write of a tier built on the store
        try:
            tombstones = self.tombstones
            if tombstones.records and thread_id in tombstones.records:
                tombstones.forget(thread_id)
        finally:
            lock.release()

    def forget_refusal(self, checkpoint_id: str) -> None:
        """Forget that a checkpoint's put was refused, if it was: its later pending writes are no longer
        refused under the limit that refused it. Runtime complexity: O(1).
        """
        with self.lock:
            self.refusals.forget(checkpoint_id)

    def pending_drops(self) -> Announcements | None:
        """The queue of dropped threads waiting for ``on_drop``, when one waits; else None.

        The caller hands it over once the lock is released (``Announcements.deliver``,
        or the saver's async-aware delivery). Without the lock: the queue is one object for
        the store's life, and a drop queued just after this look is delivered by the call
        that queued it. Runtime complexity: O(1).
        """
        announcements = self.announcements
        return announcements if announcements.queue else None

    def _take_parked(self, thread_id: str, namespace: str, checkpoint_id: str) -> None:
        """Store the writes parked for a checkpoint just stored, as a put_writes (lock held).

        A refusal of them (a limit) is counted and leaves the checkpoint stored, as
        it would had they arrived after it.
        """
        parked = self.parked.records[checkpoint_id]
        self.parked.forget(checkpoint_id)
        if parked.thread_id == thread_id and parked.namespace == namespace:
            with contextlib.suppress(CheckpointCapacityError):  # counted by put_writes; the checkpoint stays
                self.put_writes(thread_id, namespace, checkpoint_id, parked.writes)

    def _expire_due(self, *touched: str | None) -> float:
        """The clock reading, after expiring what is due (the threads named first). Lock held."""
        now = self.clock()
        if now >= self.next_expiry:
            expire(self, now, *touched)
        return now


_SLOT, _TEXT, _VALUE, _WRITE_SET, _TASK = memory.TUPLE_SLOT, memory.STR, memory.VALUE, memory.WRITE_SET, memory.TASK
_INT, _FLOAT, _SMALL_INTS, _TOP_INT = memory.INT, memory.FLOAT, memory.SMALL_INTS, memory.SMALL_INTS[-1]
_MIN_INT, _MAX_INT = identifiers.MIN_INT_VERSION, identifiers.MAX_INT_VERSION
_NO_KEY = (None, None)  # the last blob key of a namespace holding none: no version is None
