"""Removals a caller asks for: a thread, every thread, the checkpoints of runs, or all but the latest.

Unlike eviction and expiry (``engine.eviction``), these leave no tombstone and
are not announced: the caller wanted the data gone. Deleting a thread forgets
its tombstone, so a new run on that id is not mistaken for a late write.
``delete_runs`` and ``prune`` keep every ancestor that a surviving checkpoint
needs to rebuild a delta channel (``lineage.required_ancestors``).

Everything here runs with the store's lock held (``engine.store`` takes it).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence

from . import identifiers
from .lineage import plan_removal, required_ancestors
from .state import State
from .thread import Thread

__all__ = ["clear", "delete_runs", "delete_thread", "prune", "remove_planned"]


def delete_thread(state: State, thread_id: str) -> bool:
    """Remove a thread whole, and its tombstone; return whether it was stored.

    Runtime complexity: O(runs of the thread) plus freeing its objects; no other thread is visited.
    """
    state.tombstones.forget(thread_id)
    thread = state.threads.get(thread_id)
    if thread is None:
        identifiers.check_identifier("thread_id", thread_id, state.limits)
        return False
    state.unlink(thread)
    return True


def clear(state: State) -> None:
    """Remove every thread and tombstone (not counted as eviction).

    Runtime complexity: O(1) bookkeeping plus freeing everything.
    """
    state.threads = OrderedDict()
    state.runs = {}
    state.nbytes = state.checkpoints = state.writes = state.blobs = state.namespaces = 0
    state.variable_overhead = 0
    state.next_expiry = float("inf")
    state.tombstones.clear()
    if state.exports is not None:
        state.exports, state.changed = {}, set()  # the next snapshot holds no thread


def delete_runs(state: State, run_ids: Iterable[str]) -> int:
    """Remove the checkpoints created by these runs, with their writes; return how many went.

    An ancestor that a surviving checkpoint needs to rebuild a delta channel is
    kept. Blobs no surviving checkpoint references are freed; a thread left
    empty leaves the store.

    Runtime complexity: O(size of the threads holding those runs), with a
    factor d * C for d delta channels and C channels per checkpoint
    (``lineage.required_ancestors``), and each thread's runs recounted once; no
    other thread is visited.
    """
    runs = set(run_ids)
    holders = sorted(set().union(*(state.runs.get(run, ()) for run in runs)))
    removed = 0
    for thread_id in holders:
        thread = state.threads[thread_id]
        runs_changed = False
        for name, space in list(thread.namespaces.items()):
            doomed = {cid for cid, record in space.records.items() if record.run_id in runs}
            if not doomed:
                continue
            survivors = [record for cid, record in space.records.items() if cid not in doomed]
            doomed -= required_ancestors(space, survivors)
            removal = plan_removal(space, doomed)
            runs_changed |= state.remove_checkpoints(thread, name, removal)
            removed += len(removal.checkpoint_ids)
        _settle(state, thread, runs_changed)
    return removed


def prune(state: State, thread_ids: Sequence[str], *, keep_last: int | None) -> None:
    """Keep only the newest ``keep_last`` checkpoints of each namespace (and what they need), or delete the
    threads (``keep_last=None``).

    Each namespace's newest ``keep_last`` checkpoints are kept with their writes
    and every ancestor they need to rebuild a delta channel; the rest goes, and
    so do blobs nothing kept references. With ``keep_last=None`` each thread is
    deleted as ``delete_thread`` does. The ids and the count were checked by the
    caller.

    Runtime complexity: O(size of the named threads), with a factor d * C for
    d delta channels and C channels per checkpoint (``required_ancestors``),
    and each thread's runs recounted once.
    """
    for thread_id in thread_ids:
        if keep_last is None:
            delete_thread(state, thread_id)
            continue
        thread = state.threads.get(thread_id)
        if thread is None:
            continue
        runs_changed = False
        for name, space in list(thread.namespaces.items()):
            if len(space.ids) <= keep_last:
                continue
            newest = [space.records[cid] for cid in space.ids[-keep_last:]]
            keep = required_ancestors(space, newest)
            keep.update(record.checkpoint_id for record in newest)
            removal = plan_removal(space, [cid for cid in space.ids if cid not in keep])
            if removal.checkpoint_ids:
                runs_changed |= state.remove_checkpoints(thread, name, removal)
        _settle(state, thread, runs_changed)


def remove_planned(state: State, thread_id: str, planned: Mapping[str, Sequence[str]]) -> int:
    """Remove exactly the checkpoints planned elsewhere (namespace to ids), with their writes (also writes
    stored under a planned id whose checkpoint is not) and the blobs no remaining checkpoint references; a
    remaining checkpoint whose parent is a planned id is left with no parent. Return how many checkpoints went.

    For a copy of a thread that another store pruned by its own plan (the tiered saver's durable tier): the
    copy may hold part of the thread only, and then answers as that store does, which leaves no parent that
    is not there. Ids, namespaces and a thread not stored are skipped.

    Runtime complexity: O(n * channels) per namespace named, of n checkpoints (``plan_removal``'s blob sweep
    and one pass over the records for their parents), and the thread's runs recounted once if a removed
    checkpoint had a run.
    """
    thread = state.threads.get(thread_id)
    if thread is None:
        return 0
    removed = 0
    runs_changed = False
    for name, checkpoint_ids in planned.items():
        space = thread.namespaces.get(name)
        if space is None:
            continue
        removal = plan_removal(space, checkpoint_ids)
        if removal.checkpoint_ids:
            runs_changed |= state.remove_checkpoints(thread, name, removal)
            removed += len(removal.checkpoint_ids)
        gone = set(checkpoint_ids)  # not only those held here: a kept one's parent may be gone from the other
        records = space.records
        orphans = [checkpoint_id for checkpoint_id, record in records.items() if record.parent_id in gone]
        for checkpoint_id in orphans:
            records[checkpoint_id] = records[checkpoint_id]._replace(parent_id=None)  # its cost counts no parent
        if orphans:
            state.mark_changed(thread_id)
        for checkpoint_id in [checkpoint_id for checkpoint_id in space.writes if checkpoint_id in gone]:
            state.remove_writes(thread, name, checkpoint_id)  # writes held under a checkpoint held elsewhere
    _settle(state, thread, runs_changed)
    return removed


def _settle(state: State, thread: Thread, runs_changed: bool) -> None:
    """After removals from a thread: unlink it if emptied, else recount its runs if they changed."""
    if not thread.namespaces:
        state.unlink(thread)
    elif runs_changed:
        state.reindex_runs(thread)
