"""``TieredSaver`` over a sync durable saver never starves the event loop's default executor into a deadlock.

A sync durable saver (``SqliteSaver``, ``PostgresSaver``) has no async side, so the tiered saver's async
methods run its calls in worker threads. Some of the saver's own async methods (``aflush``, ``aclose``,
write-back's backpressure, ``aprune``...) also run sync work in the default executor, and that work may
wait on a thread's gate (``coordination.ThreadGates``). A coroutine holding a gate (``adelete_thread``
alone, a write-through ``aput`` shared) must therefore never need the default executor to let it go:
once every worker waits on the gate, its own call would never run.

Each test gives the loop a default executor of one worker, parks that worker on an event, queues a job
that will wait on the gate, has a coroutine take the gate, then frees the worker. The order is made by
events and by counting what the executor was handed, never by sleeping. A hang fails after ``WAIT``
seconds (never reached when things work), and the gate is then let go so that nothing stays stuck.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Collection, Coroutine
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import pytest
from langchain_core.runnables import RunnableConfig

from langgraph.checkpoint.bounded import InMemoryCheckpointConfig, TieredSaver
from tests.helpers import config, make_checkpoint
from tests.test_tiered_support import sqlite_durable

WAIT = 20.0  # seconds before a wait counts as a hang (never reached when things work)
THREAD = "doomed"

P = ParamSpec("P")
T = TypeVar("T")


class OneWorker(ThreadPoolExecutor):
    """The loop's default executor: one worker, and a count of the jobs it was handed (from the loop's thread)."""

    def __init__(self) -> None:
        super().__init__(max_workers=1, thread_name_prefix="one-default-worker")
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


async def all_finish(tasks: dict[str, asyncio.Task[Any]]) -> None:
    """Wait for every task; on a hang, cancel them (their gates are let go) and fail naming the stuck ones."""
    _, pending = await asyncio.wait(tasks.values(), timeout=WAIT)
    if pending:
        stuck = sorted(name for name, task in tasks.items() if task in pending)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        pytest.fail(f"deadlock: {stuck} did not finish in {WAIT} s (a worker waits on a gate a coroutine holds)")
    for task in tasks.values():
        task.result()  # raise what failed


async def settle(tasks: Collection[asyncio.Task[Any]]) -> None:
    """Wait for cancelled tasks to finish unwinding."""
    await asyncio.gather(*tasks, return_exceptions=True)


def run_on_one_worker(scenario: Callable[[OneWorker], Coroutine[Any, Any, None]]) -> None:
    """Run ``scenario`` on a fresh loop whose default executor has one worker; after it, cancel what it left
    running (letting its gates go), then shut both down."""
    loop = asyncio.new_event_loop()
    executor = OneWorker()
    loop.set_default_executor(executor)
    try:
        loop.run_until_complete(scenario(executor))
    finally:
        left = asyncio.all_tasks(loop)
        for task in left:
            task.cancel()
        if left:
            loop.run_until_complete(settle(left))
        executor.shutdown(wait=True)
        loop.close()


async def park_the_worker(executor: OneWorker, release: threading.Event) -> asyncio.Task[bool]:
    """Occupy the only worker until ``release`` is set."""
    before = executor.submitted
    parked = asyncio.ensure_future(asyncio.to_thread(release.wait, WAIT))
    await until(lambda: executor.submitted == before + 1, "the worker is parked")
    return parked


def durable_tuples(tiered: TieredSaver, thread_id: str) -> list[Any]:
    """What the durable tier alone holds of the thread."""
    return list(tiered.durable.list(config(thread_id)))


async def put_root(tiered: TieredSaver, thread_id: str, size: int = 10) -> RunnableConfig:
    """A first checkpoint of the thread, with a value of ``size`` characters; the config it was stored under."""
    return await tiered.aput(config(thread_id), make_checkpoint({"x": "v" * size}), {"step": -1}, {"x": 1})


# --- a deletion holds the gate alone while a flush in the executor waits for it -----------------------------------


async def trigger_aflush(tiered: TieredSaver) -> None:
    await tiered.aflush()


async def trigger_aclose(tiered: TieredSaver) -> None:
    await tiered.aclose()


async def trigger_backpressure(tiered: TieredSaver) -> None:
    """A write on another thread that needs room: it flushes the deleted thread's unflushed write first."""
    await put_root(tiered, "bystander", size=1_500)


async def trigger_acopy_thread(tiered: TieredSaver) -> None:
    """A copy from another thread into the one being deleted: it flushes, then writes it, gate shared."""
    await tiered.acopy_thread("bystander-source", THREAD)


TRIGGERS: dict[str, Callable[[TieredSaver], Awaitable[None]]] = {
    "aflush": trigger_aflush,
    "aclose": trigger_aclose,
    "backpressure": trigger_backpressure,
    "acopy_thread": trigger_acopy_thread,
}


@pytest.mark.parametrize("trigger", sorted(TRIGGERS))
def test_adelete_thread_does_not_starve_a_flush_waiting_in_the_default_executor(tmp_path: Path, trigger: str) -> None:
    """The reviewer's deadlock: ``adelete_thread`` holds the gate alone across the durable calls; the flush
    (or copy) queued before it in the executor waits on that gate in the only worker."""
    tiered = TieredSaver(
        sqlite_durable(tmp_path / "durable.sqlite"),
        write="back",
        flush_interval_seconds=float("inf"),
        max_dirty_bytes=2_500,  # the doomed thread's write fits; the bystander's needs it flushed first
    )

    async def scenario(executor: OneWorker) -> None:
        await put_root(tiered, THREAD, size=1_000)  # unflushed: the flush will want the thread's gate
        if trigger == "acopy_thread":
            await put_root(tiered, "bystander-source")
            tiered.flush()  # the copy's own flushes then have nothing to write but the doomed thread's
        release = threading.Event()
        try:
            parked = await park_the_worker(executor, release)
            queued = executor.submitted + 1
            flushing = asyncio.ensure_future(TRIGGERS[trigger](tiered))
            await until(lambda: executor.submitted == queued, f"{trigger} queued its job behind the parked one")
            deleting = asyncio.ensure_future(tiered.adelete_thread(THREAD))
            gates = tiered._shared.gates
            await until(lambda: THREAD in gates.exclusive or deleting.done(), "the deletion holds the gate")
        finally:
            release.set()
        await all_finish({"parked": parked, trigger: flushing, "adelete_thread": deleting})

    run_on_one_worker(scenario)
    tiered.close()  # flushes whatever is left
    tiered.check()
    assert tiered.stats().dirty_bytes == 0
    # The promises hold: nothing brought the deleted thread's own write back, not even the flush queued first.
    values = [item.checkpoint["channel_values"]["x"] for item in durable_tuples(tiered, THREAD)]
    if trigger == "acopy_thread":
        assert values == ["v" * 10]  # the copy, made after the deletion, wrote the thread again, on purpose
    else:
        assert values == []
        assert tiered.get_tuple(config(THREAD)) is None
    if trigger == "backpressure":
        assert [item.checkpoint["channel_values"]["x"] for item in durable_tuples(tiered, "bystander")] == ["v" * 1_500]


# --- a write-through holds the gate shared while a deletion in the executor waits for it --------------------------


def test_a_write_through_does_not_starve_a_deletion_waiting_in_the_default_executor(tmp_path: Path) -> None:
    """The other way round: ``aput`` (write-through) holds the gate shared across the durable put, and
    ``aprune(strategy="delete")`` queued before it takes the gate alone in the only worker."""
    tiered = TieredSaver(sqlite_durable(tmp_path / "durable.sqlite"), config=InMemoryCheckpointConfig())

    async def scenario(executor: OneWorker) -> None:
        root = await put_root(tiered, THREAD)
        release = threading.Event()
        try:
            parked = await park_the_worker(executor, release)
            queued = executor.submitted + 1
            pruning = asyncio.ensure_future(tiered.aprune([THREAD], strategy="delete"))
            await until(lambda: executor.submitted == queued, "aprune queued its job behind the parked one")
            child = make_checkpoint({"x": "w"}, {"x": 2})
            writing = asyncio.ensure_future(tiered.aput(root, child, {"step": 0}, {"x": 2}))
            gates = tiered._shared.gates
            await until(lambda: THREAD in gates.shared or writing.done(), "the write holds the gate")
        finally:
            release.set()
        await all_finish({"parked": parked, "aprune": pruning, "aput": writing})

    run_on_one_worker(scenario)
    assert durable_tuples(tiered, THREAD) == []  # the write finished first, then the deletion took all
    assert tiered.get_tuple(config(THREAD)) is None
    tiered.check()
