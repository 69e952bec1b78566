"""Ratios measured in alternation: the figure to trust on a noisy machine.

Medians of separate pytest-benchmark runs move with whatever else the machine
does (on a shared two-core VM, by up to 2x between runs). Here the savers
hold the same store, and each round times a batch of calls on each in turn
(the order rotating round to round); the ratios of each round are ours / stock
and floor / stock, and the median of each is reported with its quartiles.
Slow phases of the machine then hit both sides of a ratio.

The third saver, ``FloorSaver`` (``floor_saver.py``), is the stock saver plus
the least bookkeeping any bounded saver needs: where ours is slower than the
stock saver, it shows how much of the gap bounding costs at all.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from collections.abc import Callable

import pytest
from floor_saver import FloorSaver
from test_graph import CONCURRENT_RUNS, build
from workload import SAVERS, Batch, ThreadWriter, fill, task_writes, timed_batch

BATCH = 50  # calls timed per saver per round
ROUNDS = 21  # rounds per operation; the median ratio of these is reported
ROTATION = ("bounded", "stock", "floor")  # round r starts at ROTATION[r % 3]


def put_batch(saver) -> Batch:
    writer = ThreadWriter(saver, "hot", rng=random.Random(11))

    def run() -> float:
        prepared = [writer.prepare() for _ in range(BATCH)]
        start = time.perf_counter()
        for args in prepared:
            saver.put(*args)
        return (time.perf_counter() - start) / BATCH

    return run


def put_writes_batch(saver, writers) -> Batch:
    stored = writers[1].parent
    rng, rounds = random.Random(5), iter(range(10**9))

    def run() -> float:
        tag = next(rounds)
        batch = [(task_writes(rng, i), f"task-{tag}-{i}") for i in range(BATCH)]
        start = time.perf_counter()
        for writes, task_id in batch:
            saver.put_writes(stored, writes, task_id, "~__pregel_pull, agent")
        return (time.perf_counter() - start) / BATCH

    return run


def repeat(call: Callable[[], object], per_batch: int = BATCH) -> Batch:
    return timed_batch(call, per_batch)


SAVER_METHODS = ("get_tuple", "put", "put_writes", "aget_tuple", "aput", "aput_writes", "get_next_version")


def timed(saver):
    """The same saver, its methods timed: ``saver.spent`` seconds inside the saver, all callers together."""
    base = type(saver)

    def sync(name):
        def method(self, *args, **kwargs):
            start = time.perf_counter()
            try:
                return getattr(base, name)(self, *args, **kwargs)
            finally:
                self.spent += time.perf_counter() - start

        return method

    def asynchronous(name):
        async def method(self, *args, **kwargs):
            start = time.perf_counter()
            try:
                return await getattr(base, name)(self, *args, **kwargs)
            finally:
                self.spent += time.perf_counter() - start

        return method

    methods = {name: (asynchronous if name.startswith("a") else sync)(name) for name in SAVER_METHODS}
    saver.__class__ = type(f"Timed{base.__name__}", (base,), methods)
    saver.spent = 0.0
    return saver


def invoke_batch(saver, writers) -> Batch:
    """One turn of the chat graph (seven new messages) on each of 10 threads; both savers' graphs
    see the same turns. ``run.saver_us`` collects the saver's own time per invoke."""
    saver = timed(saver)
    app, turns = build(saver), iter(range(10**9))

    def run() -> float:
        spent = saver.spent
        start = time.perf_counter()
        for _ in range(10):
            thread_id = f"chat-{next(turns) % 10}"
            app.invoke({"messages": [{"role": "user", "content": "hi"}]}, {"configurable": {"thread_id": thread_id}})
        run.saver_us.append((saver.spent - spent) / 10 * 1e6)
        return (time.perf_counter() - start) / 10

    run.saver_us = []
    return run


def ainvoke_batch(saver, writers) -> Batch:
    """20 concurrent turns on 20 threads, on one event loop; ``run.saver_us`` as above, per turn."""
    saver = timed(saver)
    app, loop, rounds = build(saver), asyncio.new_event_loop(), iter(range(10**9))

    def run() -> float:
        batch = next(rounds)

        async def turns() -> None:
            await asyncio.gather(
                *(
                    app.ainvoke(
                        {"messages": [{"role": "user", "content": "hi"}]},
                        {"configurable": {"thread_id": f"async-{batch % 3}-{i}"}},
                    )
                    for i in range(CONCURRENT_RUNS)
                )
            )

        spent = saver.spent
        start = time.perf_counter()
        loop.run_until_complete(turns())
        run.saver_us.append((saver.spent - spent) / CONCURRENT_RUNS * 1e6)
        return time.perf_counter() - start

    run.saver_us = []
    return run


LATEST = {"configurable": {"thread_id": "thread-3", "checkpoint_ns": ""}}

OPERATIONS: dict[str, Callable[..., Batch]] = {
    "put": lambda saver, writers: put_batch(saver),
    "put_writes": put_writes_batch,
    "get_tuple latest": lambda saver, writers: repeat(lambda: saver.get_tuple(LATEST)),
    "get_tuple by id": lambda saver, writers: repeat(lambda: saver.get_tuple(writers[4].parent)),
    "list limit=10": lambda saver, writers: repeat(lambda: list(saver.list(LATEST, limit=10)), BATCH // 10),
    "graph invoke (one turn)": invoke_batch,
    f"graph ainvoke x{CONCURRENT_RUNS} concurrent": ainvoke_batch,
}


@pytest.mark.parametrize("operation", list(OPERATIONS))
def test_interleaved_ratio(benchmark, operation):
    factories = {"bounded": SAVERS["bounded"], "stock": SAVERS["stock"], "floor": FloorSaver}
    batches = {}
    for kind in ROTATION:
        saver = factories[kind]()
        batches[kind] = OPERATIONS[operation](saver, fill(saver, 50, 20))
    times: dict[str, list[float]] = {kind: [] for kind in ROTATION}

    def measure() -> None:
        for round_number in range(ROUNDS):
            start = round_number % len(ROTATION)
            for kind in ROTATION[start:] + ROTATION[:start]:
                times[kind].append(batches[kind]())

    benchmark.group = f"interleaved: {operation}"
    benchmark.extra_info["saver"] = "ratio"
    benchmark.pedantic(measure, rounds=1, iterations=1)
    for kind in ("bounded", "floor"):
        ratios = [ours / stock for ours, stock in zip(times[kind], times["stock"], strict=True)]
        quartiles = statistics.quantiles(ratios, n=4)
        benchmark.extra_info.update(
            {
                f"{kind}_ratio_median": statistics.median(ratios),
                f"{kind}_ratio_q1": quartiles[0],
                f"{kind}_ratio_q3": quartiles[2],
            }
        )
        assert all(ratio > 0 for ratio in ratios)
    benchmark.extra_info.update({f"{kind}_us": statistics.median(times[kind]) * 1e6 for kind in ROTATION})
    for kind in ROTATION:  # the savers' own time inside a graph's turn, where measured
        if hasattr(batches[kind], "saver_us"):
            benchmark.extra_info[f"{kind}_saver_us"] = statistics.median(batches[kind].saver_us)
