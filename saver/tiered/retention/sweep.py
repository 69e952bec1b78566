"""The sweep: find the threads a ``RetentionPolicy`` makes due, and remove from each, a bounded number a pass.

A pass (``run_pass``) takes first the threads earlier passes left due, then
finds more, a page at a time, until it has asked the durable tier to remove
from ``max_threads_per_sweep`` (or, for ``sweep()``, until none is left to
find); a thread in use is skipped at no cost to that bound. Each thread is removed on
its own (``threads.remove_from_thread``: one transaction, its gate held alone,
the engine's lock never held across the durable call); one that fails is
counted and left for the next pass, and the pass goes on.

Finding due threads, SQLite and PostgreSQL: two windows of checkpoint ids
(times: ``ids``), read on retention's index (``backends``) a page of threads
at a time:

* idle: the threads with a checkpoint in ``[start, cutoff)`` and none after,
  where ``cutoff`` is the id of ``now - idle_ttl_seconds`` (and again, the
  ``waiting`` window, at ``now - interrupted_ttl_seconds``: the threads the
  idle TTL kept because they waited at an interrupt are due once more then);
* long: the threads with a namespace written in ``[start, upto)`` holding more
  than ``keep_last`` checkpoints, where ``upto`` is the id of ``now``, or
  above the newest id this process put if the clock is behind it.

A window's next range starts where the previous one ended (``since``), less
``DISCOVERY_OVERLAP_SECONDS`` (``start``); the first pass of a process reads
the index from the start. A range cut short by the bound resumes at the next
pass where it stopped (``Window.after``). What moves a window (``_bounds``,
once a pass):

* this process's own rows, whatever their ids and whenever they land: every
  durable put is flown in ``Shared.landings`` (``tiered.landing``); a window
  rewinds to the lowest id put since the last pass, and no window ends past a
  put under way or an unflushed one (write-back's ``DirtyLedger``), so each
  lands before a range passes it, and the first pass after it lands reads it;
* a wall clock behind a window (stepped back) rewinds the window to the
  clock, less the overlap: the rows written with the clock as it is are read;
* a rewind that falls in a range still open (cut short by the bound) takes
  effect when the range ends: restarting it would never let it end under load;
* another process's rows: a range re-reads the overlap behind its start, so a
  row landing less than ``DISCOVERY_OVERLAP_SECONDS`` (by this process's
  clock) after a pass read past its id is found by the next; one landing
  later is found by its own process's sweeper, or by any process's first pass.

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
from ..backends import dialect_of, kind_of, run_async, run_sync
from ..backends.base import INDEX, Kind, Plan, Removed
from ..state import Shared, Tiers
from ..stats import SweepReport
from .ids import checkpoint_id_at, id_after, time_of
from .policy import RetentionPolicy
from .quota import fit_thread
from .threads import remove_from_thread
from .waiting import IdleDeletion

__all__ = ["DISCOVERY_OVERLAP_SECONDS", "DISCOVERY_PAGE", "Due", "Sweeper", "Window", "run_pass"]

logger = logging.getLogger("langgraph.checkpoint.bounded.tiered")

Due = Literal["idle", "long"]
Search = Literal["idle", "waiting", "long"]
"""The windows a pass reads: ``waiting`` is the idle search again at ``interrupted_ttl_seconds``' cutoff."""

DISCOVERY_PAGE = 1_000
"""Threads found due per query of the durable tier, at most."""

DISCOVERY_OVERLAP_SECONDS = 300.0
"""How far behind where the last range ended each range starts: a row another process puts is found if it lands
less than this after a pass (by this process's clock) read past its id."""


@dataclass
class Window:
    """Where the search for due threads stands in one range of checkpoint ids (times).

    Invariant: ``after``, ``start`` and ``rewound`` are empty unless a range is open (``upto`` set); an open
    range is read from ``start``, at or below ``since`` (the overlap), to ``upto`` above ``since``, and
    ``rewound``, when set, is below ``upto``.

    Attributes:
        since: Where the next range starts, less the overlap: every row this process put below it had landed
            when a pass read it (a row landing lower moves it down: ``rewind``).
        start: Where the open range is read from: ``since`` less the overlap.
        upto: The end of the range being read (None: no range open).
        after: Threads up to this id were read in the open range.
        rewound: The lowest id that landed in the open range, or below it, since it opened (the pages read may
            have passed it): the next range starts there.
    """

    since: str = ""
    start: str = ""
    upto: str | None = None
    after: str = ""
    rewound: str | None = None

    def rewind(self, lowest: str) -> None:
        """A row at ``lowest`` landed, or is landing, where the search may have passed it: read from there again
        (after the open range, if one is: restarting it would never let a range cut short by the bound end,
        under load). Runtime complexity: O(1)."""
        if self.upto is None:
            self.since = min(self.since, lowest)
        elif lowest < self.upto and (self.rewound is None or lowest < self.rewound):
            self.rewound = lowest

    def open(self, upto: str, overlap: Callable[[str], str]) -> bool:
        """Open the range from ``overlap(since)`` to ``upto`` unless one is open; return whether one is open.
        Runtime complexity: O(1)."""
        if self.upto is None:
            if upto <= self.since:
                return False
            self.start, self.upto = min(overlap(self.since), self.since), upto
        return True

    def page_read(self, last_thread: str | None, full: bool) -> None:
        """A page was read: a full one ends at ``last_thread`` (more may follow), a short one ends the range."""
        if full and last_thread is not None:
            self.after = last_thread
            return
        assert self.upto is not None
        since = self.upto if self.rewound is None else self.rewound
        self.since, self.start, self.upto, self.after, self.rewound = since, "", None, "", None

    def check(self) -> None:
        """Assert the invariant (for tests)."""
        assert self.upto is not None or not (self.after or self.start or self.rewound is not None), self
        assert self.upto is None or self.start <= self.since < self.upto, self
        assert self.rewound is None or (self.upto is not None and self.rewound < self.upto), self


class Sweeper:
    """Retention in one process: the policy, where the search for due threads stands, and the threads found
    due and not yet swept, in the order found (those a pass left, in use or failed, after those found before).

    One pass runs at a time (``running``); the background job and ``sweep()`` take turns.

    Args:
        policy: The retention policy.
        kind: The durable saver's kind (``backends.kind_of``).
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
        self.newest_put = ""  # the greatest checkpoint id this process has put: the long window reaches it
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
        self.waiting.check()
        self.long.check()


@dataclass
class _Tally:
    deleted_threads: int = 0
    pruned_threads: int = 0
    checkpoints: int = 0
    writes: int = 0
    nbytes: int = 0
    in_use: int = 0
    failures: int = 0
    over_bytes: int = 0


def run_pass(tiers: Tiers, sweeper: Sweeper, *, max_threads: int | None) -> SweepReport:
    """One pass: take up to ``max_threads`` due threads (None: all) and remove from each; return what it did,
    and count it in ``stats().retention``.

    Raises:
        Exception: The durable tier failed to find due threads (counted as a sweep failure); the threads
            swept before it stay swept.

    Runtime complexity: per thread, one transaction reading its ids and deleting what goes (SQL savers);
    finding them, an index range over the ids written since the last pass and ``DISCOVERY_OVERLAP_SECONDS``
    before it (from further back once this process put an older id, or its clock went back).
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
    uptos = _bounds(tiers.shared, sweeper, now, cutoff, idle.interrupted_before if idle else None)
    if sweeper.sql is not None and not sweeper.indexed:
        _create_index(tiers, sweeper)
    left: dict[str, Due] = {}  # in use or failed: for the next pass, after the threads found before them
    taken = 0  # threads the durable tier was asked to remove from (one in use costs no durable call)
    scanned = False
    try:
        while taken < budget:
            if not sweeper.due:
                if sweeper.sql is not None:
                    found = _find_in_tables(tiers, sweeper, uptos, DISCOVERY_PAGE)
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
        if policy.max_thread_bytes is not None and sweeper.sql is not None:
            return _fit(tiers, sweeper, tally, thread_id, policy.max_thread_bytes)
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
        return _failed(tiers, tally, thread_id, error)
    return _tally_removed(tally, removed)


def _fit(tiers: Tiers, sweeper: Sweeper, tally: _Tally, thread_id: str, max_bytes: int) -> str:
    """Prune a thread written since the last pass to ``keep_last`` and ``max_thread_bytes`` (``quota``)."""
    assert sweeper.sql is not None
    try:
        removed, over = fit_thread(
            tiers,
            sweeper.kind,
            sweeper.sql,
            thread_id,
            max_bytes=max_bytes,
            keep_last=sweeper.policy.keep_last,
            in_use_seconds=sweeper.eviction_grace_seconds,
        )
    except Exception as error:
        return _failed(tiers, tally, thread_id, error)
    if over:
        tally.over_bytes += 1
        logger.warning(
            "retention: thread %r stays over max_thread_bytes (%d): its newest checkpoints, and what they need, "
            "alone pass it (TieredSaver.thread_storage says where its bytes are)",
            thread_id,
            max_bytes,
        )
    return _tally_removed(tally, removed)


def _failed(tiers: Tiers, tally: _Tally, thread_id: str, error: Exception) -> str:
    tally.failures += 1
    message = f"{type(error).__name__}: {error}"
    tiers.shared.retention_totals.note_error(message)
    logger.warning("retention: removing from thread %r failed, kept for the next sweep: %s", thread_id, message)
    return FAILED


def _tally_removed(tally: _Tally, removed: Removed | None) -> str:
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


def _bounds(
    shared: Shared, sweeper: Sweeper, now: float, cutoff: str | None, waiting_cutoff: str | None
) -> dict[Search, str]:
    """Where each window may end this pass, after moving each back to the rows this process put below it.

    * A put this process began since the last pass (``landing.Landings``), or an unflushed one (write-back's
      ledger), below a window's start rewinds it there: the row is read once it has landed, whatever its id.
    * No window ends past an unflushed put or a put under way: a range read before such a row lands would
      pass it.
    * A wall clock behind a window (stepped back) rewinds it to the clock less the overlap: the rows written
      with the clock as it is are read (other processes' too); the long window reaches the newest id this
      process put even when the clock is behind it.

    Runtime complexity: O(dirty threads), plus O(log puts under way).
    """
    landed = shared.landings.take()
    unflushed = shared.dirty.lowest_checkpoint_id()
    held = min((found for found in (landed.flying, unflushed) if found is not None), default=None)
    at_risk = min((found for found in (landed.lowest, held) if found is not None), default=None)
    if landed.highest is not None and landed.highest > sweeper.newest_put:
        sweeper.newest_put = landed.highest
    clock = checkpoint_id_at(now)
    newest = id_after(sweeper.newest_put) if sweeper.newest_put else None
    # each search: its window, where it may end, and the id of "now" on its own clock (a step back shows there)
    candidates: dict[Search, tuple[Window, str, str]] = {"long": (sweeper.long, max(clock, newest or ""), clock)}
    if cutoff is not None:
        candidates["idle"] = (sweeper.idle, cutoff, cutoff)
    if waiting_cutoff is not None:
        candidates["waiting"] = (sweeper.waiting, waiting_cutoff, waiting_cutoff)
    uptos: dict[Search, str] = {}
    for search, (window, upto, now_id) in candidates.items():
        if at_risk is not None:
            window.rewind(at_risk)
        if now_id < window.since:  # the wall clock went back: read what is written with it as it is
            window.rewind(_overlap(now_id))
        uptos[search] = upto if held is None else min(upto, held)
    return uptos


def _overlap(since: str) -> str:
    """Where a range that continues at ``since`` is read from: ``DISCOVERY_OVERLAP_SECONDS`` earlier (an id
    that holds no time: ``since`` itself). Runtime complexity: O(1)."""
    seconds = time_of(since)
    return since if seconds is None else checkpoint_id_at(seconds - DISCOVERY_OVERLAP_SECONDS)


def _find_in_tables(tiers: Tiers, sweeper: Sweeper, uptos: dict[Search, str], limit: int) -> bool:
    """Read the next page of due threads into ``sweeper.due``; return whether any was found. Runtime complexity:
    one index range query a window until one finds something, each returning at most ``limit`` threads."""
    sql, kind, policy = sweeper.sql, sweeper.kind, sweeper.policy
    assert sql is not None
    searches: list[tuple[Window, Due, str, Callable[[Window], tuple[object, ...]]]] = []
    for search, window in (("idle", sweeper.idle), ("waiting", sweeper.waiting)):
        if search in uptos:  # the waiting search is the idle one again, at interrupted_ttl_seconds' cutoff
            searches.append((window, "idle", uptos[search], lambda w: (w.start, w.upto, w.after, w.upto, limit)))
    if policy.keep_last is not None or policy.max_thread_bytes is not None:
        # max_thread_bytes: every thread written in the window (a namespace of more than 0) is measured
        keep_last = 0 if policy.max_thread_bytes is not None else policy.keep_last or 0
        searches.append((sweeper.long, "long", uptos["long"], lambda w: (w.start, w.upto, w.after, keep_last, limit)))
    for window, due, upto, parameters in searches:
        while window.open(upto, _overlap):
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
