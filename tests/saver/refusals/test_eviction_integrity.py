"""Integrity under eviction and overload: nothing is lost silently, a refused write leaves nothing.

The cases of the integrity issue, as regression tests, on direct calls and on compiled graphs:

1. a thread started afresh after a drop refuses the previous life's late writes;
2. a refused put takes its earlier pending writes with it and refuses its later ones, so no thread
   or namespace is left holding only writes; serial subgraphs under async durability are not refused;
3. ``eviction_grace_seconds`` turns overload into refusal at admission;
4. ``dropped_thread()`` says what happened to a thread;
5. every drop reaches the hook or is counted, and the queue is bounded;
6. no call expires more than ``EXPIRY_BUDGET`` threads, however long it iterates.
"""

from __future__ import annotations

import asyncio
import operator
import threading
import time
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver as StockSaver

from langgraph.checkpoint.bounded import (
    BoundedInMemorySaver,
    CheckpointCapacityError,
    CheckpointRefusedError,
    InMemoryCheckpointConfig,
    InterruptLostError,
    ThreadEvictedError,
)
from langgraph.checkpoint.bounded.engine.eviction import EXPIRY_BUDGET
from langgraph.checkpoint.bounded.engine.hooks import QUEUE_BOUND
from tests.conftest import FakeClock, make_saver
from tests.support.graphs import linear
from tests.support.helpers import config, fingerprint, make_checkpoint, put, recording_hook


class Log(TypedDict):
    log: Annotated[list[str], operator.add]


def orphans(saver: BoundedInMemorySaver) -> list[str]:
    """Namespaces holding only pending writes (no checkpoint), as ``thread/namespace``."""
    return [
        f"{thread_id}/{name}"
        for thread_id, thread in saver.store.threads.items()
        for name, space in thread.namespaces.items()
        if not space.records
    ]


# --- 1. late writes after revival ----------------------------------------------------------------------


def test_a_revived_thread_refuses_the_previous_life_s_late_writes() -> None:
    saver = BoundedInMemorySaver(config=InMemoryCheckpointConfig(max_threads=1))
    a1 = saver.put(config("t1"), make_checkpoint({"x": "A1"}, {"x": "1"}), {}, {"x": "1"})  # run A
    saver.put(config("t2"), make_checkpoint({"x": 0}, {"x": "1"}), {}, {"x": "1"})  # evicts t1
    b1 = saver.put(config("t1"), make_checkpoint({"x": "B"}, {"x": "1"}), {}, {"x": "1"})  # run B: t1 afresh
    before = fingerprint(saver.store)
    with pytest.raises(ThreadEvictedError):
        saver.put(a1, make_checkpoint({"x": "A2"}, {"x": "2"}), {}, {"x": "2"})
    with pytest.raises(ThreadEvictedError):
        saver.put_writes(a1, [("x", 1)], "taskA")
    assert fingerprint(saver.store) == before
    saver.put_writes(b1, [("x", "b-write")], "taskB")  # B's own life goes on
    saver.put(b1, make_checkpoint({"x": "B2"}, {"x": "2"}), {}, {"x": "2"})
    assert saver.get_tuple(config("t1")).checkpoint["channel_values"] == {"x": "B2"}
    saver.check()


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_a_run_whose_thread_was_evicted_and_revived_fails_and_leaves_the_new_run_s_state(use_async: bool) -> None:
    saver = BoundedInMemorySaver(config=InMemoryCheckpointConfig(max_threads=1))
    entered, release = threading.Event(), threading.Event()

    def wait(state: Log) -> dict[str, Any]:
        if state["log"][-1] == "A":
            entered.set()
            release.wait(10)
        return {"log": ["waited"]}

    builder = linear(Log, {"wait": wait, "after": lambda state: {"log": ["after"]}})
    app = builder.compile(checkpointer=saver)
    failure: list[BaseException] = []

    def run_a() -> None:
        try:
            if use_async:
                asyncio.run(app.ainvoke({"log": ["A"]}, {"configurable": {"thread_id": "t"}}, durability="sync"))
            else:
                app.invoke({"log": ["A"]}, {"configurable": {"thread_id": "t"}}, durability="sync")
        except BaseException as error:
            failure.append(error)

    runner = threading.Thread(target=run_a)
    runner.start()
    assert entered.wait(10)
    app.invoke({"log": ["other"]}, {"configurable": {"thread_id": "other"}})  # evicts "t" mid-run
    b = app.invoke({"log": ["B"]}, {"configurable": {"thread_id": "t"}})  # "t" afresh: evicts "other"
    release.set()
    runner.join(10)
    assert failure and isinstance(failure[0], ThreadEvictedError), failure
    assert app.get_state({"configurable": {"thread_id": "t"}}).values == b == {"log": ["B", "waited", "after"]}
    assert orphans(saver) == []
    saver.check()


# --- 2. a refused write leaves nothing --------------------------------------------------------------------


def test_writes_that_came_before_a_refused_put_go_with_it_and_later_ones_are_refused() -> None:
    saver = make_saver(max_checkpoint_bytes=200)
    checkpoint = make_checkpoint({"big": "x" * 1_000})
    early = config("t", "", checkpoint["id"])
    saver.put_writes(early, [("big", 1)], "task")  # async durability: the writes arrive first
    assert saver.stats().threads == 1
    with pytest.raises(CheckpointCapacityError, match="max_checkpoint_bytes"):
        saver.put(config("t"), checkpoint, {}, {"big": 1})
    assert saver.stats().threads == 0 and orphans(saver) == []  # the writes went with the refusal
    with pytest.raises(CheckpointRefusedError) as info:
        saver.put_writes(early, [("big", 2)], "later-task")
    assert info.value.limit == "max_checkpoint_bytes" and info.value.checkpoint_id == checkpoint["id"]
    assert saver.stats().threads == 0 and saver.stats().rejections == {"max_checkpoint_bytes": 1}
    saver.check()


def test_a_refused_re_put_keeps_the_stored_checkpoint_and_its_writes() -> None:
    saver = make_saver(max_checkpoint_bytes=400)
    stored = put(saver, "t", {"a": "small"})
    saver.put_writes(stored, [("a", 1)], "task")
    again = make_checkpoint({"a": "x" * 1_000}, {"a": 1}, checkpoint_id=stored["configurable"]["checkpoint_id"])
    with pytest.raises(CheckpointCapacityError, match="max_checkpoint_bytes"):
        saver.put(config("t"), again, {}, {"a": 1})
    assert saver.get_tuple(stored).pending_writes == [("task", "a", 1)]
    saver.put_writes(stored, [("a", 2)], "task-2")  # the stored checkpoint still takes writes
    saver.check()


def test_a_refused_put_in_a_new_namespace_leaves_no_namespace_of_writes() -> None:
    saver = make_saver(max_namespaces_per_thread=1)
    put(saver, "t", {"a": 1})
    checkpoint = make_checkpoint({"a": 1})
    with pytest.raises(CheckpointCapacityError, match="max_namespaces_per_thread"):
        saver.put(config("t", "sub:1"), checkpoint, {}, {"a": 1})
    with pytest.raises(CheckpointCapacityError):  # refused for the namespace, and for its checkpoint
        saver.put_writes(config("t", "sub:1", checkpoint["id"]), [("a", 1)], "task")
    assert list(saver.store.threads["t"].namespaces) == [""]
    saver.check()


def serial_subgraphs(checkpointer: Any) -> Any:
    def sub(name: str) -> Any:
        builder = linear(Log, {"work": lambda state: {"log": [name]}})
        return builder.compile()

    builder = linear(Log, {"one": sub("one"), "two": sub("two")})
    return builder.compile(checkpointer=checkpointer)


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_serial_subgraphs_under_a_namespace_limit_give_the_stock_answers(use_async: bool, durability: Any) -> None:
    """The parent's checkpoint after the first subgraph may arrive after the second subgraph's first put
    (async durability): the first subgraph is still complete, against the root checkpoint the second runs under."""
    for _ in range(10):
        ours = BoundedInMemorySaver(
            config=InMemoryCheckpointConfig(max_namespaces_per_thread=2, on_namespace_limit="prune_oldest")
        )
        stock = StockSaver()
        for turn in range(5):
            inputs, thread = {"log": [f"in{turn}"]}, {"configurable": {"thread_id": "t"}}
            if use_async:
                got = asyncio.run(serial_subgraphs(ours).ainvoke(inputs, thread, durability=durability))
            else:
                got = serial_subgraphs(ours).invoke(inputs, thread, durability=durability)
            assert got == serial_subgraphs(stock).invoke(inputs, thread, durability=durability)
        assert orphans(ours) == []
        ours.check()


def overloaded(count: int, grace: float, max_threads: int = 5) -> tuple[BoundedInMemorySaver, list[Any]]:
    """``count`` concurrent runs of a two-node graph, each on its own thread, arriving 5 ms apart."""
    saver = BoundedInMemorySaver(config=InMemoryCheckpointConfig(max_threads=max_threads, eviction_grace_seconds=grace))

    async def slow(state: Log) -> dict[str, Any]:
        await asyncio.sleep(0.02)
        return {"log": ["slow"]}

    builder = linear(Log, {"slow": slow, "fast": lambda state: {"log": ["fast"]}})
    app = builder.compile(checkpointer=saver)

    async def arrive(n: int) -> Any:
        await asyncio.sleep(n * 0.005)
        return await app.ainvoke({"log": [f"t{n}"]}, {"configurable": {"thread_id": f"t{n}"}})

    async def runs() -> list[Any]:
        return await asyncio.gather(*(arrive(n) for n in range(count)), return_exceptions=True)

    return saver, asyncio.run(runs())


def test_overload_without_grace_leaves_no_orphan_writes() -> None:
    saver, results = overloaded(20, grace=0)
    failed = [result for result in results if isinstance(result, BaseException)]
    assert all(isinstance(error, CheckpointCapacityError) for error in failed), failed
    assert orphans(saver) == [] and saver.stats().threads <= 5
    saver.check()


def test_the_last_writes_of_a_dead_run_wait_aside_and_a_fresh_run_s_early_writes_are_taken_in() -> None:
    """Under async durability a run whose put was refused still sends the writes of its next step, whose put
    never comes; a fresh run's writes may come before its put. Neither starts a namespace of writes alone."""
    saver = BoundedInMemorySaver(config=InMemoryCheckpointConfig(max_threads=1))
    a1 = saver.put(config("t"), make_checkpoint({"x": 1}), {}, {"x": 1})
    put(saver, "other", {"x": 1})  # evicts "t"
    a2 = make_checkpoint({"x": 2})
    with pytest.raises(ThreadEvictedError):
        saver.put(a1, a2, {}, {"x": 2})
    a3 = make_checkpoint({"x": 3})  # the dead run's next step: its put will never come
    saver.put_writes(config("t", "", a3["id"]), [("x", "last")], "task-a")
    assert "t" not in saver.store.threads and saver.stats().parked_write_records == 1
    b1 = make_checkpoint({"x": "b"})  # a fresh run: its writes first, then its put
    saver.put_writes(config("t", "", b1["id"]), [("x", "early")], "task-b")
    assert "t" not in saver.store.threads and saver.stats().parked_write_records == 2
    stored = saver.put(config("t"), b1, {}, {"x": 1})
    assert saver.get_tuple(stored).pending_writes == [("task-b", "x", "early")]
    assert saver.stats().parked_write_records == 1 and orphans(saver) == []
    saver.check()


# --- 3. overload degrades to refusal at admission -------------------------------------------------------------


def test_overload_with_a_grace_completes_some_runs_and_refuses_the_others_at_admission() -> None:
    saver, results = overloaded(20, grace=60)
    completed = [result for result in results if not isinstance(result, BaseException)]
    failed = [result for result in results if isinstance(result, BaseException)]
    assert len(completed) >= 5
    for n, result in enumerate(results):
        if not isinstance(result, BaseException):
            assert result == {"log": [f"t{n}", "slow", "fast"]}  # the stock saver's answer
    for error in failed:
        assert type(error) is CheckpointCapacityError and error.limit == "max_threads"
        assert "used in the last 60 s" in str(error) and "eviction_grace_seconds" in str(error)
        assert error.thread_id not in saver.store.threads  # refused at its first write: nothing stored
    assert saver.stats().evicted_threads == 0 and orphans(saver) == []
    saver.check()


def test_a_grace_refuses_only_what_threads_in_use_would_have_to_give() -> None:
    clock = FakeClock()
    saver = make_saver(clock, max_threads=2, eviction_grace_seconds=60)
    put(saver, "old", {"a": 1})
    clock.advance(61)
    put(saver, "recent", {"a": 1})
    put(saver, "new", {"a": 1})  # "old" is outside the grace: evicted as ever
    assert saver.store.thread_ids() == ["recent", "new"]
    before = fingerprint(saver.store)
    with pytest.raises(CheckpointCapacityError, match=r"all 2 other threads were used in the last 60 s"):
        put(saver, "newer", {"a": 1})
    assert fingerprint(saver.store) == before
    clock.advance(61)
    put(saver, "newer", {"a": 1})  # "recent" has been idle past the grace since
    assert saver.store.thread_ids() == ["new", "newer"]
    saver.check()


def test_the_grace_holds_for_bytes_too_and_is_all_or_nothing() -> None:
    clock = FakeClock()
    saver = make_saver(clock, max_total_bytes=3_000, eviction_grace_seconds=30)
    put(saver, "idle", {"a": "x" * 900})
    clock.advance(31)
    put(saver, "busy", {"a": "x" * 900})
    before = fingerprint(saver.store)
    with pytest.raises(CheckpointCapacityError, match="max_total_bytes") as info:
        put(saver, "big", {"a": "x" * 2_000})  # evicting "idle" alone would not be enough
    assert "the 1 used before that are not enough" in str(info.value)
    assert fingerprint(saver.store) == before  # "idle" was not evicted for a write refused anyway
    saver.check()


# --- 4. dropped_thread ------------------------------------------------------------------------------------------


def test_dropped_thread_says_why_when_and_what_the_thread_held(clock: FakeClock) -> None:
    saver = make_saver(clock, max_threads=1)
    assert saver.dropped_thread("t") is None
    first = put(saver, "t", {"a": 1})
    clock.advance(3)
    put(saver, "u", {"a": 1})
    record = saver.dropped_thread("t")
    assert record is not None
    assert (record.limit, record.limit_value, record.dropped_at) == ("max_threads", 1, clock())
    assert record.newest_checkpoint_id == first["configurable"]["checkpoint_id"]
    put(saver, "t", {"a": 2})  # afresh: the record of the previous life stays
    assert saver.dropped_thread("t") == record
    saver.delete_thread("t")
    assert saver.dropped_thread("t") is None


def test_a_resume_of_an_evicted_interrupted_thread_can_be_checked_first() -> None:
    from langgraph.types import Command, interrupt

    saver = BoundedInMemorySaver(config=InMemoryCheckpointConfig(max_threads=1))

    def ask(state: Log) -> dict[str, Any]:
        return {"log": [interrupt("approve?")]}

    builder = linear(Log, {"ask": ask})
    app = builder.compile(checkpointer=saver)
    app.invoke({"log": ["draft"]}, {"configurable": {"thread_id": "review"}})
    app.invoke({"log": ["other"]}, {"configurable": {"thread_id": "other"}})  # evicts "review"
    dropped = saver.dropped_thread("review")
    assert dropped is not None and dropped.limit == "max_threads"
    # LangGraph would start a fresh run that asks again, the answer lost; the saver refuses that resume
    with pytest.raises(InterruptLostError, match="cannot resume thread 'review'"):
        app.invoke(Command(resume="yes"), {"configurable": {"thread_id": "review"}})
    assert saver.store.thread_ids() == ["other"]  # nothing stored for it, and "other" not evicted for it


# --- 5. every drop delivered or counted -------------------------------------------------------------------------


def test_a_sync_hook_that_returns_a_coroutine_has_it_run() -> None:
    archived: list[str] = []

    archive = recording_hook(archived)
    saver = BoundedInMemorySaver(
        config=InMemoryCheckpointConfig(max_threads=1, on_evict=lambda dropped, export: archive(dropped, export))
    )
    for n in range(4):
        put(saver, f"t{n}", {"a": n})

    async def from_a_loop() -> None:
        for n in range(4, 7):
            await saver.aput(config(f"t{n}"), make_checkpoint({"a": n}), {}, {"a": 1})

    asyncio.run(from_a_loop())
    assert archived == [f"t{n}" for n in range(6)]
    assert saver.stats().drop_hook_errors == 0


def test_drops_left_by_cancelled_callers_are_delivered_by_close() -> None:
    delivered: list[str] = []

    slow_archive = recording_hook(delivered, 0.05)
    saver = BoundedInMemorySaver(config=InMemoryCheckpointConfig(max_threads=1, on_evict=slow_archive))

    async def scenario() -> None:
        await saver.aput(config("t0"), make_checkpoint({"a": 0}), {}, {"a": 1})
        callers = [
            asyncio.create_task(saver.aput(config(f"t{n}"), make_checkpoint({"a": n}), {}, {"a": 1}))
            for n in range(1, 7)
        ]
        await asyncio.sleep(0.01)
        for caller in callers:
            caller.cancel()
        await asyncio.gather(*callers, return_exceptions=True)
        assert saver.stats().queued_drops > 0  # left behind, and shown
        await saver.aclose()

    asyncio.run(scenario())
    stats = saver.stats()
    assert stats.queued_drops == 0 and stats.queued_drop_bytes == 0
    assert len(delivered) + stats.drop_hook_errors == stats.evicted_threads == 6  # each delivered or counted


def test_a_hook_raising_a_base_exception_never_fails_the_write_that_dropped() -> None:
    class Stop(BaseException):
        pass

    def hook(dropped: Any, export: Any) -> None:
        raise Stop

    saver = BoundedInMemorySaver(config=InMemoryCheckpointConfig(max_threads=1, on_evict=hook))
    put(saver, "a", {"x": 1})
    put(saver, "b", {"x": 1})  # drops "a": the hook raises, the put stands
    assert saver.store.thread_ids() == ["b"] and saver.stats().drop_hook_errors == 1


def test_keyboard_interrupt_from_a_hook_goes_on_after_it_is_counted() -> None:
    def hook(dropped: Any, export: Any) -> None:
        raise KeyboardInterrupt

    saver = BoundedInMemorySaver(config=InMemoryCheckpointConfig(max_threads=1, on_evict=hook))
    put(saver, "a", {"x": 1})
    with pytest.raises(KeyboardInterrupt):
        put(saver, "b", {"x": 1})
    assert saver.store.thread_ids() == ["b"] and saver.stats().drop_hook_errors == 1  # stored, and counted


def test_the_queue_is_bounded_when_callers_on_event_loops_outpace_a_slow_hook() -> None:
    seen_queue: list[int] = []

    def slow_hook(dropped: Any, export: Any) -> None:
        seen_queue.append(len(saver.store.announcements.queue))
        time.sleep(0.005)

    saver = BoundedInMemorySaver(config=InMemoryCheckpointConfig(max_threads=10, on_evict=slow_hook))
    longest: list[int] = []

    def writer(worker: int) -> None:
        async def on_its_loop() -> None:
            for n in range(60):
                put(saver, f"w{worker}-{n}", {"a": n})  # a sync call on a running loop
                longest.append(len(saver.store.announcements.queue))

        asyncio.run(on_its_loop())

    workers = [threading.Thread(target=writer, args=(worker,)) for worker in range(8)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    saver.close()
    assert max(longest) <= QUEUE_BOUND + 8, max(longest)  # each caller adds its drop, then waits for room
    stats = saver.stats()
    assert stats.queued_drops == 0 and len(seen_queue) + stats.drop_hook_errors == stats.evicted_threads


def test_queued_exports_count_in_memory_bytes() -> None:
    saver = BoundedInMemorySaver(config=InMemoryCheckpointConfig(max_threads=1, on_evict=lambda d, e: None))
    put(saver, "a", {"x": "y" * 1_000})
    store = saver.store
    with store.lock:  # a drop queued, not yet delivered
        store.put_checkpoint("b", "", make_record("b1"), {})
        queued = store.stats()
    assert queued.queued_drops == 1 and queued.queued_drop_bytes > 1_000
    assert queued.memory_bytes == store.bounded_memory_bytes() + queued.queued_drop_bytes
    store.announcements.deliver()
    assert store.stats().queued_drop_bytes == 0


def make_record(checkpoint_id: str) -> Any:
    from langgraph.checkpoint.bounded.engine import CheckpointRecord

    return CheckpointRecord.of(checkpoint_id, None, ("json", b"{}"), ("json", b"{}"), {})


# --- 6. at most EXPIRY_BUDGET expiries per call ----------------------------------------------------------------


def expired_by(saver: BoundedInMemorySaver, call: Any) -> int:
    before = saver.stats().expired_threads
    call()
    return saver.stats().expired_threads - before


def test_no_call_expires_more_than_the_budget(clock: FakeClock) -> None:
    saver = make_saver(clock, idle_ttl_seconds=60, max_threads=10_000)
    for n in range(1_000):
        put(saver, f"t{n}", {"a": n})
    clock.advance(61)
    calls = {
        "get_tuple": lambda: saver.get_tuple(config("t999")),
        "put": lambda: put(saver, "fresh", {"a": 1}),
        "put_writes": lambda: saver.put_writes(config("writes", "", "1ef-new"), [("a", 2)], "task"),
        "copy_thread": lambda: saver.copy_thread("t998", "copy"),
        "list(None, limit=200)": lambda: list(saver.list(None, limit=200)),
        "list(None, filter)": lambda: list(saver.list(None, filter={"step": 99})),
        "get_delta_channel_history": lambda: saver.get_delta_channel_history(config=config("t997"), channels=["a"]),
        "export_thread": lambda: saver.export_thread("t996"),
    }
    for name, call in calls.items():
        assert expired_by(saver, call) <= EXPIRY_BUDGET, name


def test_a_listing_read_while_the_ttl_passes_expires_nothing_more(clock: FakeClock) -> None:
    saver = make_saver(clock, idle_ttl_seconds=60, max_threads=10_000)
    for n in range(500):
        put(saver, f"t{n}", {"a": n})
    before = saver.stats().expired_threads
    listed = 0
    for _ in saver.list(None, limit=200):
        listed += 1
        clock.advance(1)  # the TTL passes for every thread while the listing is read
    assert saver.stats().expired_threads - before <= EXPIRY_BUDGET
    assert listed < 200  # threads gone idle since they were listed read as gone


def test_the_tombstone_of_a_refused_put_never_pushes_the_store_past_max_memory_bytes() -> None:
    """A refusal leaves a record (so its late writes are refused too); in a store full to its memory limit
    remembered records are shed, oldest first, rather than the limit passed or a thread evicted for it."""
    limit = 40_000
    saver = make_saver(max_memory_bytes=limit, max_checkpoint_bytes=3_000)
    put(saver, "first", {"a": "x" * 100})
    per_thread = saver.store.bounded_memory_bytes() - 100  # what a thread costs beside its payload
    n = 0
    while limit - saver.store.bounded_memory_bytes() > 2 * per_thread + 2_000:
        put(saver, f"t{n}", {"a": "x" * 1_000})
        n += 1
    put(saver, "last", {"a": "x" * (limit - saver.store.bounded_memory_bytes() - per_thread - 40)})
    assert 0 <= limit - saver.store.bounded_memory_bytes() < 200 and saver.stats().evicted_threads == 0  # just full
    for n in range(20):  # refusals in a row, each remembered
        with pytest.raises(CheckpointCapacityError, match="max_checkpoint_bytes"):
            put(saver, f"big{n}", {"a": "y" * 4_000})
        assert saver.store.bounded_memory_bytes() <= limit
        saver.check()
    assert saver.stats().evicted_threads == 0  # remembered records made room, no thread did
