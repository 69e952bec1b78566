"""Reads that list or walk: ``Store.list``, ``Store.views`` and ``Store.delta_history``.

The one read on every step of a graph, ``Store.get``, stays in ``engine.store``
beside the writes. ``list`` and ``delta_history`` mark the thread they read as
used; ``views`` does not (``list`` did).

Everything here runs with the store's lock held (``engine.store`` takes it),
after the store has expired what was due.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import partial
from operator import attrgetter
from typing import NamedTuple

from . import identifiers, lineage
from .namespace import EMPTY_NAMESPACE, Namespace
from .records import ChannelHistory, CheckpointRecord, CheckpointView, payload_size
from .state import State
from .stats import ThreadStorage
from .thread import Thread

__all__ = [
    "SELECT_THREADS_PER_HOLD",
    "CheckpointRef",
    "delta_history",
    "list_checkpoints",
    "select_in_threads",
    "threads_by_creation",
    "views",
]


class CheckpointRef(NamedTuple):
    """Where a listed checkpoint lives; ``Store.views`` turns it into a read."""

    thread_id: str
    namespace: str
    record: CheckpointRecord


make_ref = partial(tuple.__new__, CheckpointRef)  # in C: one per listed checkpoint


SELECT_THREADS_PER_HOLD = 64
"""Threads whose checkpoints ``Store.select_every_thread`` visits under one hold of the store's lock."""


def threads_by_creation(state: State) -> list[Thread]:
    """Every stored thread, oldest created first (``list(None)``'s order).

    Runtime complexity: O(T log T).
    """
    return sorted(state.threads.values(), key=_creation_order)


def select_in_threads(
    state: State,
    threads: Iterable[Thread],
    namespace: str | None,
    before: str | None,
    select: Callable[[CheckpointRecord], object],
) -> list[tuple[CheckpointRef, object]]:
    """The checkpoints of these threads, newest first within each namespace, for which ``select`` returns
    something other than None, each with what it returned; a thread no longer stored (or stored anew since) is
    skipped. Marks no thread as used.

    Runtime complexity: O(k) calls of ``select`` for the k checkpoints visited, plus O(log n) per namespace
    with ``before``.
    """
    stored = state.threads
    found: list[tuple[CheckpointRef, object]] = []
    for thread in threads:
        thread_id = thread.thread_id
        if stored.get(thread_id) is not thread:
            continue
        if namespace is None:
            spaces: Iterable[tuple[str, Namespace]] = thread.namespaces.items()
        else:
            named = thread.namespaces.get(namespace)
            spaces = () if named is None else ((namespace, named),)
        for name, space in spaces:
            records = space.records
            for found_id in reversed(space.ids) if before is None else space.newest_first(before):
                record = records[found_id]
                chosen = select(record)
                if chosen is not None:
                    found.append((make_ref((thread_id, name, record)), chosen))
    return found


def list_checkpoints(
    state: State,
    now: float,
    thread_id: str | None,
    namespace: str | None = None,
    *,
    checkpoint_id: str | None = None,
    before: str | None = None,
    limit: int | None = None,
) -> list[CheckpointRef]:
    """Checkpoints newest first within each namespace; marks a named thread as used if it finds any.

    Args:
        state: The store's state.
        now: The clock reading of the call.
        thread_id: The thread, or None for every thread in creation order.
        namespace: Only this namespace, or None for all of them.
        checkpoint_id: Only the checkpoint with this id.
        before: Only checkpoints whose id sorts below this one.
        limit: At most this many.

    Raises:
        ValueError: An identifier that is not stored is also invalid.

    Runtime complexity: O(log n + k) per namespace listed for k checkpoints
    returned; with ``thread_id=None``, O(T log T + namespaces of every thread)
    more to order T threads and visit their namespaces.
    """
    threads: list[Thread]
    if thread_id is None:
        threads = threads_by_creation(state)
    else:
        found = state.threads.get(thread_id)
        if found is None:
            identifiers.check_location(thread_id, namespace, checkpoint_id, state.limits)
        threads = [found] if found is not None else []
    refs: list[CheckpointRef] = []
    if limit is not None and limit <= 0:
        return refs
    for thread in threads:
        spaces: Iterable[tuple[str, Namespace]]
        if namespace is None:
            spaces = thread.namespaces.items()
        else:
            named = thread.namespaces.get(namespace)
            spaces = () if named is None else ((namespace, named),)
        for name, space in spaces:
            if checkpoint_id is not None:
                found_ids: Iterable[str] = (
                    (checkpoint_id,)
                    if checkpoint_id in space.records and (before is None or checkpoint_id < before)
                    else ()
                )
            else:
                found_ids = reversed(space.ids) if before is None else space.newest_first(before)
            for found_id in found_ids:
                refs.append(make_ref((thread.thread_id, name, space.records[found_id])))
                if len(refs) == limit:
                    break
            else:
                continue
            break
        else:
            continue
        break
    if thread_id is not None and refs:
        state.touch(threads[0], now)
    return refs


def views(state: State, now: float, refs: Iterable[CheckpointRef]) -> list[CheckpointView | None]:
    """A view of each listed checkpoint, or None for one gone since it was listed.

    A checkpoint whose thread has been idle past ``idle_ttl_seconds`` since it
    was listed reads as gone; the thread itself is left for the next
    operation's expiry, so that reading a long listing expires nothing.
    Does not mark threads as used (``list`` did).

    Runtime complexity: O(c + w log w) per checkpoint of c channels and w writes.
    """
    threads = state.threads
    ttl = state.limits.idle_ttl_seconds
    found: list[CheckpointView | None] = []
    for ref in refs:
        thread = threads.get(ref.thread_id)
        space = None if thread is None or now - thread.last_used >= ttl else thread.namespaces.get(ref.namespace)
        if space is None or space.records.get(ref.record.checkpoint_id) is not ref.record:
            found.append(None)
        else:
            found.append(space.view(ref.thread_id, ref.namespace, ref.record))
    return found


def delta_history(
    state: State, now: float, thread_id: str, namespace: str, checkpoint_id: str | None, channels: Sequence[str]
) -> dict[str, ChannelHistory]:
    """Writes and seed of each channel along a checkpoint's ancestor chain (``lineage.channel_history``).

    Marks the thread as used when the checkpoint is found.

    Raises:
        ValueError: An identifier that is not stored is also invalid.

    Runtime complexity: that of ``lineage.channel_history`` for the a ancestors
    walked, never more than the namespace holds.
    """
    thread = state.threads.get(thread_id)
    space = None if thread is None else thread.namespaces.get(namespace)
    record = None
    if space is not None:
        record = space.latest() if checkpoint_id is None else space.records.get(checkpoint_id)
    if thread is None or space is None or record is None:
        identifiers.check_location(thread_id, namespace, checkpoint_id, state.limits)
        return lineage.channel_history(EMPTY_NAMESPACE, None, channels)
    state.touch(thread, now)
    return lineage.channel_history(space, record, channels)


_creation_order = attrgetter("created")  # in C


def thread_storage(state: State, thread_id: str, tier: str) -> ThreadStorage:
    """The bytes a stored thread occupies, from the records themselves (no payload is re-serialized).

    Reads only: a thread the store does not hold reports zeros, and nothing is created, expired or
    marked as used.

    Runtime complexity: O(k + b + w) for the thread's k checkpoints, b channel values and w writes.
    """
    thread = state.threads.get(thread_id)
    if thread is None:
        return ThreadStorage(thread_id, tier)
    by_channel: dict[str, int] = {}
    checkpoint_bytes = write_bytes = writes = 0
    for space in thread.namespaces.values():
        checkpoint_bytes += sum(record.nbytes for record in space.records.values())
        for stored in space.writes.values():
            writes += len(stored)
            write_bytes += sum(write.nbytes for write in stored.values())
        for (channel, _version), blob in space.blobs.items():
            by_channel[channel] = by_channel.get(channel, 0) + payload_size(blob)
    return ThreadStorage(
        thread_id,
        tier,
        namespaces=len(thread.namespaces),
        checkpoints=thread.checkpoints,
        checkpoint_bytes=checkpoint_bytes,
        channel_values=thread.blobs,
        channel_bytes=sum(by_channel.values()),
        by_channel=by_channel,
        pending_writes=writes,
        pending_write_bytes=write_bytes,
    )
