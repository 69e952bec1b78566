"""How the tiered saver's callers keep out of each other's way, one thread id at a time.

Five small pieces, each with one invariant, used by ``TieredSaver`` (``tiered.saver``
and its ``tiered_*`` modules):

* ``DeletedThreads``: tombstones of deleted threads, so that a late write (of a
  run that was still going when its thread was deleted) never brings it back;
* ``UnstorableThreads``: records of threads whose unflushed writes the durable
  tier kept refusing and which were dropped, so that what continues them is
  refused too;
* ``ThreadGates``: writes and flushes that reach the durable tier for a thread
  hold its gate shared, a deletion holds it alone, so a deletion never races a
  write already past its checks;
* ``WriteMarks``: a counter per thread (striped) that every write and deletion
  moves, so that a read-through which began before it does not admit what it
  read into the hot tier, nor share its read with a caller that began after it;
* ``Flights``: concurrent misses on one key read the durable tier once, the
  others wait for that read (dogpile's "one regenerates, the others wait").

None of them holds a lock across a durable round trip: gates and flights are
counts and futures, waited on without holding their own lock.

A sync wait on a gate blocks its OS thread, which may be a worker of the
tiered saver's own jobs pool (``pools.jobs_pool``: copies, prunes, run
deletions for async callers). So a coroutine holding a gate, or leading a
flight, awaits nothing but the durable tier, whose sync calls run on a pool of
their own (``pools.durable_pool``) that never waits on a gate: it lets the gate
go however many jobs wait for it. The async paths wait on gates by polling,
never blocking their event loop.
"""

from __future__ import annotations

import asyncio
import copy
import threading
import time
from collections.abc import AsyncIterator, Callable, Hashable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, fields, replace
from typing import Generic, NamedTuple, TypeVar

from ..engine import BoundedSaverError, Tombstones

__all__ = [
    "GATE_POLL_SECONDS",
    "MARK_STRIPES",
    "DELETE_THREAD",
    "DeletedThread",
    "DeletedThreads",
    "Deletion",
    "Flight",
    "Flights",
    "Joined",
    "LostWrites",
    "ThreadDeletedError",
    "ThreadGates",
    "UnstorableThreads",
    "UnstorableWriteError",
    "WriteMarks",
]

GATE_POLL_SECONDS = 0.001
"""How often an async caller looks again at a gate held by another caller (it never blocks its loop)."""

MARK_STRIPES = 1_024
"""Counters ``WriteMarks`` keeps: threads share a counter when their ids hash alike (a needless retry, never a miss)."""


class ThreadDeletedError(BoundedSaverError, RuntimeError):
    """A write continues a thread deleted since it began: refused, and written nowhere.

    A run still going when its thread was deleted would otherwise bring the
    thread back, partly, from its next write (langgraph#7206). A new run on the
    same thread id (a checkpoint with no parent, or ids newer than anything the
    deleted thread held) is not refused.

    Attributes:
        thread_id: The deleted thread.
        checkpoint_id: The checkpoint the refused write continues.
        seconds_ago: How long before this write the thread was deleted.
    """

    def __init__(self, thread_id: str, checkpoint_id: str, seconds_ago: float) -> None:
        self.thread_id = thread_id
        self.checkpoint_id = checkpoint_id
        self.seconds_ago = seconds_ago
        super().__init__(
            f"thread {thread_id!r} was deleted {seconds_ago:.3g} s before this write, which continues its "
            f"checkpoint {checkpoint_id!r}: the write was refused and nothing was written, so the thread does not "
            f"come back. A new run on the thread starts afresh."
        )


class ThreadRecord:
    """A record ``engine.Tombstones`` keeps under its thread id, its size the characters of its text fields."""

    __slots__ = ()
    thread_id: str

    @property
    def key(self) -> str:
        """What the record is remembered by: the thread id."""
        return self.thread_id

    @property
    def nbytes(self) -> int:
        """Characters of the text the record keeps. Runtime complexity: O(fields)."""
        values = (getattr(self, field.name) for field in fields(self))  # type: ignore[arg-type]
        return sum(len(value) for value in values if type(value) is str)


@dataclass(frozen=True, slots=True)
class DeletedThread(ThreadRecord):
    """What a tombstone of a deleted thread holds.

    Attributes:
        thread_id: The thread.
        newest_checkpoint_id: The greatest checkpoint id it held when deleted, if any.
        deleted_at: ``time.monotonic()`` when it was deleted.
        limit: What deleted it: ``"delete_thread"`` (a call, or ``prune(strategy="delete")``), or the retention
            policy's field: ``"idle_ttl_seconds"``, ``"interrupted_ttl_seconds"`` (it waited at an interrupt).
        limit_value: That field's value (0 for ``delete_thread``).
        deleted_at_wall: When it was deleted, in seconds since the epoch (the saver's ``wall_clock``).
        waiting: It waited at an interrupt when retention deleted it: a resume of it is refused
            (``retention.resumes``).
    """

    thread_id: str
    newest_checkpoint_id: str | None
    deleted_at: float
    limit: str = "delete_thread"
    limit_value: float = 0.0
    deleted_at_wall: float = 0.0
    waiting: bool = False

    def continued_by(self, checkpoint_id: str | None) -> bool:
        """Whether a write naming ``checkpoint_id`` continues the deleted thread (ids are time-ordered).

        Runtime complexity: O(1).
        """
        return (
            checkpoint_id is not None
            and self.newest_checkpoint_id is not None
            and checkpoint_id <= self.newest_checkpoint_id
        )


class Deletion(NamedTuple):
    """Why a thread was deleted, as its tombstone keeps it (``DeletedThread``'s fields of the same names).

    Attributes:
        limit: ``"delete_thread"``, ``"idle_ttl_seconds"`` or ``"interrupted_ttl_seconds"``.
        limit_value: That field's value (0 for ``delete_thread``).
        at_wall: When, in seconds since the epoch (None: now, by the tombstones' ``wall_clock``).
        waiting: The thread waited at an interrupt.
    """

    limit: str = "delete_thread"
    limit_value: float = 0.0
    at_wall: float | None = None
    waiting: bool = False


DELETE_THREAD = Deletion()
"""The reason of a ``delete_thread`` (the default)."""


@dataclass(frozen=True, slots=True)
class RefusedRun(ThreadRecord):
    """Where the run of a refused resume began: its writes from ``start`` on are refused (``refuse_run``) with the
    resume's own ``refusal``."""

    thread_id: str
    start: str
    refusal: Exception


class DeletedThreads:
    """The last ``capacity`` deleted threads, the oldest forgotten first, and the runs of refused resumes.

    Both are the engine's bounded memory (``engine.Tombstones``, as the memory saver keeps its dropped threads);
    this class adds what a tiered record carries (why and when, by the wall clock, a thread was deleted), the
    merge of a thread deleted again, and a lock: several threads delete and write at once, while the engine's
    records are written under the store's lock only.

    Invariant: at most ``capacity`` records, each under its thread id, and at most
    ``capacity`` refused runs. Writes of ``records`` and ``refused_runs`` happen
    under ``lock``.

    Args:
        capacity: How many are remembered (``max_dropped_thread_records``).
        wall_clock: Seconds since the epoch, for ``deleted_at_wall`` (``TieredSaver`` sets its own).
    """

    def __init__(self, capacity: float, wall_clock: Callable[[], float] = time.time) -> None:
        self.capacity = capacity
        self.wall_clock = wall_clock
        self.lock = threading.Lock()
        self.tombstones: Tombstones[DeletedThread] = Tombstones(capacity)
        self.records = self.tombstones.records  # read without the lock where empty means nothing to refuse
        self.runs: Tombstones[RefusedRun] = Tombstones(capacity)
        self.refused_runs = self.runs.records  # thread -> where a refused resume's run began

    def remember(self, thread_id: str, newest_checkpoint_id: str | None, why: Deletion = DELETE_THREAD) -> None:
        """Remember a thread just deleted, and why. A thread deleted again keeps refusing what its earlier lives
        held (a retried deletion finds it empty, and must not replace its tombstone with one that refuses
        nothing), and keeps the reason of a deletion that found it waiting (a retry found nothing waiting).

        Runtime complexity: O(1) amortized.
        """
        at_wall = self.wall_clock() if why.at_wall is None else why.at_wall
        with self.lock:
            earlier = self.records.get(thread_id)
            held = [cid for cid in (earlier and earlier.newest_checkpoint_id, newest_checkpoint_id) if cid]
            newest_checkpoint_id = max(held, default=None)
            if (
                earlier is not None
                and earlier.waiting
                and not why.waiting
                and newest_checkpoint_id == (earlier.newest_checkpoint_id)
            ):  # deleted again with nothing new in it: the waiting thread's deletion is what a resume meets
                record = replace(earlier, deleted_at=time.monotonic())
            else:
                same = earlier is not None and (earlier.limit, earlier.deleted_at_wall) == (why.limit, at_wall)
                deleted_at = earlier.deleted_at if same and earlier is not None else time.monotonic()
                record = DeletedThread(
                    thread_id, newest_checkpoint_id, deleted_at, why.limit, why.limit_value, at_wall, why.waiting
                )
            self.tombstones.remember(record)  # the newest; the oldest forgotten past capacity

    def get(self, thread_id: str) -> DeletedThread | None:
        """The tombstone of a thread, or None. Runtime complexity: O(1)."""
        with self.lock:
            return self.records.get(thread_id)

    def forget(self, thread_id: str) -> None:
        """Forget a thread's tombstone (it was written on purpose again: a copy into it). Runtime complexity: O(1)."""
        with self.lock:
            self.tombstones.forget(thread_id)
            self.runs.forget(thread_id)

    def refuse_run(self, thread_id: str, checkpoint_id: str, refusal: Exception) -> None:
        """A resume of the deleted thread, started (afresh by LangGraph, or from a hot copy) at ``checkpoint_id``,
        was refused with ``refusal``: the rest of its run (LangGraph runs on, and sends the writes of its steps) is
        refused too, with the same error, until a run of the thread starts (``run_started``).

        Runtime complexity: O(1) amortized.
        """
        with self.lock:
            earlier = self.refused_runs.get(thread_id)
            start = checkpoint_id if earlier is None else min(earlier.start, checkpoint_id)
            self.runs.remember(RefusedRun(thread_id, start, refusal))

    def run_started(self, thread_id: str) -> None:
        """A run of the thread read its latest checkpoint: its writes are its own, not a refused resume's (a run
        reads before it writes). Runtime complexity: O(1)."""
        with self.lock:
            self.runs.forget(thread_id)

    def refuse(self, thread_id: str, continues: str | None) -> None:
        """Refuse a write that continues a deleted thread's checkpoint ``continues``, or the run of a refused
        resume (``refuse_run``).

        Raises:
            ThreadDeletedError: The write continues what was deleted.

        Runtime complexity: O(1); nothing at all while no thread was deleted.
        """
        if not self.records and not self.refused_runs:
            return
        refused = self.refused_runs.get(thread_id)
        if refused is not None and continues is not None and continues >= refused.start:
            raise refused.refusal  # the resume's own refusal (the same error again): what the run's caller must see
        record = self.records.get(thread_id)
        if record is not None and record.continued_by(continues):
            raise ThreadDeletedError(thread_id, continues or "", time.monotonic() - record.deleted_at)

    def covers(self, thread_id: str, checkpoint_ids: Sequence[str]) -> bool:
        """Whether every one of ``checkpoint_ids`` belongs to a deleted life of the thread (a rewrite that read
        them must not put them back). Runtime complexity: O(len(checkpoint_ids)); O(1) while none was deleted.
        """
        if not self.records:
            return False
        with self.lock:
            record = self.records.get(thread_id)
        return record is not None and all(record.continued_by(checkpoint_id) for checkpoint_id in checkpoint_ids)

    def __len__(self) -> int:
        return len(self.records)


class UnstorableWriteError(BoundedSaverError, RuntimeError):
    """A write continues unflushed writes the durable tier refused (write-back), which were dropped: refused.

    A write-back write is acknowledged before the durable tier sees it. When the
    durable tier keeps refusing one thread's writes while it takes the others'
    (a value or metadata it cannot store), those writes are dropped so that they
    stop holding up every other thread's flushes, and what continues them is
    refused: it would build on state the durable tier never had. A new run on
    the thread (from what the durable tier holds) is not refused.

    Attributes:
        thread_id: The thread.
        checkpoint_id: The checkpoint the refused write continues ('' for the drop itself).
        first_dropped: The oldest checkpoint id whose writes were dropped.
        error: The durable tier's failure, as ``ExceptionType: message``.
        dropped_at: Wall-clock time of the drop (``time.time()``).
    """

    def __init__(self, thread_id: str, checkpoint_id: str, first_dropped: str, error: str, dropped_at: float) -> None:
        self.thread_id = thread_id
        self.checkpoint_id = checkpoint_id
        self.first_dropped = first_dropped
        self.error = error
        self.dropped_at = dropped_at
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(dropped_at))
        what = (
            f"this write continues checkpoint {checkpoint_id!r}, so it was refused and nothing was written; "
            if (checkpoint_id)
            else ""
        )
        super().__init__(
            f"thread {thread_id!r}: the durable tier refused its unflushed writes from checkpoint {first_dropped!r} "
            f"on ({error}), so they were dropped at {when}; {what}the durable tier holds the thread as it was "
            f"before them: read it again and start a new run from there"
        )


@dataclass(frozen=True, slots=True)
class LostWrites(ThreadRecord):
    """What the record of a thread whose unflushed writes were dropped holds.

    Attributes:
        thread_id: The thread.
        first_dropped: The oldest checkpoint id whose writes were dropped.
        error: The durable tier's failure, as ``ExceptionType: message``.
        dropped_at: Wall-clock time of the drop.
    """

    thread_id: str
    first_dropped: str
    error: str
    dropped_at: float

    def refusal(self, checkpoint_id: str) -> UnstorableWriteError:
        """The error of a write continuing ``checkpoint_id`` ('' for the drop itself). Runtime complexity: O(1)."""
        return UnstorableWriteError(self.thread_id, checkpoint_id, self.first_dropped, self.error, self.dropped_at)


class UnstorableThreads:
    """The last ``capacity`` threads whose unflushed writes were dropped, the oldest forgotten first.

    The engine's bounded memory (``engine.Tombstones``) behind a lock, as ``DeletedThreads``.

    Invariant: at most ``capacity`` records, each under its thread id; reads and writes under ``lock``.
    """

    def __init__(self, capacity: float) -> None:
        self.capacity = capacity
        self.lock = threading.Lock()
        self.tombstones: Tombstones[LostWrites] = Tombstones(capacity)
        self.records = self.tombstones.records

    def remember(self, thread_id: str, first_dropped: str, error: str) -> LostWrites:
        """Remember a drop (an earlier one of the thread keeps its older first id). Runtime complexity: O(1)."""
        with self.lock:
            earlier = self.records.get(thread_id)
            if earlier is not None and earlier.first_dropped < first_dropped:
                first_dropped = earlier.first_dropped
            record = LostWrites(thread_id, first_dropped, error, time.time())
            self.tombstones.remember(record)
            return record

    def forget(self, thread_id: str) -> None:
        """Forget a thread's record (it was deleted, or written on purpose again). Runtime complexity: O(1)."""
        with self.lock:
            self.tombstones.forget(thread_id)

    def refuse(self, thread_id: str, continues: str | None) -> None:
        """Refuse a write continuing a checkpoint at or after the thread's first dropped one.

        Raises:
            UnstorableWriteError: It continues what was dropped.

        Runtime complexity: O(1); nothing at all while no thread lost writes.
        """
        if not self.records:
            return
        record = self.records.get(thread_id)
        if record is not None and continues is not None and continues >= record.first_dropped:
            raise record.refusal(continues)

    def __len__(self) -> int:
        return len(self.records)


class ThreadGates:
    """Per thread id: the callers reaching the durable tier for it, or the one deletion under way.

    Invariant: a thread id is in ``shared`` only while at least one caller
    holds its gate shared, and in ``exclusive`` only while a deletion holds it;
    never in both. Waiting happens on ``changed`` (sync) or by polling
    (async), never while holding a durable connection. An async holder
    (``asharing``, ``aalone``) awaits only the durable tier while it holds the
    gate, never the default executor a sync waiter may be blocking (see the
    module's docstring).
    """

    def __init__(self) -> None:
        self.changed = threading.Condition(threading.Lock())
        self.shared: dict[str, int] = {}
        self.exclusive: set[str] = set()

    def _try_shared(self, thread_id: str) -> bool:
        with self.changed:
            if thread_id in self.exclusive:
                return False
            self.shared[thread_id] = self.shared.get(thread_id, 0) + 1
            return True

    def _release_shared(self, thread_id: str) -> None:
        with self.changed:
            count = self.shared[thread_id] - 1
            if count:
                self.shared[thread_id] = count
            else:
                del self.shared[thread_id]
            self.changed.notify_all()

    def _try_exclusive(self, thread_id: str) -> bool:
        with self.changed:
            if thread_id in self.exclusive:
                return False
            self.exclusive.add(thread_id)
            return True

    def _release_exclusive(self, thread_id: str) -> None:
        with self.changed:
            self.exclusive.discard(thread_id)
            self.changed.notify_all()

    @contextmanager
    def sharing(self, thread_id: str) -> Iterator[None]:
        """Hold a thread's gate shared: wait while a deletion of it is under way.

        Runtime complexity: O(1), plus the wait for a deletion.
        """
        with self.changed:
            self.changed.wait_for(lambda: thread_id not in self.exclusive)
            self.shared[thread_id] = self.shared.get(thread_id, 0) + 1
        try:
            yield
        finally:
            self._release_shared(thread_id)

    @asynccontextmanager
    async def asharing(self, thread_id: str) -> AsyncIterator[None]:
        """``sharing`` for async callers: the wait polls, so the event loop is never blocked."""
        while not self._try_shared(thread_id):
            await asyncio.sleep(GATE_POLL_SECONDS)
        try:
            yield
        finally:
            self._release_shared(thread_id)

    @contextmanager
    def alone(self, thread_id: str) -> Iterator[None]:
        """Hold a thread's gate alone: wait for another deletion, then for the callers already in.

        Callers arriving meanwhile wait for this one to finish. Runtime
        complexity: O(1), plus the waits.
        """
        with self.changed:
            self.changed.wait_for(lambda: thread_id not in self.exclusive)
            self.exclusive.add(thread_id)
            self.changed.wait_for(lambda: thread_id not in self.shared)
        try:
            yield
        finally:
            self._release_exclusive(thread_id)

    @asynccontextmanager
    async def aalone(self, thread_id: str) -> AsyncIterator[None]:
        """``alone`` for async callers: both waits poll."""
        while not self._try_exclusive(thread_id):
            await asyncio.sleep(GATE_POLL_SECONDS)
        try:
            while thread_id in self.shared:
                await asyncio.sleep(GATE_POLL_SECONDS)
            yield
        finally:
            self._release_exclusive(thread_id)


class WriteMarks:
    """Counters moved by every write and deletion of a thread, striped over ``MARK_STRIPES`` slots.

    A read-through notes its thread's mark before reading the durable tier and
    admits what it read only if the mark has not moved: otherwise a write (or a
    deletion) may have made the read stale. Threads sharing a slot only cost
    each other an admission. Moves happen with the hot store's lock held (the
    caller's), so a mark read under that lock is exact.
    """

    def __init__(self) -> None:
        self.counts = [0] * MARK_STRIPES

    def read(self, thread_id: str) -> int:
        """The thread's mark now. Runtime complexity: O(1)."""
        return self.counts[hash(thread_id) % MARK_STRIPES]

    def move(self, thread_id: str) -> None:
        """A write or deletion of the thread. Runtime complexity: O(1)."""
        self.counts[hash(thread_id) % MARK_STRIPES] += 1


Result = TypeVar("Result")


class Flight(Generic[Result]):
    """One read of the durable tier in flight, and the callers waiting for it.

    Attributes:
        future: Resolved with the read's result (a private copy for the waiters), or its error; made
            when the first waiter joins (a read nobody waits for costs no future).
        leader: The OS thread doing the read (a sync caller on it must not wait for itself).
        waiters: How many callers wait.
    """

    __slots__ = ("future", "leader", "waiters")

    def __init__(self) -> None:
        self.future: Future[Result] | None = None
        self.leader = threading.get_ident()
        self.waiters = 0

    def wait(self) -> Result:
        """Block until the read lands; a fresh copy of its result, or its error raised here.

        Runtime complexity: the read's, plus copying its result.
        """
        assert self.future is not None
        return copy.deepcopy(self.future.result())

    async def await_(self) -> Result:
        """``wait`` for async callers: the event loop runs while the read lands."""
        assert self.future is not None
        return copy.deepcopy(await asyncio.wrap_future(self.future))


class Joined(NamedTuple, Generic[Result]):
    """A caller's place in a flight: the flight, and whether the caller leads it (reads) or follows (waits)."""

    flight: Flight[Result]
    leads: bool


class Flights(Generic[Result]):
    """Durable reads in flight by key: the first caller of a key reads, later ones wait for it.

    Invariant: a key is in ``flights`` from its leader's ``join`` to its
    ``land``; a flight lands exactly once.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.flights: dict[Hashable, Flight[Result]] = {}

    def join(self, key: Hashable, *, sync: bool) -> Joined[Result]:
        """The flight of ``key`` and whether the caller leads it (reads) or follows (waits).

        A sync caller on the leader's own OS thread leads a flight of its own
        instead of waiting (it would wait for itself). Runtime complexity: O(1).
        """
        with self.lock:
            flight = self.flights.get(key)
            if flight is not None and not (sync and flight.leader == threading.get_ident()):
                flight.waiters += 1
                if flight.future is None:
                    flight.future = Future()
                return Joined(flight, False)
            flight = Flight()
            self.flights.setdefault(key, flight)
            return Joined(flight, True)

    def land(self, key: Hashable, flight: Flight[Result], result: Result) -> None:
        """The leader's read is done: its waiters get a copy of ``result``. Runtime complexity: O(1),
        plus one copy of the result when anyone waits."""
        with self.lock:
            if self.flights.get(key) is flight:
                del self.flights[key]
            future = flight.future
        if future is not None:
            future.set_result(copy.deepcopy(result))

    def fail(self, key: Hashable, flight: Flight[Result], error: BaseException) -> None:
        """The leader's read failed: its waiters get the error. Runtime complexity: O(1)."""
        with self.lock:
            if self.flights.get(key) is flight:
                del self.flights[key]
            future = flight.future
        if future is not None:
            future.set_exception(error)

    def __len__(self) -> int:
        return len(self.flights)
