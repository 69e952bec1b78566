"""Write-back's unflushed writes: what the durable tier has not acknowledged yet, in the order it came.

With ``TieredSaver(..., write="back")`` a write lands in the hot tier and here.
The ledger keeps each unflushed write as the hot tier stored it (immutable
records, shared with the hot store, not copied), so a thread that leaves memory
before it is flushed loses nothing: its unflushed writes stay here until the
durable tier has them. A flush replays a thread's writes oldest first (parents
before children, a checkpoint before the writes that came after it), each
through the durable saver's public ``put`` / ``put_writes``.

What waits is bounded twice, by the caller (``flushing.dirty_room``), which
makes room before adding, never queueing past the bounds:

* in bytes (``max_dirty_bytes``): every byte the ledger keeps alive is counted,
  once per thread: a checkpoint record, each value an unflushed checkpoint
  holds (a value several of the thread's unflushed checkpoints share, as
  unchanged channels do, counts once), and each batch of pending writes with
  its task paths. A value the hot tier holds too is counted: the ledger keeps
  it alive once the thread leaves memory;
* in age (``max_dirty_seconds``): ``oldest_since`` is when the oldest unflushed
  write came.

A thread whose writes the durable tier refuses for what they hold, while it
takes the others', is struck (``failed``); past ``POISON_STRIKES`` it is
poisoned, and the caller takes its writes out (``take``) so that it stops
holding up everyone's flushes.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import math
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata
from langgraph.checkpoint.serde.base import SerializerProtocol

from ..engine import CheckpointRecord, Payload, Version, WriteRecord, payload_size

__all__ = [
    "CHANGE_WAIT_SECONDS",
    "ITEM_SECONDS_WEIGHT",
    "UNMEASURED_ITEMS",
    "POISON_STRIKES",
    "SKIPPED_BOUND",
    "Backlog",
    "DirtyCheckpoint",
    "DirtyItem",
    "DirtyLedger",
    "DirtyWrites",
    "FlushRounds",
    "CheckpointReplay",
    "Replay",
    "Selection",
    "Selector",
    "Wakeups",
    "WritesReplay",
    "refuses_the_data",
    "replay",
]

POISON_STRIKES = 2
"""Failed flushes of a thread, each while the durable tier took other writes since the one before, that poison it."""

UNMEASURED_ITEMS = 16
"""Unflushed writes that may wait before any flush measured how fast the durable tier takes them."""

ITEM_SECONDS_WEIGHT = 0.25
"""The weight of the last flushed write's time in ``DirtyLedger.item_seconds`` (an exponential moving average)."""

CHANGE_WAIT_SECONDS = 1.0
"""The longest an async waiter sleeps between looks at the ledger should its wake-up be missed (it is woken by the
change itself: this is a guard, not a poll)."""


class DirtyCheckpoint(NamedTuple):
    """An unflushed ``put``.

    Attributes:
        namespace: Its namespace.
        record: The checkpoint as the hot tier stored it (metadata merged, parent id).
        values: Every non-empty channel value it references, as a read returns them.
        new_versions: The channels the put stored new values for, and their versions.
    """

    namespace: str
    record: CheckpointRecord
    values: Mapping[str, Payload]
    new_versions: Mapping[str, Version]

    @property
    def checkpoint_id(self) -> str:
        """The checkpoint's id."""
        return self.record.checkpoint_id


class DirtyWrites(NamedTuple):
    """An unflushed ``put_writes``: one task's batch, in the order it was given.

    Attributes:
        namespace: Its namespace.
        checkpoint_id: The checkpoint its task ran from.
        task_id: The task.
        task_path: The task's path.
        writes: The records, in the order of the call (so each gets its index back).
        nbytes: Its values and task paths.
    """

    namespace: str
    checkpoint_id: str
    task_id: str
    task_path: str
    writes: tuple[WriteRecord, ...]
    nbytes: int


DirtyItem = DirtyCheckpoint | DirtyWrites


class Selection(NamedTuple):
    """What a ``persist="latest"`` flush writes of a thread's claimed writes (``write_less.select``).

    Attributes:
        kept: ``(index in the claimed list, item)`` of each write kept, in order; an item may be a rewritten
            checkpoint (its parent, its ``new_versions``).
        pins: ``(namespace, checkpoint_id)`` of checkpoints whose pending writes are written before their put
            came: never to be dropped later.
        skipped: ``(namespace, checkpoint_id)`` of each checkpoint this claim drops, to its parent id: the ledger
            remembers them, to rejoin a later fork from one of them (``DirtyLedger.skipped_parents``).
    """

    kept: list[tuple[int, DirtyItem]]
    pins: set[tuple[str, str]]
    skipped: dict[tuple[str, str], str | None]


Selector = Callable[[list[DirtyItem], set[tuple[str, str]], Mapping[tuple[str, str], str | None]], "Selection | None"]
"""``write_less.select``: given a thread's claimed writes, its pinned checkpoints and the checkpoints earlier claims
dropped (to their parents), what a flush keeps."""

SKIPPED_BOUND = 10_000
"""How many dropped checkpoints (``persist="latest"``) the ledger remembers a thread, the oldest forgotten: a fork
from one forgotten is refused at its flush (``flushing._orphaned``), as before the ledger remembered them."""


@dataclass(eq=False)
class Backlog:
    """One thread's unflushed writes, oldest first, and what they keep alive.

    Invariant: ``items`` and ``times`` have one entry per unflushed write (``times`` non-decreasing);
    ``payloads`` maps each distinct value object the checkpoints among them hold to how many hold it and its
    size; ``nbytes`` is the sum of the items' own bytes (a record, or a batch of writes) and of those sizes.

    Attributes:
        items: The unflushed writes, oldest first.
        times: When each came (the ledger's clock).
        payloads: ``id(value)`` to ``[holders, size]``.
        nbytes: What the backlog keeps alive.
        strikes: Failed flushes in a row, each while the durable tier took other writes since the one before.
        successes_seen: The durable tier's successful calls at the last failed flush.
        lows: The checkpoint ids of the unflushed puts that no later one undercuts, ascending (a sliding-window
            minimum: ``lows[0]`` is the smallest id among ``items``), for retention's discovery.
    """

    items: deque[DirtyItem] = field(default_factory=deque)
    times: deque[float] = field(default_factory=deque)
    payloads: dict[int, list[int]] = field(default_factory=dict)
    nbytes: int = 0
    strikes: int = 0
    successes_seen: int = 0
    lows: deque[str] = field(default_factory=deque)

    def push(self, item: DirtyItem, at: float) -> int:
        """Add an item; return the bytes it added. Runtime complexity: O(values of the item)."""
        added = _own_bytes(item)
        if isinstance(item, DirtyCheckpoint):
            lows, checkpoint_id = self.lows, item.record.checkpoint_id
            while lows and lows[-1] > checkpoint_id:
                lows.pop()  # amortized O(1): each id leaves once
            lows.append(checkpoint_id)
            payloads = self.payloads
            for value in item.values.values():
                held = payloads.get(id(value))
                if held is None:
                    size = payload_size(value)
                    payloads[id(value)] = [1, size]
                    added += size
                else:
                    held[0] += 1
        self.items.append(item)
        self.times.append(at)
        self.nbytes += added
        return added

    def pop(self) -> int:
        """Drop the oldest item (flushed); return the bytes it freed. Runtime complexity: O(values of the item)."""
        item = self.items.popleft()
        self.times.popleft()
        freed = _own_bytes(item)
        if isinstance(item, DirtyCheckpoint):
            if self.lows and self.lows[0] == item.record.checkpoint_id:
                self.lows.popleft()
            payloads = self.payloads
            for value in item.values.values():
                held = payloads[id(value)]
                held[0] -= 1
                if not held[0]:
                    del payloads[id(value)]
                    freed += held[1]
        self.nbytes -= freed
        return freed

    def recount(self) -> int:
        """The bytes the items keep alive, counted afresh. Runtime complexity: O(items and their values)."""
        distinct: dict[int, int] = {}
        for item in self.items:
            if isinstance(item, DirtyCheckpoint):
                for value in item.values.values():
                    distinct[id(value)] = payload_size(value)
        return sum(_own_bytes(item) for item in self.items) + sum(distinct.values())


_DATA_ERRORS = (TypeError, ValueError, OverflowError, RecursionError)
_DB_API_DATA_ERRORS = frozenset({"DataError", "IntegrityError", "NotSupportedError"})


def refuses_the_data(error: BaseException) -> bool:
    """Whether a durable failure is about what was written, not about reaching the tier: a value or metadata
    the saver cannot serialize (``TypeError``, ``ValueError``...), a DB-API ``DataError`` or ``IntegrityError``
    (PostgreSQL refusing a NUL character, a number out of range), or SQLite refusing to bind a parameter.
    Connection and operational errors (a server down, a locked database) are not.

    Runtime complexity: O(depth of the error's class hierarchy).
    """
    if isinstance(error, _DATA_ERRORS):
        return True
    kinds = type(error).__mro__
    if any(kind.__name__ in _DB_API_DATA_ERRORS for kind in kinds):
        return True
    return any(kind.__name__ == "InterfaceError" and kind.__module__.startswith("sqlite3") for kind in kinds)


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class Wakeups:
    """The waiters of a condition, sync and async: a sync waiter waits on the condition, an async one on a
    future of its own loop, set from whichever thread calls ``wake`` (``call_soon_threadsafe``). Nobody polls.

    Invariant: ``waiters`` is guarded by the condition's lock; ``wake`` empties it.
    """

    def __init__(self, lock: threading.Condition) -> None:
        self.lock = lock
        self.waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    async def until(self, ready: Callable[[], bool], timeout: float = CHANGE_WAIT_SECONDS) -> None:
        """Return once ``ready()`` (read with the lock held), or the next ``wake``; ``timeout`` only guards against
        a loop that missed its wake-up. Runtime complexity: O(1), plus the wait."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self.lock:
            if ready():
                return
            self.waiters.append((loop, future))
        try:
            await asyncio.wait_for(future, timeout)
        except TimeoutError:
            pass
        finally:
            with self.lock:
                if (loop, future) in self.waiters:
                    self.waiters.remove((loop, future))

    def wake(self) -> None:
        """Wake every waiter, sync and async (lock held). Runtime complexity: O(waiters)."""
        self.lock.notify_all()
        waiters, self.waiters = self.waiters, []
        for loop, future in waiters:
            with contextlib.suppress(RuntimeError):  # its loop is closed: nobody waits there any more
                loop.call_soon_threadsafe(_wake, future)


class FlushRounds:
    """Write-back's flush rounds: when a bound is reached, ONE flush of every dirty thread (``flushing.flush_all``,
    oldest first, as big a batch as is dirty) runs, and every writer that needs room waits for its end instead
    of flushing too. A write that waited rechecks the bounds once the round is over.

    Invariant: ``running`` exactly while a round runs (``started == finished + 1``); at most one round runs;
    ``finished`` grows, and every waiter is woken, at each round's end; ``failure`` is the last round's while
    ``waiting`` callers wait, else None (an error's traceback holds the flush's frames, and with them the saver:
    kept, it would keep a saver nobody holds from being collected and flushed). Guarded by ``lock``; nobody
    holds it across a durable round trip.
    """

    def __init__(self) -> None:
        self.lock = threading.Condition(threading.Lock())
        self.wakeups = Wakeups(self.lock)
        self.running = False
        self.started = 0
        self.finished = 0
        self.failure: Exception | None = None
        self.waiting = 0

    def begin(self) -> int | None:
        """Start a round (None: the caller runs it, then calls ``end``), or, while one runs, return ``finished``
        now, to wait for its end (``wait_end``, ``await_end``). Runtime complexity: O(1)."""
        with self.lock:
            if self.running:
                return self.finished
            self.running = True
            self.started += 1
            return None

    def end(self, failure: Exception | None) -> None:
        """The round is over (``failure``: how it failed, if it did): wake every waiter. Runtime complexity:
        O(waiters)."""
        with self.lock:
            self.running = False
            self.finished += 1
            self.failure = failure if self.waiting else None
            self.wakeups.wake()

    def wait_end(self, seen: int) -> Exception | None:
        """Wait for the end of the round under way when ``finished`` was ``seen``; its failure, if any.
        Runtime complexity: O(1), plus the wait."""
        with self.lock:
            self.waiting += 1
            try:
                self.lock.wait_for(lambda: self.finished != seen)
                return self.failure
            finally:
                self._left()

    async def await_end(self, seen: int) -> Exception | None:
        """``wait_end`` for async callers: woken by the round's end on their own loop, never by polling.
        Runtime complexity: O(1), plus the wait."""
        with self.lock:
            self.waiting += 1
        try:
            while True:
                await self.wakeups.until(lambda: self.finished != seen)
                with self.lock:
                    if self.finished != seen:
                        return self.failure
        finally:
            with self.lock:
                self._left()

    def _left(self) -> None:
        """A waiter has its answer (lock held): the last one lets the failure go. Runtime complexity: O(1)."""
        self.waiting -= 1
        if not self.waiting:
            self.failure = None


def _own_bytes(item: DirtyItem) -> int:
    return item.record.nbytes if isinstance(item, DirtyCheckpoint) else item.nbytes


class DirtyLedger:
    """Each thread's unflushed writes (a ``Backlog``), their bytes and their age.

    Invariant: ``nbytes`` is the sum of the backlogs' ``nbytes``; a thread with no item has no backlog;
    ``ages`` holds ``(since, thread_id)`` for every backlog's oldest item (and stale pairs, skipped when read);
    a thread is being flushed by at most one caller (``flushing``); ``changes`` grows at each write leaving the
    ledger and each flusher's end, waking every waiter (``wait_change``, ``await_change``). Everything is guarded
    by ``lock``; nobody holds it across a durable round trip.
    """

    def __init__(self) -> None:
        self.lock = threading.Condition(threading.Lock())
        self.threads: dict[str, Backlog] = {}
        self.nbytes = 0
        self.flushing: set[str] = set()
        self.ages: list[tuple[float, str]] = []  # a heap
        self.changes = 0  # bumped (and waiters woken) whenever a write leaves the ledger or a flusher finishes
        self.items = 0  # unflushed writes, every thread's
        self.item_seconds: float | None = None  # a write's flush lately (EWMA, saver clock); None: unmeasured
        self.wakeups = Wakeups(self.lock)
        self.rounds = FlushRounds()  # the one flush that backpressure runs, and its waiters (flushing)
        # persist="latest" (write_less.select): what a claim keeps of a thread's writes; its pinned checkpoints
        self.select: Selector | None = None
        self.pinned: dict[str, set[tuple[str, str]]] = {}
        self.skipped = 0  # unflushed writes a claim dropped unwritten (persist="latest")
        # persist="latest": each thread's dropped checkpoints, (namespace, id) -> parent id, oldest first (bounded:
        # SKIPPED_BOUND), so a fork from one is rejoined; forgotten when the thread leaves memory (forget_skipped)
        self.skipped_parents: dict[str, OrderedDict[tuple[str, str], str | None]] = {}
        self.forget_at_claim: set[str] = set()  # threads that left memory while dirty: forgotten at their next claim

    def add(self, thread_id: str, item: DirtyItem, at: float) -> None:
        """Note an unflushed write that came at ``at``. Runtime complexity: O(values of the item), plus
        O(log threads) when the thread was clean."""
        with self.lock:
            backlog = self.threads.get(thread_id)
            if backlog is None:
                backlog = self.threads[thread_id] = Backlog()
                heapq.heappush(self.ages, (at, thread_id))
            self.nbytes += backlog.push(item, at)
            self.items += 1

    def is_dirty(self, thread_id: str) -> bool:
        """Whether the thread has unflushed writes. Runtime complexity: O(1)."""
        return thread_id in self.threads

    def dirty_threads(self) -> list[str]:
        """The threads with unflushed writes, the one whose oldest write is oldest first.

        Runtime complexity: O(t log t) for t dirty threads.
        """
        with self.lock:
            return sorted(self.threads, key=lambda thread_id: self.threads[thread_id].times[0])

    def window(self, now: float) -> float:
        """What a crash now could lose at worst, in seconds: the age of the oldest unflushed write (one in a
        flush under way included) plus the time the unflushed writes take to flush, as recent flushes went
        (``item_seconds`` each, one after another). 0 with none; ``math.inf`` past ``UNMEASURED_ITEMS`` before
        any flush was measured (the first flush measures the tier). Runtime complexity: amortized O(log t)."""
        with self.lock:
            oldest = self._oldest()
            if oldest is None:
                return 0.0
            if self.item_seconds is None:
                return now - oldest[0] if self.items <= UNMEASURED_ITEMS else math.inf
            return now - oldest[0] + self.items * self.item_seconds

    def oldest_since(self) -> float:
        """When the oldest unflushed write came (``math.inf`` with none), a write in a flush under way included
        (it leaves the ledger only once the durable tier took it). Runtime complexity: amortized O(log t)."""
        with self.lock:
            oldest = self._oldest()
            return float("inf") if oldest is None else oldest[0]

    def _oldest(self) -> tuple[float, str] | None:
        """``(since, thread_id)`` of the oldest unflushed write (lock held). Runtime complexity: amortized O(log t)."""
        ages, threads = self.ages, self.threads
        while ages:
            since, thread_id = ages[0]
            backlog = threads.get(thread_id)
            if backlog is not None and backlog.times[0] == since:
                return ages[0]
            heapq.heappop(ages)  # stale: that thread was flushed (its pair, if dirty again, was pushed anew)
        return None

    def wait_change(self, seen: int, timeout: float | None = None) -> None:
        """Wait until the ledger changed since ``changes`` was ``seen`` (a write flushed, a flusher done).

        Runtime complexity: O(1), plus the wait.
        """
        with self.lock:
            self.lock.wait_for(lambda: self.changes != seen, timeout)

    async def await_change(self, seen: int, timeout: float = CHANGE_WAIT_SECONDS) -> None:
        """``wait_change`` for async callers: woken by the change itself (``_changed`` sets a future on the
        waiter's loop), never by polling; ``timeout`` only guards against a loop that missed its wake-up.

        Runtime complexity: O(1), plus the wait.
        """
        await self.wakeups.until(lambda: self.changes != seen, timeout)

    def _changed(self) -> None:
        """Wake every waiter, sync and async (lock held). Runtime complexity: O(waiters)."""
        self.changes += 1
        self.wakeups.wake()

    def claim(self, thread_id: str) -> list[DirtyItem]:
        """Become the thread's flusher (waiting for another one to finish) and take its unflushed writes in order.

        The caller tells each item flushed (``flushed_one``, oldest first) and must ``release`` after flushing.
        Runtime complexity: O(items of the thread), plus the wait.
        """
        with self.lock:
            self.lock.wait_for(lambda: thread_id not in self.flushing)
            return self._claimed(thread_id)

    async def aclaim(self, thread_id: str) -> list[DirtyItem]:
        """``claim`` for async callers: the wait awaits the other flusher's end (``await_change``), so the
        event loop is never blocked."""
        while True:
            with self.lock:
                if thread_id not in self.flushing:
                    return self._claimed(thread_id)
                seen = self.changes
            await self.await_change(seen)

    def try_claim(self, thread_id: str) -> list[DirtyItem] | None:
        """``claim`` without waiting: None when another caller is flushing the thread (a group commit leaves it
        to that flusher, and flushes what is left after). Runtime complexity: O(items of the thread)."""
        with self.lock:
            return None if thread_id in self.flushing else self._claimed(thread_id)

    def _claimed(self, thread_id: str) -> list[DirtyItem]:
        self.flushing.add(thread_id)
        backlog = self.threads.get(thread_id)
        if backlog is None:
            return []
        if self.select is not None:
            self._thin(thread_id, backlog, self.select)
            backlog = self.threads[thread_id]
        return list(backlog.items)

    def _thin(self, thread_id: str, backlog: Backlog, select: Selector) -> None:
        """``persist="latest"``: keep of the thread's writes what ``select`` keeps (``write_less``); the rest
        leaves the ledger unwritten (lock held). Runtime complexity: O(items of the thread and their values)."""
        pinned = self.pinned.get(thread_id, set())
        remembered = self.skipped_parents.get(thread_id)
        selection = select(list(backlog.items), pinned, {} if remembered is None else remembered)
        if thread_id in self.forget_at_claim:  # it left memory: no fork from a dropped checkpoint can come now
            self.forget_at_claim.discard(thread_id)
            self.skipped_parents.pop(thread_id, None)
        elif selection is not None and selection.skipped:
            self._remember(thread_id, selection.skipped)
        if selection is None:
            return
        kept, pins, _ = selection
        pinned = (pinned | pins).difference(
            (item.namespace, item.checkpoint_id) for _, item in kept if isinstance(item, DirtyCheckpoint)
        )
        if pinned:
            self.pinned[thread_id] = pinned
        else:
            self.pinned.pop(thread_id, None)
        if len(kept) == len(backlog.items) and all(item is backlog.items[index] for index, item in kept):
            return
        thinned = Backlog(strikes=backlog.strikes, successes_seen=backlog.successes_seen)
        for index, item in kept:
            thinned.push(item, backlog.times[index])
        self.threads[thread_id] = thinned
        self.nbytes += thinned.nbytes - backlog.nbytes
        self.items += len(thinned.items) - len(backlog.items)
        self.skipped += len(backlog.items) - len(thinned.items)
        heapq.heappush(self.ages, (thinned.times[0], thread_id))
        self._changed()

    def _remember(self, thread_id: str, skipped: dict[tuple[str, str], str | None]) -> None:
        """Remember the checkpoints a claim dropped, and their parents, the oldest forgotten past ``SKIPPED_BOUND``
        (lock held). Runtime complexity: O(skipped), amortized."""
        remembered = self.skipped_parents.get(thread_id)
        if remembered is None:
            remembered = self.skipped_parents[thread_id] = OrderedDict()
        remembered.update(skipped)
        while len(remembered) > SKIPPED_BOUND:
            remembered.popitem(last=False)

    def forget_skipped(self, thread_id: str) -> None:
        """The thread left the hot tier: no fork from a checkpoint a claim dropped can come from memory any more,
        so forget them; at its next claim when it still has unflushed writes (one of them may be such a fork,
        acknowledged while it was in memory). Runtime complexity: O(1)."""
        with self.lock:
            if thread_id in self.threads or thread_id in self.flushing:
                if thread_id in self.skipped_parents:
                    self.forget_at_claim.add(thread_id)
            else:
                self.skipped_parents.pop(thread_id, None)

    def flushed_one(self, thread_id: str, seconds: float) -> None:
        """The flusher's oldest item taken is durable now, after ``seconds``: it leaves the ledger at once, so
        the age of what is left (and the writers waiting on it) follows the flush as it goes; ``item_seconds``
        learns how long a write's flush takes. Runtime complexity: O(values of the item) plus O(log t)."""
        with self.lock:
            seconds = max(0.0, seconds)
            last = self.item_seconds
            self.item_seconds = seconds if last is None else last + ITEM_SECONDS_WEIGHT * (seconds - last)
            backlog = self.threads.get(thread_id)
            if backlog is None:
                return
            self.nbytes -= backlog.pop()
            self.items -= 1
            backlog.strikes = 0
            if not backlog.items:
                del self.threads[thread_id]
            else:
                heapq.heappush(self.ages, (backlog.times[0], thread_id))
            self._changed()

    def release(self, thread_id: str) -> None:
        """The flusher is done (what it flushed left the ledger one by one: ``flushed_one``).

        Runtime complexity: O(waiters).
        """
        with self.lock:
            self.flushing.discard(thread_id)
            if thread_id in self.forget_at_claim and thread_id not in self.threads:  # it left memory, now clean
                self.forget_at_claim.discard(thread_id)
                self.skipped_parents.pop(thread_id, None)
            self._changed()

    def failed(self, thread_id: str, error: BaseException, successes: int) -> bool:
        """A flush of the thread failed with ``error``; ``successes`` counts the durable tier's successful calls
        so far. Return whether the thread is poisoned now: it failed ``POISON_STRIKES`` times in a row with an
        error about the data (``refuses_the_data``), each while the durable tier took other writes since the
        failure before. An outage fails everyone alike (no success between), and a connection error is no
        strike at all, so neither ever poisons a thread.

        Runtime complexity: O(1).
        """
        with self.lock:
            backlog = self.threads.get(thread_id)
            if backlog is None:
                return False
            if not refuses_the_data(error):
                backlog.strikes = 0
            elif successes > backlog.successes_seen:
                backlog.strikes += 1
            else:
                backlog.strikes = 1
            backlog.successes_seen = successes
            return backlog.strikes >= POISON_STRIKES

    def take(self, thread_id: str) -> list[DirtyItem]:
        """Take a thread's unflushed writes out of the ledger (a deleted or poisoned thread); return them.
        A flush under way for it finishes first. Runtime complexity: O(items of the thread).
        """
        with self.lock:
            self.lock.wait_for(lambda: thread_id not in self.flushing)
            backlog = self.threads.pop(thread_id, None)
            self.pinned.pop(thread_id, None)
            self.skipped_parents.pop(thread_id, None)
            self.forget_at_claim.discard(thread_id)
            if backlog is None:
                return []
            self.nbytes -= backlog.nbytes
            self.items -= len(backlog.items)
            self._changed()
            return list(backlog.items)

    def newest_id(self, thread_id: str) -> str | None:
        """The greatest checkpoint id among the thread's unflushed puts. Runtime complexity: O(items)."""
        with self.lock:
            backlog = self.threads.get(thread_id)
            items = () if backlog is None else backlog.items
            ids = [item.checkpoint_id for item in items if isinstance(item, DirtyCheckpoint)]
        return max(ids, default=None)

    def check(self) -> None:
        """Assert the invariant's accounting: each thread's bytes, and the total. Runtime complexity: O(items).

        Raises:
            AssertionError: Naming the first drift found.
        """
        with self.lock:
            for thread_id, backlog in self.threads.items():
                if not backlog.items or len(backlog.items) != len(backlog.times):
                    raise AssertionError(f"the backlog of {thread_id!r} is malformed")
                if backlog.nbytes != backlog.recount():
                    raise AssertionError(f"dirty bytes of {thread_id!r} drift")
                if list(backlog.times) != sorted(backlog.times):
                    raise AssertionError(f"the unflushed writes of {thread_id!r} are out of order")
            if self.items != sum(len(backlog.items) for backlog in self.threads.values()):
                raise AssertionError("the count of unflushed writes drifts")
            if self.nbytes != sum(backlog.nbytes for backlog in self.threads.values()):
                raise AssertionError("dirty bytes drift")
            if any(len(remembered) > SKIPPED_BOUND for remembered in self.skipped_parents.values()):
                raise AssertionError("a thread remembers more dropped checkpoints than SKIPPED_BOUND")
            if not self.forget_at_claim <= set(self.skipped_parents):
                raise AssertionError("a thread to forget at its claim has no dropped checkpoints remembered")

    def __len__(self) -> int:
        return len(self.threads)

    def lowest_checkpoint_id(self) -> str | None:
        """The smallest checkpoint id among every thread's unflushed puts, those being flushed included (they
        stay until ``release``), or None: retention's discovery reads no window past it (``retention.sweep``).

        Runtime complexity: O(dirty threads).
        """
        with self.lock:
            return min((backlog.lows[0] for backlog in self.threads.values() if backlog.lows), default=None)


class CheckpointReplay(NamedTuple):
    """The arguments of the durable saver's ``put`` that store an unflushed checkpoint as it was first made."""

    config: RunnableConfig
    checkpoint: Checkpoint
    metadata: CheckpointMetadata
    new_versions: ChannelVersions


class WritesReplay(NamedTuple):
    """The arguments of the durable saver's ``put_writes`` that store an unflushed batch of writes."""

    config: RunnableConfig
    writes: list[tuple[str, Any]]
    task_id: str
    task_path: str


Replay = CheckpointReplay | WritesReplay


def replay(item: DirtyItem, thread_id: str, serde: SerializerProtocol) -> Replay:
    """The arguments that store an unflushed write as it was first made, through the durable saver's ``put``
    (``CheckpointReplay``) or ``put_writes`` (``WritesReplay``).

    A checkpoint is put with every value it holds, its merged metadata, its
    parent link and the versions its put stored new values for; a batch of
    pending writes is put again whole, in its order, so each write gets its
    index back (a special channel its fixed one). Values are deserialized
    afresh. Runtime complexity: O(size of the item) to deserialize.
    """
    loads = serde.loads_typed
    if isinstance(item, DirtyCheckpoint):
        record = item.record
        checkpoint = loads(record.checkpoint)
        checkpoint["channel_values"] = {channel: loads(payload) for channel, payload in item.values.items()}
        target: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": item.namespace}
        if record.parent_id is not None:
            target["checkpoint_id"] = record.parent_id
        return CheckpointReplay({"configurable": target}, checkpoint, loads(record.metadata), dict(item.new_versions))
    located = {"thread_id": thread_id, "checkpoint_ns": item.namespace, "checkpoint_id": item.checkpoint_id}
    writes = [(write.channel, loads(write.value)) for write in item.writes]
    return WritesReplay({"configurable": located}, writes, item.task_id, item.task_path)
