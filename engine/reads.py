"""Reads that list or walk: ``Store.list``, ``Store.views`` and ``Store.delta_history``.

The one read on every step of a graph, ``Store.get``, stays in ``engine.store``
beside the writes. These take the store's lock themselves; ``list`` and
``delta_history`` mark the thread they read as used.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import partial
from operator import attrgetter
from typing import TYPE_CHECKING, NamedTuple

from . import identifiers, lineage, policy
from .namespace import EMPTY_NAMESPACE
from .records import ChannelHistory, CheckpointRecord, CheckpointView

if TYPE_CHECKING:
    from .store import Store


class CheckpointRef(NamedTuple):
    """Where a listed checkpoint lives; ``Store.views`` turns it into a read."""

    thread_id: str
    namespace: str
    record: CheckpointRecord


make_ref = partial(tuple.__new__, CheckpointRef)  # in C: one per listed checkpoint


def list_checkpoints(
    store: Store,
    thread_id: str | None,
    namespace: str | None = None,
    *,
    checkpoint_id: str | None = None,
    before: str | None = None,
    limit: int | None = None,
) -> list[CheckpointRef]:
    """Checkpoints newest first within each namespace; marks a named thread as used if it finds any.

    Args:
        store: The store.
        thread_id: The thread, or None for every thread in creation order.
        namespace: Only this namespace, or None for all of them.
        checkpoint_id: Only the checkpoint with this id.
        before: Only checkpoints whose id sorts below this one.
        limit: At most this many.

    Raises:
        ValueError: An identifier that is not stored is also invalid.

    Runtime complexity: O(log n + k) per namespace listed for k checkpoints
    returned; with ``thread_id=None``, O(T log T + namespaces of every thread)
    more to order T threads and visit their namespaces; plus expiry when due
    (``Store``).
    """
    with store.lock:
        now = store.clock()
        if now >= store.next_expiry:
            policy.expire(store, now, thread_id)
        if thread_id is None:
            threads = sorted(store.threads.values(), key=_creation_order)
        else:
            found = store.threads.get(thread_id)
            if found is None:
                identifiers.check_location(thread_id, namespace, checkpoint_id, store.limits)
            threads = [found] if found is not None else []
        refs: list[CheckpointRef] = []
        if limit is not None and limit <= 0:
            return refs
        for thread in threads:
            for name, space in thread.namespaces.items():
                if namespace is not None and name != namespace:
                    continue
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
            threads[0].last_used = now
            store.threads.move_to_end(thread_id)
        return refs


def views(store: Store, refs: Iterable[CheckpointRef]) -> list[CheckpointView | None]:
    """Read listed checkpoints under one hold of the lock: a view each, or None for one gone since.

    Does not mark threads as used (``list`` did). A thread that has expired
    since it was listed is removed and its checkpoints read as None.

    Runtime complexity: O(c + w log w) per checkpoint of c channels and w
    writes; plus expiry when due (``Store``), which may recur for each ref while
    more idle threads are due than one expiry takes.
    """
    found: list[CheckpointView | None] = []
    with store.lock:
        now = store.clock()
        threads = store.threads
        for ref in refs:
            if now >= store.next_expiry:
                policy.expire(store, now, ref.thread_id)
            thread = threads.get(ref.thread_id)
            space = None if thread is None else thread.namespaces.get(ref.namespace)
            if space is None or space.records.get(ref.record.checkpoint_id) is not ref.record:
                found.append(None)
            else:
                found.append(space.view(ref.thread_id, ref.namespace, ref.record))
    return found


def delta_history(
    store: Store, thread_id: str, namespace: str, checkpoint_id: str | None, channels: Sequence[str]
) -> dict[str, ChannelHistory]:
    """Writes and seed of each channel along a checkpoint's ancestor chain (``lineage.delta_history``).

    Marks the thread as used when the checkpoint is found.

    Raises:
        ValueError: An identifier that is not stored is also invalid.

    Runtime complexity: that of ``lineage.delta_history`` for the a ancestors
    walked, never more than the namespace holds; plus expiry when due (``Store``).
    """
    with store.lock:
        now = store.clock()
        if now >= store.next_expiry:
            policy.expire(store, now, thread_id)
        thread = store.threads.get(thread_id)
        space = None if thread is None else thread.namespaces.get(namespace)
        target = None
        if space is not None:
            target = space.latest() if checkpoint_id is None else space.records.get(checkpoint_id)
        if thread is None or space is None or target is None:
            identifiers.check_location(thread_id, namespace, checkpoint_id, store.limits)
            return lineage.delta_history(EMPTY_NAMESPACE, None, channels)
        thread.last_used = now
        store.threads.move_to_end(thread_id)
        return lineage.delta_history(space, target, channels)


_creation_order = attrgetter("created")  # in C
