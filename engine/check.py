"""``Store.check()``: every invariant of the store, recounted from scratch.

Each invariant has a name, and a broken one raises ``AssertionError`` whose
message starts with that name, so that a test can break exactly one and expect
it (``tests/engine/test_check.py`` does, for every name in ``INVARIANTS``).
"""

from __future__ import annotations

import math

from . import memory
from .identifiers import KNOWN_CHANNELS
from .state import State
from .totals import Totals

__all__ = ["INVARIANTS", "check_state"]

INVARIANTS = (
    "lru keys",  # every thread is filed under its own id
    "lru order",  # least recently used first is also least recently used by the clock
    "empty thread",  # a stored thread holds at least one namespace
    "thread",  # each thread's own invariant (Thread.check, Namespace.check)
    "store totals",  # the store's counters equal the sum of its threads'
    "run index",  # run id -> threads equals what the records say
    "next expiry",  # never later than the least recently used thread's expiry
    "tombstones",  # of dropped threads and refused checkpoints: at most max_dropped_thread_records, bytes counted
    "announcements",  # nothing is queued without a hook, and the queued exports' memory is counted
    "snapshot cache",  # the cached exports and the change set hold stored threads only: nothing is pinned
    "memory",  # each thread's and the store's heap estimate equal a recount
    "known channels",  # every remembered channel name is a valid identifier, at most KNOWN_CHANNELS of them
    "limits",  # every limit holds
)


def check_state(state: State) -> None:
    """Assert every invariant in ``INVARIANTS``; raise ``AssertionError`` naming the first broken one.

    Runs with the store's lock held. Runtime complexity: O(size of the store).
    """
    limits = state.limits
    total = Totals()
    overhead = 0
    runs: dict[str, set[str]] = {}
    previous_use = -math.inf
    for thread_id, thread in state.threads.items():
        _require(thread.thread_id == thread_id, "lru keys", f"key {thread_id!r} holds thread {thread.thread_id!r}")
        _require(thread.last_used >= previous_use, "lru order", f"thread {thread_id!r} is out of order")
        previous_use = thread.last_used
        _require(bool(thread.namespaces), "empty thread", f"thread {thread_id!r} holds nothing")
        try:
            thread.check()
        except AssertionError as error:
            raise AssertionError(f"thread: {thread_id!r}: {error}") from None
        for run_id in thread.runs:
            runs.setdefault(run_id, set()).add(thread_id)
        _require(
            len(thread.namespaces) <= limits.max_namespaces_per_thread,
            "limits",
            f"thread {thread_id!r} exceeds max_namespaces_per_thread",
        )
        _require(
            thread.checkpoints <= limits.max_checkpoints_per_thread,
            "limits",
            f"thread {thread_id!r} exceeds max_checkpoints_per_thread",
        )
        recounted = memory.thread_overhead(thread)
        _require(
            thread.variable_overhead == recounted,
            "memory",
            f"thread {thread_id!r} keeps {thread.variable_overhead}, recounted {recounted}",
        )
        overhead += thread.variable_overhead
        total = total.plus(thread.totals)
    kept = Totals(state.nbytes, state.checkpoints, state.writes, state.blobs, state.namespaces)
    _require(total == kept, "store totals", f"kept {kept}, recounted {total}")
    _require(runs == state.runs, "run index", "it drifts from the records")
    _require(
        overhead == state.variable_overhead,
        "memory",
        f"the store keeps {state.variable_overhead}, its threads {overhead}",
    )
    if state.threads:
        oldest = next(iter(state.threads.values()))
        _require(
            state.next_expiry <= oldest.last_used + limits.idle_ttl_seconds,
            "next expiry",
            f"{state.next_expiry} is later than the oldest thread's expiry",
        )
    for name, tombstones in (("tombstones", state.tombstones), ("refused checkpoints", state.refusals)):
        try:
            tombstones.check()
        except AssertionError as error:
            raise AssertionError(f"tombstones: {name}: {error}") from None
    announcements = state.announcements
    _require(announcements.hook is not None or not announcements.queue, "announcements", "queued without a hook")
    queued = sum(drop.nbytes for drop in announcements.queue)
    _require(
        announcements.queued_bytes == queued,
        "announcements",
        f"queued_bytes is {announcements.queued_bytes}, the queue holds {queued}",
    )
    if state.exports is not None:
        stale = [thread_id for thread_id in state.exports if thread_id not in state.threads]
        _require(not stale, "snapshot cache", f"exports of threads gone are pinned: {stale[:3]}")
    if state.changed is not None:
        gone = [thread_id for thread_id in state.changed if thread_id not in state.threads]
        _require(not gone, "snapshot cache", f"the change set holds threads gone: {gone[:3]}")
    _require(
        len(state.known_channels) <= KNOWN_CHANNELS
        and all(
            type(name) is str and 0 < len(name) <= limits.max_identifier_length and name.isprintable()
            for name in state.known_channels
        ),
        "known channels",
        "an invalid name is remembered as checked",
    )
    _require(len(state.threads) <= limits.max_threads, "limits", "max_threads exceeded")
    _require(state.nbytes <= limits.max_total_bytes, "limits", "max_total_bytes exceeded")
    _require(state.bounded_memory_bytes() <= limits.max_memory_bytes, "limits", "max_memory_bytes exceeded")


def _require(condition: bool, invariant: str, detail: str) -> None:
    if not condition:
        raise AssertionError(f"{invariant}: {detail}")
