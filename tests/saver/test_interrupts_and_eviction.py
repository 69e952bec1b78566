"""A resume of a thread the memory saver evicted while it waited at an interrupt: refused, loudly, at no cost.

The app is the one a new user writes: draft -> review (``interrupt()``) -> send, many threads, a small
``max_threads``. LangGraph starts a thread it finds no checkpoint for afresh, even for a resume; these
tests pin what it sends the saver then (``saver.interrupts`` builds on it), and check that the saver
refuses the resume before anything is stored for the thread and before any other thread is evicted for it.
"""

from __future__ import annotations

import asyncio
import logging
import operator
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.base import WRITES_IDX_MAP
from langgraph.types import Command, interrupt

from langgraph.checkpoint.bounded import (
    BoundedInMemorySaver,
    CheckpointRefusedError,
    InMemoryCheckpointConfig,
    InterruptLostError,
    ThreadEvictedError,
    ThreadQuarantinedError,
    TieredSaver,
)
from langgraph.checkpoint.bounded.engine import ResumeRefusedError, Store, StoreLimits, WriteRecord
from langgraph.checkpoint.bounded.engine.errors import utc_text
from langgraph.checkpoint.bounded.interrupts import ANSWER_CHANNELS
from tests.conftest import FakeClock
from tests.support.graphs import linear
from tests.support.helpers import fingerprint, put
from tests.support.paths import ROOT

DURABILITIES = ["sync", "async", "exit"]
APIS = [False, True]
NULL_TASK = "00000000-0000-0000-0000-000000000000"


class Review(TypedDict, total=False):
    messages: Annotated[list[str], operator.add]
    approved: bool


class App:
    """draft -> review (waits for a human) -> send; records every node that ran and every message sent.

    ``strict``: the draft reads the last message as a new user's code does, and fails on an empty state.
    """

    def __init__(self, saver: Any, *, strict: bool = False) -> None:
        self.saver = saver
        self.ran: list[str] = []
        self.sent: list[str] = []

        def draft(state: Review) -> Review:
            self.ran.append("draft")
            last = state["messages"][-1] if strict else (state.get("messages") or ["(nothing)"])[-1]
            return {"messages": [f"draft of {last}"]}

        def review(state: Review) -> Review:
            self.ran.append("review")
            answer = interrupt({"question": "send this draft?"})
            return {"approved": answer == "yes"}

        def send(state: Review) -> Review:
            self.ran.append("send")
            if state.get("approved"):
                self.sent.append(state["messages"][-1])
            return {}

        self.graph = linear(Review, {"draft": draft, "review": review, "send": send}).compile(checkpointer=saver)

    def run(self, thread_id: str, payload: Any, *, use_async: bool, durability: str) -> Any:
        run_config: Any = {"configurable": {"thread_id": thread_id}}
        if use_async:
            return asyncio.run(self.graph.ainvoke(payload, run_config, durability=durability))  # type: ignore[arg-type]
        return self.graph.invoke(payload, run_config, durability=durability)  # type: ignore[arg-type]

    def waiting(self, thread_id: str) -> bool:
        return bool(self.graph.get_state({"configurable": {"thread_id": thread_id}}).interrupts)


def three_waiting_threads(app: App, durability: str) -> None:
    """'a', 'b', 'c' wait at their review, on a saver of max_threads=2: 'c' evicted 'a'."""
    for thread_id in "abc":
        app.run(thread_id, {"messages": [f"hello from {thread_id}"]}, use_async=False, durability=durability)
    assert app.saver.store.thread_ids() == ["b", "c"] and app.saver.dropped_thread("a") is not None
    app.ran.clear()


def saver_of(clock: FakeClock | None = None, **settings: Any) -> BoundedInMemorySaver:
    return BoundedInMemorySaver(config=InMemoryCheckpointConfig(max_threads=2, **settings), clock=clock or FakeClock())


# --- what LangGraph sends the saver for a resume of a thread it finds no checkpoint for ------------------------


class Recording(BoundedInMemorySaver):
    """Records the writes LangGraph sends: ``("put", source, input values)`` and ``("put_writes", task, channels)``."""

    calls: list[tuple[Any, ...]]

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        self.calls.append(("put", metadata.get("source"), list(checkpoint["channel_values"].values())))
        return super().put(config, checkpoint, metadata, new_versions)

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        self.calls.append(("put_writes", task_id, [channel for channel, _ in writes]))
        super().put_writes(config, writes, task_id, task_path)

    async def aput(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        self.calls.append(("put", metadata.get("source"), list(checkpoint["channel_values"].values())))
        return await super().aput(config, checkpoint, metadata, new_versions)

    async def aput_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        self.calls.append(("put_writes", task_id, [channel for channel, _ in writes]))
        await super().aput_writes(config, writes, task_id, task_path)


@pytest.mark.parametrize("durability", DURABILITIES)
@pytest.mark.parametrize("use_async", APIS, ids=["sync", "async"])
def test_what_langgraph_sends_for_a_resume_of_a_thread_without_checkpoint(use_async: bool, durability: str) -> None:
    """The facts ``saver.interrupts`` builds on: under sync and async durability the answer comes as a
    ``__resume__`` write of the null task, and the fresh run's input checkpoint holds the Command; under
    exit durability neither comes, and the run's one checkpoint looks like any new run's."""
    saver = Recording()
    saver.calls = []
    app = App(saver)
    app.run("never-seen", Command(resume="yes"), use_async=use_async, durability=durability)
    answers = [call for call in saver.calls if call[0] == "put_writes" and "__resume__" in call[2]]
    inputs = [call for call in saver.calls if call[0] == "put" and call[1] == "input"]
    if durability == "exit":
        assert answers == [] and inputs == []
        assert [call[1] for call in saver.calls if call[0] == "put"] == ["loop"]
    else:
        assert [call[1] for call in answers] == [NULL_TASK]
        assert len(inputs) == 1 and isinstance(inputs[0][2][0], Command) and inputs[0][2][0].resume == "yes"
    assert set(WRITES_IDX_MAP) >= ANSWER_CHANNELS  # the channel the engine is told answers an interrupt


# --- the refusal ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("durability", ["sync", "async"])
@pytest.mark.parametrize("use_async", APIS, ids=["sync", "async"])
def test_a_resume_of_an_evicted_thread_fails_and_costs_no_other_thread(use_async: bool, durability: str) -> None:
    saver = saver_of()
    app = App(saver)
    three_waiting_threads(app, durability)
    evicted = saver.stats().evicted_threads
    with pytest.raises(InterruptLostError) as refused:
        app.run("a", Command(resume="yes"), use_async=use_async, durability=durability)
    error = refused.value
    assert isinstance(error, ThreadEvictedError) and error.thread_id == "a" and error.limit == "max_threads"
    assert saver.store.thread_ids() == ["b", "c"], "the resume stored something, or evicted another thread"
    assert saver.stats().evicted_threads == evicted and app.sent == []
    saver.check()
    # the threads that waited still wait, and their answers still apply
    assert app.waiting("b") and app.waiting("c")
    app.run("b", Command(resume="yes"), use_async=use_async, durability=durability)
    assert app.sent == ["draft of hello from b"]


@pytest.mark.parametrize("durability", ["sync", "async"])
@pytest.mark.parametrize("use_async", APIS, ids=["sync", "async"])
def test_a_node_that_fails_on_the_empty_state_first_still_costs_nothing_and_the_refusal_is_logged(
    use_async: bool, durability: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Under async durability LangGraph runs the fresh start's first node before it looks at the saver's
    refusal, and a node's error is the one a run ends with: the refusal is in the log, and nothing changed.
    Under sync durability LangGraph waits for the refused checkpoint before the first node: the run ends
    with the saver's error. (``dropped_thread_quarantine_seconds`` refuses at the first read: see below.)"""
    saver = saver_of()
    app = App(saver, strict=True)
    three_waiting_threads(app, durability)
    with (
        caplog.at_level(logging.WARNING, logger="langgraph.checkpoint.bounded.interrupts"),
        pytest.raises(InterruptLostError if durability == "sync" else IndexError),
    ):
        app.run("a", Command(resume="yes"), use_async=use_async, durability=durability)
    assert app.ran == ([] if durability == "sync" else ["draft"])
    assert saver.store.thread_ids() == ["b", "c"] and app.waiting("b") and app.waiting("c")
    logged = [record.getMessage() for record in caplog.records]
    assert len(logged) == 1 and "cannot resume thread 'a'" in logged[0], logged


def test_the_error_says_which_thread_which_limit_when_and_what_to_do() -> None:
    saver = saver_of()
    app = App(saver)
    three_waiting_threads(app, "sync")
    dropped = saver.dropped_thread("a")
    assert dropped is not None
    with pytest.raises(InterruptLostError) as refused:
        app.run("a", Command(resume="yes"), use_async=False, durability="sync")
    message = str(refused.value)
    assert "thread 'a'" in message and "evicted" in message and "max_threads=2" in message
    assert f"at {utc_text(dropped.dropped_at_wall)}" in message
    assert dropped.dropped_at_utc.strftime("%Y-%m-%d %H:%M:%S UTC") in message
    assert "was not applied" in message and "nothing was stored" in message
    assert "new run" in message and "TieredSaver" in message
    assert refused.value.dropped_at_wall == dropped.dropped_at_wall


def test_an_expired_thread_s_resume_says_it_expired() -> None:
    clock = FakeClock()
    saver = saver_of(clock, idle_ttl_seconds=60)
    app = App(saver)
    app.run("idle", {"messages": ["hi"]}, use_async=False, durability="sync")
    clock.advance(61)
    with pytest.raises(InterruptLostError, match=r"expired after being idle under idle_ttl_seconds=60 at .* UTC"):
        app.run("idle", Command(resume="yes"), use_async=False, durability="sync")
    assert saver.store.thread_ids() == []


@pytest.mark.parametrize("durability", DURABILITIES)
def test_a_new_run_on_the_id_starts_afresh_as_before(durability: str) -> None:
    saver = saver_of()
    app = App(saver)
    three_waiting_threads(app, durability)
    if durability != "exit":
        with pytest.raises(InterruptLostError):
            app.run("a", Command(resume="yes"), use_async=False, durability=durability)
    stopped = app.run("a", {"messages": ["start over"]}, use_async=False, durability=durability)
    assert stopped["messages"] == ["start over", "draft of start over"] and app.waiting("a")
    app.run("a", Command(resume="yes"), use_async=False, durability=durability)
    assert app.sent == ["draft of start over"]


def test_under_exit_durability_the_saver_cannot_tell_a_resume_and_the_fresh_start_goes_on() -> None:
    """What LangGraph hides (``test_what_langgraph_sends...``): without the quarantine, such a resume starts
    the thread afresh and makes room as a new run does. The quarantine is the remedy (below)."""
    saver = saver_of()
    app = App(saver)
    three_waiting_threads(app, "exit")
    app.run("a", Command(resume="yes"), use_async=False, durability="exit")
    assert saver.store.thread_ids() == ["c", "a"]


# --- the same refusal, at the engine's door: either order, nothing changed ---------------------------------------


def dropped_store() -> tuple[Store, str]:
    """A store of max_threads=1 whose thread 'gone' was evicted; and that thread's checkpoint id."""
    store = Store(StoreLimits(max_threads=1), clock=FakeClock(), answer_channels=["__resume__"])
    store.put_checkpoint("gone", "", record("c1"), {})
    store.put_checkpoint("other", "", record("c2"), {})
    return store, "c1"


def record(checkpoint_id: str, parent_id: str | None = None) -> Any:
    from langgraph.checkpoint.bounded.engine import CheckpointRecord

    return CheckpointRecord.of(checkpoint_id, parent_id, ("json", b"{}"), ("json", b"{}"), {})


ANSWER = WriteRecord.of(NULL_TASK, WRITES_IDX_MAP["__resume__"], "__resume__", ("json", b'"yes"'))


@pytest.mark.parametrize("order", ["answer first", "checkpoint first"])
def test_the_engine_refuses_the_answer_and_the_resuming_checkpoint_in_either_order(order: str) -> None:
    store, _ = dropped_store()
    before = fingerprint(store)
    steps: list[Callable[[], None]] = [
        lambda: store.put_writes("gone", "", "z-empty", [ANSWER]),
        lambda: store.put_checkpoint("gone", "", record("z-input"), {}, None, True),
    ]
    for step in steps if order == "answer first" else steps[::-1]:
        with pytest.raises(ResumeRefusedError) as refused:
            step()
        assert refused.value.thread_id == "gone" and refused.value.limit == "max_threads"
    assert fingerprint(store) == before
    # the run's later writes find nothing to land on: refused with the checkpoint they name, or parked aside
    late = [WriteRecord.of("task", 0, "x", ("json", b"1"))]
    with pytest.raises(CheckpointRefusedError):
        store.put_writes("gone", "", "z-input", late)
    store.put_writes("gone", "", "z-step", late)
    assert store.thread_ids() == ["other"] and store.stats().evicted_threads == 1
    store.check()


def test_the_engine_lets_answers_through_to_a_thread_it_holds_or_never_dropped() -> None:
    store, _ = dropped_store()
    store.put_writes("never-dropped", "", "c9", [ANSWER])  # LangGraph's own business: not a dropped thread's
    store.put_checkpoint("gone", "", record("z-fresh"), {})  # a new run on the id: the thread lives again
    store.put_writes("gone", "", "z-fresh", [ANSWER])
    store.put_checkpoint("gone", "", record("z-next", "z-fresh"), {}, None, True)
    assert "gone" in store.thread_ids()


# --- the quarantine: a new run on a recently dropped thread, refused at its first read ---------------------------


@pytest.mark.parametrize("durability", DURABILITIES)
@pytest.mark.parametrize("use_async", APIS, ids=["sync", "async"])
@pytest.mark.parametrize("payload", ["resume", "input"])
def test_the_quarantine_refuses_any_run_before_any_node(use_async: bool, durability: str, payload: str) -> None:
    saver = saver_of(dropped_thread_quarantine_seconds=600)
    app = App(saver, strict=True)
    three_waiting_threads(app, durability)
    before = fingerprint(saver.store)
    run_input = Command(resume="yes") if payload == "resume" else {"messages": ["start over"]}
    with pytest.raises(ThreadQuarantinedError) as refused:
        app.run("a", run_input, use_async=use_async, durability=durability)
    assert app.ran == [], "a node ran"
    assert fingerprint(saver.store) == before
    message = str(refused.value)
    assert "thread 'a'" in message and "max_threads=2" in message and " UTC" in message
    assert "dropped_thread_quarantine_seconds=600" in message and "was not applied" in message
    assert refused.value.quarantine_seconds == 600


def test_the_quarantine_ends_with_its_time_or_with_delete_thread_and_never_refuses_a_state_read() -> None:
    clock = FakeClock()
    saver = saver_of(clock, dropped_thread_quarantine_seconds=600)
    app = App(saver)
    three_waiting_threads(app, "sync")
    assert app.graph.get_state({"configurable": {"thread_id": "a"}}).values == {}  # a read, not a run
    clock.advance(599)
    with pytest.raises(ThreadQuarantinedError, match=r"ends in 1 s"):
        app.run("a", {"messages": ["again"]}, use_async=False, durability="sync")
    clock.advance(1)
    app.run("a", {"messages": ["again"]}, use_async=False, durability="sync")  # over: it starts afresh...
    assert app.waiting("a") and saver.store.thread_ids() == ["c", "a"]  # ...and evicts 'b'
    with pytest.raises(ThreadQuarantinedError):
        app.run("b", {"messages": ["back"]}, use_async=False, durability="sync")
    saver.delete_thread("b")  # forgets the thread's record, and with it the quarantine
    app.run("b", {"messages": ["back"]}, use_async=False, durability="sync")
    assert app.waiting("b")


def test_the_quarantine_refuses_a_first_checkpoint_written_without_a_read() -> None:
    saver = saver_of(dropped_thread_quarantine_seconds=float("inf"))
    first = put(saver, "x", {"n": 1})
    put(saver, "y", {"n": 1})
    put(saver, "z", {"n": 1})  # evicts x
    with pytest.raises(ThreadQuarantinedError, match=r"delete the thread to start it afresh now\."):
        put(saver, "x", {"n": 2})
    with pytest.raises(ThreadEvictedError):
        put(saver, "x", {"n": 2}, parent=first)  # a late write of its old life: refused as before
    assert saver.store.thread_ids() == ["y", "z"]


@pytest.mark.parametrize("value", [-1, float("nan"), "600", True])
def test_a_bad_quarantine_names_the_field(value: Any) -> None:
    with pytest.raises(ValueError, match="dropped_thread_quarantine_seconds"):
        InMemoryCheckpointConfig(dropped_thread_quarantine_seconds=value)


# --- TieredSaver: its hot tier drops threads all the time, and none of this applies there ------------------------


@pytest.mark.parametrize("write", ["through", "back"])
@pytest.mark.parametrize("quarantine", [0.0, 600.0])
def test_a_tiered_saver_still_resumes_a_thread_that_left_its_hot_tier(write: str, quarantine: float) -> None:
    from langgraph.checkpoint.memory import InMemorySaver as StockSaver

    durable = StockSaver()  # a BoundedInMemorySaver is refused as the durable tier: it may evict
    hot = InMemoryCheckpointConfig(max_threads=1, dropped_thread_quarantine_seconds=quarantine)
    with TieredSaver(durable, config=hot, write=write) as tiered:  # type: ignore[arg-type]
        app = App(tiered)
        for thread_id in "ab":
            app.run(thread_id, {"messages": [f"hello from {thread_id}"]}, use_async=False, durability="async")
        assert tiered._store.thread_ids() == ["b"]
        app.run("a", Command(resume="yes"), use_async=False, durability="async")
        asyncio.run(app.graph.ainvoke(Command(resume="yes"), {"configurable": {"thread_id": "b"}}))
        assert sorted(app.sent) == ["draft of hello from a", "draft of hello from b"]


# --- when a thread was dropped, by the wall clock ----------------------------------------------------------------


def test_a_dropped_thread_says_when_by_the_wall_clock_and_keeps_the_store_s_clock() -> None:
    clock = FakeClock()
    told: list[Any] = []
    saver = BoundedInMemorySaver(
        config=InMemoryCheckpointConfig(max_threads=1, on_evict=lambda dropped, export: told.append(dropped)),
        clock=clock,
    )
    first = put(saver, "a", {"n": 1})
    before = time.time()
    put(saver, "b", {"n": 1})
    after = time.time()
    dropped = saver.dropped_thread("a")
    assert dropped is not None and told == [dropped]
    assert before <= dropped.dropped_at_wall <= after
    assert dropped.dropped_at_utc == datetime.fromtimestamp(dropped.dropped_at_wall, UTC)
    assert dropped.dropped_at == clock.now  # the monotonic reading the engine measures with
    clock.advance(5)
    with pytest.raises(ThreadEvictedError, match=rf"at {utc_text(dropped.dropped_at_wall)}, 5 s before"):
        put(saver, "a", {"n": 2}, parent=first)


# --- the documented recipe: what says a run waits --------------------------------------------------------------


def documented_recipe() -> Callable[..., str]:
    """``resume_if_waiting`` as the docs' overload guide shows it, run as written."""
    page = ROOT / "docs" / "guide" / "overload.md"
    blocks = re.findall(r"^```python\n(.*?)^```$", page.read_text(), flags=re.M | re.S)
    [recipe] = [block for block in blocks if "def resume_if_waiting(" in block]
    namespace: dict[str, Any] = {}
    exec(compile(recipe, str(page), "exec"), namespace)  # the page's own code, run as a user runs it
    return namespace["resume_if_waiting"]  # type: ignore[no-any-return]


def test_the_documented_recipe_resumes_only_a_run_that_waits_and_says_why_not() -> None:
    resume_if_waiting = documented_recipe()
    saver = saver_of()
    app = App(saver, strict=True)
    with pytest.raises(IndexError):  # a run that failed: state.next is not empty, and no interrupt waits
        app.run("failed", {"messages": []}, use_async=False, durability="sync")
    assert app.graph.get_state({"configurable": {"thread_id": "failed"}}).next == ("draft",)
    app.run("waiting", {"messages": ["hi"]}, use_async=False, durability="sync")
    app.run("done", {"messages": ["bye"]}, use_async=False, durability="sync")  # evicts "failed"
    app.run("done", Command(resume="yes"), use_async=False, durability="sync")  # evicts nothing: 'done' is held
    app.run("evicts", {"messages": ["x"]}, use_async=False, durability="sync")  # evicts "waiting"
    app.ran.clear()
    assert resume_if_waiting(app.graph, saver, "done", "yes") == "nothing waits"
    lost = resume_if_waiting(app.graph, saver, "waiting", "yes")
    assert lost.startswith("lost: max_threads=2 dropped it at ") and lost.endswith(" UTC; start a new run")
    assert app.ran == []  # neither answered: no run started
    assert resume_if_waiting(app.graph, saver, "evicts", "yes") == "resumed"
    assert app.sent == ["draft of bye", "draft of x"]
    with pytest.raises(IndexError):
        app.run("failed", {"messages": []}, use_async=False, durability="sync")  # fails again, in a new life
    app.ran.clear()
    assert resume_if_waiting(app.graph, saver, "failed", "yes") == "failed: retry with app.invoke(None, config)"
    assert app.ran == []
