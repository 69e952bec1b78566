"""Real LangGraph graphs and scenarios, run identically on two checkpointers.

A scenario is an async function of a ``Runner`` that returns a trace: results,
states and histories with the run-specific ids (checkpoint ids, versions, task
ids) left out, so that traces from two savers can be compared with ``==``.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, RetryPolicy, Send, StateSnapshot, interrupt

# --- describing what a graph persisted ----------------------------------------------------------


def describe(snapshot: StateSnapshot) -> dict[str, Any]:
    """A snapshot without its ids: what a user sees of a state."""
    metadata = snapshot.metadata or {}
    return {
        "values": snapshot.values,
        "next": snapshot.next,
        "source": metadata.get("source"),
        "step": metadata.get("step"),
        "has_parent": snapshot.parent_config is not None,
        "interrupts": sorted(repr(i.value) for i in snapshot.interrupts),
        "tasks": sorted(
            (
                task.name,
                repr([i.value for i in task.interrupts]),
                task.error is not None,
                repr(describe(task.state)) if isinstance(task.state, StateSnapshot) else None,
            )
            for task in snapshot.tasks
        ),
    }


def without_interrupt_ids(result: Any) -> Any:
    """An invoke result with each ``Interrupt`` replaced by its value (ids differ per run)."""
    if isinstance(result, dict) and "__interrupt__" in result:
        return {**result, "__interrupt__": [i.value for i in result["__interrupt__"]]}
    return result


@dataclass
class Runner:
    """Runs a compiled graph through the sync or the async API, with one durability."""

    app: Any
    use_async: bool
    durability: str
    calls: dict[str, int] = field(default_factory=dict)

    async def invoke(self, value: Any, config: RunnableConfig) -> Any:
        if self.use_async:
            result = await self.app.ainvoke(value, config, durability=self.durability)
        else:
            result = self.app.invoke(value, config, durability=self.durability)
        return without_interrupt_ids(result)

    async def state(self, config: RunnableConfig, subgraphs: bool = False) -> dict[str, Any]:
        if self.use_async:
            return describe(await self.app.aget_state(config, subgraphs=subgraphs))
        return describe(self.app.get_state(config, subgraphs=subgraphs))

    async def raw_history(self, config: RunnableConfig) -> list[StateSnapshot]:
        if self.use_async:
            return [s async for s in self.app.aget_state_history(config)]
        return list(self.app.get_state_history(config))

    async def history(self, config: RunnableConfig) -> list[dict[str, Any]]:
        return [describe(s) for s in await self.raw_history(config)]

    async def update(self, config: RunnableConfig, values: Any, as_node: str | None = None) -> RunnableConfig:
        if self.use_async:
            return await self.app.aupdate_state(config, values, as_node=as_node)
        return self.app.update_state(config, values, as_node=as_node)


Scenario = Callable[[Runner], Awaitable[Any]]
GraphFactory = Callable[[BaseCheckpointSaver, dict[str, int]], Any]


def thread(name: str) -> RunnableConfig:
    return {"configurable": {"thread_id": name}}


def counted(calls: dict[str, int], name: str) -> None:
    calls[name] = calls.get(name, 0) + 1


def appending(calls: dict[str, int], name: str, channel: str, text: str | None = None) -> Callable[[Any], dict]:
    """A node that counts its runs in ``calls`` under ``name`` and appends ``text`` (``name`` if None) to the
    list of ``channel``."""

    def node(state: Any) -> dict:
        counted(calls, name)
        return {channel: [name if text is None else text]}

    return node


# --- graphs ---------------------------------------------------------------------------------------


class ChatState(TypedDict, total=False):
    messages: Annotated[list, operator.add]
    approved: Any
    count: int


def linear(state: Any, nodes: dict[str, Any]) -> StateGraph:
    """A graph builder whose nodes run one after the other, in ``nodes``' order, from START to END."""
    builder = StateGraph(state)
    previous = START
    for name, node in nodes.items():
        builder.add_node(name, node)
        builder.add_edge(previous, name)
        previous = name
    builder.add_edge(previous, END)
    return builder


def wide_writer(checkpointer: BaseCheckpointSaver, every_turn: int) -> Callable[[int], str]:
    """A compiled graph of 500 channels, as a writer of thread ``graph-<index>``'s five turns: the first turn
    writes every channel, later turns ``every_turn`` of them (the memory tests and ``benchmarks/memory_bound.py``).
    """
    names = [f"channel_{number}" for number in range(500)]
    state = TypedDict("Wide", dict.fromkeys(names, int), total=False)  # type: ignore[operator]

    def node(values: dict[str, int]) -> dict[str, int]:
        return {name: values.get(name, 0) + 1 for name in (names[:every_turn] if values else names)}

    app = linear(state, {"write": node}).compile(checkpointer=checkpointer)

    def write(index: int) -> str:
        for _ in range(5):
            app.invoke({}, {"configurable": {"thread_id": f"graph-{index}"}})
        return f"graph-{index}"

    return write


def approval_graph(checkpointer: BaseCheckpointSaver, calls: dict[str, int]) -> Any:
    """draft -> ask (interrupts for approval) -> finish."""

    def draft(state: ChatState) -> dict:
        counted(calls, "draft")
        return {"messages": [f"draft {len(state.get('messages', []))}"], "count": state.get("count", 0) + 1}

    def ask(state: ChatState) -> dict:
        counted(calls, "ask")
        answer = interrupt({"question": "approve?", "draft": state["messages"][-1]})
        return {"approved": answer}

    def finish(state: ChatState) -> dict:
        counted(calls, "finish")
        return {"messages": [f"done: {state['approved']}"]}

    return linear(ChatState, {"draft": draft, "ask": ask, "finish": finish}).compile(checkpointer=checkpointer)


def nested_graph(checkpointer: BaseCheckpointSaver, calls: dict[str, int]) -> Any:
    """A parent whose middle node is a subgraph that itself interrupts."""

    def inner_ask(state: ChatState) -> dict:
        counted(calls, "inner_ask")
        return {"messages": [f"inner answer {interrupt('inner?')}"]}

    sub = linear(ChatState, {"inner_work": appending(calls, "inner_work", "messages", "inner"), "inner_ask": inner_ask})
    before, after = appending(calls, "before", "messages"), appending(calls, "after", "messages")
    return linear(ChatState, {"before": before, "sub": sub.compile(), "after": after}).compile(
        checkpointer=checkpointer
    )


class FanState(TypedDict, total=False):
    topics: list[str]
    results: Annotated[list, operator.add]


def fan_out_graph(checkpointer: BaseCheckpointSaver, calls: dict[str, int]) -> Any:
    """plan -> Send one worker per topic -> merge."""

    def plan(state: FanState) -> dict:
        counted(calls, "plan")
        return {}

    def route(state: FanState) -> list[Send]:
        return [Send("worker", {"topics": [topic]}) for topic in state["topics"]]

    def worker(state: FanState) -> dict:
        counted(calls, "worker")
        return {"results": [state["topics"][0].upper()]}

    def merge(state: FanState) -> dict:
        counted(calls, "merge")
        return {"results": [f"{len(state['results'])} results"]}

    builder = StateGraph(FanState)
    builder.add_node("plan", plan)
    builder.add_node("worker", worker)
    builder.add_node("merge", merge)
    builder.add_edge(START, "plan")
    builder.add_conditional_edges("plan", route, ["worker"])
    builder.add_edge("worker", "merge")
    return builder.compile(checkpointer=checkpointer)


class FlakyState(TypedDict, total=False):
    log: Annotated[list, operator.add]


STEADY_SAVED_TIMEOUT = 30.0  # seconds; only reached if LangGraph never saves steady's writes


def flaky_parallel_graph(checkpointer: BaseCheckpointSaver, calls: dict[str, int], *, retry: bool = False) -> Any:
    """start -> (steady | flaky) in parallel -> join; flaky fails on its first call.

    Without ``retry`` the failure ends the run, and a resume must not run
    steady again: its writes were saved. So that this is deterministic, flaky
    fails only once the checkpointer has received steady's writes (LangGraph
    would otherwise cancel a steady still running). With ``retry``, a retry
    policy re-runs flaky inside the same run.
    """
    steady_saved = threading.Event()
    original_put_writes, original_aput_writes = checkpointer.put_writes, checkpointer.aput_writes

    def note_steady(writes: Any) -> None:
        if any(value == ["steady"] for _, value in writes):
            steady_saved.set()

    def put_writes(config: RunnableConfig, writes: Any, task_id: str, task_path: str = "") -> None:
        original_put_writes(config, writes, task_id, task_path)
        note_steady(writes)

    async def aput_writes(config: RunnableConfig, writes: Any, task_id: str, task_path: str = "") -> None:
        await original_aput_writes(config, writes, task_id, task_path)
        note_steady(writes)

    checkpointer.put_writes = put_writes  # type: ignore[method-assign]
    checkpointer.aput_writes = aput_writes  # type: ignore[method-assign]

    def flaky(state: FlakyState) -> dict:
        counted(calls, "flaky")
        if calls["flaky"] == 1:
            if not retry and not steady_saved.wait(STEADY_SAVED_TIMEOUT):
                raise AssertionError("steady's writes never reached the checkpointer")
            raise ConnectionError("transient failure")
        return {"log": ["flaky"]}

    builder = StateGraph(FlakyState)
    builder.add_node("start", appending(calls, "start", "log"))
    builder.add_node("steady", appending(calls, "steady", "log"))
    builder.add_node("flaky", flaky, retry_policy=RetryPolicy(initial_interval=0, jitter=False) if retry else None)
    builder.add_node("join", appending(calls, "join", "log"))
    builder.add_edge(START, "start")
    builder.add_edge("start", "steady")
    builder.add_edge("start", "flaky")
    builder.add_edge(["steady", "flaky"], "join")
    return builder.compile(checkpointer=checkpointer)


def retrying_parallel_graph(checkpointer: BaseCheckpointSaver, calls: dict[str, int]) -> Any:
    return flaky_parallel_graph(checkpointer, calls, retry=True)


def chat_graph(checkpointer: BaseCheckpointSaver, calls: dict[str, int]) -> Any:
    """A chat turn as issue 34 measured it: agent -> tool -> final (a checkpoint after each step)."""

    def step(name: str, say: Callable[[list], str]) -> Callable[[ChatState], dict]:
        def node(state: ChatState) -> dict:
            counted(calls, name)
            return {"messages": [say(state["messages"])]}

        return node

    nodes = {
        "agent": step("agent", lambda messages: f"call a tool for {messages[-1]}"),
        "tool": step("tool", lambda messages: f"tool result {len(messages)}"),
        "final": step("final", lambda messages: f"answer {len(messages)}"),
    }
    return linear(ChatState, nodes).compile(checkpointer=checkpointer)


def extend(state: list, batches: list) -> list:
    """A batching-invariant reducer for DeltaChannel."""
    result = list(state)
    for batch in batches:
        result.extend(batch)
    return result


class DeltaState(TypedDict, total=False):
    items: Annotated[list, DeltaChannel(extend, snapshot_frequency=3)]
    turns: int


def delta_graph(checkpointer: BaseCheckpointSaver, calls: dict[str, int]) -> Any:
    """A conversation whose history key is a DeltaChannel snapshotting every 3 updates."""

    def respond(state: DeltaState) -> dict:
        counted(calls, "respond")
        turn = state.get("turns", 0) + 1
        return {"items": [f"reply {turn}"], "turns": turn}

    def review(state: DeltaState) -> dict:
        counted(calls, "review")
        return {"items": [f"reviewed {len(state['items'])}"]}

    return linear(DeltaState, {"respond": respond, "review": review}).compile(checkpointer=checkpointer)


# --- scenarios ----------------------------------------------------------------------------------------


async def interrupt_and_resume(r: Runner) -> Any:
    cfg = thread("approval")
    trace: list[Any] = [await r.invoke({"messages": ["hi"]}, cfg), await r.state(cfg)]
    trace.append(await r.invoke(Command(resume="yes"), cfg))
    trace.append(await r.invoke({"messages": ["again"]}, cfg))
    trace.append(await r.invoke(Command(resume={"ok": 2}), cfg))
    trace += [await r.state(cfg), await r.history(cfg), dict(r.calls)]
    return trace


async def subgraph_interrupts(r: Runner) -> Any:
    cfg = thread("nested")
    trace: list[Any] = [await r.invoke({"messages": ["go"]}, cfg), await r.state(cfg, subgraphs=True)]
    trace.append(await r.invoke(Command(resume="inside"), cfg))
    trace.append(await r.invoke({"messages": ["twice"]}, cfg))
    trace.append(await r.invoke(Command(resume="again"), cfg))
    trace += [await r.state(cfg, subgraphs=True), await r.history(cfg), dict(r.calls)]
    return trace


async def update_state_and_continue(r: Runner) -> Any:
    cfg = thread("updates")
    trace: list[Any] = [await r.invoke({"messages": ["hi"]}, cfg)]
    await r.update(cfg, {"messages": ["edited by a human"]}, as_node="draft")
    trace.append(await r.state(cfg))
    trace.append(await r.invoke(Command(resume="after edit"), cfg))
    await r.update(cfg, {"count": 100})
    trace += [await r.state(cfg), await r.history(cfg), dict(r.calls)]
    return trace


async def replay_and_fork(r: Runner) -> Any:
    cfg = thread("travel")
    await r.invoke({"messages": ["one"]}, cfg)
    await r.invoke(Command(resume="first"), cfg)
    await r.invoke({"messages": ["two"]}, cfg)
    await r.invoke(Command(resume="second"), cfg)
    snapshots = await r.raw_history(cfg)
    # replay from the checkpoint before "ask" of the first run
    before_ask = next(s for s in reversed(snapshots) if s.next == ("ask",))
    trace: list[Any] = [await r.invoke(None, before_ask.config), await r.state(cfg)]
    trace.append(await r.invoke(Command(resume="replayed"), cfg))
    # fork: change an old state and continue from there
    forked = await r.update(before_ask.config, {"messages": ["forked"]})
    trace.append(await r.invoke(Command(resume="on the fork"), forked))
    trace += [await r.state(cfg), await r.history(cfg), dict(r.calls)]
    return trace


async def send_fan_out(r: Runner) -> Any:
    cfg = thread("fan")
    trace = [await r.invoke({"topics": ["a", "b", "c", "d"]}, cfg)]
    trace.append(await r.invoke({"topics": ["e", "f"]}, cfg))
    trace += [await r.state(cfg), await r.history(cfg), dict(r.calls)]
    return trace


async def failing_branch_is_retried(r: Runner) -> Any:
    cfg = thread("flaky")
    trace: list[Any] = []
    try:
        await r.invoke({"log": ["in"]}, cfg)
        trace.append("no error")
    except ConnectionError as error:
        trace.append(f"raised {error}")
    trace.append(await r.state(cfg))
    trace.append(await r.invoke(None, cfg))  # resume: steady's saved writes are not re-run
    trace += [await r.state(cfg), await r.history(cfg), dict(r.calls)]
    return trace


async def branch_is_retried_in_run(r: Runner) -> Any:
    cfg = thread("retrying")
    trace = [await r.invoke({"log": ["in"]}, cfg)]
    trace += [await r.state(cfg), await r.history(cfg), dict(r.calls)]
    return trace


async def delta_channel_conversation(r: Runner) -> Any:
    cfg = thread("delta")
    trace: list[Any] = [await r.invoke({"items": [f"user {turn}"]}, cfg) for turn in range(7)]
    snapshots = await r.raw_history(cfg)
    trace += [await r.state(cfg), [describe(s) for s in snapshots]]
    middle = snapshots[len(snapshots) // 2]
    trace.append(await r.state(middle.config))  # time travel rebuilds from ancestors
    forked = await r.update(middle.config, {"items": ["fork"]})
    trace.append(await r.invoke(None, forked))
    trace += [await r.state(cfg), dict(r.calls)]
    return trace


SCENARIOS: dict[str, tuple[GraphFactory, Scenario]] = {
    "interrupt_and_resume": (approval_graph, interrupt_and_resume),
    "subgraph_interrupts": (nested_graph, subgraph_interrupts),
    "update_state_and_continue": (approval_graph, update_state_and_continue),
    "replay_and_fork": (approval_graph, replay_and_fork),
    "send_fan_out": (fan_out_graph, send_fan_out),
    "failing_branch_is_retried": (flaky_parallel_graph, failing_branch_is_retried),
    "branch_is_retried_in_run": (retrying_parallel_graph, branch_is_retried_in_run),
    "delta_channel_conversation": (delta_graph, delta_channel_conversation),
}
