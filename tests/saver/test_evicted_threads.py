"""A thread evicted or expired while a run still writes to it: the run fails loudly."""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, Any, TypedDict

import pytest

from langgraph.checkpoint.bounded import (
    BoundedInMemorySaver,
    CheckpointCapacityError,
    InMemoryCheckpointConfig,
    ThreadEvictedError,
)
from tests.conftest import FakeClock, make_saver
from tests.support.graphs import linear
from tests.support.helpers import config, fingerprint, put


def test_a_put_continuing_an_evicted_thread_is_refused_and_changes_nothing(clock: FakeClock) -> None:
    saver = make_saver(clock, max_threads=1)
    first = put(saver, "victim", {"a": 1})
    clock.advance(5)
    put(saver, "intruder", {"a": 1})  # evicts "victim"
    clock.advance(2)
    before = fingerprint(saver.store)
    with pytest.raises(ThreadEvictedError) as info:
        put(saver, "victim", {"a": 2}, parent=first)
    error = info.value
    assert isinstance(error, CheckpointCapacityError)
    assert (error.limit, error.limit_value, error.thread_id) == ("max_threads", 1, "victim")
    assert error.checkpoint_id == first["configurable"]["checkpoint_id"]
    assert error.seconds_ago == 2 and error.needed is None
    assert "evicted" in str(error) and "max_threads" in str(error)
    assert fingerprint(saver.store) == before
    assert saver.stats().dropped_thread_records == 1


def test_writes_to_a_dropped_checkpoint_are_refused_but_a_fresh_run_starts_cleanly(clock: FakeClock) -> None:
    saver = make_saver(clock, max_threads=1)
    first = put(saver, "victim", {"a": 1})
    put(saver, "intruder", {"a": 1})
    with pytest.raises(ThreadEvictedError):
        saver.put_writes(first, [("a", 2)], "task")
    fresh = put(saver, "victim", {"a": "again"})  # no parent: a new run on the same id
    assert saver.stats().dropped_thread_records == 2  # "intruder" now, and "victim"'s previous life still
    with pytest.raises(ThreadEvictedError):
        saver.put_writes(first, [("a", 2)], "task")  # the previous life's late write, after the revival
    saver.put_writes(fresh, [("a", 3)], "task")
    assert saver.get_tuple(config("victim")).pending_writes == [("task", "a", 3)]
    saver.check()


def test_an_expired_thread_says_it_expired(clock: FakeClock) -> None:
    saver = make_saver(clock, idle_ttl_seconds=60)
    first = put(saver, "slow", {"a": 1})
    clock.advance(61)
    with pytest.raises(ThreadEvictedError, match="expired") as info:
        put(saver, "slow", {"a": 2}, parent=first)
    assert info.value.limit == "idle_ttl_seconds"


def test_records_are_bounded_in_count_and_accounted(clock: FakeClock) -> None:
    saver = make_saver(clock, max_threads=1, max_dropped_thread_records=3)
    for index in range(10):
        put(saver, f"thread-{index}", {"a": index})
    stats = saver.stats()
    assert stats.evicted_threads == 9 and stats.dropped_thread_records == 3
    assert stats.dropped_thread_record_bytes == sum(len(f"thread-{i}") + 36 for i in (6, 7, 8))  # uuid6 ids
    saver.delete_thread("thread-8")
    assert saver.stats().dropped_thread_records == 2
    saver.check()


# --- real graphs whose own work drops their thread -----------------------------------------------


class Log(TypedDict, total=False):
    log: Annotated[list, operator.add]


def self_evicting_graph(saver: BoundedInMemorySaver, clock: FakeClock, how: str) -> Any:
    """first -> trouble -> last, where "trouble" makes the store drop the running thread."""

    def trouble(state: Log) -> dict:
        if how == "expire":
            clock.advance(3_600)
            saver.get_tuple(config("someone-else"))  # any operation carries out the expiry
        else:
            put(saver, f"newcomer-{len(state['log'])}", {"x": 1})  # max_threads=1: evicts the running thread
        return {"log": ["trouble"]}

    builder = linear(
        Log, {"first": lambda state: {"log": ["first"]}, "trouble": trouble, "last": lambda state: {"log": ["last"]}}
    )
    return builder.compile(checkpointer=saver)


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("how", ["evict", "expire"])
def test_a_run_whose_thread_is_dropped_fails_loudly(how: str, use_async: bool, durability: str) -> None:
    clock = FakeClock()
    saver = BoundedInMemorySaver(config=InMemoryCheckpointConfig(max_threads=1, idle_ttl_seconds=600), clock=clock)
    app = self_evicting_graph(saver, clock, how)
    run_config = {"configurable": {"thread_id": "running"}}
    if durability == "exit":
        # With exit durability a run writes once, at its end, from the thread's
        # previous checkpoint; so the thread needs one for a drop to break it (a
        # fresh thread's single checkpoint is whole whatever happens meanwhile).
        one_node_graph("earlier run", saver).invoke({"log": []}, run_config)
    with pytest.raises(ThreadEvictedError) as info:
        if use_async:
            asyncio.run(app.ainvoke({"log": ["in"]}, run_config, durability=durability))
        else:
            app.invoke({"log": ["in"]}, run_config, durability=durability)
    assert info.value.thread_id == "running"
    state = app.get_state(run_config)
    assert state.values == {}, f"a partial state was persisted: {state.values}"
    saver.check()
    # a new run on the same thread starts afresh and completes
    clock.advance(1)
    assert one_node_graph("fresh", saver).invoke({"log": []}, run_config) == {"log": ["fresh"]}


def one_node_graph(entry: str, saver: BoundedInMemorySaver) -> Any:
    builder = linear(Log, {"only": lambda state: {"log": [entry]}})
    return builder.compile(checkpointer=saver)
