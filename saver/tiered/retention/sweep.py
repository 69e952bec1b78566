"""The sweep: find the threads a ``RetentionPolicy`` makes due, and remove from each, a bounded number a pass.

A pass (``run_pass``) takes first the threads earlier passes left due, then
finds more, a page at a time, until it has asked the durable tier to remove
from ``max_threads_per_sweep`` (or, for ``sweep()``, until none is left to
find); a thread in use is skipped at no cost to that bound. Each thread is removed on
its own (``threads.remove_from_thread``: one transaction, its gate held alone,
the engine's lock never held across the durable call); one that fails is
counted and left for the next pass, and the pass goes on.

Finding due threads, SQLite and PostgreSQL: two windows of checkpoint ids
(times: ``ids``), read on retention's index (``storage``) a page of threads
at a time:

* idle: the threads with a checkpoint in ``[since, cutoff)`` and none after,
  where ``cutoff`` is the id of ``now - idle_ttl_seconds`` (and again at
  ``now - interrupted_ttl_seconds``: the threads the idle TTL kept because they
  waited at an interrupt, ``waiting``, are due once more then);
* long: the threads with a namespace written in ``[since, now)`` holding more
  than ``keep_last`` checkpoints.

A window's ``since`` is where the previous one ended, so a pass reads the
index entries written since the last, once; the first pass of a process
reads the index from the start. A window cut short by the bound resumes at
the next pass where it stopped (``Window.after``).

Any other saver: every pass (with nothing due left over) lists every
checkpoint (``list(None)``), O(everything stored) with its payloads.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from ...locations import configurable
from ..durable_format import Kind, kind_of
from ..state import Tiers
from ..stats import SweepReport
from .ids import checkpoint_id_at
from .policy import RetentionPolicy
from .storage import INDEX, Plan, dialect_of, run_async, run_sync
from .threads import remove_from_thread
from .waiting import IdleDeletion

__all__ = ["DISCOVERY_PAGE", "Due", "Sweeper", "Window", "run_pass"]

logger = logging.getLogger("langgraph.checkpoint.bounded.tiered")

Due = Literal["idle", "long"]

DISCOVERY_PAGE = 1_000
"""Threads found due per query of the durable tier, at most."""


@dataclass
class Window:
    """Where the search for due threads stands in one range of checkpoint ids (times).

    Invariant: ``after`` is empty unless a range is open (``upto`` set), and an open range starts at ``since``
    and ends at ``upto`` above it.

    Attributes:
        since: Ids below this were read by earlier passes.
        upto: The end of the range being read (None: no range open).
        after: Threads up to this id were read in the open range.
    """

    since: str = ""
    upto: str | None = None
    after: str = ""

    def open(self, upto: str) -> bool:
        """Open the range ``[since, upto)`` unless one is open; return whether one is open and not empty."""
        if self.upto is None:
            if upto <= self.since:
                return False
            self.upto = upto
        return True

    def page_read(self, last_thread: str | None, full: bool) -> None:
        """A page was read: a full one ends at ``last_thread`` (more may follow), a short one ends the range."""
        if full and last_thread is not None:
            self.after = last_thread
            return
        assert self.upto is not None
        self.since, self.upto, self.after = self.upto, None, ""

    def check(self) -> None:
        """Assert the invariant (for tests)."""
        assert self.upto is not None or not self.after, self
        assert self.upto is None or self.since < self.upto, self


class Sweeper:
    """Retention in one process: the policy, where the search for due threads stands, and the threads found
    due and not yet swept, in the order found (those a pass left, in use or failed, after those found before).

    One pass runs at a time (``running``); the background job and ``sweep()`` take turns.

    Args:
        policy: The retention policy.
        kind: The durable saver's kind (``durable_format.kind_of``).
        eviction_grace_seconds: A thread used this recently in this process is not pruned.
        wall_clock: Unix seconds (checkpoint ids hold the wall time of their put).
    """

    def __init__(
        self, policy: RetentionPolicy, kind: Kind, eviction_grace_seconds: float, wall_clock: Callable[[], float]
    ) -> None:
        self.policy = policy
        self.kind: Kind = kind
        self.sql = dialect_of(kind)
        self.eviction_grace_seconds = eviction_grace_seconds
        self.wall_clock = wall_clock
        self.idle = Window()
        self.long = Window()
        self.waiting = Window()  # idle past interrupted_ttl_seconds: the waiting threads the idle TTL kept
        self.due: dict[str, Due] = {}
        self.indexed = False
        self.running = threading.Lock()

    @classmethod
    def for_tiers(cls, policy: RetentionPolicy, tiers: Tiers, wall_clock: Callable[[], float]) -> Sweeper:
        """The sweeper of a tiered saver's durable tier. Runtime complexity: O(1)."""
        grace = tiers.config.eviction_grace_seconds
        return cls(policy, kind_of(tiers.durable.saver), grace, wall_clock)

    def check(self) -> None:
        """Assert the windows' invariants (for tests)."""
        self.idle.check()
        self.long.check()
        self.waiting.check()


@dataclass
class _Tally:
    deleted_threads: int = 0
    pruned_threads: int = 0
    checkpoints: int = 0
    writes: int = 0
    nbytes: int = 0
    in_use: int = 0
    failures: int = 0


def run_pass(tiers: Tiers, sweeper: Sweeper, *, max_threads: int | None) -> SweepReport:
    """One pass: take up to ``max_threads`` due threads (None: all) and remove from each; return what it did,
    and count it in ``stats().retention``.

    Raises:
        Exception: The durable tier failed to find due threads (counted as a sweep failure); the threads
            swept before it stay swept.

    Runtime complexity: per thread, one transaction reading its ids and deleting what goes (SQL savers);
    finding them, an index range over the ids written since the last pass.
    """
    totals = tiers.shared.retention_totals
    with sweeper.running:
        started = time.perf_counter()
        tally = _Tally()
        try:
            _sweep(tiers, sweeper, tally, math.inf if max_threads is None else max_threads)
        except Exception as error:
            totals.add(_report(sweeper, tally, started), sweep=True, error=f"{type(error).__name__}: {error}")
            raise
        report = _report(sweeper, tally, started)
        totals.add(report, sweep=True)
        return report


def _report(sweeper: Sweeper, tally: _Tally, started: float) -> SweepReport:
    return SweepReport(**vars(tally), due=len(sweeper.due), seconds=time.perf_counter() - started)


def _sweep(tiers: Tiers, sweeper: Sweeper, tally: _Tally, budget: float) -> None:
    policy = sweeper.policy
    now = sweeper.wall_clock()
    cutoff = checkpoint_id_at(now - policy.idle_ttl_seconds) if policy.idle_ttl_seconds is not None else None
    idle = IdleDeletion.of(policy, now)  # what an idle deletion does with a thread waiting at an interrupt
    if sweeper.sql is not None and not sweeper.indexed:
        _create_index(tiers, sweeper)
    left: dict[str, Due] = {}  # in use or failed: for the next pass, after the threads found before them
    taken = 0  # threads the durable tier was asked to remove from (one in use costs no durable call)
    scanned = False
    try:
        while taken < budget:
            if not sweeper.due:
                if sweeper.sql is not None:
                    found = _find_in_tables(tiers, sweeper, now, cutoff, DISCOVERY_PAGE, idle)
                elif not scanned:
                    found, scanned = _find_through_api(tiers, sweeper, cutoff), True
                else:
                    found = False
                if not found:
                    break
                continue
            thread_id, due = next(iter(sweeper.due.items()))
            del sweeper.due[thread_id]
            settled = _settle(tiers, sweeper, tally, thread_id, due, cutoff, idle)
            if settled != IN_USE:
                taken += 1
                # Yield the interpreter: a write waiting for the durable connection or the hot store's lock,
                # which this removal just released, takes it now, instead of after the next removal too.
                time.sleep(0)
            if settled != SETTLED:
                left[thread_id] = due
    finally:  # a failed discovery must not lose them: the windows have moved past them
        for thread_id, due in left.items():
            sweeper.due.setdefault(thread_id, due)


SETTLED, IN_USE, FAILED = "settled", "in use", "failed"


def _settle(
    tiers: Tiers,
    sweeper: Sweeper,
    tally: _Tally,
    thread_id: str,
    due: Due,
    cutoff: str | None,
    idle: IdleDeletion | None,
) -> str:
    """Remove from one due thread; return ``SETTLED``, or ``IN_USE`` or ``FAILED`` (due again next pass)."""
    policy = sweeper.policy
    if due == "idle" and cutoff is not None:
        keep_last = None if policy.strategy == "delete" else 1
        idle_before: str | None = cutoff
        seconds = policy.idle_ttl_seconds or 0.0  # a read in this process within the TTL keeps it
    else:
        keep_last, idle_before, seconds = policy.keep_last, None, sweeper.eviction_grace_seconds
        if keep_last is None:
            return SETTLED  # a long thread found under a count the policy no longer has
    try:
        removed = remove_from_thread(
            tiers,
            sweeper.kind,
            sweeper.sql,
            thread_id,
            keep_last=keep_last,
            idle_before=idle_before,
            in_use_seconds=seconds,
            idle=idle if due == "idle" else None,
        )
    except Exception as error:
        tally.failures += 1
        message = f"{type(error).__name__}: {error}"
        tiers.shared.retention_totals.note_error(message)
        logger.warning("retention: removing from thread %r failed, kept for the next sweep: %s", thread_id, message)
        return FAILED
    if removed is None:
        tally.in_use += 1
        return IN_USE
    if removed.checkpoints:  # none: another process swept it first
        if removed.whole:
            tally.deleted_threads += 1
        else:
            tally.pruned_threads += 1
    tally.checkpoints += removed.checkpoints
    tally.writes += removed.writes
    tally.nbytes += removed.nbytes
    return SETTLED


# --- finding due threads ---------------------------------------------------------------------------------------


def _create_index(tiers: Tiers, sweeper: Sweeper) -> None:
    """Create retention's index, once per process; a failure is logged and the pass goes on without it (its
    queries are right without it, and slower), to try again at the next pass."""
    sql, kind = sweeper.sql, sweeper.kind
    assert sql is not None
    try:
        tiers.durable.on_tables(
            lambda saver: run_sync(saver, kind, sql.create_index(), transaction=False),
            lambda saver: run_async(saver, kind, sql.create_index(), transaction=False),
        )
    except Exception as error:
        logger.warning("retention: creating the index %s failed, tried again next pass: %r", INDEX, error)
        return
    sweeper.indexed = True


def _find_in_tables(
    tiers: Tiers, sweeper: Sweeper, now: float, cutoff: str | None, limit: int, idle: IdleDeletion | None = None
) -> bool:
    """Read the next page of due threads into ``sweeper.due``; return whether any was found."""
    sql, kind, policy = sweeper.sql, sweeper.kind, sweeper.policy
    assert sql is not None
    searches: list[tuple[Window, Due, str, Callable[[Window], tuple[object, ...]]]] = []
    if cutoff is not None:
        searches.append((sweeper.idle, "idle", cutoff, lambda w: (w.since, w.upto, w.after, w.upto, limit)))
    if idle is not None and idle.interrupted_before is not None:
        # the idle search again, at the waiting threads' cutoff: the ones the idle TTL kept are due once more
        waiting = idle.interrupted_before
        searches.append((sweeper.waiting, "idle", waiting, lambda w: (w.since, w.upto, w.after, w.upto, limit)))
    if policy.keep_last is not None:
        keep_last = policy.keep_last
        searches.append(
            (sweeper.long, "long", checkpoint_id_at(now), lambda w: (w.since, w.upto, w.after, keep_last, limit))
        )
    for window, due, upto, parameters in searches:
        while window.open(upto):
            statement = sql.idle_threads() if due == "idle" else sql.long_threads()
            found = _thread_ids(tiers, kind, statement, parameters(window))
            window.page_read(found[-1] if found else None, len(found) >= limit)
            for thread_id in found:
                if due == "idle" or thread_id not in sweeper.due:
                    sweeper.due[thread_id] = due
            if found:
                return True
    return False


def _thread_ids(tiers: Tiers, kind: Kind, statement: str, parameters: tuple[object, ...]) -> list[str]:
    """The thread ids a query of the durable tables returns (read outside a transaction)."""

    def plan() -> Plan[list[str]]:
        rows = yield statement, parameters
        return [str(row[0]) for row in rows]

    found: list[str] = tiers.durable.on_tables(
        lambda saver: run_sync(saver, kind, plan(), transaction=False),
        lambda saver: run_async(saver, kind, plan(), transaction=False),
    )
    return found


def _find_through_api(tiers: Tiers, sweeper: Sweeper, cutoff: str | None) -> bool:
    """List every checkpoint (any saver): the threads idle since ``cutoff``, and those with a namespace over
    ``keep_last``, into ``sweeper.due``; return whether any was found."""
    newest: dict[str, str] = {}
    counts: dict[tuple[str, str], int] = {}
    for item in tiers.durable.list(None):
        located = configurable(item.config)
        thread_id, checkpoint_id = str(located["thread_id"]), str(located["checkpoint_id"])
        namespace = str(located.get("checkpoint_ns", "") or "")
        if checkpoint_id > newest.get(thread_id, ""):
            newest[thread_id] = checkpoint_id
        counts[thread_id, namespace] = counts.get((thread_id, namespace), 0) + 1
    keep_last = sweeper.policy.keep_last
    found = False
    for thread_id, newest_id in sorted(newest.items()):
        if cutoff is not None and newest_id < cutoff:
            sweeper.due[thread_id] = "idle"
            found = True
    if keep_last is not None:
        for thread_id, _namespace in sorted(key for key, count in counts.items() if count > keep_last):
            if thread_id not in sweeper.due:
                sweeper.due[thread_id] = "long"
                found = True
    return found
