"""Write-back's flushing: unflushed writes on their way to the durable tier, and what waits for them.

With ``write="back"`` every write lands in the hot tier and in the ledger of
unflushed writes (``saver.writeback``). This module moves them on:

* ``flush_thread`` replays one thread's unflushed writes, oldest first, through
  the durable saver's ``put`` / ``put_writes``, holding the thread's gate shared
  (a deletion waits for it); ``flush_all`` does every dirty thread;
* ``dirty_room`` is the backpressure: a write that would pass
  ``max_dirty_bytes`` flushes first, and is refused with a
  ``CheckpointCapacityError`` naming the durable failure if that flush fails;
* ``spill`` flushes the threads the hot tier evicted with unflushed writes, and
  ``deliver`` (called after every operation) hands the hot tier's drops to its
  hook, which requests those spills;
* ``flush_in_background`` is the periodic flush; ``flush_at_exit`` flushes, at
  interpreter exit, the write-back savers still alive that nobody closed.

No lock is held across a durable round trip.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import time
import weakref

from . import announcing
from .engine import CheckpointCapacityError
from .tiered_settings import DIRTY_ROOM_ATTEMPTS, PER_ITEM_LIMITS
from .tiered_state import Shared, Tiers, count_rejection
from .writeback import replay

__all__ = [
    "adeliver",
    "adirty_room",
    "aflush_thread",
    "deliver",
    "dirty_room",
    "flush_all",
    "flush_at_exit",
    "flush_at_exit_later",
    "flush_in_background",
    "flush_thread",
    "spill",
]

logger = logging.getLogger(f"{__package__}.tiered")  # TieredSaver's one logger, whichever module logs


def dirty_room(tiers: Tiers, thread_id: str, needed: int) -> bool:
    """Write-back backpressure: flush until ``needed`` more bytes fit under ``max_dirty_bytes``.

    Returns False for a write that still does not fit (larger than the bound
    by itself, or other writers filled it again): it is written through
    instead, durable first, after the thread's own unflushed writes. A write
    that had to wait is counted, with its wait, in ``stats()``
    (``backpressure_waits``, ``backpressure_seconds``).

    Raises:
        CheckpointCapacityError: The flush failed, so nothing more fits; names the durable failure.

    Runtime complexity: O(1) when it fits; else up to ``DIRTY_ROOM_ATTEMPTS`` rounds of flushes (one durable
    write per unflushed item flushed).
    """
    shared = tiers.shared
    if shared.dirty.nbytes + needed <= shared.max_dirty_bytes:
        return True
    start = time.perf_counter()
    try:
        return _make_room(tiers, thread_id, needed)
    finally:
        with shared.hot.store.exclusive():
            shared.counters.backpressure_waits += 1
            shared.counters.backpressure_seconds += time.perf_counter() - start


def _make_room(tiers: Tiers, thread_id: str, needed: int) -> bool:
    """``dirty_room`` once the write does not fit: flush the threads dirty longest until it does."""
    shared = tiers.shared
    for _ in range(DIRTY_ROOM_ATTEMPTS):
        if shared.dirty.nbytes + needed <= shared.max_dirty_bytes:
            return True
        if needed > shared.max_dirty_bytes:
            break
        try:
            for dirty in shared.dirty.dirty_threads():  # the thread dirty longest first, until it fits
                flush_thread(tiers, dirty)
                if shared.dirty.nbytes + needed <= shared.max_dirty_bytes:
                    return True
        except Exception as error:
            raise _refusal(tiers, thread_id, "max_dirty_bytes", shared.max_dirty_bytes, needed, error) from error
    try:
        flush_thread(tiers, thread_id)  # its parents first
    except Exception as error:
        raise _refusal(tiers, thread_id, "max_dirty_bytes", shared.max_dirty_bytes, needed, error) from error
    return False


async def adirty_room(tiers: Tiers, thread_id: str, needed: int) -> bool:
    """Async ``dirty_room``: when it must flush, it does so in a worker thread. Runtime complexity: that of
    ``dirty_room``."""
    shared = tiers.shared
    if shared.dirty.nbytes + needed <= shared.max_dirty_bytes:
        return True
    return await asyncio.to_thread(dirty_room, tiers, thread_id, needed)


def _refusal(
    tiers: Tiers, thread_id: str, limit: str, value: float, needed: float, error: BaseException
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
            f"{type(error).__name__}: {error}. They stay in memory and are flushed once it is back."
        ),
    )


def flush_thread(tiers: Tiers, thread_id: str, refusal: CheckpointCapacityError | None = None) -> int:
    """Flush one thread's unflushed writes, oldest first; return how many. With ``refusal`` (the hot
    tier refused a write-back write for a store-wide limit), a durable failure is raised as that
    refusal, naming it; then the write goes through and the thread's hot copy leaves memory.

    Raises:
        Exception: The durable tier's failure (as ``refusal``, naming it, when given); what was not
            flushed stays in memory.

    Runtime complexity: one durable write per unflushed item.
    """
    shared = tiers.shared
    if not shared.dirty.is_dirty(thread_id):
        if refusal is not None:
            _drop_behind(shared, thread_id, refusal)
        return 0
    start = time.perf_counter()
    flushed = 0
    try:
        with shared.gates.sharing(thread_id):
            items = shared.dirty.claim(thread_id)
            try:
                for item in items:
                    method, args = replay(item, thread_id, tiers.serde)
                    tiers.durable.call(method, *args)
                    flushed += 1
            finally:
                shared.dirty.release(thread_id, flushed)
    except Exception as error:
        _count_flush(shared, flushed, time.perf_counter() - start, failed=True)
        if refusal is not None:
            needed = refusal.needed or 0
            raise _refusal(tiers, thread_id, refusal.limit, refusal.limit_value, needed, error) from error
        raise
    _count_flush(shared, flushed, time.perf_counter() - start, failed=False)
    if refusal is not None:
        _drop_behind(shared, thread_id, refusal)
    return flushed


async def aflush_thread(tiers: Tiers, thread_id: str, refusal: CheckpointCapacityError | None = None) -> int:
    """Async ``flush_thread``, in a worker thread when there is anything to do. Runtime complexity: that of
    ``flush_thread``."""
    if not tiers.shared.dirty.is_dirty(thread_id) and refusal is None:
        return 0
    return await asyncio.to_thread(flush_thread, tiers, thread_id, refusal)


def _drop_behind(shared: Shared, thread_id: str, refusal: CheckpointCapacityError) -> None:
    """The hot tier refused a write-back write that now goes through: its copy of the thread is behind.
    A store-wide refusal is counted as ``left_out``; a per-item one is counted as ``oversize`` when the
    write-through leaves the thread out.

    Runtime complexity: that of ``Store.delete_thread``.
    """
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


def flush_all(tiers: Tiers) -> int:
    """Flush every dirty thread, the one dirty longest first; raise the first durable failure. A no-op with
    ``write="through"``.

    Runtime complexity: one durable write per unflushed item.
    """
    if tiers.shared.write != "back":
        return 0
    return sum(flush_thread(tiers, thread_id) for thread_id in tiers.shared.dirty.dirty_threads())


def flush_in_background(tiers: Tiers) -> None:
    """The periodic flush. An async durable saver's loop that is not running is skipped until it runs.

    Runtime complexity: that of ``flush_all``.
    """
    if _loop_idle(tiers):
        return
    flush_all(tiers)


def _loop_idle(tiers: Tiers) -> bool:
    """Whether the durable saver is an async one whose event loop is not running (ended, or not started):
    a sync call handed to it would wait in vain. Runtime complexity: O(1)."""
    loop = tiers.durable.loop
    return loop is not None and (loop.is_closed() or not loop.is_running())


_WRITING_BACK: weakref.WeakValueDictionary[int, Tiers] = weakref.WeakValueDictionary()
"""Every write-back saver's tiers, held weakly, for ``flush_at_exit``."""


def flush_at_exit_later(tiers: Tiers) -> None:
    """Have ``flush_at_exit`` flush these tiers if they are still alive when the interpreter exits.

    Runtime complexity: O(1).
    """
    _WRITING_BACK[id(tiers)] = tiers


def flush_at_exit() -> None:
    """At interpreter exit, flush the unflushed writes of every write-back saver still alive: a program that
    ends without ``close()`` (a clean exit) loses nothing its durable tier can still take.

    An async durable saver whose event loop has ended cannot take them: that is logged, as is any durable
    failure (nothing can raise to the program any more). Runtime complexity: that of ``flush_all`` per saver.
    """
    for tiers in list(_WRITING_BACK.values()):
        if not tiers.shared.dirty:
            continue
        if _loop_idle(tiers):
            logger.error(
                "at interpreter exit, %d threads' unflushed writes were not flushed: the durable saver's event "
                "loop has ended (close the saver with aclose() before it ends)",
                len(tiers.shared.dirty),
            )
            continue
        try:
            flush_all(tiers)
        except Exception:
            logger.exception("flushing unflushed writes at interpreter exit failed: they are lost")


atexit.register(flush_at_exit)


def spill(tiers: Tiers) -> None:
    """Flush the threads the hot tier evicted with unflushed writes (their writes stay in memory until
    then). A failure is counted and logged, not raised: the caller's own write succeeded.

    Runtime complexity: one durable write per unflushed item of those threads.
    """
    shared = tiers.shared
    with shared.hot.store.exclusive():
        thread_ids, shared.spill_requests = shared.spill_requests, set()
    for thread_id in thread_ids:
        start = time.perf_counter()
        try:
            flush_thread(tiers, thread_id)
        except Exception:
            logger.exception("flushing thread %r, evicted with unflushed writes, failed; kept in memory", thread_id)
            continue  # counted by the flush; retried by the next flush
        with shared.hot.store.exclusive():
            shared.counters.spills += 1
            shared.counters.spill_seconds += time.perf_counter() - start


def deliver(tiers: Tiers) -> None:
    """Hand the hot tier's drops to the hook, then flush the dirty threads it evicted.

    Runtime complexity: O(1) when nothing waits; else the hook's per drop, and that of ``spill``.
    """
    announcements = tiers.shared.hot.store.pending_drops()
    if announcements is not None:
        announcing.deliver(announcements)
    if tiers.shared.spill_requests:
        spill(tiers)


async def adeliver(tiers: Tiers) -> None:
    """Async ``deliver``: the hook as ``announcing.deliver_async`` calls it, the spill in a worker thread.

    Runtime complexity: that of ``deliver``.
    """
    announcements = tiers.shared.hot.store.pending_drops()
    if announcements is not None:
        await announcing.deliver_async(announcements)
    if tiers.shared.spill_requests:
        await asyncio.to_thread(spill, tiers)
