"""What the tiered saver's tests share: running graph scenarios, reading what a saver holds, interleaved and
concurrent runs."""

from __future__ import annotations

import asyncio
import contextvars
import operator
import threading
from typing import Annotated, Any, TypedDict

from tests.support.graphs import SCENARIOS, Runner, describe, linear, thread
from tests.support.helpers import config, make_checkpoint

WAIT = 60.0  # seconds a wait may take before the test fails (it is never reached when things work)


def run(name: str, checkpointer: Any, *, use_async: bool, durability: str = "async") -> Any:
    factory, scenario = SCENARIOS[name]
    calls: dict[str, int] = {}
    runner = Runner(factory(checkpointer, calls), use_async=use_async, durability=durability, calls=calls)
    return asyncio.run(scenario(runner))


def tuples(saver: Any, thread_id: str, namespace: str | None = "", **criteria: Any) -> list[Any]:
    """Everything a ``list()`` answers (of one namespace, or with None of all), comparable with ``==``."""
    located = {"thread_id": thread_id} if namespace is None else {"thread_id": thread_id, "checkpoint_ns": namespace}
    return [
        (item.config, item.checkpoint, item.metadata, item.parent_config, item.pending_writes)
        for item in saver.list({"configurable": located}, **criteria)
    ]


def put_chain(saver: Any, thread_id: str, count: int, namespace: str = "") -> list[dict[str, Any]]:
    """``count`` checkpoints in a parent chain, each with one pending write; the stored configs."""
    stored: list[dict[str, Any]] = []
    for step in range(count):
        parent = stored[-1]["configurable"]["checkpoint_id"] if stored else None
        version = saver.get_next_version(None if not stored else f"{step:032}.0", None)
        checkpoint = make_checkpoint({"step": step, "text": f"turn {step}"}, {"step": version, "text": version})
        result = saver.put(
            config(thread_id, namespace, parent),
            checkpoint,
            {"source": "loop", "step": step, "parents": {}},
            {"step": version, "text": version},
        )
        saver.put_writes(result, [("step", step + 1)], f"task-{step}")
        stored.append(result)
    return stored


COPY = contextvars.ContextVar("COPY", default=0)

# The two scenarios that wrap the checkpointer's put_writes to time their failure: copies sharing one saver would
# wrap it in turn, so they are left out of the interleaved runs.
INTERLEAVED_SCENARIOS = [
    name for name in SCENARIOS if name not in ("failing_branch_is_retried", "branch_is_retried_in_run")
]


def interleaved_thread(name: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": f"{name}-{COPY.get()}"}}


def run_interleaved(checkpointer: Any, *, use_async: bool, durability: str, copies: int) -> dict[Any, Any]:
    """Every scenario's trace, ``copies`` runs of each at once (asyncio tasks, or OS threads for sync runs)."""

    def runner(name: str) -> tuple[Runner, Any]:
        factory, scenario = SCENARIOS[name]
        calls: dict[str, int] = {}
        return Runner(factory(checkpointer, calls), use_async=use_async, durability=durability, calls=calls), scenario

    found: dict[Any, Any] = {}
    if use_async:

        async def one(name: str, copy: int) -> None:
            COPY.set(copy)
            graph, scenario = runner(name)
            found[name, copy] = await scenario(graph)

        async def every() -> None:
            await asyncio.gather(*(one(name, copy) for name in INTERLEAVED_SCENARIOS for copy in range(copies)))

        asyncio.run(every())
        return found

    def in_thread(name: str, copy: int) -> None:
        COPY.set(copy)
        graph, scenario = runner(name)
        found[name, copy] = asyncio.run(scenario(graph))

    workers = [
        threading.Thread(target=contextvars.copy_context().run, args=(in_thread, name, copy))
        for name in INTERLEAVED_SCENARIOS
        for copy in range(copies)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(WAIT)
    assert not any(worker.is_alive() for worker in workers), "a run never finished"
    return found


def graph_view(factory: Any, saver: Any, thread_id: str) -> list[Any]:
    """A thread's state and every state of its history, as a graph compiled over ``saver`` reads them."""
    app = factory(saver, {})
    history = list(app.get_state_history(thread(thread_id)))
    return [describe(app.get_state(thread(thread_id))), *(describe(app.get_state(s.config)) for s in history)]


class Log(TypedDict):
    log: Annotated[list[str], operator.add]


def three_steps(checkpointer: Any) -> Any:
    """Two async nodes that yield to the loop (so that concurrent runs interleave), then a sync one."""

    async def slow(state: Log) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"log": ["slow"]}

    def fast(state: Log) -> dict[str, Any]:
        return {"log": [f"fast after {len(state['log'])}"]}

    return linear(Log, {"slow": slow, "slower": slow, "fast": fast}).compile(checkpointer=checkpointer)


async def concurrent_runs(checkpointer: Any, count: int) -> list[Any]:
    app = three_steps(checkpointer)

    async def one(index: int) -> Any:
        try:
            return await app.ainvoke({"log": [f"user {index}"]}, thread(f"run-{index}"))
        except Exception as error:
            return type(error).__name__

    return await asyncio.gather(*(one(index) for index in range(count)))


def write_mode(write: str, **back: Any) -> Any:
    """``write`` (``"through"`` or ``"back"``, as tests parametrize it) as ``TieredSaver``'s write policy, with
    write-back's settings ``back`` when it is write-back (with write-through they would be refused)."""
    from langgraph.checkpoint.bounded import WriteBack, WriteThrough

    return WriteBack(**back) if write == "back" else WriteThrough()


def flight_waiters(tiered: Any) -> int:
    """How many reads wait for another caller's read of the same key (``TieredSaver``'s single flights)."""
    flights = tiered._shared.flights
    with flights.lock:
        return sum(flight.waiters for flight in flights.flights.values())


def wait_until(condition: Any) -> None:
    """Return once ``condition()`` holds; fail after ``WAIT`` seconds."""
    pause = threading.Event()
    for _ in range(int(WAIT / 0.001)):
        if condition():
            return
        pause.wait(0.001)
    raise AssertionError("the condition never held")


def read_together(tiered: Any, durable: Any, read: Any, count: int) -> list[Any]:
    """``count`` threads call ``read()`` at once while the durable tier (a ``ControlledSqlite``) holds its
    ``get_tuple``: the first enters the durable read, the others join its flight; then the gate opens. Returns
    their answers."""
    durable.close_gate("get_tuple")
    answers: list[Any] = []
    readers = [threading.Thread(target=lambda: answers.append(read())) for _ in range(count)]
    readers[0].start()
    assert durable.entered.wait(WAIT)
    for reader in readers[1:]:
        reader.start()
    wait_until(lambda: flight_waiters(tiered) == count - 1)
    durable.gate.set()
    for reader in readers:
        reader.join(WAIT)
    return answers
