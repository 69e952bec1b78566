"""What the limits do: expiry, eviction, rejection, refusal of dropped threads, rolling history.

Every function here is reached from a store transaction through one inline
test, only when it has work to do, and is called with the store's lock held
(``purge_expired`` takes it itself, batch by batch).
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple, NoReturn

from . import identifiers, lineage, memory, moves
from .errors import CheckpointCapacityError, ThreadEvictedError
from .lineage import Removal, plan_removal
from .namespace import EMPTY_NAMESPACE, Namespace
from .records import Blob, BlobKey, CheckpointRecord
from .thread import Thread
from .tombstones import DroppedThread
from .totals import Totals

if TYPE_CHECKING:
    from .store import Store

EXPIRY_BUDGET = 4
"""Idle threads an operation removes from the front of the LRU order, besides the one it touches."""

PURGE_BATCH = 256
"""Idle threads ``purge_expired`` removes per hold of the lock."""

TOMBSTONE_SHARE = 16
"""Under ``max_memory_bytes``, tombstones keep at most this fraction of it (the oldest go first)."""

# --- expiry ------------------------------------------------------------------------------------------


def expire(store: Store, now: float, touched: str | None) -> None:
    """Remove the thread an operation touches if it has expired (lazily), and at most
    ``EXPIRY_BUDGET`` of the oldest idle threads (actively); then reset ``next_expiry``.

    Runtime complexity: O(EXPIRY_BUDGET + 1) threads removed, each O(namespaces +
    runs), plus its export when a hook is set.
    """
    ttl = store.limits.idle_ttl_seconds
    threads = store.threads
    if touched is not None:
        thread = threads.get(touched)
        if thread is not None and now - thread.last_used >= ttl:
            _expire_one(store, thread, ttl, now)
    for _ in range(EXPIRY_BUDGET):
        if not threads:
            break
        oldest = next(iter(threads.values()))
        if now - oldest.last_used < ttl:
            break
        _expire_one(store, oldest, ttl, now)
    store.next_expiry = next(iter(threads.values())).last_used + ttl if threads else math.inf


def purge_expired(store: Store) -> int:
    """Remove every expired thread, ``PURGE_BATCH`` per hold of the lock; return how many.

    Runtime complexity: O(expired threads): they are at the front of the LRU
    order. No other caller waits longer than one batch.
    """
    removed = 0
    while True:
        with store.lock:
            now = store.clock()
            ttl = store.limits.idle_ttl_seconds
            threads = store.threads
            batch = 0
            while threads and batch < PURGE_BATCH:
                oldest = next(iter(threads.values()))
                if now - oldest.last_used < ttl:
                    break
                _expire_one(store, oldest, ttl, now)
                batch += 1
            store.next_expiry = next(iter(threads.values())).last_used + ttl if threads else math.inf
        removed += batch
        if batch < PURGE_BATCH:
            return removed


def _expire_one(store: Store, thread: Thread, ttl: float, now: float) -> None:
    remove(store, thread, "idle_ttl_seconds", ttl, now)
    store.expired += 1


# --- eviction and rejection ------------------------------------------------------------------------------


def make_room(
    store: Store,
    growth: int,
    footprint: int,
    keep: Sequence[Thread],
    thread_id: str,
    now: float,
    adds_thread: bool,
) -> None:
    """Remove least-recently-used threads, never those in ``keep``, so that the store can
    grow by ``growth`` payload bytes, ``footprint`` bytes of heap estimate and one thread
    if ``adds_thread``; or reject.

    Feasibility is decided first: a rejection evicts nobody. An idle thread past
    its TTL taken on the way counts as expired, not evicted. Under
    ``max_memory_bytes``, once no other thread is left, the oldest tombstones go
    too (each eviction leaves one, and they hold memory).

    Raises:
        CheckpointCapacityError: ``max_total_bytes``, ``max_memory_bytes`` or
            ``max_threads`` cannot be met even with every other thread gone.

    Runtime complexity: O(len(keep)) to decide feasibility; then O(len(keep))
    per thread removed, each O(namespaces + runs) plus its export when a hook
    is set, and O(1) per tombstone shed.
    """
    limits = store.limits
    kept = sum(thread.nbytes for thread in keep) + growth
    if kept > limits.max_total_bytes:
        reject(store, "max_total_bytes", limits.max_total_bytes, kept, thread_id)
    kept_memory = sum(memory.of_thread(thread) for thread in keep) + footprint
    if kept_memory > limits.max_memory_bytes:
        reject(store, "max_memory_bytes", limits.max_memory_bytes, kept_memory, thread_id)
    if adds_thread and len(keep) + 1 > limits.max_threads:
        reject(store, "max_threads", limits.max_threads, len(keep) + 1, thread_id)
    threads = store.threads
    ttl = limits.idle_ttl_seconds
    while True:
        if adds_thread and len(threads) + 1 > limits.max_threads:
            limit = "max_threads"
        elif store.nbytes + growth > limits.max_total_bytes:
            limit = "max_total_bytes"
        elif store.memory_limited and memory.of_store(store) + footprint > limits.max_memory_bytes:
            limit = "max_memory_bytes"
        else:
            return
        victim = next((thread for thread in threads.values() if thread not in keep), None)
        if victim is None:  # only tombstones are left to shed: the memory they hold
            if store.tombstones.forget_oldest():
                continue
            return  # unreachable: the feasibility test above counted everything that stays

        if now - victim.last_used >= ttl:
            _expire_one(store, victim, ttl, now)
        elif limit == "max_threads":
            remove(store, victim, limit, limits.max_threads, now)
            store.evicted_for_threads += 1
        elif limit == "max_total_bytes":
            remove(store, victim, limit, limits.max_total_bytes, now)
            store.evicted_for_bytes += 1
        else:
            remove(store, victim, limit, limits.max_memory_bytes, now)
            store.evicted_for_memory += 1


def remove(store: Store, thread: Thread, limit: str, limit_value: float, now: float) -> None:
    """Evict or expire a thread whole: leave a tombstone, queue its announcement, unlink it.

    Runtime complexity: O(namespaces + runs), plus its export when a hook is set.
    """
    newest = max((space.ids[-1] for space in thread.namespaces.values() if space.ids), default=None)
    record = DroppedThread(thread.thread_id, limit, limit_value, now, newest)
    tombstones = store.tombstones
    tombstones.remember(record)
    if store.memory_limited:  # tombstones may hold a sixteenth of the memory limit, no more
        while memory.of_tombstones(tombstones) > store.limits.max_memory_bytes / TOMBSTONE_SHARE:
            tombstones.forget_oldest()
    if store.announcements.hook is not None:
        store.announcements.queue.append((record, moves.export(thread)))
    store.unlink(thread)


def reject(
    store: Store, limit: str, limit_value: float, needed: float, thread_id: str | None, hint: str | None = None
) -> NoReturn:
    """Count a rejection and raise its ``CheckpointCapacityError`` (``hint``: what to do). Runtime complexity: O(1)."""
    store.rejections[limit] += 1
    raise CheckpointCapacityError(limit, limit_value, needed, thread_id=thread_id, hint=hint)


# --- new threads and namespaces -----------------------------------------------------------------------------


def admit_location(store: Store, thread: Thread | None, thread_id: str, namespace: str) -> Pruning | None:
    """Check the identifiers a write adds as new keys, and ``max_namespaces_per_thread``.

    Returns the namespaces to prune first when the thread is at the limit under
    ``on_namespace_limit="prune_oldest"`` (``plan_namespaces``), else None.

    Raises:
        ValueError: A new thread id or namespace is invalid.
        CheckpointCapacityError: The thread would have one namespace too many.

    Runtime complexity: O(length of the identifiers), plus, at the limit,
    O(s log s + size of the namespaces taken) for a thread of s namespaces
    (``plan_namespaces``).
    """
    limits = store.limits
    if thread is None:
        identifiers.check_identifier("thread_id", thread_id, limits)
    identifiers.check_namespace(namespace, limits)
    if thread is None or len(thread.namespaces) < limits.max_namespaces_per_thread:
        return None
    return plan_namespaces(store, thread)


# --- pruning a thread's own history: namespaces and rolling checkpoints -----------------------------------


class Pruning(NamedTuple):
    """What a write removes from its own thread to fit its limits, planned before anything changes.

    Attributes:
        namespaces: Namespaces removed whole (``on_namespace_limit="prune_oldest"``),
            each with what removing it frees.
        removals: Oldest checkpoints removed per namespace (``on_checkpoint_limit="prune_oldest"``).
        freed: What all of it frees.
    """

    namespaces: dict[str, Totals]
    removals: dict[str, Removal]
    freed: Totals


NO_PRUNING = Pruning({}, {}, Totals())

_SUBGRAPHS = (
    "Namespaces come from subgraph calls: each call checkpoints under a namespace of its own "
    "(node:<task id>), so a thread gains one per call."
)


def plan_namespaces(store: Store, thread: Thread) -> Pruning:
    """The namespaces to remove whole so that a thread at ``max_namespaces_per_thread`` can take a new one.

    Under ``on_namespace_limit="prune_oldest"``, takes the least recently written
    non-root namespaces that are complete: their newest checkpoint id sorts below
    the root namespace's newest. Ids are time-ordered, so what stays is what the
    current step still needs: subgraphs running, interrupted, or of the current
    step are never taken. Changes nothing.

    Raises:
        CheckpointCapacityError: ``max_namespaces_per_thread``, under ``"reject"``
            or when no namespace is complete; the message says why and what to do.

    Runtime complexity: O(s log s) for the s namespaces of the thread, plus the
    size of the one taken.
    """
    limits = store.limits
    maximum = limits.max_namespaces_per_thread
    count = len(thread.namespaces) + 1
    held = f"The thread holds {len(thread.namespaces)} namespaces; this write would add one more."
    if limits.on_namespace_limit != "prune_oldest":
        hint = (
            f'{held} {_SUBGRAPHS} Set on_namespace_limit="prune_oldest" to remove the oldest completed '
            f"subgraph namespaces as new ones come, or raise max_namespaces_per_thread."
        )
        reject(store, "max_namespaces_per_thread", maximum, count, thread.thread_id, hint)
    root = thread.namespaces.get("")
    cutoff = root.ids[-1] if root is not None and root.ids else None
    complete = sorted(
        (space.ids[-1], name)
        for name, space in thread.namespaces.items()
        if name and space.ids and cutoff is not None and space.ids[-1] < cutoff
    )
    if not complete:
        hint = (
            f"{held} None of them is complete: every subgraph namespace belongs to a subgraph that is still "
            f"running, interrupted, or of the current step (more than max_namespaces_per_thread at once, a wide "
            f"fan-out for example). Raise max_namespaces_per_thread above the widest step."
        )
        reject(store, "max_namespaces_per_thread", maximum, count, thread.thread_id, hint)
    name = complete[0][1]
    space = thread.namespaces[name]
    freed = space.recount()
    freed = Totals(
        freed.nbytes, freed.checkpoints, freed.writes, freed.blobs, 1, memory.namespace_extra(space) + len(name)
    )
    return Pruning({name: freed}, {}, freed)


# --- writes that continue a dropped thread --------------------------------------------------------------------


def refuse_continuation(store: Store, thread_id: str, space: Namespace, continues: str | None, now: float) -> bool:
    """Refuse a write that continues a checkpoint of a thread since evicted or expired.

    Returns True when the write starts the thread afresh (its tombstone may go
    once the write is stored).

    Raises:
        ThreadEvictedError: The write continues the dropped thread's state.

    Runtime complexity: O(1).
    """
    record = store.tombstones.records[thread_id]
    if not record.continued_by(continues) or continues in space.records:
        return True
    store.rejections[record.limit] += 1
    raise ThreadEvictedError(
        record.limit,
        record.limit_value,
        thread_id=thread_id,
        checkpoint_id=continues or "",
        seconds_ago=now - record.dropped_at,
    )


# --- rolling history --------------------------------------------------------------------------------------------


def plan_rolling(
    store: Store,
    thread: Thread,
    namespace: str,
    record: CheckpointRecord,
    new_blobs: Mapping[BlobKey, Blob],
    pruning: Pruning | None,
) -> Pruning | None:
    """The thread's oldest checkpoints that make room for ``record`` (with what ``pruning`` already
    takes), or a rejection; None when the namespaces ``pruning`` removes make room enough.

    Under ``on_checkpoint_limit="prune_oldest"``, takes the thread's oldest
    checkpoints (ids are time-ordered, so across namespaces too), a tenth of the
    limit at a time, so that this O(n) planning is paid once per that many puts.
    Never takes the new checkpoint's parent, nor an ancestor that a kept
    checkpoint (or the new one) needs to rebuild a delta channel. Changes nothing.

    Raises:
        CheckpointCapacityError: ``max_checkpoints_per_thread``, under ``"reject"``
            or when too little can be taken.

    When the checkpoints just past the cut lean on the ones before it (a delta
    channel seeded long ago), the cut moves forward, at least doubling each
    time, so that whole old chains go first; it may then take more than a tenth.

    Runtime complexity: O(n * (d * C + 1) * log n + n * (C + log s)) for the n
    checkpoints of the thread in s namespaces, d delta channels and C channels
    per checkpoint: O(log n) passes (the cut at least doubles), each recomputing
    what the survivors need (``lineage.required_ancestors``); the ids merged
    oldest first; the blob sweeps (``lineage.plan_removal``).
    """
    limits = store.limits
    maximum = limits.max_checkpoints_per_thread
    pruning = pruning or NO_PRUNING
    count = thread.checkpoints - pruning.freed.checkpoints + 1
    if count <= maximum:
        return pruning if pruning.namespaces else None
    if limits.on_checkpoint_limit != "prune_oldest":
        hint = (
            f"The thread holds {thread.checkpoints} checkpoints, all namespaces counted. Set "
            f'on_checkpoint_limit="prune_oldest" to keep a rolling history of the newest ones (time travel and '
            f"DeltaChannel state keep working), or raise max_checkpoints_per_thread."
        )
        reject(store, "max_checkpoints_per_thread", maximum, count, thread.thread_id, hint)
    wanted = int(count - maximum) + max(1, int(maximum // 10)) - 1  # maximum is finite here: count passed it
    oldest_first = list(
        heapq.merge(
            *(
                zip(space.ids, itertools.repeat(name))
                for name, space in thread.namespaces.items()
                if name not in pruning.namespaces
            )
        )
    )
    written = thread.namespaces.get(namespace)
    parent = written.records.get(record.parent_id) if written is not None and record.parent_id else None
    # Remove the oldest `cut` checkpoints except those a survivor needs; when that
    # frees too few (the survivors just past the cut lean on the ones before it),
    # move the cut forward, so that whole old chains go first.
    cut = wanted
    taken: dict[str, list[str]] = {}
    while cut <= len(oldest_first):
        keep: dict[str, list[CheckpointRecord]] = {namespace: [record] + ([parent] if parent else [])}
        for checkpoint_id, name in oldest_first[cut:]:
            keep.setdefault(name, []).append(thread.namespaces[name].records[checkpoint_id])
        required = {
            name: lineage.required_ancestors(thread.namespaces.get(name, EMPTY_NAMESPACE), records)
            for name, records in keep.items()
        }
        taken = {}
        for checkpoint_id, name in oldest_first[:cut]:
            if checkpoint_id in required.get(name, ()) or (
                parent is not None and checkpoint_id == parent.checkpoint_id
            ):
                continue
            taken.setdefault(name, []).append(checkpoint_id)
        shortfall = wanted - sum(map(len, taken.values()))
        if shortfall <= 0 or cut == len(oldest_first):
            break
        cut = min(len(oldest_first), cut + max(shortfall, cut))  # at least doubling: O(log n) passes
    if sum(map(len, taken.values())) < count - maximum:
        reject(store, "max_checkpoints_per_thread", maximum, count, thread.thread_id)
    keep_blobs = set(record.blob_keys()) | set(new_blobs)
    removals = {
        name: plan_removal(thread.namespaces[name], ids, keep_blobs if name == namespace else ())
        for name, ids in taken.items()
    }
    freed = pruning.freed
    for removal in removals.values():
        freed = freed.plus(removal.freed)
    return Pruning(pruning.namespaces, removals, freed)


def carry_out(store: Store, thread: Thread, pruning: Pruning) -> None:
    """Carry out a plan of ``plan_namespaces`` or ``plan_rolling``, counting what it pruned.

    Runtime complexity: O(size of what it removes) (``lineage``'s removals),
    plus O(checkpoints of the thread), once, to recount its runs when a removed
    checkpoint belonged to one.
    """
    runs_changed = False
    for name, freed in pruning.namespaces.items():
        runs_changed |= lineage.remove_namespace(store, thread, name, freed)
        store.pruned_namespaces += 1
    for name, removal in pruning.removals.items():
        runs_changed |= lineage.remove_checkpoints(store, thread, name, removal)
        store.pruned_checkpoints += len(removal.checkpoint_ids)
    if runs_changed:
        lineage.reindex_runs(store, thread)
