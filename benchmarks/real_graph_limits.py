"""How many turns each shape of graph gets on one thread before a limit stops it.

For plain chat, a tool loop, a subgraph node, nested subgraphs and map-reduce
over N subgraphs, runs turn after turn on one thread until a write is refused,
under the reference defaults and under both rolling policies
(``on_checkpoint_limit`` and ``on_namespace_limit`` set to ``"prune_oldest"``),
and prints the README's table ("Limits for real graphs").

Usage: ``python benchmarks/real_graph_limits.py [--turns 2000]`` (about a minute).
"""

from __future__ import annotations

import argparse
import operator
import time
from collections.abc import Callable
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import Send
from workload import require_this_checkout

from langgraph.checkpoint.bounded import BoundedInMemorySaver, CheckpointCapacityError, InMemoryCheckpointConfig

ROLLING = {"on_checkpoint_limit": "prune_oldest", "on_namespace_limit": "prune_oldest"}


class Chat(TypedDict, total=False):
    messages: Annotated[list, operator.add]
    calls: int


def plain_chat(saver: BoundedInMemorySaver) -> Any:
    """START -> reply -> END."""
    builder = StateGraph(Chat)
    builder.add_node("reply", lambda state: {"messages": ["hello"]})
    builder.add_edge(START, "reply")
    return builder.compile(checkpointer=saver)


def tool_loop(saver: BoundedInMemorySaver) -> Any:
    """agent -> tools -> agent -> END: two model calls and one tool call per turn."""

    def agent(state: Chat) -> dict[str, Any]:
        return {"messages": ["thinking"], "calls": state.get("calls", 0) + 1}

    builder = StateGraph(Chat)
    builder.add_node("agent", agent)
    builder.add_node("tools", lambda state: {"messages": ["42"]})
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", lambda state: "tools" if state["calls"] % 2 else END, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=saver)


class Counter(TypedDict, total=False):
    n: int


def subgraph(depth: int) -> Callable[[BoundedInMemorySaver], Any]:
    """A node calling a subgraph, nested ``depth`` deep (1: a plain subgraph node)."""

    def build(saver: BoundedInMemorySaver) -> Any:
        builder = StateGraph(Counter)
        builder.add_node("step", lambda state: {"n": state.get("n", 0) + 1})
        builder.add_edge(START, "step")
        for level in range(depth):
            inner = builder.compile()
            builder = StateGraph(Counter)
            builder.add_node(f"call{level}", inner)
            builder.add_edge(START, f"call{level}")
        return builder.compile(checkpointer=saver)

    return build


class MapReduce(TypedDict, total=False):
    results: Annotated[list, operator.add]


class Item(TypedDict, total=False):
    item: int
    results: Annotated[list, operator.add]


def map_reduce(width: int) -> Callable[[BoundedInMemorySaver], Any]:
    """plan -> Send ``width`` worker subgraphs -> reduce."""

    def build(saver: BoundedInMemorySaver) -> Any:
        worker = StateGraph(Item)
        worker.add_node("work", lambda state: {"results": [state["item"]]})
        worker.add_edge(START, "work")
        builder = StateGraph(MapReduce)
        builder.add_node("plan", lambda state: {})
        builder.add_node("worker", worker.compile())
        builder.add_node("reduce", lambda state: {})
        builder.add_edge(START, "plan")
        builder.add_conditional_edges(
            "plan", lambda state: [Send("worker", {"item": i}) for i in range(width)], ["worker"]
        )
        builder.add_edge("worker", "reduce")
        return builder.compile(checkpointer=saver)

    return build


SHAPES: dict[str, tuple[Callable[[BoundedInMemorySaver], Any], dict[str, Any]]] = {
    "plain chat (one node)": (plain_chat, {"messages": ["hi"]}),
    "tool loop (agent, tools, agent)": (tool_loop, {"messages": ["hi"]}),
    "subgraph node": (subgraph(1), {"n": 0}),
    "nested subgraphs (3 deep)": (subgraph(3), {"n": 0}),
    "map-reduce of 5 subgraphs": (map_reduce(5), {"results": []}),
    "map-reduce of 20 subgraphs": (map_reduce(20), {"results": []}),
}


def turns_until_refused(build: Callable[..., Any], inputs: dict[str, Any], limits: dict[str, Any], cap: int) -> str:
    """How many turns one thread took before a write was refused, and by which limit."""
    saver = BoundedInMemorySaver(config=InMemoryCheckpointConfig(**limits))
    app = build(saver)
    for turn in range(cap):
        try:
            app.invoke(inputs, {"configurable": {"thread_id": "t"}})
        except CheckpointCapacityError as error:
            return f"{turn:,} ({error.limit})"
    stats = saver.stats()
    return f"none in {cap:,} (holds {stats.checkpoints:,} checkpoints, {stats.namespaces} namespaces)"


def main() -> None:
    require_this_checkout()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=2_000, help="turns tried per thread")
    options = parser.parse_args()
    start = time.perf_counter()
    print("| graph shape | turns before a refusal: reference defaults | with both rolling policies |")
    print("| --- | --- | --- |")
    for name, (build, inputs) in SHAPES.items():
        reference = turns_until_refused(build, inputs, {}, options.turns)
        rolling = turns_until_refused(build, inputs, ROLLING, options.turns)
        print(f"| {name} | {reference} | {rolling} |", flush=True)
    print(f"\n(measured in {time.perf_counter() - start:.0f} s with `python benchmarks/real_graph_limits.py`)")


if __name__ == "__main__":
    main()
