"""The worst single call while a store's threads expire en masse.

Every thread of a filled store goes idle past its TTL at once. The calls that
follow (reads and writes of other threads) each remove at most
``eviction.EXPIRY_BUDGET`` idle threads (the one they touch first, then the
oldest), so no one call pays for all of them. The benchmark records the longest
of those calls; ``purge_expired()``, which removes them all in batches of
``store.PURGE_BATCH``, is timed beside it.
"""

from __future__ import annotations

import time

import pytest
from workload import fill_cheap

from langgraph.checkpoint.bounded import BoundedInMemorySaver, InMemoryCheckpointConfig
from langgraph.checkpoint.bounded.engine.eviction import EXPIRY_BUDGET
from langgraph.checkpoint.bounded.engine.store import PURGE_BATCH

SIZES = [10_000, pytest.param(100_000, marks=pytest.mark.slow)]
CALLS = 2_000


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def expiring_store(threads: int) -> tuple[BoundedInMemorySaver, Clock]:
    clock = Clock()
    limits = InMemoryCheckpointConfig(idle_ttl_seconds=60, max_threads=10**9, max_total_bytes=10**12)
    saver = BoundedInMemorySaver(config=limits, clock=clock)
    fill_cheap(saver, threads)
    clock.now += 61  # every thread has now been idle past its TTL
    return saver, clock


@pytest.mark.parametrize("threads", SIZES)
def test_longest_call_while_every_thread_expires(benchmark, threads):
    saver, _ = expiring_store(threads)
    config = {"configurable": {"thread_id": "reader", "checkpoint_ns": ""}}
    durations: list[float] = []

    def calls() -> None:
        for index in range(CALLS):
            start = time.perf_counter()
            if index % 2:
                saver.get_tuple(config)
            else:
                saver.put_writes({"configurable": {"thread_id": f"w{index}", "checkpoint_id": "c"}}, [("a", 1)], "t")
            durations.append(time.perf_counter() - start)

    benchmark.group = "expiry: longest single call while every thread expires (ms in extra_info)"
    benchmark.extra_info.update(saver="bounded", size=threads)
    benchmark.pedantic(calls, rounds=1, iterations=1)
    durations.sort()
    benchmark.extra_info["longest_call_ms"] = round(durations[-1] * 1e3, 3)
    benchmark.extra_info["median_call_us"] = round(durations[len(durations) // 2] * 1e6, 1)
    expired = saver.stats().expired_threads
    assert CALLS * EXPIRY_BUDGET // 2 <= expired <= threads  # each call took its share, no call took them all


@pytest.mark.parametrize("threads", SIZES)
def test_purge_expired_in_batches(benchmark, threads):
    saver, _ = expiring_store(threads)
    benchmark.group = "expiry: purge_expired of every thread (batches of PURGE_BATCH)"
    benchmark.extra_info.update(saver="bounded", size=threads, batch=PURGE_BATCH)
    removed = benchmark.pedantic(saver.purge_expired, rounds=1, iterations=1)
    assert removed == threads and saver.stats().threads == 0
