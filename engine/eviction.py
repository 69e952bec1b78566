"""Threads leaving the store for a limit: idle expiry, eviction to make room, and refusal of their late writes.

Reached from a store transaction through one inline test each, only when there
is work to do: expiry when ``next_expiry`` has passed, ``make_room`` when a write
would pass ``max_threads``, ``max_total_bytes`` or ``max_memory_bytes``,
``refuse_dropped`` when the thread has a tombstone. A thread leaves whole:
its tombstone is kept (``engine.tombstones``) and, with a hook, its export is
queued for ``on_drop`` (``engine.hooks``).

Everything here runs with the store's lock held (``engine.store`` takes it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from . import memory
from .errors import (
    CheckpointCapacityError,
    CheckpointRefusedError,
    ResumeRefusedError,
    ThreadEvictedError,
    ThreadQuarantinedError,
)
from .export import ThreadExport
from .namespace import Namespace
from .records import WriteKey, WriteRecord
from .state import State
from .thread import Thread
from .tombstones import DroppedThread, ParkedWrites, RefusedCheckpoint

__all__ = [
    "EXPIRY_BUDGET",
    "TOMBSTONE_SHARE",
    "drop",
    "expire",
    "expire_oldest",
    "make_room",
    "park",
    "refuse_checkpoint",
    "refuse_continuation",
    "refuse_dropped",
    "refuse_restart",
    "refuse_writes_of_refused",
]

EXPIRY_BUDGET = 5
"""Idle threads one operation removes at most: those it names first, then the oldest."""

TOMBSTONE_SHARE = 16
"""Under ``max_memory_bytes``, tombstones keep at most this fraction of it (the oldest go first)."""


# --- expiry ------------------------------------------------------------------------------------------


def expire(state: State, now: float, *touched: str | None) -> None:
    """Remove the threads an operation names if they have expired (lazily), then the oldest idle
    threads (actively), ``EXPIRY_BUDGET`` in all; then reset ``next_expiry``.

    Runtime complexity: O(EXPIRY_BUDGET) threads removed, each O(namespaces +
    runs), plus its export when a hook is set.
    """
    ttl = state.limits.idle_ttl_seconds
    threads = state.threads
    removed = 0
    for thread_id in touched:
        thread = None if thread_id is None else threads.get(thread_id)
        if thread is not None and now - thread.last_used >= ttl:
            _expire_one(state, thread, ttl, now)
            removed += 1
    expire_oldest(state, now, EXPIRY_BUDGET - removed)


def expire_oldest(state: State, now: float, budget: int) -> int:
    """Remove at most ``budget`` expired threads from the front of the LRU order, then reset
    ``next_expiry``; return how many went.

    Runtime complexity: O(budget) threads removed, each O(namespaces + runs), plus its export
    when a hook is set: LRU order is idle order, so expired threads are at the front.
    """
    ttl = state.limits.idle_ttl_seconds
    threads = state.threads
    removed = 0
    while threads and removed < budget:
        oldest = next(iter(threads.values()))
        if now - oldest.last_used < ttl:
            break
        _expire_one(state, oldest, ttl, now)
        removed += 1
    state.next_expiry = next(iter(threads.values())).last_used + ttl if threads else math.inf
    return removed


def _expire_one(state: State, thread: Thread, ttl: float, now: float) -> None:
    drop(state, thread, "idle_ttl_seconds", ttl, now)
    state.expired += 1


# --- eviction -------------------------------------------------------------------------------------------


def make_room(
    state: State,
    growth: int,
    footprint: int,
    keep: Sequence[Thread],
    thread_id: str,
    now: float,
    adds_thread: bool,
) -> None:
    """Remove least-recently-used threads, never those in ``keep``, so that the store can
    grow by ``growth`` payload bytes, ``footprint`` bytes of heap estimate and one thread
    if ``adds_thread``; or refuse.

    Feasibility is decided first: a refusal evicts nobody. An idle thread past
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
    limits = state.limits
    kept = sum(thread.nbytes for thread in keep) + growth
    if kept > limits.max_total_bytes:
        raise CheckpointCapacityError("max_total_bytes", limits.max_total_bytes, kept, thread_id=thread_id)
    kept_memory = sum(memory.of_thread(thread) for thread in keep) + footprint
    if kept_memory > limits.max_memory_bytes:
        raise CheckpointCapacityError("max_memory_bytes", limits.max_memory_bytes, kept_memory, thread_id=thread_id)
    if adds_thread and len(keep) + 1 > limits.max_threads:
        raise CheckpointCapacityError("max_threads", limits.max_threads, len(keep) + 1, thread_id=thread_id)
    if limits.eviction_grace_seconds > 0:
        _refuse_unless_room_outside_grace(state, growth, footprint, keep, thread_id, now, adds_thread)
    threads = state.threads
    ttl = limits.idle_ttl_seconds
    while True:
        if adds_thread and len(threads) + 1 > limits.max_threads:
            limit = "max_threads"
        elif state.nbytes + growth > limits.max_total_bytes:
            limit = "max_total_bytes"
        elif state.memory_limited and state.bounded_memory_bytes() + footprint > limits.max_memory_bytes:
            limit = "max_memory_bytes"
        else:
            return
        victim = next((thread for thread in threads.values() if thread not in keep), None)
        if victim is None:  # only tombstones are left to shed: the memory they hold
            if _forget_oldest(state):
                continue
            return  # unreachable: the feasibility test above counted everything that stays
        if now - victim.last_used >= ttl:
            _expire_one(state, victim, ttl, now)
        elif limit == "max_threads":
            drop(state, victim, limit, limits.max_threads, now)
            state.evicted_for_threads += 1
        elif limit == "max_total_bytes":
            drop(state, victim, limit, limits.max_total_bytes, now)
            state.evicted_for_bytes += 1
        else:
            drop(state, victim, limit, limits.max_memory_bytes, now)
            state.evicted_for_memory += 1


def _refuse_unless_room_outside_grace(
    state: State,
    growth: int,
    footprint: int,
    keep: Sequence[Thread],
    thread_id: str,
    now: float,
    adds_thread: bool,
) -> None:
    """Refuse a write whose room only threads used within ``eviction_grace_seconds`` could give.

    LRU order is recency order, so the threads that may go are a prefix of it:
    walk it, counting what each would free, until the write fits; meeting a
    thread inside the grace first means it does not. Tombstones count as
    freeable memory (they are shed before a refusal). Changes nothing.

    Runtime complexity: O(threads that would be evicted + len(keep) each), the
    eviction's own order; O(1) when the least recently used thread is in grace.
    """
    limits = state.limits
    grace = limits.eviction_grace_seconds
    threads_after = len(state.threads) + (1 if adds_thread else 0)
    nbytes_after = state.nbytes + growth
    memory_after = state.bounded_memory_bytes() - state.remembered_bytes() + footprint
    limit, value = "max_threads", limits.max_threads
    evictable = 0
    for thread in state.threads.values():
        if thread in keep:
            continue
        fits = (
            threads_after <= limits.max_threads
            and nbytes_after <= limits.max_total_bytes
            and (not state.memory_limited or memory_after <= limits.max_memory_bytes)
        )
        if fits:
            return
        if threads_after > limits.max_threads:
            limit, value = "max_threads", limits.max_threads
        elif nbytes_after > limits.max_total_bytes:
            limit, value = "max_total_bytes", limits.max_total_bytes
        else:
            limit, value = "max_memory_bytes", limits.max_memory_bytes
        if now - thread.last_used < grace:
            break  # this one and every thread after it were used within the grace
        evictable += 1
        threads_after -= 1
        nbytes_after -= thread.nbytes
        memory_after -= memory.of_thread(thread)
    else:
        return  # everything outside the grace can go: the feasibility test already said that is enough
    in_grace = len(state.threads) - len(keep) - evictable  # every other thread from here on: recency order
    older = f"the {evictable} used before that are not enough, and " if evictable else ""
    needed = {"max_threads": threads_after, "max_total_bytes": nbytes_after}.get(limit, memory_after)
    raise CheckpointCapacityError(
        limit,
        value,
        needed,
        thread_id=thread_id,
        hint=(
            f"The store is full: {older}all {in_grace} other threads were used in the last {grace:g} s "
            f"(eviction_grace_seconds), and a thread in use is not evicted. Retry later, raise {limit}, "
            f"or lower eviction_grace_seconds."
        ),
    )


def drop(state: State, thread: Thread, limit: str, limit_value: float, now: float) -> None:
    """Evict or expire a thread whole: leave a tombstone, queue its announcement, unlink it.

    Runtime complexity: O(namespaces + runs), plus its export when a hook is set.
    """
    record = DroppedThread(thread.thread_id, limit, limit_value, now, thread.newest_id(), state.wall_clock())
    state.tombstones.remember(record)
    _shed_tombstones(state)
    if state.announcements.hook is not None:
        state.announcements.queue_drop(record, ThreadExport.of(thread), memory.of_thread(thread))
    state.unlink(thread)


def _shed_tombstones(state: State) -> None:
    """Under ``max_memory_bytes``, tombstones and parked writes may hold a sixteenth of it, no more: the
    oldest go first (parked writes, refused checkpoints, then dropped threads)."""
    if state.memory_limited:
        while state.remembered_bytes() > state.limits.max_memory_bytes / TOMBSTONE_SHARE and _forget_oldest(state):
            pass


def _fit_remembered(state: State) -> None:
    """After a record was remembered outside ``make_room`` (a refusal, parked writes): within the
    tombstones' share, and within ``max_memory_bytes`` as a whole, shedding the oldest records."""
    if state.memory_limited:
        limits = state.limits
        while (
            state.remembered_bytes() > limits.max_memory_bytes / TOMBSTONE_SHARE
            or state.bounded_memory_bytes() > limits.max_memory_bytes
        ) and _forget_oldest(state):
            pass


def _forget_oldest(state: State) -> bool:
    """Forget the oldest parked writes, else refused checkpoint, else dropped thread; whether one went."""
    return state.parked.forget_oldest() or state.refusals.forget_oldest() or state.tombstones.forget_oldest()


# --- writes for a dropped thread ------------------------------------------------------------------------


def refuse_dropped(
    state: State,
    thread_id: str,
    thread: Thread | None,
    space: Namespace,
    continues: str | None,
    now: float,
    resumes: bool = False,
    writes: Sequence[WriteRecord] = (),
) -> None:
    """Refuse a write for a thread that has a tombstone, when it needs the state the thread lost.

    Three rules, in order; a write none of them refuses goes on:

    * it resumes the thread's state (``resumes``, or a write to one of
      ``state.answer_channels``) and the store holds nothing of the thread:
      ``ResumeRefusedError``;
    * it starts the thread afresh (a checkpoint with no parent) while the thread
      holds nothing, less than ``dropped_thread_quarantine_seconds`` after the
      drop: ``ThreadQuarantinedError``;
    * it continues a checkpoint of the dropped thread (``refuse_continuation``).

    Raises:
        ResumeRefusedError, ThreadQuarantinedError, ThreadEvictedError: As above.

    Runtime complexity: O(1), plus O(len(writes)) when the thread holds nothing.
    """
    if thread is None:
        answers = state.answer_channels
        if resumes or (answers and any(write[2] in answers for write in writes)):
            record = state.tombstones.records[thread_id]
            raise ResumeRefusedError(
                record.limit,
                record.limit_value,
                thread_id=thread_id,
                checkpoint_id=continues or "",
                seconds_ago=now - record.dropped_at,
                dropped_at_wall=record.dropped_at_wall,
            )
        if continues is None:
            refuse_restart(state, state.tombstones.records[thread_id], now)
    refuse_continuation(state, thread_id, space, continues, now)


def refuse_restart(state: State, record: DroppedThread, now: float) -> None:
    """Refuse a new run on a dropped thread within ``dropped_thread_quarantine_seconds`` of its drop.

    Raises:
        ThreadQuarantinedError: The quarantine has not ended.

    Runtime complexity: O(1).
    """
    quarantine = state.limits.dropped_thread_quarantine_seconds
    if quarantine and now - record.dropped_at < quarantine:
        raise ThreadQuarantinedError(
            record.limit,
            record.limit_value,
            thread_id=record.thread_id,
            checkpoint_id=record.newest_checkpoint_id or "",
            seconds_ago=now - record.dropped_at,
            quarantine_seconds=quarantine,
            dropped_at_wall=record.dropped_at_wall,
        )


def refuse_continuation(state: State, thread_id: str, space: Namespace, continues: str | None, now: float) -> None:
    """Refuse a write that continues a checkpoint of a thread since evicted or expired.

    The write is let through when it starts the thread afresh (a checkpoint
    with no parent, or ids newer than anything the dropped thread held) or
    continues a checkpoint stored since (the thread's new life). The tombstone
    stays while the thread lives again, so the previous life's late writes are
    still refused.

    Raises:
        ThreadEvictedError: The write continues the dropped thread's state.

    Runtime complexity: O(1).
    """
    record = state.tombstones.records[thread_id]
    if not record.continued_by(continues) or continues in space.records:
        return
    raise ThreadEvictedError(
        record.limit,
        record.limit_value,
        thread_id=thread_id,
        checkpoint_id=continues or "",
        seconds_ago=now - record.dropped_at,
        dropped_at_wall=record.dropped_at_wall,
    )


# --- checkpoints whose put was refused ------------------------------------------------------------------


def refuse_checkpoint(
    state: State, thread_id: str, namespace: str, checkpoint_id: object, error: CheckpointCapacityError
) -> None:
    """After a ``put`` was refused: its pending writes that came before it go, and a tombstone
    refuses those that come after (``refuse_writes_of_refused``).

    Writes may arrive before their checkpoint (LangGraph's async durability), so
    a refused put can leave writes of a checkpoint that will never be stored;
    removing them is the only change a refusal makes, and a namespace or thread
    they alone held goes with them. A stored checkpoint whose re-put was refused
    keeps its writes.

    Runtime complexity: O(writes removed).
    """
    limits = state.limits
    if type(checkpoint_id) is not str or not 0 < len(checkpoint_id) <= limits.max_identifier_length:
        return  # not a key the store could hold: its writes were refused with it
    thread = state.threads.get(thread_id)
    space = None if thread is None else thread.namespaces.get(namespace)
    if thread is not None and space is not None:
        if checkpoint_id in space.records:
            return
        if checkpoint_id in space.writes:
            state.remove_writes(thread, namespace, checkpoint_id)
            if not thread.namespaces:
                state.unlink(thread)
    state.parked.forget(checkpoint_id)  # parked writes of the refused checkpoint go with it too
    state.refusals.remember(RefusedCheckpoint(thread_id, namespace, checkpoint_id, error.limit, error.limit_value))
    _fit_remembered(state)


def refuse_writes_of_refused(
    state: State, thread_id: str, namespace: str, checkpoint_id: str, space: Namespace
) -> None:
    """Refuse pending writes for a checkpoint whose put was refused and that is not stored.

    Raises:
        CheckpointRefusedError: Under the limit that refused the checkpoint.

    Runtime complexity: O(1).
    """
    record = state.refusals.records[checkpoint_id]
    if record.thread_id != thread_id or record.namespace != namespace or checkpoint_id in space.records:
        return
    raise CheckpointRefusedError(record.limit, record.limit_value, thread_id=thread_id, checkpoint_id=checkpoint_id)


# --- pending writes that would start a namespace of a dropped thread ----------------------------------------


def park(
    state: State, thread_id: str, namespace: str, checkpoint_id: str, writes: Mapping[WriteKey, WriteRecord]
) -> None:
    """Set aside checked writes for a checkpoint not stored that would start a namespace of a dropped thread.

    They wait for the checkpoint's put (``Store.put_checkpoint`` takes them in),
    merged with writes parked before for it the way a namespace merges them (a
    regular write kept once, a special one replacing); past capacity, or under
    the memory share of tombstones, the oldest go.

    Runtime complexity: O(writes parked for the checkpoint).
    """
    earlier = state.parked.records.get(checkpoint_id)
    merged: dict[WriteKey, WriteRecord] = {}
    if earlier is not None and earlier.thread_id == thread_id and earlier.namespace == namespace:
        merged = {write.key: write for write in earlier.writes}
    for key, write in writes.items():
        if key not in merged or key[1] < 0:
            merged[key] = write
    held = tuple(merged.values())
    state.parked.remember(ParkedWrites(thread_id, namespace, checkpoint_id, held, memory.parked_writes_bytes(held)))
    _fit_remembered(state)
