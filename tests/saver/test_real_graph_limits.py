"""Real compiled graphs under the reference limits: subgraphs, map-reduce and long conversations.

Every subgraph call checkpoints under a namespace of its own, so a thread gains
a namespace per call; ``on_namespace_limit="prune_oldest"`` removes the oldest
completed ones, as ``on_checkpoint_limit="prune_oldest"`` rolls checkpoints.
Each test runs the same graph on the stock saver and compares what a user sees.
"""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.memory import InMemorySaver as StockSaver
from langgraph.graph import START, StateGraph
from langgraph.types import Command, Send, interrupt

from langgraph.checkpoint.bounded import BoundedInMemorySaver, CheckpointCapacityError, InMemoryCheckpointConfig
from tests.support.graphs import Runner, describe, extend, linear, thread
from tests.support.helpers import fingerprint

ROLLING = {"on_namespace_limit": "prune_oldest", "on_checkpoint_limit": "prune_oldest"}
SYNC_AND_ASYNC = pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])


def saver(**limits: Any) -> BoundedInMemorySaver:
    return BoundedInMemorySaver(config=InMemoryCheckpointConfig(**limits))


# --- graphs ---------------------------------------------------------------------------------------------


class Turn(TypedDict, total=False):
    turns: int
    last: str


def subgraph_node(checkpointer: Any) -> Any:
    """START -> think (a compiled subgraph: one namespace per call)."""
    inner = linear(
        Turn,
        {
            "draft": lambda state: {"last": f"draft {state.get('turns', 0)}"},
            "polish": lambda state: {"last": state["last"] + " polished", "turns": state.get("turns", 0) + 1},
        },
    )
    outer = linear(Turn, {"think": inner.compile()})
    return outer.compile(checkpointer=checkpointer)


def nested_subgraphs(checkpointer: Any) -> Any:
    """START -> middle (a subgraph) -> inner (a subgraph of the subgraph)."""
    innermost = linear(Turn, {"count": lambda state: {"turns": state.get("turns", 0) + 1}})
    middle = linear(Turn, {"inner": innermost.compile(), "note": lambda state: {"last": f"turn {state['turns']}"}})
    outer = linear(Turn, {"middle": middle.compile()})
    return outer.compile(checkpointer=checkpointer)


class MapReduce(TypedDict, total=False):
    width: int
    results: Annotated[list, operator.add]
    summary: str


class Work(TypedDict, total=False):
    item: int
    results: Annotated[list, operator.add]


def map_reduce(checkpointer: Any) -> Any:
    """plan -> Send one worker subgraph per item -> reduce."""
    worker = linear(Work, {"square": lambda state: {"results": [state["item"] ** 2]}})
    builder = StateGraph(MapReduce)
    builder.add_node("plan", lambda state: {"results": []})
    builder.add_node("worker", worker.compile())
    builder.add_node("reduce", lambda state: {"summary": f"{len(state['results'])} results"})
    builder.add_edge(START, "plan")
    builder.add_conditional_edges(
        "plan", lambda state: [Send("worker", {"item": i}) for i in range(state["width"])], ["worker"]
    )
    builder.add_edge("worker", "reduce")
    return builder.compile(checkpointer=checkpointer)


def asking_subgraph(checkpointer: Any) -> Any:
    """START -> ask, a subgraph whose node interrupts for an answer."""
    inner = linear(Turn, {"question": lambda state: {"last": f"answer: {interrupt('why?')}"}})
    outer = linear(Turn, {"ask": inner.compile(), "count": lambda state: {"turns": state.get("turns", 0) + 1}})
    return outer.compile(checkpointer=checkpointer)


class DeltaTurn(TypedDict, total=False):
    items: Annotated[list, DeltaChannel(extend, snapshot_frequency=3)]
    last: str


class Reply(TypedDict, total=False):
    last: str


def delta_with_subgraph(checkpointer: Any) -> Any:
    """A root DeltaChannel conversation whose reply comes from a subgraph (which sees only ``last``)."""
    inner = linear(Reply, {"reply": lambda state: {"last": "reply"}})
    outer = linear(
        DeltaTurn,
        {"think": inner.compile(), "record": lambda state: {"items": [f"{state['last']} {len(state['items'])}"]}},
    )
    return outer.compile(checkpointer=checkpointer)


async def turns(runner: Runner, name: str, count: int, value: Any) -> list[Any]:
    return [await runner.invoke(value, thread(name)) for _ in range(count)]


def both(graph: Any, checkpointer: BoundedInMemorySaver, use_async: bool) -> tuple[Runner, Runner]:
    return Runner(graph(checkpointer), use_async, "sync"), Runner(graph(StockSaver()), use_async, "sync")


# --- subgraph calls ------------------------------------------------------------------------------------------


@SYNC_AND_ASYNC
def test_a_subgraph_node_runs_for_a_hundred_turns(use_async: bool) -> None:
    ours = saver(**ROLLING)
    runner, stock = both(subgraph_node, ours, use_async)

    async def scenario(r: Runner) -> Any:
        results = await turns(r, "t", 100, {"turns": 0})
        return results, await r.state(thread("t")), await r.state(thread("t"), subgraphs=True)

    assert asyncio.run(scenario(runner)) == asyncio.run(scenario(stock))
    stats = ours.stats()
    assert stats.namespaces <= 16 and stats.pruned_namespaces == 100 - 15
    ours.check()


@SYNC_AND_ASYNC
def test_without_the_policy_the_seventeenth_namespace_is_refused_saying_what_to_do(use_async: bool) -> None:
    ours = saver()
    runner = Runner(subgraph_node(ours), use_async, "sync")
    asyncio.run(turns(runner, "t", 15, {"turns": 0}))  # the root namespace and 15 subgraph calls
    with pytest.raises(CheckpointCapacityError) as info:
        asyncio.run(runner.invoke({"turns": 0}, thread("t")))
    message = str(info.value)
    assert info.value.limit == "max_namespaces_per_thread"
    assert "subgraph calls" in message and "holds 16 namespaces" in message
    assert 'on_namespace_limit="prune_oldest"' in message and "raise max_namespaces_per_thread" in message


@SYNC_AND_ASYNC
def test_nested_subgraphs(use_async: bool) -> None:
    ours = saver(**ROLLING, max_namespaces_per_thread=5)
    runner, stock = both(nested_subgraphs, ours, use_async)

    async def scenario(r: Runner) -> Any:
        return await turns(r, "nested", 30, {"turns": 0}), await r.state(thread("nested"), subgraphs=True)

    assert asyncio.run(scenario(runner)) == asyncio.run(scenario(stock))
    assert ours.stats().namespaces <= 5 and ours.stats().pruned_namespaces > 0
    ours.check()


# --- map-reduce ------------------------------------------------------------------------------------------------


@SYNC_AND_ASYNC
def test_a_fan_out_under_the_limit_rolls_turn_after_turn(use_async: bool) -> None:
    ours = saver(**ROLLING)
    runner, stock = both(map_reduce, ours, use_async)

    async def scenario(r: Runner) -> Any:
        return await turns(r, "map", 12, {"width": 6}), await r.history(thread("map"))

    assert asyncio.run(scenario(runner)) == asyncio.run(scenario(stock))
    assert ours.stats().namespaces <= 16 and ours.stats().pruned_namespaces > 0
    ours.check()


class Watched(BoundedInMemorySaver):
    """Proves that every rejected put or put_writes changed nothing: each call runs under the store's
    lock (so concurrent workers cannot interleave) between two fingerprints. The async methods
    run the sync bodies (``_put``, ``_put_writes``), so both paths are watched."""

    rejected_unchanged: list[bool]

    def watched(self, call: Any, *args: Any) -> Any:
        with self.store.lock:
            before = fingerprint(self.store)
            try:
                return call(*args)
            except CheckpointCapacityError:
                self.rejected_unchanged.append(fingerprint(self.store) == before)
                raise

    def put(self, *args: Any) -> Any:
        return self.watched(super().put, *args)

    def put_writes(self, *args: Any) -> Any:
        return self.watched(super().put_writes, *args)

    def _put(self, *args: Any) -> Any:
        return self.watched(super()._put, *args)

    def _put_writes(self, *args: Any) -> Any:
        return self.watched(super()._put_writes, *args)


@SYNC_AND_ASYNC
def test_a_fan_out_wider_than_the_limit_is_refused_clearly_and_changes_nothing(use_async: bool) -> None:
    ours = Watched(config=InMemoryCheckpointConfig(**ROLLING))
    ours.rejected_unchanged = []
    runner = Runner(map_reduce(ours), use_async, "sync")
    asyncio.run(runner.invoke({"width": 3}, thread("wide")))
    with pytest.raises(CheckpointCapacityError) as info:
        asyncio.run(runner.invoke({"width": 20}, thread("wide")))  # 20 live subgraphs at once
    message = str(info.value)
    assert info.value.limit == "max_namespaces_per_thread"
    assert "None of them is complete" in message and "raise max_namespaces_per_thread" in message.lower()
    assert ours.rejected_unchanged and all(ours.rejected_unchanged), "a rejected call changed the store"
    ours.check()


# --- interrupts, time travel and DeltaChannel across pruning --------------------------------------------------------


@SYNC_AND_ASYNC
def test_an_interrupt_inside_a_subgraph_resumes_after_pruning(use_async: bool) -> None:
    ours = saver(**ROLLING, max_namespaces_per_thread=3)
    runner, stock = both(asking_subgraph, ours, use_async)

    async def scenario(r: Runner) -> Any:
        trace = []
        for turn in range(6):
            trace.append(await r.invoke({"turns": 0}, thread("asking")))
            trace.append(await r.state(thread("asking"), subgraphs=True))  # the interrupted subgraph shows
            trace.append(await r.invoke(Command(resume=f"because {turn}"), thread("asking")))
        return trace

    assert asyncio.run(scenario(runner)) == asyncio.run(scenario(stock))
    assert ours.stats().pruned_namespaces > 0
    ours.check()


@SYNC_AND_ASYNC
def test_time_travel_on_the_root_after_pruning(use_async: bool) -> None:
    ours = saver(**ROLLING, max_namespaces_per_thread=4)
    runner, stock = both(subgraph_node, ours, use_async)

    async def scenario(r: Runner) -> Any:
        await turns(r, "travel", 10, {"turns": 0})
        history = await r.raw_history(thread("travel"))
        old = history[len(history) // 2]  # a root checkpoint whose subgraph namespace is gone
        replayed = await r.invoke(None, old.config)
        forked = await r.update(old.config, {"last": "forked"})
        return [describe(s) for s in history], replayed, await r.invoke(None, forked), await r.state(thread("travel"))

    assert asyncio.run(scenario(runner)) == asyncio.run(scenario(stock))
    assert ours.stats().pruned_namespaces > 0
    ours.check()


@SYNC_AND_ASYNC
def test_delta_channel_state_across_pruning(use_async: bool) -> None:
    ours = saver(**ROLLING, max_namespaces_per_thread=3, max_checkpoints_per_thread=30)
    runner, stock = both(delta_with_subgraph, ours, use_async)

    async def scenario(r: Runner) -> Any:
        await turns(r, "delta", 25, {"items": ["user"]})
        return await r.state(thread("delta"))

    assert asyncio.run(scenario(runner)) == asyncio.run(scenario(stock))
    stats = ours.stats()
    assert stats.pruned_namespaces > 0 and stats.pruned_checkpoints > 0
    ours.check()


# --- both policies over a long conversation ---------------------------------------------------------------------


def long_conversation(count: int) -> None:
    ours = saver(**ROLLING)
    runner, stock = both(subgraph_node, ours, use_async=False)
    saturated: list[int] = []

    async def scenario(r: Runner, watch: bool) -> Any:
        for turn in range(count):
            await r.invoke({"turns": 0}, thread("long"))
            if watch and turn >= count // 2:
                stats = ours.stats()
                assert stats.checkpoints <= 1_000 and stats.namespaces <= 16
                saturated.append(stats.total_bytes)
        return await r.state(thread("long"))

    assert asyncio.run(scenario(runner, watch=True)) == asyncio.run(scenario(stock, watch=False))
    assert max(saturated) <= 1.15 * min(saturated), "bytes kept growing"
    stats = ours.stats()
    assert stats.pruned_checkpoints > 0 and stats.pruned_namespaces == count - 15
    ours.check()


def test_both_policies_keep_a_long_conversation_flat() -> None:
    long_conversation(600)


@pytest.mark.slow
def test_both_policies_keep_five_thousand_turns_flat() -> None:
    long_conversation(5_000)
