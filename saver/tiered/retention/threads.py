"""Removing from one thread, in both tiers: the durable removal first, then the hot tier follows.

A thread's removal holds its gate alone (``coordination.ThreadGates``): the
writes and flushes of the thread under way in this process finish first, and
new ones wait for the removal, which is one transaction of the durable
database (``backends``) for SQLite and PostgreSQL. Then the hot tier lets go:

* a thread deleted whole leaves memory and is remembered as deleted, and why
  (``removal.forget_deleted``), as ``delete_thread`` does, so a late write
  that continues it is refused, loudly;
* an idle deletion asks whether the thread waits at an interrupt (``waiting``),
  in the same transaction: a waiting one is pruned as ``keep_latest`` prunes,
  or, past ``interrupted_ttl_seconds``, deleted with a row that refuses its
  resume in any process;
* a pruned thread loses the same checkpoints in memory (``removal.prune_memory``),
  and stays hot: its next turn reads no durable tier.

A thread in use is left for a later pass: one with unflushed writes
(write-back), or used in this process within ``in_use_seconds`` (the TTL for
idle threads, so a read refreshes a thread's TTL here without a durable write;
``eviction_grace_seconds`` for long ones).

A saver other than SQLite's and PostgreSQL's is worked through its API: the
thread is read whole (``durable.survivors``), then deleted, or rewritten
keeping what survives (not atomic: see ``policy``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langgraph.checkpoint.base import CheckpointTuple

from ...codec import DELTA_COUNTERS_KEY
from ..backends import dialect_of, kind_of, run_async, run_sync
from ..backends.base import NOTHING, Kind, Plan, Removed, Skeleton
from ..backends.sql import SqlDialect
from ..coordination import DELETE_THREAD
from ..durable import DurableTier, location_of, rewrite_keeping, survivors
from ..flushing import flush_thread
from ..removal import forget_deleted, leave_memory, prune_memory
from ..state import Shared, Tiers
from ..stats import SweepReport
from .plan import removals
from .waiting import INTERRUPT_CHANNEL, IdleDeletion, waiting_among

__all__ = ["in_use", "prune_threads", "remove_from_thread"]


def in_use(shared: Shared, thread_id: str, seconds: float) -> bool:
    """Whether the thread has unflushed writes, or was used in this process within ``seconds``.

    Runtime complexity: O(1).
    """
    if shared.dirty.is_dirty(thread_id):
        return True
    store = shared.hot.store
    last_used = store.last_used(thread_id)
    return last_used is not None and store.clock() - last_used < seconds


def remove_from_thread(
    tiers: Tiers,
    kind: Kind,
    sql: SqlDialect | None,
    thread_id: str,
    *,
    keep_last: int | None,
    idle_before: str | None,
    in_use_seconds: float | None,
    idle: IdleDeletion | None = None,
) -> Removed | None:
    """Delete the thread (``keep_last=None``) or prune it to each namespace's newest ``keep_last`` checkpoint
    and what they need, in both tiers; return what went, or None when it is in use (nothing done).

    With ``idle_before`` (a checkpoint id), nothing is removed unless the thread's newest checkpoint is
    still older: a write that landed since it was found idle keeps it. With ``idle`` (an idle deletion of a
    sweep), a thread waiting at an interrupt is pruned as ``keep_latest`` prunes instead, unless ``idle``
    deletes waiting threads this old too; then its deletion is recorded for a resume to be refused
    (``waiting``). Either way, the question is asked inside the transaction that removes.

    Raises:
        Exception: The durable tier's failure; the thread is as it was (one transaction).

    Runtime complexity: SQL savers: one transaction reading the thread's ids and deleting what goes (a
    thread using a ``DeltaChannel`` is read whole first, to plan with the engine); other savers: O(size of
    the thread) round trips.
    """
    shared = tiers.shared
    with shared.gates.alone(thread_id):
        if in_use_seconds is not None and in_use(shared, thread_id, in_use_seconds):
            return None
        if sql is not None:
            removed, newest, waited = _remove_in_tables(
                tiers.durable, kind, sql, thread_id, keep_last, idle_before, idle
            )
        else:
            removed, newest, waited = _remove_through_api(tiers.durable, kind, thread_id, keep_last, idle_before, idle)
        if removed.whole:
            why = idle.why(waited) if idle is not None and keep_last is None else DELETE_THREAD
            forget_deleted(shared, thread_id, newest, why)
        elif removed.planned:
            prune_memory(shared, thread_id, removed.planned)
        elif removed.checkpoints:  # an idle deletion another process's write cut short: what is left is unknown
            leave_memory(shared, {thread_id})
    return removed


def prune_threads(tiers: Tiers, thread_ids: Sequence[str], keep_last: int) -> SweepReport:
    """``prune(strategy="keep_last")``: each thread (its id checked) flushed, then pruned to each namespace's
    newest ``keep_last`` checkpoints and what they need, in both tiers; counted in ``stats().retention``.

    Raises:
        Exception: The durable tier's failure; the threads before it are pruned, it and those after are not.

    Runtime complexity: per thread, that of ``remove_from_thread``.
    """
    kind = kind_of(tiers.durable.saver)
    sql = dialect_of(kind)
    pruned = checkpoints = writes = nbytes = 0
    try:
        for thread_id in thread_ids:
            flush_thread(tiers, thread_id)
            removed = remove_from_thread(
                tiers, kind, sql, thread_id, keep_last=keep_last, idle_before=None, in_use_seconds=None
            )
            assert removed is not None  # never in use: not asked
            pruned += removed.checkpoints > 0
            checkpoints += removed.checkpoints
            writes += removed.writes
            nbytes += removed.nbytes
    finally:
        report = SweepReport(pruned_threads=pruned, checkpoints=checkpoints, writes=writes, nbytes=nbytes)
        tiers.shared.retention_totals.add(report, sweep=False)
    return report


# --- SQLite and PostgreSQL: one transaction ---------------------------------------------------------------------


def _remove_in_tables(
    durable: DurableTier,
    kind: Kind,
    sql: SqlDialect,
    thread_id: str,
    keep_last: int | None,
    idle_before: str | None,
    idle: IdleDeletion | None,
) -> tuple[Removed, str | None, bool]:
    """The removal in one transaction; returns what went, the thread's newest checkpoint id, and whether it was
    a waiting thread deleted (its row written in the same transaction)."""
    prune_to = keep_last  # a waiting thread an idle deletion keeps is pruned to 1 instead

    def plan() -> Plan[tuple[Removed, str | None, bool] | None]:
        nonlocal prune_to
        yield from sql.lock(thread_id)
        skeleton = yield from sql.skeleton(thread_id)
        if not skeleton:
            return NOTHING, None, False
        newest = max(row.checkpoint_id for row in skeleton)
        if keep_last is None:
            cutoff = idle_before or "\uffff"
            if idle is None or not (yield from sql.waiting(thread_id, INTERRUPT_CHANNEL)):
                return (yield from sql.delete_idle(thread_id, cutoff)), newest, False
            if idle.deletes_waiting(newest):
                removed = yield from sql.delete_idle(thread_id, cutoff)
                if removed.whole:
                    assert idle.interrupted_ttl_seconds is not None
                    forget_before = idle.now - idle.interrupted_ttl_seconds
                    yield from sql.record_removal(idle.removal(thread_id, newest), forget_before)
                return removed, newest, removed.whole
            prune_to = 1  # waiting: kept resumable, as strategy="keep_latest" keeps it
        assert prune_to is not None
        if any(row.delta for row in skeleton):
            return None  # the engine plans a DeltaChannel thread's ancestors, outside the transaction
        planned = removals(skeleton, prune_to)
        return (yield from sql.remove(thread_id, planned, idle_before=idle_before)), newest, False

    done: tuple[Removed, str | None, bool] | None = _run(durable, kind, plan)
    if done is not None:
        return done
    # A thread using a DeltaChannel: read it whole, plan on a copy with the engine's rule, then remove in one
    # transaction exactly what was read and planned away (what landed since is newer, and stays).
    count = prune_to
    assert count is not None
    everything, kept = survivors(
        durable, thread_id, lambda scratch, ids: scratch.prune(ids, strategy="keep_last", keep_last=count)
    )
    planned = removals(_skeleton_of(everything), count, kept)
    newest = max((row.checkpoint_id for row in _skeleton_of(everything)), default=None)

    def remove() -> Plan[tuple[Removed, str | None, bool]]:
        yield from sql.lock(thread_id)
        return (yield from sql.remove(thread_id, planned, idle_before=idle_before)), newest, False

    removed: tuple[Removed, str | None, bool] = _run(durable, kind, remove)
    return removed


def _run(durable: DurableTier, kind: Kind, plan: Any) -> Any:
    """Run a plan (made anew for each side) in one transaction of the durable saver's own connection."""
    return durable.on_tables(lambda saver: run_sync(saver, kind, plan()), lambda saver: run_async(saver, kind, plan()))


# --- any other saver: through its API ----------------------------------------------------------------------------


def _remove_through_api(
    durable: DurableTier,
    kind: Kind,
    thread_id: str,
    keep_last: int | None,
    idle_before: str | None,
    idle: IdleDeletion | None,
) -> tuple[Removed, str | None, bool]:
    if keep_last is None:
        everything = durable.list({"configurable": {"thread_id": thread_id}})
        kept: set[tuple[str, str]] = set()
    else:
        everything, kept = survivors(
            durable, thread_id, lambda scratch, ids: scratch.prune(ids, strategy="keep_last", keep_last=keep_last)
        )
    skeleton = _skeleton_of(everything)
    newest = max((row.checkpoint_id for row in skeleton), default=None)
    if newest is None or (idle_before is not None and newest >= idle_before):
        return NOTHING, None, False
    if keep_last is None:
        waited = idle is not None and waiting_among(everything)
        if idle is not None and waited and not idle.deletes_waiting(newest):
            # Kept resumable: pruned as keep_latest prunes where the policy may rewrite a thread, else kept whole
            # (a rewrite a crash could interrupt: see policy.kind_problem).
            if kind == "other":
                return NOTHING, newest, False
            return _remove_through_api(durable, kind, thread_id, 1, idle_before, None)
        durable.delete_thread(thread_id)
        return Removed(len(everything), _writes(everything), 0, True), newest, waited
    planned = removals(skeleton, keep_last, kept)
    gone = {(namespace, checkpoint_id) for namespace, ids in planned.items() for checkpoint_id in ids}
    if not gone:
        return NOTHING, newest, False
    removed = [item for item in everything if location_of(item) in gone]
    rewrite_keeping(durable, thread_id, everything, {location_of(item) for item in everything} - gone)
    return Removed(len(removed), _writes(removed), 0, len(removed) == len(everything), planned), newest, False


def _writes(items: Sequence[CheckpointTuple]) -> int:
    return sum(len(item.pending_writes or ()) for item in items)


def _skeleton_of(items: Sequence[CheckpointTuple]) -> list[Skeleton]:
    """The skeleton of checkpoints read through the API, oldest first."""
    rows = []
    for item in items:
        namespace, checkpoint_id = location_of(item)
        metadata: Any = item.metadata or {}
        parents = metadata.get("parents") or {}
        root = parents.get("") if isinstance(parents, dict) else None
        delta = DELTA_COUNTERS_KEY in metadata or "delta_writes_versioned" in metadata
        rows.append(Skeleton(namespace, checkpoint_id, delta, None if root is None else str(root)))
    rows.sort(key=lambda row: row.checkpoint_id)
    return rows
