"""``TieredSaver``'s removals and copies: changes made in the durable tier, then reflected in the hot tier.

Each operation runs on the durable tier first (with the durable saver's own
method where it has one, emulated through its API where it has not:
``tiered.durable``), then the hot tier lets go of what it held of the threads
touched, which are read again on their next use:

* ``delete_thread`` holds the thread's gate alone (writes and flushes under way
  finish first), deletes it, drops its hot copy and unflushed writes, and
  remembers it, and why (``coordination.DeletedThreads``: ``dropped_thread``),
  so that no late write, pending flush or read-through brings it back;
* ``delete_for_runs``, ``copy_thread`` and ``keep_latest`` flush the unflushed
  writes they concern first, then the threads they changed leave memory
  (a thread with unflushed writes keeps its copy: it is newer). Where the
  durable saver cannot do it itself, a removal rewrites each thread (reads it
  whole, deletes it, puts back what survives) holding the thread's gate alone
  from the read to the last put, so a retention pass of the thread waits for
  it (or it for the pass), and nothing a tombstone covers is put back.

These are cold operations: they read and rewrite whole threads, and no lock is
held across a durable round trip.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager

from langgraph.checkpoint.base import CheckpointTuple

from ..engine import Store
from ..locations import configurable, normalize_id, normalize_ids
from .coordination import DELETE_THREAD, Deletion
from .durable import location_of
from .flushing import flush_all, flush_thread
from .state import Shared, Tiers

__all__ = [
    "adelete_thread",
    "copy_thread",
    "delete_for_runs",
    "delete_thread",
    "forget_deleted",
    "keep_latest",
    "leave_memory",
    "prune_memory",
]


def delete_thread(tiers: Tiers, thread_id: str) -> None:
    """Delete a thread from both tiers, with its unflushed writes; its late writes are refused after.

    Raises:
        ValueError: The thread id is invalid.
        NotImplementedError: The durable saver cannot delete a thread.
        Exception: The durable saver's failure; nothing else changed.

    Runtime complexity: two durable round trips (the thread's newest id, the deletion) plus O(runs of
    the thread) in memory, after the wait for the thread's writes and flush under way.
    """
    target = normalize_id("thread_id", thread_id)
    with tiers.shared.gates.alone(target):
        newest = tiers.durable.list({"configurable": {"thread_id": target}}, limit=1)
        tiers.durable.delete_thread(target)
        forget_deleted(tiers.shared, target, _newest_id(newest))


async def adelete_thread(tiers: Tiers, thread_id: str) -> None:
    """Async ``delete_thread``: the durable tier's async side; the waits never block the event loop.

    The gate is held alone across the two durable calls; a sync durable saver's run on
    ``durable.durable_pool``, never on the default executor, where flushes waiting for this
    gate may hold every worker.

    Runtime complexity: that of ``delete_thread``.
    """
    target = normalize_id("thread_id", thread_id)
    async with tiers.shared.gates.aalone(target):
        newest = await tiers.durable.alist({"configurable": {"thread_id": target}}, limit=1)
        await tiers.durable.adelete_thread(target)
        forget_deleted(tiers.shared, target, _newest_id(newest))


def delete_for_runs(tiers: Tiers, run_ids: Sequence[str]) -> None:
    """Delete the checkpoints (and their writes) these runs created, in both tiers; every unflushed write
    goes to the durable tier first, and the threads touched leave memory.

    Raises:
        ValueError: A run id is invalid.

    Runtime complexity: the flush, plus the durable saver's ``delete_for_runs``, or a metadata scan of
    every thread plus O(size of the threads holding the runs) round trips.
    """
    runs = normalize_ids("run_ids", run_ids)
    if not runs:
        return
    flush_all(tiers)
    rewritten = tiers.durable.delete_for_runs(runs, functools.partial(_rewriting, tiers.shared))
    leave_memory(tiers.shared, rewritten, runs)


def copy_thread(tiers: Tiers, source_thread_id: str, target_thread_id: str) -> None:
    """Copy a whole thread to another in the durable tier, both flushed first; the target leaves memory
    and is no longer remembered as deleted.

    Raises:
        ValueError: A thread id is invalid.

    Runtime complexity: the durable saver's ``copy_thread``, or O(size of the source) round trips.
    """
    source = normalize_id("source_thread_id", source_thread_id)
    target = normalize_id("target_thread_id", target_thread_id)
    if source == target:
        return  # nothing to copy, and a deleted thread copied onto itself stays deleted
    flush_thread(tiers, source)
    flush_thread(tiers, target)
    with tiers.shared.gates.sharing(target):
        newest = _newest_id(tiers.durable.list({"configurable": {"thread_id": source}}, limit=1))
        tiers.durable.copy_thread(source, target)
    if newest is not None:
        tiers.shared.deleted.forget(target)  # written on purpose again: its new checkpoints are welcome
        with tiers.shared.hot.store.exclusive():  # the target holds the copied ids now, with their writes
            tiers.shared.residency.raise_ceiling(target, None, newest)
    leave_memory(tiers.shared, {target}, [])


def keep_latest(tiers: Tiers, thread_ids: Sequence[str]) -> None:
    """Prune threads (their ids already checked) to each namespace's latest checkpoint and the ancestors it
    needs, in the durable tier, each flushed first; the threads leave memory.

    Runtime complexity: the durable saver's ``prune``, or O(size of the threads) round trips.
    """
    for thread_id in thread_ids:
        flush_thread(tiers, thread_id)
    if thread_ids:
        tiers.durable.prune(thread_ids, strategy="keep_latest", guard=functools.partial(_rewriting, tiers.shared))
    leave_memory(tiers.shared, set(thread_ids), [])


@contextmanager
def _rewriting(shared: Shared, thread_id: str) -> Iterator[Callable[[Sequence[CheckpointTuple]], bool]]:
    """A rewrite of a thread (``durable.RewriteGuard``): the thread's gate held alone across its read and its
    rewrite, so a retention pass or a deletion of the thread takes turns with it, never in between; and a check
    that what was read is not a deleted life of the thread (its tombstone covers every id read), which is then
    not put back. Runtime complexity: O(1), plus the wait for the gate; the check, O(checkpoints read)."""
    with shared.gates.alone(thread_id):
        yield lambda read: bool(read) and shared.deleted.covers(thread_id, [location_of(item)[1] for item in read])


# --- the hot tier, after the durable change ----------------------------------------------------------------------


def leave_memory(shared: Shared, thread_ids: Collection[str], run_ids: Sequence[str] = ()) -> None:
    """After a change made in the durable tier: these threads (and the hot threads holding these runs)
    leave memory, to be read again. Threads with unflushed writes keep their copy (theirs is newer).

    Runtime complexity: O(runs + threads), plus ``Store.delete_thread`` for each thread that leaves.
    """
    store = shared.hot.store
    with store.exclusive():
        holders = set(thread_ids)
        holders |= store.threads_holding(run_ids)
        for thread_id in holders:
            shared.known_newest.forget(thread_id)  # its newest may have changed in the durable tier
            shared.marks.move(thread_id)
            shared.residency.forget(thread_id)
            if not shared.dirty.is_dirty(thread_id):
                store.delete_thread(thread_id)


def prune_memory(shared: Shared, thread_id: str, planned: Mapping[str, Sequence[str]]) -> None:
    """After a prune in the durable tier (``retention``): the hot copy loses the same checkpoints, and a kept one
    whose parent went its parent, so it answers as the durable tier does and stays hot. A thread with unflushed
    writes leaves memory instead, keeping its copy, as ``leave_memory`` does.

    What the copy holds stays described (``residency``): the same ids went from both tiers, so the hot tier
    still holds every durable checkpoint at or above each namespace's floor.

    Runtime complexity: that of ``Store.remove_planned``.
    """
    store = shared.hot.store
    with store.exclusive():
        if shared.dirty.is_dirty(thread_id):
            leave_memory(shared, {thread_id})
            return
        shared.marks.move(thread_id)  # a read in flight from before the prune must not be joined
        store.remove_planned(thread_id, planned)


def _newest_id(newest: list[CheckpointTuple]) -> str | None:
    return str(configurable(newest[0].config)["checkpoint_id"]) if newest else None


def forget_deleted(shared: Shared, thread_id: str, newest_id: str | None, why: Deletion = DELETE_THREAD) -> None:
    """After the durable deletion of a thread whose newest checkpoint was ``newest_id``: the hot copy, the
    unflushed writes and what we knew go; a tombstone stays, refusing late writes that continue it, and saying
    ``why`` (``TieredSaver.dropped_thread``; a resume of a thread retention deleted while it waited is refused).

    Runtime complexity: O(size of the thread's hot copy and of its unflushed writes).
    """
    store = shared.hot.store
    dirty_newest = shared.dirty.newest_id(thread_id)
    with store.exclusive():
        shared.marks.move(thread_id)
        hot_newest = _hot_newest(store, thread_id)
        shared.dirty.take(thread_id)
        store.delete_thread(thread_id)
        shared.residency.known_empty(thread_id)
    shared.known_newest.forget(thread_id)
    candidates = [cid for cid in (newest_id, dirty_newest, hot_newest) if cid is not None]
    shared.deleted.remember(thread_id, max(candidates, default=None), why)
    shared.unstorable.forget(thread_id)  # deleted: the tombstone refuses what continues its old lives


def _hot_newest(store: Store, thread_id: str) -> str | None:
    """The greatest checkpoint id the hot tier holds of the thread, any namespace. Runtime complexity: that of
    ``Store.list`` of the thread."""
    refs = store.list(thread_id, None)
    return max((ref.record.checkpoint_id for ref in refs), default=None)
