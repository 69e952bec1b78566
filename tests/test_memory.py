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
import tracemalloc
import uuid
from collections.abc import Callable
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.graph import START, StateGraph
from langgraph.types import Send

from langgraph.checkpoint.bounded import BoundedInMemorySaver, CheckpointCapacityError, InMemoryCheckpointConfig
from langgraph.checkpoint.bounded.engine import KIB, MIB, StoreLimits, memory
from tests.conftest import FakeClock
from tests.helpers import config, fingerprint, make_checkpoint, put

UNBOUNDED = {**vars(StoreLimits.unbounded()), "max_dropped_thread_records": 1_000}  # tombstones: the default
TOLERANCE = 0.15  # the estimate is within 15% of the traced heap

# --- graphs -----------------------------------------------------------------------------------------


class Counter(TypedDict, total=False):
    n: int
    note: str


def tiny(saver: BoundedInMemorySaver) -> Any:
    """Two nodes, two small channels: overhead dominates its checkpoints."""
    builder = StateGraph(Counter)
    builder.add_node("count", lambda state: {"n": state.get("n", 0) + 1})
    builder.add_node("note", lambda state: {"note": "ok"})
    builder.add_edge(START, "count")
    builder.add_edge("count", "note")
    return builder.compile(checkpointer=saver)


class Chat(TypedDict, total=False):
    messages: Annotated[list, operator.add]


def chat(saver: BoundedInMemorySaver, size: int) -> Any:
    """One node that appends a message of ``size`` characters."""
    builder = StateGraph(Chat)
    builder.add_node("reply", lambda state: {"messages": [{"role": "assistant", "content": "x" * size}]})
    builder.add_edge(START, "reply")
    return builder.compile(checkpointer=saver)


def with_subgraph(saver: BoundedInMemorySaver) -> Any:
    """A node that calls a compiled subgraph: a new namespace per call."""
    inner = StateGraph(Counter)
    inner.add_node("step", lambda state: {"n": state.get("n", 0) + 1})
    inner.add_edge(START, "step")
    outer = StateGraph(Counter)
    outer.add_node("call", inner.compile())
    outer.add_edge(START, "call")
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
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for run in range(runs):
            app.invoke(inputs, {"configurable": {"thread_id": thread_of(run)}})
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
