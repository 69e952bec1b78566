"""``memory_bytes`` and ``max_memory_bytes``: the heap a store holds, estimated and bounded.

The calibration tests are measurements of the store's own memory, not of time:
each fills a saver with a real workload and compares ``stats().memory_bytes``
with the heap that ``tracemalloc`` traced between two readings, after a
collection, the compiled graph and LangGraph's caches already in place before
the first one.
"""

from __future__ import annotations

import gc
import math
import operator
import random
import sys
import tracemalloc
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.graph import START, StateGraph
from langgraph.types import Send

from langgraph.checkpoint.bounded import BoundedInMemorySaver, CheckpointCapacityError, InMemoryCheckpointConfig
from langgraph.checkpoint.bounded.engine import (
    KIB,
    MIB,
    CheckpointRecord,
    Store,
    StoreLimits,
    WriteRecord,
    memory,
)
from tests.conftest import FakeClock
from tests.support.graphs import linear, wide_writer
from tests.support.helpers import config, fingerprint, make_checkpoint, put

UNBOUNDED = {**vars(StoreLimits.unbounded()), "max_dropped_thread_records": 1_000}  # tombstones: the default
TOLERANCE = 0.15  # the estimate is within 15% of the traced heap

# --- graphs -----------------------------------------------------------------------------------------


class Counter(TypedDict, total=False):
    n: int
    note: str


def tiny(saver: BoundedInMemorySaver) -> Any:
    """Two nodes, two small channels: overhead dominates its checkpoints."""
    builder = linear(
        Counter, {"count": lambda state: {"n": state.get("n", 0) + 1}, "note": lambda state: {"note": "ok"}}
    )
    return builder.compile(checkpointer=saver)


class Chat(TypedDict, total=False):
    messages: Annotated[list, operator.add]


def chat(saver: BoundedInMemorySaver, size: int) -> Any:
    """One node that appends a message of ``size`` characters."""
    builder = linear(Chat, {"reply": lambda state: {"messages": [{"role": "assistant", "content": "x" * size}]}})
    return builder.compile(checkpointer=saver)


def with_subgraph(saver: BoundedInMemorySaver) -> Any:
    """A node that calls a compiled subgraph: a new namespace per call."""
    inner = linear(Counter, {"step": lambda state: {"n": state.get("n", 0) + 1}})
    outer = linear(Counter, {"call": inner.compile()})
    return outer.compile(checkpointer=saver)


class Fanout(TypedDict, total=False):
    results: Annotated[list, operator.add]


def fan_out(saver: BoundedInMemorySaver, width: int) -> Any:
    """A plan node sends ``width`` workers: many pending writes per checkpoint."""
    builder = StateGraph(Fanout)
    builder.add_node("plan", lambda state: {})
    builder.add_node("work", lambda state: {"results": [state["i"]]})
    builder.add_edge(START, "plan")
    builder.add_conditional_edges("plan", lambda state: [Send("work", {"i": i}) for i in range(width)], ["work"])
    return builder.compile(checkpointer=saver)


# --- workloads: (graph, its input, the thread id of run i, runs) ------------------------------------------

Workload = tuple[Callable[[BoundedInMemorySaver], Any], dict[str, Any], Callable[[int], Any], int]

WORKLOADS: dict[str, Workload] = {
    "tiny-graph threads": (tiny, {"n": 0}, lambda i: f"thread-{i}", 200),
    "one long thread of tiny steps": (tiny, {"n": 0}, lambda i: "long", 100),
    "medium messages": (lambda s: chat(s, 1_200), {"messages": []}, lambda i: f"chat-{i % 20}", 100),
    "large values": (lambda s: chat(s, 120_000), {"messages": []}, lambda i: f"large-{i}", 6),
    "many namespaces": (with_subgraph, {"n": 0}, lambda i: f"sub-{i % 10}", 100),
    "many pending writes": (lambda s: fan_out(s, 12), {"results": []}, lambda i: f"fan-{i}", 20),
    "a wide fan-out": (lambda s: fan_out(s, 50), {"results": []}, lambda i: f"wide-{i}", 6),
    "int thread ids": (tiny, {"n": 0}, lambda i: i, 200),
    "UUID thread ids": (tiny, {"n": 0}, lambda i: uuid.UUID(int=i + 1), 200),
}


def traced_heap(saver: BoundedInMemorySaver, workload: Workload) -> int:
    """Bytes the store holds after the workload runs, as tracemalloc traces them."""
    build, inputs, thread_of, runs = workload
    app = build(saver)
    app.invoke(inputs, {"configurable": {"thread_id": "warm-up"}})  # LangGraph's caches, before the readings
    saver.delete_thread("warm-up")
    return traced(lambda: [app.invoke(inputs, {"configurable": {"thread_id": thread_of(run)}}) for run in range(runs)])


def traced(action: Callable[[], object]) -> int:
    """Bytes that ``action`` leaves allocated, as tracemalloc traces them (after a collection)."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        action()
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_memory_bytes_is_within_fifteen_percent_of_the_traced_heap(name: str) -> None:
    saver = BoundedInMemorySaver(config=InMemoryCheckpointConfig(**UNBOUNDED))
    heap = traced_heap(saver, WORKLOADS[name])
    stats = saver.stats()
    assert stats.checkpoints > 0 and heap > stats.total_bytes
    assert abs(stats.memory_bytes / heap - 1) <= TOLERANCE, (
        f"{name}: memory_bytes {stats.memory_bytes:,}, traced heap {heap:,}, payload {stats.total_bytes:,}"
    )
    saver.check()


@pytest.mark.parametrize("name", ["tiny-graph threads", "large values", "many namespaces"])
def test_with_max_memory_bytes_the_heap_stays_near_the_limit(name: str) -> None:
    build, inputs, thread_of, runs = WORKLOADS[name]
    limit = MIB if name != "large values" else 3 * MIB
    saver = BoundedInMemorySaver(
        config=InMemoryCheckpointConfig(**{**UNBOUNDED, "max_memory_bytes": limit, "max_checkpoint_bytes": MIB})
    )
    heap = traced_heap(saver, (build, inputs, thread_of, runs * 3))  # far past the limit
    stats = saver.stats()
    assert stats.evicted_for_memory > 0, "the workload never reached the limit"
    assert stats.memory_bytes <= limit
    assert heap <= (1 + TOLERANCE) * limit, f"{name}: heap {heap:,} for max_memory_bytes {limit:,}"
    saver.check()


# --- shapes the nine workloads do not cover ---------------------------------------------------------------------
# Each writes one thread per call through the saver's own API (or a compiled graph) and returns its id. What a
# store holds beyond its payload depends on these shapes: how many small containers a thread, a namespace and a
# checkpoint take, non-ASCII text (wider than a byte per character), numbers as versions and write indices, a
# version object shared by a step's channels, the copies of versions a new turn of a graph reads back, and what a
# snapshot decodes. The calibration runs in this process, as the nine workloads do.

Writer = Callable[[int], Any]


def write_thread(
    saver: BoundedInMemorySaver,
    thread_id: str,
    values: Callable[[int], dict[str, Any]],
    *,
    steps: int = 2,
    version: Callable[[str, int], Any] | None = None,
    namespace: str = "",
    task_id: str = "task",
    task_path: str = "~__pregel_pull, agent",
) -> None:
    """``steps`` checkpoints of a thread, each giving every channel of ``values(step)`` a new version (the
    stock format unless ``version`` makes one), then one task's write: as a graph's steps put them."""
    parent, versions, run_id = None, {}, f"run-{thread_id}"
    for step in range(steps):
        state = values(step)
        new = {c: version(c, step) if version else saver.get_next_version(versions.get(c), None) for c in state}
        versions.update(new)
        checkpoint = make_checkpoint(state, dict(versions))
        configurable = {"thread_id": thread_id, "checkpoint_ns": namespace}
        if parent is not None:
            configurable["checkpoint_id"] = parent["configurable"]["checkpoint_id"]
        metadata = {"source": "loop", "step": step, "run_id": run_id}
        parent = saver.put({"configurable": configurable}, checkpoint, metadata, new)
    channel = next(iter(values(steps)))
    saver.put_writes(parent, [(channel, values(steps)[channel])], f"{task_id}-{thread_id}", task_path)  # type: ignore[arg-type]


def small_values(step: int) -> dict[str, Any]:
    return {"messages": f"message {step}" * 4, "step": step}


def one_checkpoint_threads(saver: BoundedInMemorySaver) -> Writer:
    def write(index: int) -> str:
        write_thread(saver, f"thread-{index}", lambda step: {"value": "v" * 18}, steps=1)
        return f"thread-{index}"

    return write


def long_thread_ids(saver: BoundedInMemorySaver) -> Writer:
    def write(index: int) -> str:
        thread_id = f"{index:x>256}"
        write_thread(saver, thread_id, small_values)
        return thread_id

    return write


def deep_namespaces(saver: BoundedInMemorySaver) -> Writer:
    def write(index: int) -> str:
        thread_id = f"deep-{index}"
        write_thread(saver, thread_id, small_values, steps=1)
        deep = "|".join(f"node_{depth}:{uuid.UUID(int=(index + 1) * 64 + depth)}" for depth in range(32))
        write_thread(saver, thread_id, small_values, namespace=deep)
        return thread_id

    return write


def non_ascii_text(saver: BoundedInMemorySaver) -> Writer:
    def values(step: int) -> dict[str, Any]:
        return {"メッセージ": f"こんにちは {step}", "étape": step, "😀": "ok"}

    def write(index: int) -> str:
        thread_id = f"スレッド-{index}-é"
        write_thread(saver, thread_id, values, task_id="タスク", task_path="~__pregel_pull, エージェント")
        write_thread(saver, thread_id, values, namespace=f"ノード:{index}", task_id="😀")
        return thread_id

    return write


def wide_checkpoints(saver: BoundedInMemorySaver) -> Writer:
    """500 channels, each given a fresh version string at every put."""
    names = [f"channel_{number}" for number in range(500)]

    def write(index: int) -> str:
        write_thread(saver, f"wide-{index}", lambda step: dict.fromkeys(names, step), steps=3)
        return f"wide-{index}"

    return write


def numpy_values(saver: BoundedInMemorySaver) -> Writer:
    numpy = pytest.importorskip("numpy")

    def write(index: int) -> str:
        write_thread(saver, f"array-{index}", lambda step: {"array": numpy.arange(16.0) + step, "step": step})
        return f"array-{index}"

    return write


def number_versions(saver: BoundedInMemorySaver, kind: type) -> Writer:
    """Versions that are ints past the interpreter's shared small ones, or floats: a new object each."""

    def write(index: int) -> str:
        write_thread(saver, f"numbers-{index}", small_values, version=lambda channel, step: kind(1_000 + step))
        return f"numbers-{index}"

    return write


SHAPES: dict[str, tuple[Callable[[BoundedInMemorySaver], Writer], int]] = {
    "one-checkpoint threads, 20-byte values": (one_checkpoint_threads, 400),
    "256-character thread ids": (long_thread_ids, 200),
    "namespaces 32 deep": (deep_namespaces, 100),
    "non-ASCII ids, channel names and task paths": (non_ascii_text, 150),
    "500 channels, fresh version strings each put": (wide_checkpoints, 3),
    "a graph writing 500 channels every turn": (lambda saver: wide_writer(saver, 500), 2),
    "a graph writing 500 channels, then 5 a turn": (lambda saver: wide_writer(saver, 5), 3),
    "numpy array values": (numpy_values, 200),
    "int versions": (lambda saver: number_versions(saver, int), 200),
    "float versions": (lambda saver: number_versions(saver, float), 200),
}


def traced_writes(saver: BoundedInMemorySaver, write: Writer, count: int) -> int:
    """Bytes the store holds after ``count`` threads are written, as tracemalloc traces them."""
    saver.delete_thread(write(-1))  # caches, the channel names the store remembers: before the readings
    return traced(lambda: [write(index) for index in range(count)])


@pytest.mark.parametrize("name", list(SHAPES))
def test_memory_bytes_is_within_fifteen_percent_of_the_traced_heap_on_other_shapes(name: str) -> None:
    build, count = SHAPES[name]
    saver = BoundedInMemorySaver(config=InMemoryCheckpointConfig(**UNBOUNDED))
    heap = traced_writes(saver, build(saver), count)
    stats = saver.stats()
    assert stats.checkpoints > 0 and heap > stats.total_bytes
    assert abs(stats.memory_bytes / heap - 1) <= TOLERANCE, (
        f"{name}: memory_bytes {stats.memory_bytes:,}, traced heap {heap:,}, payload {stats.total_bytes:,}"
    )
    saver.check()


def saved_store(path: Path, fill: int) -> None:
    """A snapshot of tiny-graph threads, about ``fill`` bytes of memory_bytes."""
    source = BoundedInMemorySaver(config=InMemoryCheckpointConfig(**UNBOUNDED))
    app = tiny(source)
    index = 0
    while source.stats().memory_bytes < fill:
        app.invoke({"n": 0}, {"configurable": {"thread_id": f"thread-{index}"}})
        index += 1
    source.save(path)


def traced_load(path: Path, config: InMemoryCheckpointConfig) -> tuple[BoundedInMemorySaver, int]:
    """A saver loaded from ``path`` and the heap the load left behind (its report included)."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        saver = BoundedInMemorySaver.load(path, config=config)
        gc.collect()
        return saver, tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def test_a_store_restored_by_load_is_within_fifteen_percent_of_the_traced_heap(tmp_path: Path) -> None:
    """A snapshot's strings are decoded once per distinct value in a thread, as a graph wrote them."""
    saved_store(tmp_path / "store.snapshot", MIB)
    saver, heap = traced_load(tmp_path / "store.snapshot", InMemoryCheckpointConfig(**UNBOUNDED))
    stats = saver.stats()
    assert abs(stats.memory_bytes / heap - 1) <= TOLERANCE, f"memory_bytes {stats.memory_bytes:,}, heap {heap:,}"
    saver.check()


LIMITED_SHAPES = [
    "one-checkpoint threads, 20-byte values",
    "non-ASCII ids, channel names and task paths",
    "a graph writing 500 channels, then 5 a turn",
    "int versions",
]


@pytest.mark.parametrize("name", LIMITED_SHAPES)
def test_with_max_memory_bytes_the_heap_stays_near_the_limit_on_other_shapes(name: str) -> None:
    build, _ = SHAPES[name]
    limit = MIB
    saver = BoundedInMemorySaver(config=InMemoryCheckpointConfig(**{**UNBOUNDED, "max_memory_bytes": limit}))
    write = build(saver)
    saver.delete_thread(write(-1))
    probe = BoundedInMemorySaver(config=InMemoryCheckpointConfig(**UNBOUNDED))
    write_probe = build(probe)
    write_probe(0)
    runs = math.ceil(3 * limit / probe.stats().memory_bytes)  # far past the limit
    heap = traced_writes(saver, write, runs)
    stats = saver.stats()
    assert stats.evicted_for_memory > 0, "the workload never reached the limit"
    assert stats.memory_bytes <= limit
    # The bound holds: the heap never passes the limit by more than the tolerance, and it is what the estimate
    # says. (How far under the limit it stays depends on the threads' size: the last eviction may leave a
    # thread's worth of room, three quarters of the limit for this test's 500-channel threads.)
    assert heap / limit <= 1 + TOLERANCE, f"{name}: heap {heap:,} for max_memory_bytes {limit:,}"
    assert abs(heap / stats.memory_bytes - 1) <= TOLERANCE, f"{name}: heap {heap:,}, estimate {stats.memory_bytes:,}"
    saver.check()


def test_a_store_loaded_past_max_memory_bytes_holds_near_the_limit(tmp_path: Path) -> None:
    saved_store(tmp_path / "store.snapshot", 3 * MIB)
    config = InMemoryCheckpointConfig(**{**UNBOUNDED, "max_memory_bytes": MIB})
    saver, heap = traced_load(tmp_path / "store.snapshot", config)
    assert saver.load_report is not None and saver.load_report.evicted, "the snapshot fitted"
    assert saver.stats().memory_bytes <= MIB
    assert abs(heap / MIB - 1) <= TOLERANCE, f"heap {heap:,} for max_memory_bytes {MIB:,}"
    saver.check()


def test_the_costs_follow_the_interpreter() -> None:
    """Measured, not typed: a dict holding its first key, a non-ASCII str, an int past the shared ones."""
    assert sys.getsizeof({"key": None}) == memory.STR_DICT + memory.STR_KEY_ENTRY
    assert memory.text("caf\u00e9") + memory.STR == sys.getsizeof("caf\u00e9")
    assert memory.text("スレッド") + memory.STR == sys.getsizeof("スレッド")
    assert memory.text("ascii") + memory.STR == sys.getsizeof("ascii")
    assert memory.number(10**6) == sys.getsizeof(10**6) and memory.number(7) == 0
    assert memory.number(0.5) == sys.getsizeof(0.5)


def test_the_kept_estimate_equals_a_recount_on_every_path() -> None:
    """Random writes and removals through the engine, with what moves the estimate's varying part: non-ASCII
    ids, namespaces and task ids, versions that are ints past the shared ones or floats, one version object
    shared by several keys and several puts, checkpoints holding equal versions that are other objects than
    their parent's (and their parents re-put, pruned, deleted), write indices past the shared ints. ``check()``
    recounts after each."""
    rng = random.Random(22)
    copied = 0
    for _ in range(12):
        store = Store(
            StoreLimits(
                **{
                    **vars(StoreLimits.unbounded()),
                    "max_checkpoints_per_thread": rng.choice([3, 6, 1_000]),
                    "on_checkpoint_limit": "prune_oldest",
                    "max_namespaces_per_thread": 2,
                    "on_namespace_limit": "prune_oldest",
                }
            )
        )
        shared = ["1.0", 7, 3.5, 1_000, "v" * 40]  # the same objects put again and again
        for _ in range(150):
            thread, namespace = rng.choice(["a", "é", "スレ"]), rng.choice(["", "sub:1", "ノード:2"])
            checkpoint_id, parent = f"{rng.randrange(12):04}", rng.choice([None, *(f"{n:04}" for n in range(12))])
            roll = rng.random()
            try:
                if roll < 0.6:
                    space = store.threads.get(thread) and store.threads[thread].namespaces.get(namespace)
                    if space and space.records and rng.random() < 0.4:  # equal versions, other objects
                        source = rng.choice(list(space.records.values()))
                        half = len(source.versions) // 2
                        versions = {  # as a graph reads them back: new objects
                            channel: "".join(["", version]) if type(version) is str else type(version)(str(version))
                            for channel, version in zip(source.versions[:half], source.versions[half:], strict=True)
                        }
                        parent = source.checkpoint_id
                        copied += 1
                    else:
                        versions = {
                            channel: rng.choice([rng.choice(shared), str(rng.random()), rng.randrange(250, 300)])
                            for channel in rng.sample(["x", "y", "z", "ç"], rng.randint(0, 4))
                        }
                    blobs = {
                        (channel, version): None if rng.random() < 0.2 else ("json", b"v" * rng.randrange(40))
                        for channel, version in versions.items()
                        if rng.random() < 0.6
                    }
                    record = CheckpointRecord.of(
                        checkpoint_id,
                        parent,
                        ("json", b"c"),
                        ("json", b"m"),
                        versions,
                        run_id=rng.choice([None, "r", "rü"]),
                    )
                    store.put_checkpoint(thread, namespace, record, blobs)
                elif roll < 0.8:
                    writes = [
                        WriteRecord.of(rng.choice(["task", "tâche"]), rng.choice([0, 1, -1, 300]), "x", ("json", b"w"))
                        for _ in range(rng.randint(1, 3))
                    ]
                    store.put_writes(thread, namespace, checkpoint_id, writes)
                elif roll < 0.87:
                    store.delete_runs([rng.choice(["r", "rü"])])
                elif roll < 0.93:
                    store.prune([thread], keep_last=rng.choice([1, 1, 2]))
                else:
                    exported = store.export_thread(thread)
                    if exported is not None:
                        store.import_thread(exported, rng.choice(["a", "é", "スレ"]))
            except (ValueError, CheckpointCapacityError):
                pass
            store.check()
    assert copied > 100, "no checkpoint held copies of its parent's versions"


# --- the limit behaves as max_total_bytes does ---------------------------------------------------------------


def memory_saver(limit: float, **others: Any) -> BoundedInMemorySaver:
    return BoundedInMemorySaver(config=InMemoryCheckpointConfig(max_memory_bytes=limit, **others), clock=FakeClock())


def test_the_estimate_counts_every_kind_of_object() -> None:
    saver = memory_saver(math.inf)
    empty = saver.stats().memory_bytes
    assert empty == 0
    stored = put(saver, "t", {"a": "x" * 100}, version="1.0")
    one = saver.stats()
    assert one.memory_bytes > one.total_bytes + memory.THREAD + memory.NAMESPACE + memory.CHECKPOINT
    saver.put_writes(stored, [("a", "y")], "task-1")
    two = saver.stats()
    assert two.memory_bytes - one.memory_bytes > memory.WRITE + memory.WRITE_SET
    saver.delete_thread("t")
    assert saver.stats().memory_bytes == 0
    saver.check()


def test_max_memory_bytes_evicts_least_recently_used_threads_whole() -> None:
    probe = memory_saver(math.inf)
    put(probe, "probe", {"a": "x" * 2_000})
    one_thread = probe.stats().memory_bytes
    saver = memory_saver(3 * one_thread + one_thread // 2)
    for name in ("a", "b", "c"):
        put(saver, name, {"a": "x" * 2_000})
    assert saver.stats().evicted_threads == 0
    put(saver, "d", {"a": "x" * 2_000})
    stats = saver.stats()
    assert saver.store.thread_ids() == ["b", "c", "d"]
    assert (stats.evicted_for_memory, stats.evicted_threads) == (1, 1)
    assert stats.memory_bytes <= 3 * one_thread + one_thread // 2
    saver.check()


def test_a_write_that_cannot_fit_the_memory_limit_is_rejected_and_changes_nothing() -> None:
    saver = memory_saver(64 * KIB)
    put(saver, "small", {"a": "x" * 100})
    before = fingerprint(saver.store)
    with pytest.raises(CheckpointCapacityError) as info:
        put(saver, "huge", {"a": "x" * (100 * KIB)})
    error = info.value
    assert (error.limit, error.limit_value) == ("max_memory_bytes", 64 * KIB) and error.needed > 100 * KIB
    assert fingerprint(saver.store) == before
    assert saver.stats().rejections == {"max_memory_bytes": 1}


@pytest.mark.parametrize("value", [0, -1, True, 2.5, math.nan, "1 GiB"])
def test_max_memory_bytes_is_validated_like_every_limit(value: object) -> None:
    with pytest.raises(ValueError, match="max_memory_bytes"):
        InMemoryCheckpointConfig(max_memory_bytes=value)  # type: ignore[arg-type]


def test_the_default_leaves_memory_unbounded_and_the_reference_table_exact() -> None:
    defaults = InMemoryCheckpointConfig()
    assert defaults.max_memory_bytes == math.inf and defaults.max_total_bytes == 64 * MIB
    assert InMemoryCheckpointConfig(max_memory_bytes=512 * MIB).max_memory_bytes == 512 * MIB


def test_memory_bytes_follows_rolling_history_and_deletions() -> None:
    saver = memory_saver(math.inf, max_checkpoints_per_thread=10, on_checkpoint_limit="prune_oldest")
    parent = None
    for step in range(40):
        parent = put(saver, "rolling", {"a": "x" * 50, "n": step}, parent=parent, version=f"{step}.0")
        saver.put_writes(parent, [("a", "w" * 10)], f"task-{step}")
        saver.check()  # the kept estimate equals a recount after every prune
    saver.prune(["rolling"])
    saver.check()
    config_ = config("rolling")
    assert saver.get_tuple(config_) is not None
    saver.delete_thread("rolling")
    assert saver.stats().memory_bytes == 0


def test_a_run_new_to_a_thread_is_counted_before_the_write_is_admitted() -> None:
    """LangGraph gives every run a new id: the run index grows with each, within max_memory_bytes."""
    saver = memory_saver(64 * KIB)
    for index in range(400):
        configured = {"configurable": {"thread_id": f"thread-{index}"}, "metadata": {"run_id": str(uuid.uuid4())}}
        checkpoint = make_checkpoint({"messages": ["hello"] * 5})
        saver.put(configured, checkpoint, {"source": "loop", "step": 0}, dict(checkpoint["channel_versions"]))
        assert saver.stats().memory_bytes <= 64 * KIB
    assert saver.stats().evicted_for_memory > 0
    saver.check()


def test_tombstones_keep_a_sixteenth_of_the_memory_limit_and_never_crowd_out_threads() -> None:
    saver = memory_saver(256 * KIB)
    live: list[int] = []
    for index in range(1_500):
        put(saver, f"thread-{index}", {"messages": ["hello"] * 5})
        if index >= 500:
            live.append(saver.stats().threads)
    assert saver.store.remembered_bytes() <= 256 * KIB / 16
    assert min(live) == max(live) > 100, "threads were crowded out"
    saver.check()
