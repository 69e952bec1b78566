"""Threads moving in and out as a whole: exports, imports, copies and snapshots.

These are cold operations: they take their time (O(size of the threads they
move)) and their clarity comes first. They run with the store's lock held,
except ``import_thread``, which checks the export before taking it.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import islice
from typing import TYPE_CHECKING

from . import identifiers, memory, policy
from .export import NamespaceExport, ThreadExport, checked_namespace
from .namespace import Namespace
from .thread import Thread

if TYPE_CHECKING:
    from .store import Store


def export(thread: Thread) -> ThreadExport:
    """Everything a thread holds; the records are shared, not copied. Runtime complexity: O(size of the thread)."""
    return ThreadExport(
        thread.thread_id, {name: NamespaceExport.of(space) for name, space in thread.namespaces.items()}
    )


def copy_thread(store: Store, source_id: str, target_id: str) -> None:
    """Copy every namespace, checkpoint, write and blob of one thread into another.

    Records already in the target stay unless the source has the same key,
    which wins. A missing source copies nothing. The target's bytes are counted
    in full even though it shares immutable payloads with the source, so that
    evicting either frees what the accounting says. Marks the target, then the
    source, as used.

    Raises:
        CheckpointCapacityError: The target would exceed a per-thread limit, or
            there is no room for it without evicting the source.

    Runtime complexity: O(s log s) for the s checkpoints of both threads (the
    merged ids are sorted), plus O(namespaces + runs) per thread evicted, plus
    expiry when due (``Store``), for each of the two threads.
    """
    identifiers.check_identifier("source thread_id", source_id, store.limits)
    identifiers.check_identifier("target thread_id", target_id, store.limits)
    with store.lock:
        now = store.clock()
        if now >= store.next_expiry:
            policy.expire(store, now, source_id)
            policy.expire(store, now, target_id)
        source = store.threads.get(source_id)
        if source is None or source_id == target_id:
            return
        install(store, target_id, source.namespaces, now, keep=[source])
        source.last_used = now
        store.threads.move_to_end(source_id)


def export_thread(store: Store, thread_id: str) -> ThreadExport | None:
    """Everything a thread holds, still serialized, or None if it is not stored (or has expired).

    The export shares the store's immutable records; it does not mark the
    thread as used. Runtime complexity: O(size of the thread), plus expiry
    when due (``Store``).
    """
    with store.lock:
        thread = store.threads.get(thread_id)
        if thread is None:
            identifiers.check_identifier("thread_id", thread_id, store.limits)
            return None
        now = store.clock()
        if now - thread.last_used >= store.limits.idle_ttl_seconds:
            policy.expire(store, now, thread_id)
            return None
        return export(thread)


def import_thread(
    store: Store, export: ThreadExport, thread_id: str | None = None, *, idle_seconds: float = 0.0
) -> None:
    """Store an export as a thread (its own id unless ``thread_id`` is given).

    Merges into an existing thread as ``copy_thread`` does, the export's records
    winning. Every identifier and payload is checked first, and the limits hold
    as for any write, ``max_checkpoint_bytes`` for each imported checkpoint
    included. ``idle_seconds`` backdates the thread's last use (restoring a
    snapshot keeps threads' ages). The thread goes to the most recently used
    end, and least-recently-used order is also idle order, so it is never made
    idler than the thread used before it: import oldest first to keep every age.

    Raises:
        ValueError: The export is malformed or holds an invalid identifier.
        CheckpointCapacityError: The thread would exceed a limit; nothing changed.

    Runtime complexity: O(s log s) for the s checkpoints of the export and of
    the existing thread (the merged ids are sorted), plus expiry when due
    (``Store``) and O(namespaces + runs) per thread evicted.
    """
    if not isinstance(export, ThreadExport):
        raise ValueError(f"export must be a ThreadExport, got {type(export).__name__}")
    limits = store.limits
    target_id = identifiers.check_identifier("thread_id", export.thread_id if thread_id is None else thread_id, limits)
    if not isinstance(export.namespaces, Mapping):
        raise ValueError(f"namespaces must be a mapping, got {type(export.namespaces).__name__}")
    namespaces = {name: checked_namespace(name, space, limits) for name, space in export.namespaces.items()}
    namespaces = {name: space for name, space in namespaces.items() if not space.is_empty()}  # nothing to keep
    largest = max(
        (space.state_size(record) for space in namespaces.values() for record in space.records.values()), default=0
    )
    with store.lock:
        now = store.clock()
        if now >= store.next_expiry:
            policy.expire(store, now, target_id)
        if largest > limits.max_checkpoint_bytes:
            policy.reject(store, "max_checkpoint_bytes", limits.max_checkpoint_bytes, largest, target_id)
        if namespaces:
            thread = install(store, target_id, namespaces, now, keep=[])
            last_used = now - max(0.0, idle_seconds)
            if len(store.threads) > 1:  # LRU order is idle order: never idler than the thread used before it
                used_before = store.threads[next(islice(reversed(store.threads), 1, None))]
                last_used = max(last_used, used_before.last_used)
            thread.last_used = last_used
            store.next_expiry = min(store.next_expiry, thread.last_used + limits.idle_ttl_seconds)


def install(
    store: Store, target_id: str, namespaces: Mapping[str, Namespace], now: float, keep: list[Thread]
) -> Thread:
    """Merge namespaces into the thread ``target_id`` (created if absent), within the limits; return it.

    Builds the merged thread aside, decides feasibility, evicts what must go,
    then swaps it in at the most recently used end. ``keep`` are threads that
    must not be evicted for it.

    Runtime complexity: O(size of the merged thread) and O(n log n) for its n
    checkpoint ids sorted (``_absorb``), plus O(namespaces + runs) per thread evicted.
    """
    limits = store.limits
    target = store.threads.get(target_id)
    merged = Thread(target_id, now, -1)
    if target is not None:
        _absorb(merged, target.namespaces)
        keep = [*keep, target]
    _absorb(merged, namespaces)
    totals = merged.recount()
    merged.nbytes, merged.checkpoints, merged.writes, merged.blobs = (
        totals.nbytes,
        totals.checkpoints,
        totals.writes,
        totals.blobs,
    )
    merged.runs = merged.recount_runs()
    merged.extra = memory.thread_extra(merged)
    if len(merged.namespaces) > limits.max_namespaces_per_thread:
        policy.reject(
            store, "max_namespaces_per_thread", limits.max_namespaces_per_thread, len(merged.namespaces), target_id
        )
    if merged.checkpoints > limits.max_checkpoints_per_thread:
        policy.reject(
            store, "max_checkpoints_per_thread", limits.max_checkpoints_per_thread, merged.checkpoints, target_id
        )
    growth = merged.nbytes - (target.nbytes if target is not None else 0)
    footprint = memory.of_thread(merged) - (memory.of_thread(target) if target is not None else 0)
    if (
        store.nbytes + growth > limits.max_total_bytes
        or (target is None and len(store.threads) >= limits.max_threads)
        or store.memory_limited
    ):
        policy.make_room(store, growth, footprint, keep, target_id, now, target is None)
    if target is not None:
        store.unlink(target)
        merged.created = target.created
    else:
        merged.created = next(store.creation)
    store.threads[target_id] = merged
    store.nbytes += merged.nbytes
    store.checkpoints += merged.checkpoints
    store.writes += merged.writes
    store.blobs += merged.blobs
    store.namespaces += len(merged.namespaces)
    store.extra += merged.extra
    for run_id in merged.runs:
        store.runs.setdefault(run_id, set()).add(target_id)
    store.tombstones.forget(target_id)
    store.next_expiry = min(store.next_expiry, now + limits.idle_ttl_seconds)
    if store.changed is not None:
        store.changed.add(target_id)
    return merged


def _absorb(thread: Thread, namespaces: Mapping[str, Namespace]) -> None:
    """Add the contents of ``namespaces`` to a thread set aside, their records winning on equal keys.

    Records are immutable, so they are shared, not copied; containers are new.
    Runtime complexity: O((n + m) log(n + m)) per namespace for the merged ids, O(size) besides.
    """
    for name, source in namespaces.items():
        space = thread.namespaces.get(name)
        if space is None:
            space = thread.namespaces[name] = Namespace()
        space.blobs.update(source.blobs)
        space.records.update(source.records)
        space.ids = sorted(space.records)
        for checkpoint_id, writes in source.writes.items():
            stored = space.writes.get(checkpoint_id)
            if stored is None:
                space.writes[checkpoint_id] = dict(writes)
            else:
                stored.update(writes)


def snapshot(store: Store) -> tuple[list[tuple[ThreadExport, float]], float]:
    """Every live thread's export with its idle seconds, least recently used first, and the clock.

    Only threads changed since the previous snapshot are exported (the others'
    exports are reused: records are immutable), so a periodic snapshot holds
    writers up for a copy of the changed threads, not of the store. Threads
    past their TTL are left out.

    Runtime complexity: O(T + size of the changed threads) under the lock.
    """
    with store.lock:
        return _snapshot(store)


def _snapshot(store: Store) -> tuple[list[tuple[ThreadExport, float]], float]:
    now = store.clock()
    ttl = store.limits.idle_ttl_seconds
    if store.exports is None or store.changed is None:
        store.exports, store.changed = {}, set(store.threads)
    exports, changed = store.exports, store.changed
    for thread_id in changed:
        thread = store.threads.get(thread_id)
        if thread is None:
            exports.pop(thread_id, None)
        else:
            exports[thread_id] = export(thread)
    changed.clear()
    return [
        (exports[thread_id], now - thread.last_used)
        for thread_id, thread in store.threads.items()
        if now - thread.last_used < ttl
    ], now
