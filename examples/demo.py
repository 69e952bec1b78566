"""A real compiled LangGraph graph over many threads, under tight limits.

Run with ``make demo``. It shows, for real: least-recently-used eviction (for
the thread cap and for the byte cap), idle expiry, and an oversize checkpoint
rejected without changing anything; then the same workload on LangGraph's stock
``InMemorySaver``, which keeps everything.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver as StockSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from langgraph.checkpoint.bounded import (
    BoundedInMemorySaver,
    CheckpointCapacityError,
    InMemoryCheckpointConfig,
    StoreStats,
)
from langgraph.checkpoint.bounded.engine import KIB

THREADS = 300
TURNS = 4


class Chat(TypedDict, total=False):
    messages: Annotated[list[str], operator.add]
    turns: int


def reply(state: Chat) -> Chat:
    last = state.get("messages", [""])[-1]
    return {"messages": [f"echo: {last[:40]}"], "turns": state.get("turns", 0) + 1}


def summarize(state: Chat) -> Chat:
    return {"messages": [f"summary after {state.get('turns', 0)} turns"]}


def route(state: Chat) -> str:
    return "summarize" if state.get("turns", 0) % 3 == 0 else END


def build(checkpointer: BaseCheckpointSaver[Any]) -> CompiledStateGraph[Chat, Any, Chat, Chat]:
    builder = StateGraph(Chat)
    builder.add_node("reply", reply)
    builder.add_node("summarize", summarize)
    builder.add_edge(START, "reply")
    builder.add_conditional_edges("reply", route, ["summarize", END])
    builder.add_edge("summarize", END)
    return builder.compile(checkpointer=checkpointer)


class ManualClock:
    """Seconds that pass only when the demo says so, so expiry is shown without waiting."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def run_workload(app: CompiledStateGraph[Chat, Any, Chat, Chat], clock: ManualClock | None = None) -> None:
    """One conversation of TURNS turns per user, users arriving one after another."""
    for index in range(THREADS):
        for turn in range(TURNS):
            # most users chat briefly; every 100th pastes a long document
            filler = "lorem ipsum " * (600 if index % 100 == 50 else 3)
            message = f"user {index} turn {turn} {filler}"
            app.invoke({"messages": [message]}, {"configurable": {"thread_id": f"user-{index}"}})
            if clock is not None:
                clock.now += 0.01


def show(title: str, stats: StoreStats) -> None:
    print(f"\n{title}")
    for name, value in vars(stats).items():
        if isinstance(value, dict):
            shown = str(dict(value))
        elif isinstance(value, (int, float)):
            shown = f"{value:,}"
        else:
            shown = str(value)
        print(f"  {name:<22} {shown}")


def main() -> None:
    clock = ManualClock()
    config = InMemoryCheckpointConfig(
        max_threads=25,
        max_total_bytes=384 * KIB,
        max_checkpoint_bytes=64 * KIB,
        idle_ttl_seconds=60,
    )
    saver = BoundedInMemorySaver(config=config, clock=clock)
    app = build(saver)
    print(
        f"{THREADS} threads x {TURNS} turns through a compiled graph, with max_threads={config.max_threads}, "
        f"max_total_bytes={config.max_total_bytes:,}, max_checkpoint_bytes={config.max_checkpoint_bytes:,}, "
        f"idle_ttl_seconds={config.idle_ttl_seconds}"
    )
    run_workload(app, clock)
    show("After the workload: old threads were evicted whole, least recently used first", saver.stats())

    survivor = saver.store.thread_ids()[-1]
    survivor_config: RunnableConfig = {"configurable": {"thread_id": survivor}}
    before = app.get_state(survivor_config).values
    try:
        app.invoke({"messages": ["x" * 100_000]}, survivor_config)
    except CheckpointCapacityError as error:
        print(f"\nAn oversize message on {survivor!r} was rejected:\n  {error}")
        print(f"  limit={error.limit} limit_value={error.limit_value:,} needed={error.needed:,}")
    assert app.get_state(survivor_config).values == before, "the rejected run changed the thread"
    print(f"  {survivor!r} still holds its last good state ({len(before['messages'])} messages, all {TURNS} turns).")

    app.invoke({"messages": ["still here"]}, {"configurable": {"thread_id": "active"}})
    clock.now += 61
    app.invoke({"messages": ["one more"]}, {"configurable": {"thread_id": "active"}})
    show("A minute later: every idle thread expired on the next operation", saver.stats())
    saver.check()

    stock = StockSaver()
    run_workload(build(stock))
    checkpoints = sum(len(ns) for thread in stock.storage.values() for ns in thread.values())
    stored = sum(len(c[1]) + len(m[1]) for t in stock.storage.values() for ns in t.values() for c, m, _ in ns.values())
    stored += sum(len(b[1]) for b in stock.blobs.values())
    stored += sum(len(w[2][1]) for ws in stock.writes.values() for w in ws.values())
    print(
        f"\nThe same workload on the stock InMemorySaver keeps all {len(stock.storage)} threads, "
        f"{checkpoints:,} checkpoints and {stored:,} serialized bytes, and would keep growing."
    )


if __name__ == "__main__":
    main()
