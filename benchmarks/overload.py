"""Concurrent runs against a full store: how many complete, with and without ``eviction_grace_seconds``.

Each case runs N concurrent ``ainvoke`` of a three-step graph (two async nodes that wait 20 ms
each, then a sync one), each on its own thread id, against ``max_threads=5``: N = 5, 10 and 20
(1x, 2x and 4x overload), arriving 5 ms apart, as requests reach a server, under LangGraph's default
``durability="async"`` and under ``"sync"``. A run completes with
the stock saver's answer, or fails; the table counts both, by error, and the threads left holding
only writes. Each case is repeated ``--repeats`` times.

Usage: ``python benchmarks/overload.py [--repeats 5]`` (``make overload``).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import operator
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from workload import require_this_checkout

from langgraph.checkpoint.bounded import BoundedInMemorySaver, InMemoryCheckpointConfig

MAX_THREADS = 5
ARRIVAL_SECONDS = 0.005


class Log(TypedDict):
    log: Annotated[list[str], operator.add]


def graph(saver: BoundedInMemorySaver, steps: list[int] | None = None) -> Any:
    """The three-step graph; each node run is counted in ``steps``."""
    counted = steps if steps is not None else []

    async def slow(state: Log) -> dict[str, Any]:
        counted.append(1)
        await asyncio.sleep(0.02)
        return {"log": ["slow"]}

    def fast(state: Log) -> dict[str, Any]:
        counted.append(1)
        return {"log": ["fast"]}

    builder = StateGraph(Log)
    builder.add_node("slow", slow)
    builder.add_node("slower", slow)
    builder.add_node("fast", fast)
    builder.add_edge(START, "slow")
    builder.add_edge("slow", "slower")
    builder.add_edge("slower", "fast")
    builder.add_edge("fast", END)
    return builder.compile(checkpointer=saver)


async def case(count: int, grace: float, durability: Any) -> tuple[int, collections.Counter[str], int, int]:
    """Completed runs, failures by error, threads left holding only writes, node runs spent on runs that failed."""
    saver = BoundedInMemorySaver(config=InMemoryCheckpointConfig(max_threads=MAX_THREADS, eviction_grace_seconds=grace))
    steps: list[int] = []
    app = graph(saver, steps)

    async def arrive(n: int) -> Any:
        await asyncio.sleep(n * ARRIVAL_SECONDS)
        return await app.ainvoke({"log": [f"t{n}"]}, {"configurable": {"thread_id": f"t{n}"}}, durability=durability)

    results = await asyncio.gather(*(arrive(n) for n in range(count)), return_exceptions=True)
    completed = sum(1 for n, result in enumerate(results) if result == {"log": [f"t{n}", "slow", "slow", "fast"]})
    failures = collections.Counter(type(result).__name__ for result in results if isinstance(result, BaseException))
    orphans = sum(1 for thread in saver.store.threads.values() if thread.checkpoints == 0)
    saver.check()
    return completed, failures, orphans, len(steps) - 3 * completed


def main() -> None:
    require_this_checkout()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    options = parser.parse_args()
    print(
        f"| concurrent runs (max_threads={MAX_THREADS}) | durability | eviction_grace_seconds | completed "
        "| failed, per repeat | node runs wasted on failed runs | threads holding only writes |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for durability, grace in (("async", 0), ("async", 60), ("sync", 0), ("sync", 60)):
        for count in (MAX_THREADS, 2 * MAX_THREADS, 4 * MAX_THREADS):
            outcomes = [asyncio.run(case(count, grace, durability)) for _ in range(options.repeats)]
            completed = sorted(outcome[0] for outcome in outcomes)
            failures: collections.Counter[str] = sum((outcome[1] for outcome in outcomes), collections.Counter())
            failed = ", ".join(f"{n / options.repeats:g} {name}" for name, n in failures.most_common()) or "none"
            orphans = sum(outcome[2] for outcome in outcomes)
            wasted = sum(outcome[3] for outcome in outcomes) / options.repeats
            overload = f"{count} ({count // MAX_THREADS}x)"
            spread = f"{completed[0]}-{completed[-1]}" if completed[0] != completed[-1] else f"{completed[0]}"
            print(f"| {overload} | {durability} | {grace} | {spread} of {count} | {failed} | {wasted:g} | {orphans} |")


if __name__ == "__main__":
    main()
