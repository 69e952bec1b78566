"""Ancestry: walks along parent links, deletions that keep what survivors need, and the run index.

Some channel values are not stored at every checkpoint: they are rebuilt from
the nearest ancestor that stores a value (the *seed*) plus the writes recorded
at every ancestor on the way (LangGraph's ``DeltaChannel``). So:

* ``delta_history`` performs that walk for a reader;
* ``required_ancestors`` tells a deletion which ancestors a surviving
  checkpoint still needs, so that ``prune``, ``delete_runs`` and rolling
  history never cut such a chain;
* the run index (run id to the threads holding its checkpoints) lets
  ``delete_runs`` visit only those threads.

The functions that change the store are called with its lock held.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Collection, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, NamedTuple

from . import identifiers, memory
from .namespace import Namespace
from .records import BlobKey, ChannelHistory, CheckpointRecord, Payload, WriteRecord, payload_size
from .thread import Thread
from .totals import Totals

if TYPE_CHECKING:
    from .store import Store

# --- walks -------------------------------------------------------------------------------------------------


def ancestors(space: Namespace, record: CheckpointRecord) -> Iterator[CheckpointRecord]:
    """Stored ancestors of ``record``, nearest first; stops at a missing parent or a loop.

    Runtime complexity: O(1) per ancestor yielded.
    """
    seen = {record.checkpoint_id}
    parent_id = record.parent_id
    records = space.records
    while parent_id is not None and parent_id not in seen:
        parent = records.get(parent_id)
        if parent is None:
            return
        seen.add(parent_id)
        yield parent
        parent_id = parent.parent_id


def seed_at(space: Namespace, record: CheckpointRecord, channel: str) -> Payload | None:
    """The non-empty value ``record`` stores for ``channel``, if any. Runtime complexity: O(channels)."""
    version = record.version_of(channel)
    if version is None:
        return None
    return space.blobs.get((channel, version))


def delta_history(
    space: Namespace, target: CheckpointRecord | None, channels: Sequence[str]
) -> dict[str, ChannelHistory]:
    """For each channel, the writes and seed along ``target``'s ancestor chain.

    Each channel's walk ends at the nearest ancestor storing a non-empty value
    for it; that ancestor's own writes are included (they lead to its child).
    Writes stored at ``target`` itself are excluded.

    Runtime complexity: O(a * (r * C + w log w)) for a ancestors visited, r
    channels asked for, C channels per checkpoint (each version lookup is a C
    ``tuple.index``) and w writes per ancestor (all of them ordered).
    """
    collected: dict[str, list[WriteRecord]] = {channel: [] for channel in channels}
    seeds: dict[str, Payload] = {}
    remaining = set(channels)
    if target is not None:
        for ancestor in ancestors(space, target):
            if not remaining:
                break
            found = {channel: seed for channel in remaining if (seed := seed_at(space, ancestor, channel)) is not None}
            for write in reversed(space.ordered_writes(ancestor.checkpoint_id)):
                if write.channel in remaining:
                    collected[write.channel].append(write)
            seeds.update(found)
            remaining.difference_update(found)
    return {channel: ChannelHistory(writes=collected[channel][::-1], seed=seeds.get(channel)) for channel in channels}


def unseeded_delta_channels(space: Namespace, record: CheckpointRecord) -> set[str]:
    """Delta channels of ``record`` that it does not store a value for.

    Runtime complexity: O(d * C) for its d delta channels and C channels (version lookups).
    """
    return {
        channel
        for channel in record.delta_channels
        if record.version_of(channel) is not None and seed_at(space, record, channel) is None
    }


def required_ancestors(space: Namespace, keep: Iterable[CheckpointRecord]) -> set[str]:
    """Ids of ancestors that the kept checkpoints need to rebuild their delta channels.

    A needed ancestor is needed whole (its writes, and its own needs), so the
    result is closed: every checkpoint in ``keep`` or in the result can still
    be rebuilt once everything else is removed.

    Runtime complexity: O(n * d * C) for n checkpoints, d delta channels and C
    channels per checkpoint: a channel is carried through a checkpoint at most
    once, and each step looks up a version (O(C), in C).
    """
    carried: dict[str, set[str]] = {}
    required: set[str] = set()
    work = [(record, unseeded_delta_channels(space, record)) for record in keep]
    while work:
        record, channels = work.pop()
        for ancestor in ancestors(space, record):
            already = carried.setdefault(ancestor.checkpoint_id, set())
            channels = channels - already
            if not channels:
                break
            already |= channels
            if ancestor.checkpoint_id not in required:
                required.add(ancestor.checkpoint_id)
                own = unseeded_delta_channels(space, ancestor)
                if own:
                    work.append((ancestor, own))
            channels = {c for c in channels if seed_at(space, ancestor, c) is None}
            if not channels:
                break
    return required


# --- removals ---------------------------------------------------------------------------------------------


class Removal(NamedTuple):
    """Checkpoints (with their writes) and blobs to remove from one namespace, and what that frees.

    A plan: ``plan_removal`` returns it without changing anything, and
    ``carry_out`` applies it unchanged.
    """

    checkpoint_ids: list[str]
    blob_keys: list[BlobKey]
    freed: Totals


def plan_removal(space: Namespace, checkpoint_ids: Iterable[str], keep_blobs: Collection[BlobKey] = ()) -> Removal:
    """What removing these checkpoints, with their writes, would take away from ``space``.

    Blobs that no surviving checkpoint references go too, except ``keep_blobs``.
    Ids not stored are ignored. Runtime complexity: O(n * channels) for a
    namespace of n checkpoints (the blob sweep).
    """
    records = space.records
    ids = [checkpoint_id for checkpoint_id in dict.fromkeys(checkpoint_ids) if checkpoint_id in records]
    if not ids:
        return Removal([], [], Totals())
    nbytes = writes = extra = 0
    for checkpoint_id in ids:
        record = records[checkpoint_id]
        nbytes += record.nbytes
        extra += memory.record_extra(record)
        stored = space.writes.get(checkpoint_id)
        if stored:
            extra += memory.write_set_extra(stored)
            for write in stored.values():
                writes += 1
                nbytes += write.nbytes
    gone = set(ids)
    referenced = {key for cid, record in records.items() if cid not in gone for key in record.blob_keys()}
    blob_keys = [key for key in space.blobs if key not in referenced and key not in keep_blobs]
    for key in blob_keys:
        blob = space.blobs[key]
        nbytes += payload_size(blob)
        extra += memory.blob_extra(key, blob)
    return Removal(ids, blob_keys, Totals(nbytes, len(ids), writes, len(blob_keys), extra=extra))


def carry_out(space: Namespace, removal: Removal) -> list[CheckpointRecord]:
    """Apply a removal planned by ``plan_removal``; return the removed records.

    Runtime complexity: O(log n) plus one O(n) memory move for a single
    checkpoint, O(n) for several; O(1) per write set and blob.
    """
    records = space.records
    removed = [records.pop(checkpoint_id) for checkpoint_id in removal.checkpoint_ids]
    if len(removed) == 1:
        del space.ids[bisect_left(space.ids, removed[0].checkpoint_id)]
    elif removed:
        space.ids = [checkpoint_id for checkpoint_id in space.ids if checkpoint_id in records]
    for checkpoint_id in removal.checkpoint_ids:
        space.writes.pop(checkpoint_id, None)
    for key in removal.blob_keys:
        del space.blobs[key]
    return removed


# --- deletions -------------------------------------------------------------------------------------------


def remove_checkpoints(
    store: Store, thread: Thread, namespace: str, removal: Removal, *, unlink_empty: bool = False
) -> bool:
    """Carry out a planned removal in one namespace of a stored thread, keeping every total.

    A namespace left empty goes; a thread left empty goes too when ``unlink_empty``
    (and out of the run index with it). Returns whether a removed checkpoint
    belonged to a run: then the caller calls ``reindex_runs`` once it has
    removed all it will from the thread, if the thread is still stored.

    Runtime complexity: that of ``carry_out``.
    """
    space = thread.namespaces[namespace]
    removed = carry_out(space, removal)
    freed = removal.freed
    thread.nbytes -= freed.nbytes
    thread.checkpoints -= freed.checkpoints
    thread.writes -= freed.writes
    thread.blobs -= freed.blobs
    thread.extra -= freed.extra
    store.nbytes -= freed.nbytes
    store.checkpoints -= freed.checkpoints
    store.writes -= freed.writes
    store.blobs -= freed.blobs
    store.extra -= freed.extra
    if space.is_empty():
        del thread.namespaces[namespace]
        store.namespaces -= 1
        thread.extra -= len(namespace)
        store.extra -= len(namespace)
    if store.changed is not None:
        store.changed.add(thread.thread_id)
    if unlink_empty and not thread.namespaces:
        store.unlink(thread)
    return any(record.run_id is not None for record in removed)


def remove_namespace(store: Store, thread: Thread, namespace: str, freed: Totals) -> bool:
    """Remove a namespace of a stored thread whole, keeping every total with ``freed``, what
    planning it counted (``policy.plan_namespaces``).

    Returns whether a removed checkpoint belonged to a run: then the caller
    calls ``reindex_runs`` once it has removed all it will from the thread.

    Runtime complexity: O(checkpoints of the namespace) to look for runs.
    """
    space = thread.namespaces.pop(namespace)
    thread.nbytes -= freed.nbytes
    thread.checkpoints -= freed.checkpoints
    thread.writes -= freed.writes
    thread.blobs -= freed.blobs
    thread.extra -= freed.extra
    store.nbytes -= freed.nbytes
    store.checkpoints -= freed.checkpoints
    store.writes -= freed.writes
    store.blobs -= freed.blobs
    store.namespaces -= freed.namespaces
    store.extra -= freed.extra
    if store.changed is not None:
        store.changed.add(thread.thread_id)
    return any(record.run_id is not None for record in space.records.values())


def delete_runs(store: Store, run_ids: Iterable[str]) -> int:
    """Remove the checkpoints created by these runs, with their writes; return how many went.

    An ancestor that a surviving checkpoint needs to rebuild a delta channel is
    kept. Blobs no surviving checkpoint references are freed.

    Runtime complexity: O(size of the threads holding those runs), with a
    factor d * C for d delta channels and C channels per checkpoint
    (``required_ancestors``), and each thread's runs recounted once; no other
    thread is visited.
    """
    runs = set(run_ids)
    with store.lock:
        return _delete_runs(store, runs)


def _delete_runs(store: Store, runs: set[str]) -> int:
    thread_ids = sorted(set().union(*(store.runs.get(run, ()) for run in runs)))
    removed = 0
    for thread_id in thread_ids:
        thread = store.threads[thread_id]
        runs_changed = False
        for name, space in list(thread.namespaces.items()):
            doomed = {cid for cid, record in space.records.items() if record.run_id in runs}
            if not doomed:
                continue
            survivors = [record for cid, record in space.records.items() if cid not in doomed]
            doomed -= required_ancestors(space, survivors)
            removal = plan_removal(space, doomed)
            runs_changed |= remove_checkpoints(store, thread, name, removal, unlink_empty=True)
            removed += len(removal.checkpoint_ids)
        if runs_changed and thread.namespaces:  # still stored: an emptied thread left the run index whole
            reindex_runs(store, thread)
    return removed


def prune(store: Store, thread_ids: Iterable[str], *, keep_latest: bool) -> None:
    """Keep only the latest checkpoint of each namespace (and what it needs), or delete the threads.

    With ``keep_latest``, the latest checkpoint of each namespace is kept with
    its writes and every ancestor it needs to rebuild a delta channel; the rest
    goes, and so do blobs nothing kept references. Deleting a thread forgets
    its tombstone.

    Raises:
        ValueError: A thread id is invalid; nothing changed.

    Runtime complexity: O(size of the named threads), with a factor d * C for
    d delta channels and C channels per checkpoint (``required_ancestors``),
    and each thread's runs recounted once.
    """
    ids = [identifiers.check_identifier("thread_id", thread_id, store.limits) for thread_id in thread_ids]
    with store.lock:
        _prune(store, ids, keep_latest)


def _prune(store: Store, thread_ids: Sequence[str], keep_latest: bool) -> None:
    for thread_id in thread_ids:
        thread = store.threads.get(thread_id)
        if not keep_latest:
            store.tombstones.forget(thread_id)
            if thread is not None:
                store.unlink(thread)
            continue
        if thread is None:
            continue
        runs_changed = False
        for name, space in list(thread.namespaces.items()):
            latest = space.latest()
            if latest is None:
                continue
            keep = required_ancestors(space, [latest])
            keep.add(latest.checkpoint_id)
            removal = plan_removal(space, [cid for cid in space.ids if cid not in keep])
            if removal.checkpoint_ids:
                runs_changed |= remove_checkpoints(store, thread, name, removal, unlink_empty=True)
        if runs_changed and thread.namespaces:  # still stored: an emptied thread left the run index whole
            reindex_runs(store, thread)


# --- the run index ---------------------------------------------------------------------------------------


def index_run(store: Store, thread: Thread, run_id: str) -> None:
    """Note that a thread now holds checkpoints of a run. Runtime complexity: O(1)."""
    thread.runs.add(run_id)
    thread.extra += memory.RUN + len(run_id)
    store.extra += memory.RUN + len(run_id)
    holders = store.runs.get(run_id)
    if holders is None:
        store.runs[run_id] = {thread.thread_id}
    else:
        holders.add(thread.thread_id)


def reindex_runs(store: Store, thread: Thread) -> None:
    """Recount which runs a thread holds after checkpoints left it or changed run, and fix the index.

    Runtime complexity: O(checkpoints of the thread).
    """
    held = thread.recount_runs()
    for run_id in thread.runs - held:
        unindex_run(store, run_id, thread.thread_id)
        thread.extra -= memory.RUN + len(run_id)
        store.extra -= memory.RUN + len(run_id)
    for run_id in held - thread.runs:
        store.runs.setdefault(run_id, set()).add(thread.thread_id)
        thread.extra += memory.RUN + len(run_id)
        store.extra += memory.RUN + len(run_id)
    thread.runs = held


def unindex_run(store: Store, run_id: str, thread_id: str) -> None:
    """Forget that a thread holds checkpoints of a run. Runtime complexity: O(1)."""
    holders = store.runs.get(run_id)
    if holders is not None:
        holders.discard(thread_id)
        if not holders:
            del store.runs[run_id]
