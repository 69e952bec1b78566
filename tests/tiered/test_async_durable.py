"""``TieredSaver`` over the async durable savers, ``AsyncSqliteSaver`` and ``AsyncPostgresSaver``, as the sync
ones are covered: every graph scenario in both write modes, interleaved runs over a hot tier of one thread, and
20 concurrent runs over a hot tier of five.

``AsyncPostgresSaver.aput`` serializes in the event loop's default executor (``asyncio.to_thread``). Write-back
once spilled evicted threads from that executor and waited there for ``aput``: with every worker waiting, 20
concurrent ``ainvoke`` hung. Here the loop's default executor has one worker for those runs, which makes that
hang certain on the old code, and every job any loop's default executor is handed is recorded: none may come
from the tiered saver.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver as StockSaver

from langgraph.checkpoint.bounded import InMemoryCheckpointConfig, TieredSaver
from tests.support import graphs
from tests.support.durable_savers import cluster_fixture
from tests.support.graphs import SCENARIOS, Runner, describe, thread
from tests.support.tiered import COPY, INTERLEAVED_SCENARIOS, concurrent_runs, interleaved_thread

WAIT = 120.0  # seconds before a run counts as hung (never reached when things work)
KINDS = ["sqlite", "postgres"]


cluster = cluster_fixture("the async PostgreSQL tiered tests")


class RecordingExecutor(ThreadPoolExecutor):
    """A loop's default executor that records the functions it is handed."""

    def __init__(self, workers: int) -> None:
        super().__init__(max_workers=workers, thread_name_prefix="default-worker")
        self.functions: list[str] = []

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.functions.append(_name_of(fn, args))
        return super().submit(fn, *args, **kwargs)


def _name_of(fn: Any, args: tuple[Any, ...]) -> str:
    """The module and name of what a job runs, looking through ``functools.partial`` and ``Context.run``."""
    while True:
        if isinstance(fn, functools.partial):
            fn, args = fn.func, fn.args
        elif getattr(fn, "__qualname__", "") == "Context.run" and args:
            fn, args = args[0], args[1:]
        else:
            break
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


def run_recording_the_default_executor(main: Callable[[], Any], workers: int = 8) -> tuple[Any, list[str]]:
    """Run ``main`` on a fresh loop whose default executor has ``workers`` threads (the graphs' sync nodes run
    there, and some block until another node's writes are saved); what it was handed, by function."""
    loop = asyncio.new_event_loop()
    executor = RecordingExecutor(workers)
    loop.set_default_executor(executor)
    try:
        return loop.run_until_complete(asyncio.wait_for(main(), WAIT)), executor.functions
    finally:
        executor.shutdown(wait=True)
        loop.close()


def ours(functions: list[str]) -> list[str]:
    return [name for name in functions if name.startswith("langgraph.checkpoint.bounded")]


@asynccontextmanager
async def async_durable(kind: str, tmp_path: Path, cluster: Any) -> AsyncIterator[Any]:
    """A fresh async durable saver on the running loop: a SQLite file, or the PostgreSQL database emptied."""
    if kind == "sqlite":
        import aiosqlite
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        path = tmp_path / f"durable-{len(list(tmp_path.iterdir()))}.sqlite"
        async with aiosqlite.connect(path) as connection:
            saver = AsyncSqliteSaver(connection)
            await saver.setup()
            yield saver
        return
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg import AsyncConnection
    from psycopg.rows import dict_row

    async with await AsyncConnection.connect(
        cluster.conninfo, autocommit=True, prepare_threshold=0, row_factory=dict_row
    ) as connection:
        saver = AsyncPostgresSaver(connection)
        for thread_id in {item.config["configurable"]["thread_id"] async for item in saver.alist(None)}:
            await saver.adelete_thread(thread_id)
        yield saver


def cluster_for(kind: str, request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue("cluster") if kind == "postgres" else None


async def graph_views(factory: Any, saver: Any, thread_ids: list[str]) -> list[Any]:
    """Each thread's state and history as a graph compiled over ``saver`` reads them (async API)."""
    app = factory(saver, {})
    views = []
    for thread_id in thread_ids:
        history = [s async for s in app.aget_state_history(thread(thread_id))]
        states = [describe(await app.aget_state(s.config)) for s in history]
        views.append([describe(await app.aget_state(thread(thread_id))), *states])
    return views


async def thread_ids_of(saver: Any) -> list[str]:
    return sorted({item.config["configurable"]["thread_id"] async for item in saver.alist(None)})


def expected_trace(name: str) -> Any:
    factory, scenario = SCENARIOS[name]
    calls: dict[str, int] = {}
    return asyncio.run(scenario(Runner(factory(StockSaver(), calls), use_async=True, durability="async", calls=calls)))


# --- every graph scenario, both write modes --------------------------------------------------------------------------


@pytest.mark.parametrize("write", ["through", "back"])
@pytest.mark.parametrize("name", sorted(SCENARIOS))
@pytest.mark.parametrize("kind", KINDS)
def test_graphs_over_an_async_durable_saver_answer_as_the_stock_saver(
    tmp_path: Path, request: pytest.FixtureRequest, kind: str, name: str, write: str
) -> None:
    factory, scenario = SCENARIOS[name]
    cluster = cluster_for(kind, request)

    async def main() -> tuple[Any, Any, Any]:
        async with async_durable(kind, tmp_path, cluster) as durable:
            tiered = TieredSaver(durable, config=InMemoryCheckpointConfig(max_threads=2), write=write)  # type: ignore[arg-type]
            calls: dict[str, int] = {}
            trace = await scenario(Runner(factory(tiered, calls), use_async=True, durability="async", calls=calls))
            await tiered.aflush()
            tiered.check()
            ids = await thread_ids_of(durable)
            seen = await graph_views(factory, tiered, ids), await graph_views(factory, durable, ids)
            await tiered.aclose()
            return trace, *seen

    (trace, through_tiered, durable_alone), functions = run_recording_the_default_executor(main)
    assert trace == expected_trace(name)
    assert through_tiered == durable_alone  # what the hot tier answers is the durable tier's
    assert ours(functions) == []


# --- threads leaving memory between any two calls of a run -----------------------------------------------------------


@pytest.mark.parametrize("write", ["through", "back"])
@pytest.mark.parametrize("kind", KINDS)
def test_interleaved_runs_over_a_hot_tier_of_one_thread(
    tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, kind: str, write: str
) -> None:
    monkeypatch.setattr(graphs, "thread", interleaved_thread)
    expected = {name: expected_trace(name) for name in INTERLEAVED_SCENARIOS}
    cluster = cluster_for(kind, request)

    async def main() -> dict[Any, Any]:
        async with async_durable(kind, tmp_path, cluster) as durable:
            tiered = TieredSaver(durable, config=InMemoryCheckpointConfig(max_threads=1), write=write)  # type: ignore[arg-type]
            found: dict[Any, Any] = {}

            async def one(name: str, copy: int) -> None:
                COPY.set(copy)
                factory, scenario = SCENARIOS[name]
                calls: dict[str, int] = {}
                runner = Runner(factory(tiered, calls), use_async=True, durability="async", calls=calls)
                found[name, copy] = await scenario(runner)

            await asyncio.gather(*(one(name, copy) for name in INTERLEAVED_SCENARIOS for copy in range(3)))
            await tiered.aclose()
            tiered.check()
            return found

    found, functions = run_recording_the_default_executor(main)
    assert len(found) == 3 * len(expected)
    for (name, copy), trace in sorted(found.items()):
        assert trace == expected[name], f"{name}, copy {copy}"
    assert ours(functions) == []


# --- 20 concurrent runs over five hot threads ----------------------------------------------------------------------


@pytest.mark.parametrize("write", ["through", "back"])
@pytest.mark.parametrize("kind", KINDS)
def test_twenty_concurrent_runs_over_five_hot_threads_all_complete(
    tmp_path: Path, request: pytest.FixtureRequest, kind: str, write: str
) -> None:
    """The reported hang: 20 concurrent ainvoke over AsyncPostgresSaver with write-back, a hot tier of 5."""
    expected = asyncio.run(concurrent_runs(StockSaver(), 20))
    cluster = cluster_for(kind, request)

    async def main() -> tuple[list[Any], list[Any], Any]:
        async with async_durable(kind, tmp_path, cluster) as durable:
            tiered = TieredSaver(durable, config=InMemoryCheckpointConfig(max_threads=5), write=write)  # type: ignore[arg-type]
            results = await concurrent_runs(tiered, 20)
            await tiered.aclose()
            stored = [await durable.aget_tuple(thread(f"run-{index}")) for index in range(20)]
            return results, [item.checkpoint["channel_values"]["log"] for item in stored], tiered.stats()

    (results, durable_logs, stats), functions = run_recording_the_default_executor(main, workers=1)
    assert results == expected
    assert durable_logs == [result["log"] for result in expected]
    assert stats.hot.threads <= 5 and stats.hot.evicted_threads >= 15
    assert ours(functions) == []
