"""Write-back's flushing: unflushed writes on their way to the durable tier, and what waits for them.

With ``write="back"`` every write lands in the hot tier and in the ledger of
unflushed writes (``tiered.writeback``). This module moves them on:

* ``flush_thread`` writes one thread's unflushed writes, oldest first, in one
  transaction where the backend owns the saver's SQL (``group_commit``), else
  through the durable saver's ``put`` / ``put_writes``, holding the thread's gate
  shared (a deletion waits for it); ``flush_all`` does every dirty thread, the
  one dirty longest first, many threads a transaction (group commits), and one
  failing thread never stops the others';
* ``dirty_room`` is the backpressure: a write that would pass
  ``max_dirty_bytes``, or that finds the oldest unflushed write (one in a flush
  under way included) plus the backlog's flush time past ``max_dirty_seconds``,
  needs a flush. ONE flush runs (a round: ``flush_all``, every dirty thread, the
  oldest write first), run by the first writer that needs it, and every other
  one waits for its end (``writeback.FlushRounds``: a condition, or a future on
  the waiter's own loop; nothing polls); no writer repeats a flush another is
  running. ``flush()`` and the periodic flush are rounds too. Once the durable
  tier is known down (``known_down``) no write waits on it: a write that does
  not fit in bytes is refused with a ``CheckpointCapacityError`` naming the
  durable failure; age alone never refuses (the outage is what keeps the writes
  back). A durable connection found closed refuses every later write
  (``refuse_closed``);
* a flush first reads back the first checkpoint it continues and does not hold
  (``_parent_to_check``: one durable read): gone (another process deleted the
  thread), the flush is refused and the thread's writes dropped, as a poisoned
  thread's;
* a thread whose writes the durable tier refuses while it takes the others'
  (an unstorable write) is poisoned after ``writeback.POISON_STRIKES`` such
  failures: its unflushed writes are dropped and reported with its thread id,
  its hot copy leaves memory, and writes continuing what was dropped are
  refused (``coordination.UnstorableWriteError``);
* ``deliver`` (called after every operation) hands the hot tier's drops to its
  hook; a dirty thread it evicted is not flushed in the writer: its writes wait
  in the ledger for the next round, which counts it as a spill;
* ``flush_in_background`` is the periodic flush; ``flush_at_exit`` flushes, at
  interpreter exit, the write-back savers still alive that nobody closed, and
  ends the process with ``LOST_AT_EXIT_STATUS`` when it cannot.

Each has an async twin that awaits the durable tier natively (its async side,
or a sync saver's calls on ``pools.durable_pool``) and awaits the ledger's
changes (``DirtyLedger.await_change``): no event loop's default executor is
ever used. No lock is held across a durable round trip.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import sys
import threading
import time
import weakref
from collections.abc import Generator
from typing import Any, Generic, NamedTuple, TypeVar

from langgraph.checkpoint.serde.base import SerializerProtocol

from .. import announcing
from ..engine import CheckpointCapacityError
from .durable import DurableClosedError, DurableTier
from .group_commit import Group, GroupPlan, Hooks, Io, astore, group_plan, groupable, store
from .settings import DIRTY_ROOM_ATTEMPTS, PER_ITEM_LIMITS
from .state import Shared, Tiers, count_rejection
from .writeback import POISON_STRIKES, DirtyCheckpoint, DirtyItem, refuses_the_data

__all__ = [
    "adeliver",
    "adirty_room",
    "aflush_all",
    "aflush_round",
    "aflush_thread",
    "deliver",
    "dirty_room",
    "flush_all",
    "flush_at_exit",
    "flush_at_exit_later",
    "flush_in_background",
    "flush_round",
    "flush_thread",
]

logger = logging.getLogger(f"{__package__}.tiered")  # TieredSaver's one logger, whichever module logs


# --- backpressure ---------------------------------------------------------------------------------------------


def _aged(shared: Shared) -> bool:
    """Whether a crash now could lose writes older than ``max_dirty_seconds``: the oldest unflushed write's age
    (one in a flush under way included) plus the time the unflushed writes take to flush, as recent flushes
    went (``DirtyLedger.window``). Counting the flush time is what keeps the bound over a durable tier slower
    than the writes: without it, what was written within the bound takes longer than the bound to flush.

    Runtime complexity: amortized O(log t) for t dirty threads.
    """
    return bool(shared.dirty.threads) and shared.dirty.window(shared.clock()) > shared.max_dirty_seconds


def _pressed(shared: Shared, needed: int) -> bool:
    """Whether a write of ``needed`` bytes must make room first: it would pass ``max_dirty_bytes``, or the oldest
    unflushed write plus the backlog's flush time passes ``max_dirty_seconds`` (``_aged``). Runtime complexity:
    amortized O(log t)."""
    return not _fits(shared, needed) or _aged(shared)


def _flusher_running(shared: Shared) -> bool:
    """Whether the periodic flush runs (with write-back it is the first background job ``resume`` starts).
    Runtime complexity: O(1)."""
    return bool(shared.background) and shared.background[0].running


def known_down(tiers: Tiers, *, for_age: bool = False) -> bool:
    """Whether write-back's writes must not wait on the durable tier: its last call failed for want of the tier
    (``DurableHealth.down``) and the periodic flush runs (it finds out when the tier is back). Without a periodic
    flush only a write can find that out: one that does not fit in bytes tries again, and for the age
    (``for_age``) a write tries again only ``max_dirty_seconds`` after one found the tier down.

    Runtime complexity: O(1).
    """
    shared = tiers.shared
    if not tiers.durable.health.down:
        return False
    return _flusher_running(shared) or (for_age and shared.clock() < shared.age_retry_at)


class _Step(NamedTuple):
    """What a write making room does next: ``go`` (it fits), ``through`` (written through), ``refuse``,
    ``round`` (run the one flush of every dirty thread: ``flush_all``), ``wait`` (for the end of the round under
    way; ``seen`` the rounds finished), or ``flush`` one thread (its own, before it goes through)."""

    kind: str
    thread_id: str | None = None
    seen: int = 0


def _next_step(tiers: Tiers, needed: int, rounds_left: int, failure: Exception | None) -> _Step:
    """One decision of ``dirty_room``. Runtime complexity: amortized O(log t) for t dirty threads."""
    shared = tiers.shared
    if needed > shared.max_dirty_bytes:
        return _Step("through")  # larger than the bound by itself
    fits = _fits(shared, needed)
    if fits and not _aged(shared):
        return _Step("go")
    if known_down(tiers, for_age=fits):
        return _Step("go" if fits else "refuse")  # no write waits on a tier that is down; the bytes bound it
    if failure is not None:  # the round this write waited for failed: what is left did not flush; bytes decide
        return _Step("go" if fits else "refuse")
    if not fits and rounds_left <= 0:
        return _Step("through")  # other writers fill it again as fast as it is flushed
    return _Step("round")


def _failed_to_make_room(tiers: Tiers, error: Exception) -> None:
    """A round made to make room failed: a failure for want of the tier makes it known down for the age
    (``known_down``). Runtime complexity: O(1)."""
    if not refuses_the_data(error):
        shared = tiers.shared
        shared.age_retry_at = shared.clock() + shared.max_dirty_seconds


def dirty_room(tiers: Tiers, thread_id: str, needed: int) -> bool:
    """Write-back backpressure: before a write is acknowledged, make room for ``needed`` more bytes under
    ``max_dirty_bytes``, and wait until no unflushed write (one in a flush under way included) is older than
    ``max_dirty_seconds``. When a bound is reached, ONE flush runs (a round: ``flush_all``, every dirty thread,
    the oldest write first), run by the first writer that needs it; every other writer that needs room waits
    for that round's end (on a condition, or its own loop's future: no polling), then checks the bounds again.
    No writer repeats a flush another is running.

    While the durable tier is down (``known_down``) no write waits on it: age presses no write (the bytes bound
    what waits), and a write that does not fit is refused at once, naming the durable failure. A round that
    fails lets the bytes decide: a write that fits goes, one that does not is refused, naming the failure.

    Returns False for a write that still does not fit in bytes (larger than the bound by itself, or other
    writers filled it again after ``DIRTY_ROOM_ATTEMPTS`` rounds): it is written through instead, durable first,
    after the thread's own unflushed writes. A write that had to wait is counted, with its wait, in ``stats()``
    (``backpressure_waits``, ``backpressure_seconds``).

    Raises:
        CheckpointCapacityError: The write does not fit in bytes and the durable tier fails; names the failure.
        DurableClosedError: A flush found the durable connection closed; names the unflushed writes.

    Runtime complexity: O(1) when it fits; else a round (one flush of every dirty thread) or a wait for one,
    at most ``DIRTY_ROOM_ATTEMPTS`` of them for the bytes.
    """
    return _drive(tiers, _room_plan(tiers, thread_id, needed))


async def adirty_room(tiers: Tiers, thread_id: str, needed: int) -> bool:
    """Async ``dirty_room``: its round awaits the durable tier, its waits the round's end (no polling).

    Runtime complexity: that of ``dirty_room``.
    """
    return await _adrive(tiers, _room_plan(tiers, thread_id, needed))


def _room_plan(tiers: Tiers, thread_id: str, needed: int) -> Plan[bool]:
    """``dirty_room``'s decisions, written once for both drivers (``_drive``, ``_adrive``)."""
    shared = tiers.shared
    refuse_closed(tiers, thread_id)
    if not _pressed(shared, needed):
        return True
    start = time.perf_counter()
    failure: Exception | None = None
    rounds_left = DIRTY_ROOM_ATTEMPTS
    try:
        while True:
            step = _next_step(tiers, needed, rounds_left, failure)
            if step.kind == "go":
                return True
            if step.kind == "refuse":
                raise _room_refusal(tiers, thread_id, needed, failure)
            if step.kind == "through":
                if failure is None:
                    done = yield _Step("flush", thread_id)  # its parents first, before it goes through
                    failure = done if isinstance(done, Exception) else None
                return _through(tiers, thread_id, needed, failure)
            rounds_left -= 1
            done = yield from _round(tiers, share=True)
            if isinstance(done, Exception):
                failure = done  # counted and logged by the flush
                _failed_to_make_room(tiers, done)
    finally:
        _count_wait(shared, time.perf_counter() - start)


def _round(tiers: Tiers, *, share: bool) -> Generator[_Step, Any, int | Exception]:
    """One round: the flush of every dirty thread, one round at a time. While another caller's round runs, wait
    for its end: with ``share`` (a write making room) that round serves this caller too (its outcome is
    returned: 0 or its failure); without (``flush()``, the periodic flush: everything dirty when called must be
    flushed) the round under way may have claimed its threads before the call, so it is not enough: the next
    round is, whoever runs it (it begins after the call, and flushes every thread dirty then), and this caller
    runs it if nobody else has begun it, so that writers starting rounds back to back never keep it waiting for
    a turn of its own. Returns the count of writes this caller's round flushed (0 when another's served), or
    the failure. Spills (threads the hot tier evicted dirty) are counted when a round flushes them. Runtime
    complexity: that of ``flush_all``, plus the wait for at most two rounds under way."""
    rounds = tiers.shared.dirty.rounds
    waited = False  # for a round begun before this call
    while (seen := rounds.begin()) is not None:
        failed = yield _Step("wait", seen=seen)
        if share or waited:  # the round waited for began after this call (one ended in between): it serves
            return failed if isinstance(failed, Exception) else 0
        waited = True
    failure: Exception | None = None
    spills, start = _spill_requests(tiers.shared), time.perf_counter()
    try:
        done = yield _Step("round")
        failure = done if isinstance(done, Exception) else None
        _count_spills(tiers.shared, spills, time.perf_counter() - start)
        return done if isinstance(done, Exception) else int(done or 0)
    finally:
        rounds.end(failure)


def flush_round(tiers: Tiers) -> int:
    """Flush every unflushed write as a round (``dirty_room``'s one flush): a round under way is waited for,
    then this one runs; writers needing room meanwhile wait for it. Raises its first failure. What
    ``TieredSaver.flush()`` and the periodic flush run.

    Runtime complexity: that of ``flush_all``, plus the wait for a round under way.
    """
    return _drive(tiers, _round_plan(tiers))


async def aflush_round(tiers: Tiers) -> int:
    """Async ``flush_round``. Runtime complexity: that of ``flush_round``."""
    return await _adrive(tiers, _round_plan(tiers))


def _round_plan(tiers: Tiers) -> Plan[int]:
    done = yield from _round(tiers, share=False)
    if isinstance(done, Exception):
        raise done
    return done


T = TypeVar("T")
Step = TypeVar("Step")
Plan = Generator[_Step, "int | Exception | None", T]
"""Flushes and waits as a generator (the retention pattern: ``retention.storage.Plan``): it yields a ``flush``
or ``round`` step (and is sent the count of flushed items, or the flush's failure) or a ``wait`` step (sent the
failure of the round waited for, or None), and returns its answer. ``_drive`` runs it on the calling thread,
``_adrive`` on the event loop, so each piece of logic is written once for both sides."""


def _drive(tiers: Tiers, plan: Plan[T]) -> T:
    """Run a plan: rounds by ``flush_all``, a thread's flush by ``flush_thread``, waits for a round's end on its
    condition. Runtime complexity: its steps'."""
    with contextlib.closing(plan):
        step = _send(plan, None)
        while isinstance(step, _Step):
            if step.kind == "wait":
                step = _send(plan, tiers.shared.dirty.rounds.wait_end(step.seen))
                continue
            try:
                if step.kind == "round":
                    flushed: int | Exception = flush_all(tiers)
                else:
                    flushed = flush_thread(tiers, str(step.thread_id))
            except Exception as error:  # the flush's failure is the plan's to weigh; the plan's own propagate
                flushed = error
            step = _send(plan, flushed)
        return step.value


async def _adrive(tiers: Tiers, plan: Plan[T]) -> T:
    """``_drive`` awaiting: rounds by ``aflush_all``, flushes by ``aflush_thread``, waits for a round's end without
    blocking the loop."""
    with contextlib.closing(plan):
        step = _send(plan, None)
        while isinstance(step, _Step):
            if step.kind == "wait":
                step = _send(plan, await tiers.shared.dirty.rounds.await_end(step.seen))
                continue
            try:
                if step.kind == "round":
                    flushed: int | Exception = await aflush_all(tiers)
                else:
                    flushed = await aflush_thread(tiers, str(step.thread_id))
            except Exception as error:
                flushed = error
            step = _send(plan, flushed)
        return step.value


class _Done(NamedTuple, Generic[T]):
    """A plan's answer, once it returned."""

    value: T


def _send(plan: Generator[Step, Any, T], answer: Any) -> Step | _Done[T]:
    """The plan's next step, sent the last one's outcome; or its answer."""
    try:
        return plan.send(answer)
    except StopIteration as done:
        return _Done(done.value)


def refuse_closed(tiers: Tiers, thread_id: str) -> None:
    """Refuse a write-back write once a durable call found the connection closed (a permanent error): it
    would be acknowledged, and lost with the writes before it.

    Raises:
        DurableClosedError: Naming the durable failure and the unflushed writes it strands.

    Runtime complexity: O(1), O(t) to name the t dirty threads when it raises.
    """
    closed = tiers.durable.health.closed
    if closed is None:
        return
    count_rejection(tiers.shared, "durable_closed")
    raise DurableClosedError(
        f"thread {thread_id!r}: the write was refused and nothing was written: the durable saver "
        f"({tiers.durable.name}) failed with {closed}, so its connection is closed and "
        f"{_stranded(tiers.shared)} cannot be flushed. Close the TieredSaver before its durable connection; "
        f"to keep them, flush() once the saver's connection works again (a failed flush() raises)."
    )


def _stranded(shared: Shared) -> str:
    """The unflushed writes, in words: how many, of which threads (the first few). Runtime complexity: O(t)."""
    dirty = shared.dirty
    with dirty.lock:
        counts = {thread_id: len(backlog.items) for thread_id, backlog in dirty.threads.items()}
    if not counts:
        return "no unflushed write"
    shown = ", ".join(f"{thread_id!r} ({count})" for thread_id, count in list(counts.items())[:5])
    more = f" and {len(counts) - 5} more" if len(counts) > 5 else ""
    return f"the {sum(counts.values())} unflushed writes of {len(counts)} threads ({shown}{more})"


def _room_refusal(tiers: Tiers, thread_id: str, needed: int, failure: Exception | None) -> CheckpointCapacityError:
    """The refusal of a write that does not fit in bytes while the durable tier fails. Runtime complexity: O(1)."""
    shared = tiers.shared
    error: BaseException | str = failure if failure is not None else tiers.durable.health.last_error or "unknown"
    return _refusal(tiers, thread_id, "max_dirty_bytes", shared.max_dirty_bytes, needed, error)


def _fits(shared: Shared, needed: int) -> bool:
    return shared.dirty.nbytes + needed <= shared.max_dirty_bytes


def _through(tiers: Tiers, thread_id: str, needed: int, failure: Exception | None) -> bool:
    """The write does not fit in bytes: written through (False) once its thread is flushed, or refused naming
    the durable failure. Runtime complexity: O(1)."""
    if failure is not None:
        shared = tiers.shared
        raise _refusal(tiers, thread_id, "max_dirty_bytes", shared.max_dirty_bytes, needed, failure) from failure
    return False


def _described(error: BaseException | str) -> str:
    return error if isinstance(error, str) else f"{type(error).__name__}: {error}"


def _count_wait(shared: Shared, seconds: float) -> None:
    with shared.hot.store.exclusive():
        shared.counters.backpressure_waits += 1
        shared.counters.backpressure_seconds += seconds


def _refusal(
    tiers: Tiers, thread_id: str, limit: str, value: float, needed: float, error: BaseException | str
) -> CheckpointCapacityError:
    """The refusal of a write that needed room the failed flush could not make, counted; it names the failure.

    Runtime complexity: O(1).
    """
    count_rejection(tiers.shared, limit)
    return CheckpointCapacityError(
        limit,
        value,
        needed,
        thread_id=thread_id,
        message=(
            f"{limit} reached for thread {thread_id!r}: the write was refused and nothing was changed, "
            f"because the durable tier ({tiers.durable.name}) failed to take the unflushed writes: "
            f"{_described(error)}. They stay in memory and are flushed once it is back."
        ),
    )


# --- flushing one thread ----------------------------------------------------------------------------------------


def flush_thread(tiers: Tiers, thread_id: str, refusal: CheckpointCapacityError | None = None) -> int:
    """Flush one thread's unflushed writes, oldest first; return how many. With ``refusal`` (the hot
    tier refused a write-back write), a durable failure is raised as that refusal, naming it; then the
    write goes through and the thread's hot copy leaves memory.

    A failure that poisons the thread (``writeback.DirtyLedger.failed``) drops its unflushed writes and
    raises ``UnstorableWriteError``.

    Raises:
        Exception: The durable tier's failure (as ``refusal``, naming it, when given); what was not
            flushed stays in memory.

    Runtime complexity: one transaction (two round trips) where the backend owns the saver's SQL
    (``group_commit``); else one durable write per unflushed item.
    """
    shared = tiers.shared
    if _nothing_to_flush(shared, thread_id, refusal):
        return 0
    start, tally = time.perf_counter(), [0]
    try:
        with shared.gates.sharing(thread_id):
            items = shared.dirty.claim(thread_id)
            try:
                body = _flush_body(tiers, thread_id, items, tally)
                step = _send(body, None)
                while isinstance(step, Io):  # the items' write (the parent read in it), on this thread
                    step = _send(body, _store(tiers, step))
            finally:
                shared.dirty.release(thread_id)
    except Exception as error:
        raise _failed(tiers, thread_id, refusal, tally[0], start, error) from error
    return _finish(tiers, thread_id, refusal, (tally[0], start), step.value, items)


async def aflush_thread(tiers: Tiers, thread_id: str, refusal: CheckpointCapacityError | None = None) -> int:
    """Async ``flush_thread``: the durable tier awaited, the gate waited for by polling, another flusher of the
    thread by awaiting the ledger's change.

    Runtime complexity: that of ``flush_thread``.
    """
    shared = tiers.shared
    if _nothing_to_flush(shared, thread_id, refusal):
        return 0
    start, tally = time.perf_counter(), [0]
    try:
        async with shared.gates.asharing(thread_id):
            items = await shared.dirty.aclaim(thread_id)
            try:
                body = _flush_body(tiers, thread_id, items, tally)
                step = _send(body, None)
                while isinstance(step, Io):  # awaited
                    step = _send(body, await _astore(tiers, step))
            finally:
                shared.dirty.release(thread_id)
    except Exception as error:
        raise _failed(tiers, thread_id, refusal, tally[0], start, error) from error
    return _finish(tiers, thread_id, refusal, (tally[0], start), step.value, items)


def _flush_body(tiers: Tiers, thread_id: str, items: list[DirtyItem], tally: list[int]) -> FlushBody:
    """A flush of claimed ``items``, once for both sides: it yields their write as one group (``group_commit``: the
    parent checked first, in the same transaction where the backend has one), sent the threads whose parent is
    gone; each item leaves the ledger as it is written, counted in ``tally``. It returns the parent found gone, if
    so (nothing written). Runtime complexity: O(items), plus the write it yields."""
    shared = tiers.shared

    def stored(thread_id: str, seconds: float) -> None:
        shared.dirty.flushed_one(thread_id, seconds)
        tally[0] += 1

    group = Group(thread_id, items, _parent_to_check(shared, thread_id, items))
    gone = yield Io("store", ([group], stored))
    return group.parent if thread_id in gone else None


FlushBody = Generator[Io, Any, "tuple[str, str] | None"]


def _nothing_to_flush(shared: Shared, thread_id: str, refusal: CheckpointCapacityError | None) -> bool:
    """Whether the thread has no unflushed write (then a refusal is settled at once). Runtime complexity: O(1)."""
    if shared.dirty.is_dirty(thread_id):
        return False
    _settle_refusal(shared, thread_id, refusal)
    return True


def _finish(
    tiers: Tiers,
    thread_id: str,
    refusal: CheckpointCapacityError | None,
    counted: tuple[int, float],
    gone: tuple[str, str] | None,
    items: list[DirtyItem],
) -> int:
    """A flush's end: refused under a parent found gone, else counted; ``counted`` is (items flushed, start)."""
    if gone is not None:
        raise _orphaned(tiers, thread_id, gone)
    flushed, start = counted
    _flushed(tiers.shared, thread_id, refusal, flushed, start)
    _note_heads(tiers.shared, thread_id, items)
    return flushed


# --- a late flush under a deleted parent ------------------------------------------------------------------------

FLUSHED_HEADS_BOUND = 100_000
"""How many (thread, namespace) pairs ``Shared.flushed_heads`` remembers, the least recently flushed forgotten."""


def _parent_to_check(shared: Shared, thread_id: str, items: list[DirtyItem]) -> tuple[str, str] | None:
    """The ``(namespace, checkpoint_id)`` whose presence in the durable tier a flush of ``items`` checks first:
    the first one they continue that is not among them: a checkpoint's parent, or the checkpoint a batch of
    pending writes attaches to when this process flushed it last (a batch whose checkpoint it has not flushed
    may precede that checkpoint's own put, as LangGraph's sync engine sends them: not checked). None when there
    is none.

    Another process may delete the thread (retention's idle deletion, ``delete_thread``, ``delete_for_runs``)
    while this one holds acknowledged writes that continue it; its in-transaction re-check cannot see them.
    Written, they would land as the children of a deleted parent, or as write rows no checkpoint holds, which
    nothing ever collects. No shortcut skips the read: whatever this process knows, another process may have
    removed the parent since. Runtime complexity: O(items), no I/O.
    """
    inside = {(item.namespace, item.checkpoint_id) for item in items if isinstance(item, DirtyCheckpoint)}
    for item in items:
        if isinstance(item, DirtyCheckpoint):
            if item.record.parent_id is None:
                continue
            continued = (item.namespace, item.record.parent_id)
        else:
            continued = (item.namespace, item.checkpoint_id)
            with shared.dirty.lock:
                if shared.flushed_heads.get((thread_id, item.namespace)) != item.checkpoint_id:
                    continue
        if continued not in inside:
            return continued
    return None


def _count_parent_checks(shared: Shared, groups: list[Group]) -> None:
    """Count the parent checks a write made. Runtime complexity: O(groups)."""
    checked = sum(group.parent is not None for group in groups)
    if checked:
        with shared.hot.store.exclusive():
            shared.counters.parent_checks += checked


def _note_heads(shared: Shared, thread_id: str, items: list[DirtyItem]) -> None:
    """Remember the newest checkpoint of each namespace a flush wrote. Runtime complexity: O(items)."""
    heads = {item.namespace: item.checkpoint_id for item in items if isinstance(item, DirtyCheckpoint)}
    if not heads:
        return
    remembered = shared.flushed_heads
    with shared.dirty.lock:
        for namespace, checkpoint_id in heads.items():
            key = (thread_id, namespace)
            remembered.pop(key, None)
            remembered[key] = checkpoint_id
        while len(remembered) > FLUSHED_HEADS_BOUND:
            remembered.popitem(last=False)


def _drop_unflushed(shared: Shared, thread_id: str, rejection: str = "") -> list[DirtyItem]:
    """Take a thread's unflushed writes out of the ledger and its hot copy out of memory, counted as unstorable
    (and as a rejection of that name, if any); return the writes. Runtime complexity: O(items of the thread),
    plus ``Store.delete_thread``."""
    store = shared.hot.store
    with store.exclusive():
        dropped = shared.dirty.take(thread_id)
        shared.marks.move(thread_id)
        shared.residency.forget(thread_id)
        store.delete_thread(thread_id)
        shared.counters.unstorable_threads += 1
        shared.counters.unstorable_writes += len(dropped)
        if rejection:
            shared.counters.rejections[rejection] += 1
    return dropped


def _orphaned(tiers: Tiers, thread_id: str, parent: tuple[str, str]) -> Exception:
    """A flush found its first checkpoint's parent gone from the durable tier (another process deleted the
    thread): nothing of it is written; the thread's unflushed writes are dropped (counted, logged), its hot copy
    leaves memory, and writes continuing them are refused (``UnstorableWriteError`` naming the deletion).

    Runtime complexity: O(items of the thread), plus ``Store.delete_thread``.
    """
    shared = tiers.shared
    dropped = _drop_unflushed(shared, thread_id, "deleted_parent")
    with shared.dirty.lock:
        for key in [key for key in shared.flushed_heads if key[0] == thread_id]:
            del shared.flushed_heads[key]
    first = min((item.checkpoint_id for item in dropped), default="")
    reason = (
        f"its checkpoint {parent[1]!r} (namespace {parent[0]!r}) is gone from the durable tier: another process "
        f"deleted the thread (retention or delete_thread) while these writes waited to be flushed"
    )
    lost = shared.unstorable.remember(thread_id, first, reason)
    logger.error(
        "thread %r: a late flush under a deleted parent was refused: %s; its %d unflushed writes from checkpoint %r "
        "on were dropped, and writes continuing them are refused",
        thread_id,
        reason,
        len(dropped),
        first,
    )
    return lost.refusal(first)


def _store(tiers: Tiers, step: Io) -> set[str]:
    """Write a step's groups of unflushed writes (``group_commit.store``: one transaction where the backend owns
    the SQL); return the threads whose parent is gone. Runtime complexity: that of ``group_commit.store``."""
    groups, stored = step.what
    gone = store(tiers.durable, tiers.serde, groups, stored, tiers.shared.clock)
    _count_parent_checks(tiers.shared, groups)
    return gone


async def _astore(tiers: Tiers, step: Io) -> set[str]:
    """``_store`` awaiting the durable tier (rows of a large batch made in the jobs pool)."""
    groups, stored = step.what
    gone = await astore(
        tiers.durable, tiers.serde, groups, stored, tiers.shared.clock, tiers.config.async_offload_bytes
    )
    _count_parent_checks(tiers.shared, groups)
    return gone


def _flushed(
    shared: Shared, thread_id: str, refusal: CheckpointCapacityError | None, flushed: int, start: float
) -> None:
    _count_flush(shared, flushed, time.perf_counter() - start, failed=False)
    _settle_refusal(shared, thread_id, refusal)


def _failed(
    tiers: Tiers,
    thread_id: str,
    refusal: CheckpointCapacityError | None,
    flushed: int,
    start: float,
    error: Exception,
) -> Exception:
    """What a failed flush raises: the durable error (as ``refusal`` when given), or, for a thread the failure
    poisoned, ``UnstorableWriteError`` once its writes are dropped. Runtime complexity: O(1), plus dropping."""
    shared = tiers.shared
    _count_flush(shared, flushed, time.perf_counter() - start, failed=True)
    if shared.dirty.failed(thread_id, error, tiers.durable.health.successes):
        return _poison(tiers, thread_id, error)
    if refusal is not None:
        return _refusal(tiers, thread_id, refusal.limit, refusal.limit_value, refusal.needed or 0, error)
    return error


def _poison(tiers: Tiers, thread_id: str, error: Exception) -> Exception:
    """The durable tier keeps refusing this thread's writes while it takes others': drop them (reported with
    the thread id), let the hot copy go, and refuse from now on the writes that continue what was dropped.

    Runtime complexity: O(items of the thread), plus ``Store.delete_thread``.
    """
    shared = tiers.shared
    dropped = _drop_unflushed(shared, thread_id)
    first = min((item.checkpoint_id for item in dropped), default="")
    lost = shared.unstorable.remember(thread_id, first, f"{type(error).__name__}: {error}")
    logger.error(
        "thread %r: the durable tier (%s) refused its unflushed writes %d times while taking other threads': "
        "%d writes from checkpoint %r on were dropped (%s); writes continuing them are refused",
        thread_id,
        tiers.durable.name,
        POISON_STRIKES,
        len(dropped),
        first,
        lost.error,
    )
    return lost.refusal(first)


def _settle_refusal(shared: Shared, thread_id: str, refusal: CheckpointCapacityError | None) -> None:
    """After the thread's flush, a write the hot tier refused goes through: the thread's hot copy is behind,
    and leaves memory. A store-wide refusal is counted as ``left_out``; a per-item one as ``oversize`` when the
    write-through leaves the thread out. Runtime complexity: that of ``Store.delete_thread``.
    """
    if refusal is None:
        return
    store = shared.hot.store
    with store.exclusive():
        shared.marks.move(thread_id)
        shared.residency.forget(thread_id)
        store.delete_thread(thread_id)
        if refusal.limit not in PER_ITEM_LIMITS:
            shared.counters.left_out += 1


def _count_flush(shared: Shared, flushed: int, seconds: float, *, failed: bool) -> None:
    """Count a flush: what it wrote, its time, and whether it failed. Runtime complexity: O(1)."""
    counters = shared.counters
    with shared.hot.store.exclusive():
        if flushed:
            counters.flushes += 1
            counters.flushed_writes += flushed
        counters.flush_seconds += seconds
        if failed:
            counters.flush_failures += 1


# --- flushing every thread ------------------------------------------------------------------------------------


def flush_all(tiers: Tiers) -> int:
    """Flush every dirty thread, the one dirty longest first; a failing thread does not stop the others.
    Raise the first failure once every thread was tried. A no-op with ``write="through"``.

    Over a SQL durable saver the threads go in group commits (``group_commit.group_plan``: many threads' writes
    in one transaction); over any other saver, a thread at a time, each item through its API.

    Runtime complexity: two round trips per batch of up to ``group_commit.BATCH_ITEMS`` writes; one durable
    write per unflushed item through the API.
    """
    plan, answer = _all_plan(tiers), None
    # closing: a flush left by a BaseException (KeyboardInterrupt) releases its claims now, not when the traceback
    # holding this frame is collected (until then, every later flush of those threads would wait for it)
    with contextlib.ExitStack() as gates, contextlib.closing(plan):
        while not isinstance(step := _send(plan, answer), _Done):
            answer = _io(tiers, gates, step)
    return _total(step.value)


async def aflush_all(tiers: Tiers) -> int:
    """Async ``flush_all``. Runtime complexity: that of ``flush_all``."""
    plan, answer = _all_plan(tiers), None
    async with contextlib.AsyncExitStack() as gates:
        with contextlib.closing(plan):  # a cancelled flush releases its claims at once (see flush_all)
            while not isinstance(step := _send(plan, answer), _Done):
                answer = await _aio(tiers, gates, step)
    return _total(step.value)


Answer = set[str] | int | Exception | None
"""What a step of ``_all_plan`` is sent: the threads whose parent is gone, a thread's count, a failure, or None."""


def _io(tiers: Tiers, gates: contextlib.ExitStack[Any], step: Io) -> Answer:
    """Run a step of ``_all_plan`` on this thread; a write's failure is the plan's to weigh (sent, not raised)."""
    try:
        if step.kind == "enter":
            gates.enter_context(tiers.shared.gates.sharing(step.what))
        elif step.kind == "leave":
            gates.close()
        else:
            return _store(tiers, step) if step.kind == "store" else flush_thread(tiers, step.what)
    except Exception as error:
        return error
    return None


async def _aio(tiers: Tiers, gates: contextlib.AsyncExitStack[Any], step: Io) -> Answer:
    """``_io`` awaiting: the gates polled for, the durable tier awaited."""
    try:
        if step.kind == "enter":
            await gates.enter_async_context(tiers.shared.gates.asharing(step.what))
        elif step.kind == "leave":
            await gates.aclose()
        else:
            return await (_astore(tiers, step) if step.kind == "store" else aflush_thread(tiers, step.what))
    except Exception as error:
        return error
    return None


def _all_plan(tiers: Tiers) -> GroupPlan:
    """``flush_all``'s steps: every dirty thread, the one dirty longest first, in group commits where the durable
    saver takes them, else each alone. Runtime complexity: O(t log t) for t dirty threads, plus the steps'."""
    shared = tiers.shared
    if shared.write != "back":
        return {}
    thread_ids = shared.dirty.dirty_threads()
    if groupable(tiers.durable) and len(thread_ids) > 1:
        hooks = Hooks(
            lambda thread_id, items: _parent_to_check(shared, thread_id, list(items)),
            lambda thread_id, items, flushed, start, gone: _finish(
                tiers, thread_id, None, (flushed, start), gone, list(items)
            ),
            lambda thread_id, flushed, start, error: _failed(tiers, thread_id, None, flushed, start, error),
        )
        return (yield from group_plan(shared.dirty, thread_ids, hooks))
    outcomes: dict[str, int | Exception] = {}
    for thread_id in thread_ids:
        outcomes[thread_id] = yield Io("flush", thread_id)
    return outcomes


def _total(outcomes: dict[str, int | Exception]) -> int:
    """The writes flushed; the first failure (in the threads' order) raised once every thread was tried."""
    failure = next((outcome for outcome in outcomes.values() if isinstance(outcome, Exception)), None)
    if failure is not None:
        raise failure
    return sum(outcome for outcome in outcomes.values() if isinstance(outcome, int))


def flush_in_background(tiers: Tiers) -> None:
    """The periodic flush: a round (``flush_round``). An async durable saver's loop that is not running is skipped
    until it runs.

    Runtime complexity: that of ``flush_all``.
    """
    if _loop_idle(tiers):
        return
    flush_round(tiers)


def _loop_idle(tiers: Tiers) -> bool:
    """Whether the durable saver is an async one whose event loop is not running (ended, or not started):
    a sync call handed to it would wait in vain. Runtime complexity: O(1)."""
    loop = tiers.durable.loop
    return loop is not None and (loop.is_closed() or not loop.is_running())


_WRITING_BACK: weakref.WeakValueDictionary[int, Tiers] = weakref.WeakValueDictionary()
"""Every write-back saver's tiers, held weakly, for ``flush_at_exit``."""


_COLLECTED: list[Tiers] = []
"""Write-back tiers garbage-collected with unflushed writes, held while a flush of their own (a thread started at
collection) runs, so an unclosed saver that goes out of scope loses nothing its durable tier can take."""


def flush_at_exit_later(tiers: Tiers) -> None:
    """Have ``flush_at_exit`` flush these tiers if they are still alive when the interpreter exits, and have them
    flushed if they are garbage-collected with unflushed writes first (``_collected``).

    Runtime complexity: O(1).
    """
    _WRITING_BACK[id(tiers)] = tiers
    finalizer = weakref.finalize(tiers, _collected, tiers.shared, tiers.durable, tiers.serde, tiers.config)
    finalizer.atexit = False  # at exit, flush_at_exit does it, and says what it could not flush


def _collected(shared: Shared, durable: DurableTier, serde: SerializerProtocol, config: Any) -> None:
    """The last object holding a write-back saver's tiers was garbage-collected (nobody closed the saver): its
    unflushed writes are flushed by a thread of their own, never in the collector's frame, which may be running
    inside any code holding any of the saver's locks. Logged; runtime complexity: O(1) here."""
    if not shared.dirty:
        return
    tiers = Tiers(shared, durable, serde, config)
    _COLLECTED.append(tiers)
    logger.warning(
        "a write-back TieredSaver was garbage-collected with %s and no close(): flushing them now "
        "(close the saver, or use it as a context manager, to flush them when you choose)",
        _stranded(shared),
    )
    threading.Thread(target=_flush_collected, args=(tiers,), name="tiered-saver-collected-flush", daemon=True).start()


def _flush_collected(tiers: Tiers) -> None:
    """Flush a collected saver's writes; what its durable tier no longer takes is lost, said at ERROR (nobody holds
    the saver to raise to, and its durable tier may be gone for good: the program closed it, or a test's server)."""
    try:
        flush_all(tiers)
    except Exception as error:
        if tiers.shared.dirty:
            logger.error(
                "a garbage-collected write-back TieredSaver's %s could not be flushed and are lost: %s: %s",
                _stranded(tiers.shared),
                type(error).__name__,
                error,
            )
    finally:
        with contextlib.suppress(ValueError):
            _COLLECTED.remove(tiers)


LOST_AT_EXIT_STATUS = 70
"""The exit status of a process whose unflushed writes could not be flushed at interpreter exit (``EX_SOFTWARE``)."""


def flush_at_exit() -> None:
    """At interpreter exit, flush the unflushed writes of every write-back saver still alive: a program that
    ends without ``close()`` (a clean exit) loses nothing its durable tier can still take.

    If some cannot be flushed (the durable connection was closed first, the tier is down, an async durable
    saver's event loop has ended), they are lost: that is logged at CRITICAL, naming the threads and how many
    writes each lost, and the process ends with status ``LOST_AT_EXIT_STATUS`` whatever status it was ending
    with (an ``atexit`` handler cannot change it by raising; ``os._exit`` can, after the logs and the standard
    streams are flushed; the ``atexit`` handlers registered before this module was imported do not run then).

    Runtime complexity: that of ``flush_all`` per saver.
    """
    lost: list[str] = []
    for tiers in list(_WRITING_BACK.values()):
        if not tiers.shared.dirty:
            continue
        if _loop_idle(tiers):
            lost.append(
                f"{_stranded(tiers.shared)}: the durable saver's event loop has ended (close the saver with "
                f"aclose() before it ends)"
            )
            continue
        try:
            flush_all(tiers)
        except Exception as error:
            if tiers.shared.dirty:  # a thread's writes dropped on purpose (poisoned, orphaned) were logged then
                lost.append(f"{_stranded(tiers.shared)}: {type(error).__name__}: {error}")
    if lost:
        _exit_lost(lost)


def _exit_lost(lost: list[str]) -> None:
    """Say what was lost at exit, and end the process with ``LOST_AT_EXIT_STATUS``. Runtime complexity:
    O(len(lost)), plus flushing the logs and the standard streams."""
    logger.critical(
        "at interpreter exit, write-back's unflushed writes could not be flushed to the durable tier and are "
        "lost (close the TieredSaver before its durable connection, and check close()'s error): %s; exiting "
        "with status %d",
        "; ".join(lost),
        LOST_AT_EXIT_STATUS,
    )
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed stream: nothing more to say there
            stream.flush()
    os._exit(LOST_AT_EXIT_STATUS)


atexit.register(flush_at_exit)


# --- spills and deliveries --------------------------------------------------------------------------------------


def _spill_requests(shared: Shared) -> set[str]:
    with shared.hot.store.exclusive():
        thread_ids, shared.spill_requests = shared.spill_requests, set()
    return thread_ids


def _count_spills(shared: Shared, requested: set[str], seconds: float) -> None:
    """Count the threads evicted dirty that a round flushed; those still dirty wait for the next round.
    Runtime complexity: O(len(requested))."""
    spilled = [thread_id for thread_id in requested if not shared.dirty.is_dirty(thread_id)]
    with shared.hot.store.exclusive():
        shared.spill_requests |= requested.difference(spilled)
        if spilled:
            shared.counters.spills += len(spilled)
            shared.counters.spill_seconds += seconds


def deliver(tiers: Tiers) -> None:
    """Hand the hot tier's drops to the hook. A dirty thread it evicted is not flushed here, in the writer: its
    unflushed writes stay in the ledger (still counted in ``max_dirty_bytes`` and ``max_dirty_seconds``) for the
    next round (the periodic flush, backpressure's, ``flush()``), which counts it as a spill; a read of it
    flushes it first (``read_through``).

    Runtime complexity: O(1) when nothing waits; else the hook's per drop.
    """
    announcements = tiers.shared.hot.store.pending_drops()
    if announcements is not None:
        announcing.deliver(announcements)


async def adeliver(tiers: Tiers) -> None:
    """Async ``deliver``. The hook is the tiered saver's own (``Shared.on_hot_drop``: O(1), no I/O), so it runs
    inline. Runtime complexity: that of ``deliver``.
    """
    deliver(tiers)
