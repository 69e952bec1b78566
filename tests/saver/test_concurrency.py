"""Many OS threads and an event loop on one saver: no error but capacity errors,
every worker's writes made and found where it left them (or the thread gone
whole), invariants intact, every persisted graph state right, every tuple read whole."""

from __future__ import annotations

import asyncio
import operator
import random
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Annotated, Any, TypedDict

from langgraph.graph import START, StateGraph

from langgraph.checkpoint.bounded import (
    BoundedInMemorySaver,
    CheckpointCapacityError,
    InMemoryCheckpointConfig,
    ThreadEvictedError,
)
from langgraph.checkpoint.bounded.engine import KIB
from tests.support.helpers import config, put

WORKERS = 8
OPERATIONS_PER_WORKER = 300


@dataclass
class WorkerLog:
    """What one worker did: its failures, its progress, and the last checkpoint it put on each of its own threads."""

    writer: int
    errors: list[str] = field(default_factory=list)
    puts: int = 0
    tuples_read: int = 0
    last_put: dict[tuple[str, str], int] = field(default_factory=dict)

    def check_whole(self, tup: Any) -> None:
        """A tuple is whole: its values, metadata and pending writes all belong to the one checkpoint."""
        values, metadata = tup.checkpoint["channel_values"], tup.metadata
        checkpoint_id = tup.checkpoint["id"]
        if checkpoint_id != tup.config["configurable"]["checkpoint_id"]:
            self.errors.append(f"config of {tup.config} holds checkpoint {checkpoint_id}")
        if (values.get("writer"), values.get("k")) != (metadata.get("writer"), metadata.get("k")):
            self.errors.append(f"torn tuple: values {values.get('writer')}/{values.get('k')} with metadata {metadata}")
        for task_id, channel, value in tup.pending_writes:
            if channel == "doc" and value != f"written under {checkpoint_id}":
                self.errors.append(f"{checkpoint_id} holds the write {value!r} of task {task_id}")
        self.tuples_read += 1


def mixed_operations(saver: BoundedInMemorySaver, seed: int) -> WorkerLog:
    """A worker's random mix on shared threads ("shared-*") and its own ("own-<seed>-*").

    Only this worker writes or deletes its own threads (others may evict them),
    so whenever one is still stored its latest checkpoint must be the last one
    this worker put there.
    """
    rng = random.Random(seed)
    log = WorkerLog(seed)
    for k in range(OPERATIONS_PER_WORKER):
        own = rng.random() < 0.5
        thread = f"own-{seed}-{rng.randrange(3)}" if own else f"shared-{rng.randrange(4)}"
        namespace = rng.choice(["", "sub:1"])
        action = rng.randrange(10)
        try:
            if action < 4:
                latest = saver.get_tuple(config(thread, namespace))
                if latest is not None:
                    log.check_whole(latest)
                run_id = (
                    f"own-run-{seed}" if own else f"run-{seed}"
                )  # delete_for_runs below reaches shared threads only
                put(saver, thread, {"doc": "d" * rng.randrange(50, 1_500), "writer": seed, "k": k},
                    namespace=namespace, parent=latest.config if latest else None,
                    metadata={"run_id": run_id, "writer": seed, "k": k}, version=f"{seed}.{k}")  # fmt: skip
                log.puts += 1
                if own:
                    log.last_put[(thread, namespace)] = k
            elif action < 6:
                latest = saver.get_tuple(config(thread, namespace))
                if latest is not None:
                    log.check_whole(latest)
                    saver.put_writes(
                        latest.config, [("doc", f"written under {latest.checkpoint['id']}"), ("__error__", "e")],
                        f"task-{seed}",
                    )  # fmt: skip
                else:
                    saver.put_writes(config(thread, namespace, "pending"), [("__error__", "e")], f"task-{seed}")
            elif action == 6:
                for tup in saver.list(config(thread), limit=3):
                    log.check_whole(tup)
            elif action == 7:
                saver.delete_thread(thread)
                if own:
                    log.last_put = {key: value for key, value in log.last_put.items() if key[0] != thread}
            elif action == 8:
                saver.copy_thread(thread, f"copy-{seed}")
            elif own:
                saver.prune([thread])  # keeps the latest checkpoint of each namespace
            else:
                saver.prune([thread]) if rng.random() < 0.5 else saver.delete_for_runs([f"run-{seed}"])
        except CheckpointCapacityError:
            pass
        except Exception as error:  # anything else is a failure of the test
            log.errors.append(f"{type(error).__name__}: {error}")
    return log


def check_progress(saver: BoundedInMemorySaver, logs: list[WorkerLog]) -> None:
    """Every worker got work done, and its own threads hold what it last put there, or are gone whole."""
    assert [error for log in logs for error in log.errors] == []
    for log in logs:
        assert log.puts > 0 and log.tuples_read > 0, f"worker {log.writer} made no progress: {log}"
        for (thread, namespace), k in log.last_put.items():
            latest = saver.get_tuple(config(thread, namespace))
            if latest is not None:
                assert (latest.metadata["writer"], latest.metadata["k"]) == (log.writer, k), (thread, namespace)
    saver.check()


def tight_saver() -> BoundedInMemorySaver:
    return BoundedInMemorySaver(
        config=InMemoryCheckpointConfig(
            max_threads=10, max_total_bytes=64 * KIB, max_checkpoints_per_thread=20, max_namespaces_per_thread=2
        )
    )


def test_eight_threads_hammering_one_saver() -> None:
    saver = tight_saver()
    with ThreadPoolExecutor(WORKERS) as pool:
        logs = list(pool.map(lambda seed: mixed_operations(saver, seed), range(WORKERS)))
    check_progress(saver, logs)
    stats = saver.stats()
    assert stats.threads <= 10 and stats.total_bytes <= 64 * KIB
    assert stats.evicted_threads > 0, "the limits were never reached: the test is too gentle"
    survivors = [key for log in logs for key in log.last_put if saver.get_tuple(config(*key)) is not None]
    assert survivors, "no worker's own thread survived: nothing was checked"


def test_event_loop_and_threads_interleaving() -> None:
    saver = tight_saver()

    async def coroutine_worker(seed: int) -> WorkerLog:
        rng = random.Random(seed)
        log = WorkerLog(seed)
        for step in range(100):
            thread = f"coroutine-{seed}-{rng.randrange(2)}"  # this coroutine's own threads
            try:
                latest = await saver.aget_tuple(config(thread))
                if latest is not None:
                    log.check_whole(latest)
                checkpoint_config = config(thread, "", latest.checkpoint["id"]) if latest else config(thread)
                stored = await saver.aput(
                    checkpoint_config,
                    {**(latest.checkpoint if latest else {}), **_fresh(step, seed)},
                    {"step": step, "writer": seed, "k": step},
                    dict.fromkeys(("doc", "writer", "k"), f"{step}.{seed}"),
                )
                log.puts += 1
                log.last_put[(thread, "")] = step
                await saver.aput_writes(stored, [("doc", f"written under {stored['configurable']['checkpoint_id']}")],
                                        f"task-{seed}")  # fmt: skip
                for tup in [t async for t in saver.alist(config(thread), limit=2)]:
                    log.check_whole(tup)
            except CheckpointCapacityError:
                pass
            except Exception as error:
                log.errors.append(f"{type(error).__name__}: {error}")
            await asyncio.sleep(0)
        return log

    async def main() -> list[WorkerLog]:
        threads = asyncio.gather(*(asyncio.to_thread(mixed_operations, saver, seed) for seed in range(4)))
        coroutines = asyncio.gather(*(coroutine_worker(100 + seed) for seed in range(20)))
        return [*await threads, *await coroutines]

    logs = asyncio.run(main())
    check_progress(saver, logs)


def _fresh(step: int, seed: int) -> dict[str, Any]:
    return {
        "v": 4,
        "id": f"1ef{step:05d}-{seed:03d}-{random.random()}",
        "ts": "2026-11-29T00:00:00+00:00",
        "channel_values": {"doc": "v" * 300, "writer": seed, "k": step},
        "channel_versions": dict.fromkeys(("doc", "writer", "k"), f"{step}.{seed}"),
        "versions_seen": {},
    }


# --- real graphs, run concurrently ---------------------------------------------------------------


class Counter(TypedDict, total=False):
    log: Annotated[list, operator.add]
    total: int


def counting_graph(checkpointer: BoundedInMemorySaver) -> Any:
    """Two parallel branches per run, so LangGraph's sync engine uses worker threads."""
    builder = StateGraph(Counter)
    builder.add_node("left", lambda s: {"log": ["L"]})
    builder.add_node("right", lambda s: {"log": ["R"]})
    builder.add_node("count", lambda s: {"total": len(s["log"])})
    builder.add_edge(START, "left")
    builder.add_edge(START, "right")
    builder.add_edge(["left", "right"], "count")
    return builder.compile(checkpointer=checkpointer)


RUNS_PER_THREAD = 5


def expected_state(runs: int) -> dict[str, Any]:
    return {"log": ["in", "L", "R"] * runs, "total": 3 * runs}


def check_graph_states(app: Any, saver: BoundedInMemorySaver, names: list[str]) -> None:
    for name in names:
        state = app.get_state({"configurable": {"thread_id": name}})
        assert sorted(state.values.get("log", [])) == sorted(expected_state(RUNS_PER_THREAD)["log"])
        assert state.values["total"] == 3 * RUNS_PER_THREAD
    saver.check()


def test_compiled_graphs_invoked_from_many_threads() -> None:
    saver = BoundedInMemorySaver()
    app = counting_graph(saver)
    names = [f"graph-{i}" for i in range(16)]

    def run(name: str) -> None:
        for _ in range(RUNS_PER_THREAD):
            app.invoke({"log": ["in"]}, {"configurable": {"thread_id": name}})

    with ThreadPoolExecutor(WORKERS) as pool:
        list(pool.map(run, names))
    check_graph_states(app, saver, names)


def test_many_concurrent_ainvokes() -> None:
    saver = BoundedInMemorySaver()
    app = counting_graph(saver)
    names = [f"agraph-{i}" for i in range(32)]

    async def run(name: str) -> None:
        for _ in range(RUNS_PER_THREAD):
            await app.ainvoke({"log": ["in"]}, {"configurable": {"thread_id": name}})

    async def main() -> None:
        await asyncio.gather(*(run(name) for name in names))

    asyncio.run(main())
    check_graph_states(app, saver, names)


def test_graphs_under_eviction_are_whole_or_gone() -> None:
    """Threads are evicted mid-run here: those runs must fail loudly, never persist a partial state."""
    saver = BoundedInMemorySaver(config=InMemoryCheckpointConfig(max_threads=6))
    app = counting_graph(saver)
    names = [f"evicting-{i}" for i in range(24)]

    def run(name: str) -> int:
        failed = 0
        for _ in range(RUNS_PER_THREAD):
            try:
                app.invoke({"log": ["in"]}, {"configurable": {"thread_id": name}})
            except ThreadEvictedError as error:
                assert error.thread_id == name
                failed += 1
        return failed

    with ThreadPoolExecutor(WORKERS) as pool:
        failed_runs = sum(pool.map(run, names))
    saver.check()
    for name in names:
        state = app.get_state({"configurable": {"thread_id": name}})
        if state.values:  # a thread either holds a coherent state or nothing at all
            runs = state.values["total"] // 3
            assert state.values["total"] == len(state.values["log"]) and sorted(state.values["log"]) == sorted(
                expected_state(runs)["log"]
            )
    assert saver.stats().threads <= 6 and saver.stats().evicted_threads > 0
    assert failed_runs <= saver.stats().rejections.get("max_threads", 0)


# --- lists while writers write ----------------------------------------------------------------------


def test_lists_iterated_while_others_write_are_never_torn() -> None:
    saver = BoundedInMemorySaver(config=InMemoryCheckpointConfig(max_checkpoints_per_thread=100_000))
    stop = threading.Event()
    failures: list[str] = []

    def writer(seed: int) -> None:
        parent = None
        for step in range(400):
            parent = put(saver, "busy", {"step": step, "copy": f"{seed}:{step}"}, parent=parent,
                         metadata={"step": step, "writer": seed}, version=f"{seed}.{step}")  # fmt: skip
            saver.put_writes(parent, [("step", step)], f"task-{seed}")
            if step % 50 == 49:
                saver.prune(["busy"])

    def reader() -> None:
        while not stop.is_set():
            try:
                for tup in saver.list(config("busy")):
                    values, metadata = tup.checkpoint["channel_values"], tup.metadata
                    if values != {"step": metadata["step"], "copy": f"{metadata['writer']}:{metadata['step']}"}:
                        failures.append(f"torn tuple: {values} with {metadata}")
                    if any(w[2] != metadata["step"] for w in tup.pending_writes):
                        failures.append(f"writes of another checkpoint: {tup.pending_writes}")
            except Exception as error:
                failures.append(f"{type(error).__name__}: {error}")

    readers = [threading.Thread(target=reader) for _ in range(3)]
    for thread in readers:
        thread.start()
    _run_all([lambda seed=seed: writer(seed) for seed in range(3)])
    stop.set()
    for thread in readers:
        thread.join()
    assert failures == []
    saver.check()


def _run_all(functions: list[Callable[[], None]]) -> None:
    with ThreadPoolExecutor(len(functions)) as pool:
        for future in [pool.submit(function) for function in functions]:
            future.result()
