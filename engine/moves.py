"""Threads moving in and out as a whole: exports, imports, copies and snapshots.

These are cold operations: they take their time (O(size of the threads they
move)) and their clarity comes first. ``prepare_import`` checks an export
without the lock; everything else runs with the store's lock held
(``engine.store`` takes it), after the store has expired what was due.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import islice
from typing import NamedTuple

from . import eviction, identifiers, memory
from .errors import CheckpointCapacityError, InvalidArgumentError
from .export import ThreadExport, checked_namespace
from .limits import StoreLimits
from .namespace import Namespace
from .state import State
from .thread import Thread

__all__ = ["PreparedImport", "copy_thread", "export_thread", "import_thread", "install", "prepare_import", "snapshot"]


def export_thread(state: State, thread_id: str) -> ThreadExport | None:
    """Everything a thread holds, still serialized, or None if it is not stored.

    The export shares the store's immutable records; it does not mark the
    thread as used. Runtime complexity: O(size of the thread).
    """
    thread = state.threads.get(thread_id)
    if thread is None:
        identifiers.check_identifier("thread_id", thread_id, state.limits)
        return None
    return ThreadExport.of(thread)


def copy_thread(state: State, now: float, source_id: str, target_id: str) -> None:
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
    merged ids are sorted), plus O(namespaces + runs) per thread evicted.
    """
    source = state.threads.get(source_id)
    if source is None or source_id == target_id:
        return
    install(state, target_id, source.namespaces, now, keep=[source])
    state.touch(source, now)


class PreparedImport(NamedTuple):
    """An export checked and turned into namespaces, ready to install (``prepare_import``).

    Attributes:
        thread_id: The thread it goes to.
        namespaces: Its non-empty namespaces.
        largest_state: The largest whole state of one of its checkpoints, in bytes.
    """

    thread_id: str
    namespaces: dict[str, Namespace]
    largest_state: int


def prepare_import(export: ThreadExport, thread_id: str | None, limits: StoreLimits) -> PreparedImport:
    """Check every identifier and payload of an export and build its namespaces; changes nothing.

    Raises:
        ValueError: The export is malformed or holds an invalid identifier.

    Runtime complexity: O(size of the export), and O(n log n) per namespace of n checkpoints.
    """
    if not isinstance(export, ThreadExport):
        raise InvalidArgumentError(f"export must be a ThreadExport, got {type(export).__name__}")
    target_id = identifiers.check_identifier("thread_id", export.thread_id if thread_id is None else thread_id, limits)
    if not isinstance(export.namespaces, Mapping):
        raise InvalidArgumentError(f"namespaces must be a mapping, got {type(export.namespaces).__name__}")
    checked = {name: checked_namespace(name, space, limits) for name, space in export.namespaces.items()}
    namespaces = {name: space for name, space in checked.items() if not space.is_empty()}  # nothing to keep
    largest = max(
        (space.state_size(record) for space in namespaces.values() for record in space.records.values()), default=0
    )
    return PreparedImport(target_id, namespaces, largest)


def import_thread(state: State, now: float, prepared: PreparedImport, idle_seconds: float) -> None:
    """Store a prepared export, merged into its thread as ``copy_thread`` merges, its records winning.

    The limits hold as for any write, ``max_checkpoint_bytes`` for each imported
    checkpoint included. ``idle_seconds`` backdates the thread's last use
    (restoring a snapshot keeps threads' ages). The thread goes to the most
    recently used end, and least-recently-used order is also idle order, so it
    is never made idler than the thread used before it: import oldest first to
    keep every age.

    Raises:
        CheckpointCapacityError: The thread would exceed a limit; nothing changed.

    Runtime complexity: O(s log s) for the s checkpoints of the export and of
    the existing thread (the merged ids are sorted), plus O(namespaces + runs)
    per thread evicted.
    """
    limits = state.limits
    if prepared.largest_state > limits.max_checkpoint_bytes:
        raise CheckpointCapacityError(
            "max_checkpoint_bytes", limits.max_checkpoint_bytes, prepared.largest_state, thread_id=prepared.thread_id
        )
    if not prepared.namespaces:
        return
    thread = install(state, prepared.thread_id, prepared.namespaces, now, keep=[])
    last_used = now - max(0.0, idle_seconds)
    if len(state.threads) > 1:  # LRU order is idle order: never idler than the thread used before it
        used_before = state.threads[next(islice(reversed(state.threads), 1, None))]
        last_used = max(last_used, used_before.last_used)
    thread.last_used = last_used
    state.next_expiry = min(state.next_expiry, last_used + limits.idle_ttl_seconds)


def install(
    state: State, target_id: str, namespaces: Mapping[str, Namespace], now: float, keep: list[Thread]
) -> Thread:
    """Merge namespaces into the thread ``target_id`` (created if absent), within the limits; return it.

    Builds the merged thread aside, decides feasibility, evicts what must go,
    then swaps it in at the most recently used end. ``keep`` are threads that
    must not be evicted for it.

    Raises:
        CheckpointCapacityError: A per-thread limit, or no room without evicting ``keep``.

    Runtime complexity: O(size of the merged thread) and O(n log n) for its n
    checkpoint ids sorted (``_absorb``), plus O(namespaces + runs) per thread evicted.
    """
    limits = state.limits
    target = state.threads.get(target_id)
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
    merged.variable_overhead = memory.thread_overhead(merged)
    if len(merged.namespaces) > limits.max_namespaces_per_thread:
        raise CheckpointCapacityError(
            "max_namespaces_per_thread", limits.max_namespaces_per_thread, len(merged.namespaces), thread_id=target_id
        )
    if merged.checkpoints > limits.max_checkpoints_per_thread:
        raise CheckpointCapacityError(
            "max_checkpoints_per_thread", limits.max_checkpoints_per_thread, merged.checkpoints, thread_id=target_id
        )
    growth = merged.nbytes - (target.nbytes if target is not None else 0)
    footprint = memory.of_thread(merged) - (memory.of_thread(target) if target is not None else 0)
    eviction.make_room(state, growth, footprint, keep, target_id, now, target is None)
    if target is not None:
        state.unlink(target)
        merged.created = target.created
    else:
        merged.created = next(state.creation)
    state.link(merged)
    state.tombstones.forget(target_id)
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


def snapshot(state: State, now: float) -> list[tuple[ThreadExport, float]]:
    """Every live thread's export with its idle seconds, least recently used first.

    Only threads changed since the previous snapshot are exported (the others'
    exports are reused: records are immutable), so a periodic snapshot holds
    writers up for a copy of the changed threads, not of the store. Threads
    past their TTL are left out.

    Runtime complexity: O(T + size of the changed threads).
    """
    ttl = state.limits.idle_ttl_seconds
    if state.exports is None or state.changed is None:
        state.exports, state.changed = {}, set(state.threads)
    exports, changed = state.exports, state.changed
    for thread_id in changed:  # stored threads only: one that left was forgotten then (State.forget_snapshot_of)
        exports[thread_id] = ThreadExport.of(state.threads[thread_id])
    changed.clear()
    return [
        (exports[thread_id], now - thread.last_used)
        for thread_id, thread in state.threads.items()
        if now - thread.last_used < ttl
    ]
