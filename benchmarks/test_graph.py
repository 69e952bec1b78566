"""A real compiled graph: a message list with a reducer and a conditional edge."""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from workload import IN_MEMORY, SAVERS, message_list

CONCURRENT_RUNS = 20


class Chat(TypedDict, total=False):
    messages: Annotated[list, operator.add]
    calls: int


MESSAGES_PER_TURN = 7  # the user's, three from the agent's first call, the tool's, two from its answer


def build(checkpointer):
    """A tool-calling chat whose message list grows by seven messages a turn: agent -> tools -> agent."""
    import random

    rng = random.Random(3)

    def agent(state: Chat) -> dict:
        calls = state.get("calls", 0) + 1
        if calls % 2:  # thinks, then asks for a tool
            replies = [*message_list(600, rng)[:2], {"role": "assistant", "content": "", "tool_call": "search"}]
            return {"messages": replies[:3], "calls": calls}
        return {"messages": message_list(400, rng)[:2], "calls": calls}

    def tools(state: Chat) -> dict:
        return {"messages": [{"role": "tool", "content": "42"}]}

    return compile_chat(checkpointer, agent, tools)


def compile_chat(checkpointer, agent, tools):
    """The chat's edges (agent -> tools while ``calls`` is odd -> agent -> end) over the given nodes, compiled."""
    builder = StateGraph(Chat)
    builder.add_node("agent", agent)
    builder.add_node("tools", tools)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", lambda s: "tools" if s["calls"] % 2 else END, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)


@pytest.mark.parametrize("kind", IN_MEMORY)
def test_invoke(benchmark, kind):
    app = build(SAVERS[kind]())
    benchmark.group = "graph invoke (one turn)"
    benchmark.extra_info["saver"] = kind
    turns = iter(range(10**9))
    benchmark(
        lambda: app.invoke(
            {"messages": [{"role": "user", "content": "hi"}]}, {"configurable": {"thread_id": f"t{next(turns) % 50}"}}
        )
    )


@pytest.mark.parametrize("kind", IN_MEMORY)
def test_concurrent_ainvoke(benchmark, kind):
    app = build(SAVERS[kind]())
    benchmark.group = f"graph ainvoke x{CONCURRENT_RUNS} concurrent"
    benchmark.extra_info["saver"] = kind
    loop = asyncio.new_event_loop()
    rounds = iter(range(10**9))

    def run_batch():
        batch = next(rounds)

        async def main():
            await asyncio.gather(
                *(
                    app.ainvoke(
                        {"messages": [{"role": "user", "content": "hi"}]},
                        {"configurable": {"thread_id": f"a{batch % 5}-{i}"}},
                    )
                    for i in range(CONCURRENT_RUNS)
                )
            )

        loop.run_until_complete(main())

    benchmark.pedantic(run_batch, rounds=15)
    loop.close()
