"""``TieredSaver``'s async methods never need the event loop's default executor, so they never deadlock on it.

The default executor belongs to everyone on the loop: LangGraph, the durable saver itself
(``AsyncPostgresSaver.aput`` serializes there with ``asyncio.to_thread``), the application. A tiered job parked
there waiting for work queued behind it hangs once every worker waits (20 concurrent ``ainvoke`` over
``AsyncPostgresSaver`` with write-back hung so: tests/tiered/test_async_durable.py runs that). So:

* every async method runs with the loop's only default worker parked for the whole test, and finishes;
* the saver's own jobs pool, cut to one worker, holding a job that waits on a thread's gate, never stops the
  coroutine that holds the gate (it awaits only the durable tier);
* a deletion holding a gate alone never starves the flushes waiting for it, nor the other way round.

The order is made by events and by polling conditions, never by sleeping for correctness. A hang fails after
``WAIT`` seconds (never reached when things work), and what was held is then let go.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import pytest
from langchain_core.runnables import RunnableConfig

from langgraph.checkpoint.bounded import InMemoryCheckpointConfig, TieredSaver, WriteBack
from langgraph.checkpoint.bounded.tiered import pools
from tests.support.durable_savers import ControlledSqlite, sqlite_durable
from tests.support.helpers import config, make_checkpoint
from tests.support.tiered import write_mode

WAIT = 20.0  # seconds before a wait counts as a hang (never reached when things work)

P = ParamSpec("P")
T = TypeVar("T")


class CountingExecutor(ThreadPoolExecutor):
    """A loop's default executor: ``workers`` threads, and a count of the jobs it was handed."""

    def __init__(self, workers: int = 1) -> None:
        super().__init__(max_workers=workers, thread_name_prefix="default-worker")
        self.submitted = 0

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        self.submitted += 1
        return super().submit(fn, *args, **kwargs)


async def until(condition: Callable[[], bool], what: str) -> None:
    """Let the loop run until ``condition`` holds; fail after ``WAIT`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT
    while not condition():
        if loop.time() > deadline:
            pytest.fail(f"never happened: {what}")
        await asyncio.sleep(0.001)


async def finish(awaitable: Coroutine[Any, Any, T], what: str) -> T:
    try:
        return await asyncio.wait_for(awaitable, WAIT)
    except TimeoutError:
        pytest.fail(f"hung: {what} did not finish in {WAIT} s")


def run_with_parked_default_worker(scenario: Callable[[], Coroutine[Any, Any, None]]) -> int:
    """Run ``scenario`` on a fresh loop whose only default worker is parked throughout; return how many jobs the
    default executor was handed besides the parked one."""
    loop = asyncio.new_event_loop()
    executor = CountingExecutor()
    loop.set_default_executor(executor)
    release = threading.Event()
    try:
        parked = loop.run_in_executor(None, release.wait, WAIT)
        loop.run_until_complete(scenario())
        return executor.submitted - 1
    finally:
        release.set()
        loop.run_until_complete(parked)
        executor.shutdown(wait=True)
        loop.close()


async def put_root(tiered: TieredSaver, thread_id: str, size: int = 10) -> RunnableConfig:
    return await tiered.aput(config(thread_id), make_checkpoint({"x": "v" * size}), {"step": -1}, {"x": 1})


async def put_child(tiered: TieredSaver, parent: RunnableConfig, value: str) -> RunnableConfig:
    return await tiered.aput(parent, make_checkpoint({"x": value}, {"x": 2}), {"step": 0}, {"x": 2})


async def every_async_method(tiered: TieredSaver) -> None:
    """Every async method, and the paths they take (hits, misses, evictions and spills, backpressure, large
    values offloaded, cold operations), with a hot tier of two threads."""
    big = "b" * (2 * tiered.config.async_offload_bytes)
    roots = {name: await put_root(tiered, name) for name in ("a", "b", "c", "d")}  # evictions, spills
    child = await put_child(tiered, roots["a"], big)  # a large value: serialized off the loop
    await tiered.aput_writes(child, [("x", big)], "task-big")
    assert (await tiered.aget_tuple(config("a"))) is not None  # a miss or a hit
    assert (await tiered.aget_tuple(config("a"))) is not None  # a hit
    assert len([item async for item in tiered.alist(config("b"))]) == 1
    assert len([item async for item in tiered.alist(None)]) >= 5
    await tiered.aget_delta_channel_history(config=config("c"), channels=["x"])
    await tiered.aflush()
    await tiered.acopy_thread("a", "copy")
    await tiered.adelete_for_runs(["no-such-run"])
    await tiered.aprune(["copy"], strategy="keep_latest")
    await tiered.aprune(["copy"], strategy="delete")
    await tiered.adelete_thread("d")
    await tiered.aclose()


@pytest.mark.parametrize("write", ["through", "back"])
def test_every_async_method_finishes_with_the_default_executor_parked(tmp_path: Path, write: str) -> None:
    tiered = TieredSaver(
        sqlite_durable(tmp_path / "durable.sqlite"),
        config=InMemoryCheckpointConfig(max_threads=2, async_offload_bytes=1_000),
        write=write_mode(write, flush_interval_seconds=float("inf"), max_dirty_bytes=3_000),
    )

    async def scenario() -> None:
        await finish(every_async_method(tiered), "the async methods")

    assert run_with_parked_default_worker(scenario) == 0  # nothing was handed to the default executor
    tiered.check()
    stats = tiered.stats()
    assert stats.dirty_bytes == 0 and stats.hot.evicted_threads >= 2
    if write == "back":
        assert stats.backpressure_waits >= 1 and stats.spills >= 1
    assert tiered.get_tuple(config("d")) is None
    durable = sqlite_durable(tmp_path / "durable.sqlite")
    assert durable.get_tuple(config("a")).checkpoint["channel_values"]["x"].startswith("b")  # type: ignore[union-attr]


# --- the saver's own jobs pool: one worker, waiting on a gate, never stops the gate's holder ----------------------


@pytest.fixture
def one_job_worker(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The tiered saver's jobs pool cut to one worker, for this test."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="one-job-worker")
    monkeypatch.setitem(pools._pools, "jobs", pool)
    yield pool
    pool.shutdown(wait=True)


def test_a_prune_waiting_in_the_only_job_worker_does_not_starve_the_write_holding_the_gate(
    tmp_path: Path, one_job_worker: Any
) -> None:
    """``aput`` (write-through) holds the thread's gate shared across its durable put; ``aprune(delete)``,
    in the jobs pool's only worker, waits to hold the gate alone. The put's durable call runs on the durable
    pool (never behind the prune), so both finish: the write first, then the deletion takes everything."""
    durable = ControlledSqlite(tmp_path / "durable.sqlite")
    tiered = TieredSaver(durable)

    async def scenario() -> None:
        root = await put_root(tiered, "doomed")
        durable.close_gate("put")
        writing = asyncio.ensure_future(put_child(tiered, root, "w"))
        await until(durable.entered.is_set, "the write waits inside its durable put, gate shared")
        pruning = asyncio.ensure_future(tiered.aprune(["doomed"], strategy="delete"))
        await until(lambda: "doomed" in tiered._shared.gates.exclusive, "the prune waits for the gate alone")
        durable.gate.set()
        await finish(asyncio.gather(writing, pruning), "the write and the prune")

    asyncio.run(scenario())
    assert list(sqlite_durable(tmp_path / "durable.sqlite").list(config("doomed"))) == []
    assert tiered.get_tuple(config("doomed")) is None
    tiered.check()


@pytest.mark.parametrize("trigger", ["aflush", "aclose", "backpressure", "acopy_thread"])
def test_a_deletion_holding_the_gate_alone_does_not_starve_the_flushes_waiting_for_it(
    tmp_path: Path, one_job_worker: Any, trigger: str
) -> None:
    """``adelete_thread`` holds the gate alone across its durable calls; a flush (or a copy, in the jobs pool's
    only worker) waits for the gate. Everything finishes, and nothing brings the deleted thread's write back."""
    durable = ControlledSqlite(tmp_path / "durable.sqlite")
    tiered = TieredSaver(durable, write=WriteBack(flush_interval_seconds=float("inf"), max_dirty_bytes=2_500))

    async def scenario() -> None:
        await put_root(tiered, "doomed", size=1_000)  # unflushed: a flush will want the thread's gate
        if trigger == "acopy_thread":
            await put_root(tiered, "source")
            await tiered.aflush()
        durable.close_gate("delete_thread")
        deleting = asyncio.ensure_future(tiered.adelete_thread("doomed"))
        await until(durable.entered.is_set, "the deletion waits inside its durable call, gate alone")
        if trigger == "aflush":
            waiting = asyncio.ensure_future(tiered.aflush())
        elif trigger == "aclose":
            waiting = asyncio.ensure_future(tiered.aclose())
        elif trigger == "backpressure":
            waiting = asyncio.ensure_future(put_root(tiered, "bystander", size=1_500))
        else:
            waiting = asyncio.ensure_future(tiered.acopy_thread("source", "doomed"))
        for _ in range(50):
            await asyncio.sleep(0)  # let the waiter reach the gate
        durable.gate.set()
        await finish(asyncio.gather(deleting, waiting), f"adelete_thread and {trigger}")

    asyncio.run(scenario())
    tiered.close()
    tiered.check()
    assert tiered.stats().dirty_bytes == 0
    values = [
        item.checkpoint["channel_values"]["x"]
        for item in sqlite_durable(tmp_path / "durable.sqlite").list(config("doomed"))
    ]
    assert values == (["v" * 10] if trigger == "acopy_thread" else [])
