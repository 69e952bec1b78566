"""``TieredSaver`` over a real SQLite file: graphs, reads across tiers, both write modes, failures.

Every graph here is a compiled LangGraph graph (tests/support/graphs.py: interrupts, subgraphs, ``Send``,
time travel, a failing parallel branch, ``DeltaChannel``), compared with the stock
``InMemorySaver`` and with what the durable tier alone answers. The hot tier is kept small, so
threads leave memory while their runs go on. Durable failures and slow calls come from
``ControlledSqlite`` (tests/support/durable_savers.py), a ``SqliteSaver`` a test can make fail or wait;
every wait is on an event, never on time.
"""

from __future__ import annotations

import asyncio
import gc
import operator
import sqlite3
import threading
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver as StockSaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command, interrupt

from langgraph.checkpoint.bounded import (
    CheckpointCapacityError,
    InMemoryCheckpointConfig,
    InvalidArgumentError,
    ThreadDeletedError,
    TieredSaver,
    WriteBack,
)
from langgraph.checkpoint.bounded.tiered.durable import DurableSideError
from tests.support import graphs
from tests.support.durable_savers import ControlledSqlite, sqlite_durable
from tests.support.graphs import (
    SCENARIOS,
    Runner,
    approval_graph,
    delta_channel_conversation,
    delta_graph,
    describe,
    linear,
    thread,
    without_interrupt_ids,
)
from tests.support.helpers import SteppingClock, config, make_checkpoint
from tests.support.tiered import (
    INTERLEAVED_SCENARIOS,
    concurrent_runs,
    flight_waiters,
    graph_view,
    interleaved_thread,
    put_chain,
    read_together,
    run,
    run_interleaved,
    tuples,
    wait_until,
    write_mode,
)

SMALL = InMemoryCheckpointConfig(max_threads=2)
WAIT = 60.0  # seconds an event wait may take before the test fails (it is never reached when things work)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "durable.sqlite"


# --- graphs: the stock saver's answers, with threads leaving memory --------------------------------------------------

CASES = [
    pytest.param(name, write, use_async, durability, id=f"{name}-{write}-{'a' if use_async else ''}sync-{durability}")
    for name in sorted(SCENARIOS)
    for write in ("through", "back")
    for use_async in (False, True)
    for durability in ("sync", "async", "exit")
    if not (durability == "exit" and name == "failing_branch_is_retried")  # needs its writes saved during the run
    if durability == "async" or write == "back" or not use_async  # every mode for write-back; enough for through
]


@pytest.mark.parametrize(("name", "write", "use_async", "durability"), CASES)
def test_graphs_answer_as_the_stock_saver_and_the_durable_tier_agrees(
    db: Path, name: str, write: str, use_async: bool, durability: str
) -> None:
    expected = run(name, StockSaver(), use_async=use_async, durability=durability)
    tiered = TieredSaver(sqlite_durable(db), config=SMALL, write=write)
    assert run(name, tiered, use_async=use_async, durability=durability) == expected
    tiered.flush()
    tiered.check()
    assert tiered.stats().dirty_bytes == 0
    # What the hot tier answers is what the durable tier alone answers: the same tuples, and the same
    # states and histories for a graph reading it.
    durable = sqlite_durable(db)
    factory = SCENARIOS[name][0]
    for thread_id in sorted({item.config["configurable"]["thread_id"] for item in durable.list(None)}):
        assert graph_view(factory, tiered, thread_id) == graph_view(factory, durable, thread_id)
        if name != "delta_channel_conversation":
            assert tuples(tiered, thread_id) == tuples(durable, thread_id)
        # A DeltaChannel snapshot LangGraph puts under a version an older checkpoint already holds: the hot
        # tier keys values by version (as InMemorySaver and PostgresSaver do), so the older checkpoint reads it
        # too, where SqliteSaver keeps each checkpoint's own values. The states read above are the same.


# Every scenario, three copies of each at once over a hot tier of one thread: threads leave memory between any
# two calls of a run (between a step's writes and its checkpoint's put, between two puts, before a fork).
INTERLEAVED = [
    pytest.param(write, use_async, durability, id=f"{write}-{'a' if use_async else ''}sync-{durability}")
    for write in ("through", "back")
    for use_async in (False, True)
    for durability in ("sync", "async", "exit")
]

# These two wrap the checkpointer's put_writes to time their failure: copies sharing one saver would wrap it in turn.


@pytest.mark.parametrize(("write", "use_async", "durability"), INTERLEAVED)
def test_interleaved_runs_over_a_hot_tier_of_one_thread_answer_as_the_stock_saver(
    db: Path, monkeypatch: pytest.MonkeyPatch, write: str, use_async: bool, durability: str
) -> None:
    """A put whose hot copy lacks values it references (the thread left memory, a fork below what is hot)
    stores them too; writes acknowledged before their checkpoint's put and lost with the thread's hot copy
    keep that checkpoint out of memory. Before either fix, the hot tier answered without unchanged channels
    or without interrupts, and write-back flushed the incomplete states to the durable tier."""
    monkeypatch.setattr(graphs, "thread", interleaved_thread)
    expected = {
        name: run(name, StockSaver(), use_async=use_async, durability=durability) for name in INTERLEAVED_SCENARIOS
    }
    tiered = TieredSaver(sqlite_durable(db), config=InMemoryCheckpointConfig(max_threads=1), write=write)
    found = run_interleaved(tiered, use_async=use_async, durability=durability, copies=3)
    tiered.flush()
    tiered.check()
    assert len(found) == 3 * len(expected)
    for (name, copy), trace in sorted(found.items()):
        assert trace == expected[name], f"{name}, copy {copy}"
    durable = sqlite_durable(db)
    for thread_id in sorted({item.config["configurable"]["thread_id"] for item in durable.list(None)}):
        assert tuples(tiered, thread_id, None) == tuples(durable, thread_id, None), thread_id
    tiered.close()


def test_a_put_whose_thread_left_memory_keeps_its_unchanged_values(db: Path) -> None:
    for mode in ("through", "back"):
        durable = sqlite_durable(db.with_name(f"{mode}.sqlite"))
        tiered = TieredSaver(durable, config=InMemoryCheckpointConfig(max_threads=1), write=mode)
        first = tiered.put(
            config("A"), make_checkpoint({"x": 1, "y": "kept"}, {"x": 1, "y": 1}), {"step": 0}, {"x": 1, "y": 1}
        )
        tiered.put(config("B"), make_checkpoint({"x": 1}, {"x": 1}), {"step": 0}, {"x": 1})  # A leaves memory
        parent = first["configurable"]["checkpoint_id"]
        tiered.put(config("A", "", parent), make_checkpoint({"x": 2, "y": "kept"}, {"x": 2, "y": 1}), {}, {"x": 2})
        got = tiered.get_tuple(config("A"))
        assert got is not None and got.checkpoint["channel_values"] == {"x": 2, "y": "kept"}, mode
        tiered.flush()
        alone = durable.get_tuple(config("A"))
        assert alone is not None and alone.checkpoint["channel_values"] == {"x": 2, "y": "kept"}, mode
        tiered.close()


@pytest.mark.parametrize("write", ["through", "back"])
def test_writes_before_their_put_lost_with_the_hot_copy_keep_the_checkpoint_out_of_memory(db: Path, write: str) -> None:
    tiered = TieredSaver(sqlite_durable(db), config=InMemoryCheckpointConfig(max_threads=1), write=write)
    first = tiered.put(config("A"), make_checkpoint({"x": 1}, {"x": 1}), {"step": 0}, {"x": 1})
    second = make_checkpoint({"x": 1}, {"x": 1})
    early = config("A", "", second["id"])
    tiered.put_writes(early, [("__interrupt__", "approve?")], "task-1")  # before its checkpoint's put
    tiered.put(config("B"), make_checkpoint({"x": 1}, {"x": 1}), {"step": 0}, {"x": 1})  # A leaves memory
    tiered.put(config("A", "", first["configurable"]["checkpoint_id"]), second, {"step": 1}, {})
    got = tiered.get_tuple(config("A"))
    assert got is not None and got.pending_writes == [("task-1", "__interrupt__", "approve?")]
    assert tiered.stats().left_out >= 1
    tiered.check()
    tiered.close()


def test_a_cold_tiered_saver_resumes_what_another_one_wrote(db: Path) -> None:
    """A restart: a new saver over the same file, nothing in memory, picks the interrupted thread up."""
    first = TieredSaver(sqlite_durable(db), write="back")
    app = approval_graph(first, {})
    app.invoke({"messages": ["hi"]}, thread("restart"))
    first.close()
    second = TieredSaver(sqlite_durable(db))
    assert second.stats().hot.threads == 0
    resumed = approval_graph(second, {}).invoke(Command(resume="yes"), thread("restart"))
    stock = StockSaver()
    stock_app = approval_graph(stock, {})
    stock_app.invoke({"messages": ["hi"]}, thread("restart"))
    assert resumed == stock_app.invoke(Command(resume="yes"), thread("restart"))
    assert second.stats().misses >= 1 and second.stats().admissions >= 1


# --- eviction is never a loss ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("write", ["through", "back"])
def test_twenty_concurrent_runs_over_five_hot_threads_all_complete(db: Path, write: str) -> None:
    expected = asyncio.run(concurrent_runs(StockSaver(), 20))
    memory_only = asyncio.run(
        concurrent_runs(
            __import__("langgraph.checkpoint.bounded", fromlist=["BoundedInMemorySaver"]).BoundedInMemorySaver(
                config=InMemoryCheckpointConfig(max_threads=5)
            ),
            20,
        )
    )
    assert "ThreadEvictedError" in memory_only, "the memory-only saver no longer loses evicted runs"
    tiered = TieredSaver(sqlite_durable(db), config=InMemoryCheckpointConfig(max_threads=5), write=write)
    assert asyncio.run(concurrent_runs(tiered, 20)) == expected
    stats = tiered.stats()
    assert stats.hot.threads <= 5 and stats.hot.evicted_threads >= 15
    tiered.close()
    durable = sqlite_durable(db)
    for index in range(20):
        state = durable.get_tuple(thread(f"run-{index}"))
        assert state is not None and state.checkpoint["channel_values"]["log"] == expected[index]["log"]


@pytest.mark.parametrize("write", ["through", "back"])
def test_an_interrupted_thread_evicted_then_resumed_gets_its_answer(db: Path, write: str) -> None:
    tiered = TieredSaver(sqlite_durable(db), config=InMemoryCheckpointConfig(max_threads=1), write=write)
    app, stock = approval_graph(tiered, {}), approval_graph(StockSaver(), {})
    for graph in (app, stock):
        graph.invoke({"messages": ["draft this"]}, thread("waiting"))
        graph.invoke({"messages": ["other"]}, thread("other"))  # evicts "waiting" from the hot tier
    assert tiered._store.last_used("waiting") is None
    assert app.invoke(Command(resume="approved"), thread("waiting")) == stock.invoke(
        Command(resume="approved"), thread("waiting")
    )
    assert describe(app.get_state(thread("waiting"))) == describe(stock.get_state(thread("waiting")))


def test_sync_runs_in_many_threads_with_a_tiny_hot_tier(db: Path) -> None:
    """LangGraph's sync engine writes from worker threads; every run completes as on the stock saver."""
    from concurrent.futures import ThreadPoolExecutor

    tiered = TieredSaver(sqlite_durable(db), config=InMemoryCheckpointConfig(max_threads=2))
    app, stock = approval_graph(tiered, {}), approval_graph(StockSaver(), {})

    def conversation(app: Any, index: int) -> list[Any]:
        cfg = thread(f"user-{index}")
        first = app.invoke({"messages": [f"hi {index}"]}, cfg)
        return [without_interrupt_ids(first), app.invoke(Command(resume=index), cfg)]

    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda index: conversation(app, index), range(16)))
    assert got == [conversation(stock, index) for index in range(16)]
    tiered.check()


# --- reads across tiers ----------------------------------------------------------------------------------------------


def test_reads_past_the_resident_suffix_go_to_the_durable_tier_and_agree(db: Path) -> None:
    durable = ControlledSqlite(db)
    writer = TieredSaver(durable)
    stored = put_chain(writer, "long", 10)
    reader = TieredSaver(ControlledSqlite(db))  # a cold hot tier: the thread comes back as a suffix
    reference = sqlite_durable(db)
    assert reader.get_tuple(thread("long")) == reference.get_tuple(thread("long"))
    calls = reader.durable.calls  # type: ignore[attr-defined]
    before = sum(calls.values())
    assert reader.get_tuple(stored[-1]) == reference.get_tuple(stored[-1])  # resident: no durable call
    assert tuples(reader, "long", limit=1) == tuples(reference, "long", limit=1)
    assert sum(calls.values()) == before
    assert tuples(reader, "long", limit=3) == tuples(reference, "long", limit=3)  # past the suffix
    assert tuples(reader, "long", before=stored[5], limit=2) == tuples(reference, "long", before=stored[5], limit=2)
    assert reader.get_tuple(stored[2]) == reference.get_tuple(stored[2])
    assert tuples(reader, "long", filter={"step": 4}) == tuples(reference, "long", filter={"step": 4})
    assert sum(calls.values()) > before
    assert tuples(reader, "long", None, limit=2) == tuples(reference, "long", None, limit=2)  # every namespace
    assert tuples(reader, "long") == tuples(reference, "long")  # the whole namespace, admitted...
    settled = sum(calls.values())
    assert tuples(reader, "long", before=stored[3]) == tuples(reference, "long", before=stored[3])
    assert tuples(reader, "long", filter={"step": 4}) == tuples(reference, "long", filter={"step": 4})
    assert sum(calls.values()) == settled  # ...so these come from memory
    reader.check()


def test_a_new_thread_is_known_empty_after_its_first_read(db: Path) -> None:
    durable = ControlledSqlite(db)
    tiered = TieredSaver(durable)
    assert tiered.get_tuple(thread("fresh")) is None
    assert durable.calls == {"get_tuple": 1, "list": 1}
    put_chain(tiered, "fresh", 2)
    # A subgraph's namespace, a missing id, a listing: all answered from memory, none of them durable reads.
    assert tiered.get_tuple({"configurable": {"thread_id": "fresh", "checkpoint_ns": "node:task"}}) is None
    assert len(list(tiered.list(thread("fresh")))) == 2
    assert durable.calls["get_tuple"] == 1 and durable.calls["list"] == 1


@pytest.mark.parametrize("write", ["through", "back"])
def test_delta_channel_history_is_right_across_tiers(db: Path, write: str) -> None:
    tiered = TieredSaver(sqlite_durable(db), config=InMemoryCheckpointConfig(max_threads=1), write=write)
    runner = Runner(delta_graph(tiered, {}), use_async=False, durability="sync")
    stock = Runner(delta_graph(StockSaver(), {}), use_async=False, durability="sync")
    assert asyncio.run(delta_channel_conversation(runner)) == asyncio.run(delta_channel_conversation(stock))
    tiered.flush()
    reference = sqlite_durable(db)
    history = list(reference.list(thread("delta")))
    for item in history[::3]:
        cold = TieredSaver(sqlite_durable(db))
        cold.get_tuple(thread("delta"))  # only the latest is hot: older walks reach the durable tier
        for saver in (tiered, cold):
            assert saver.get_delta_channel_history(config=item.config, channels=["items"]) == (
                reference.get_delta_channel_history(config=item.config, channels=["items"])
            )


def test_concurrent_misses_on_one_thread_read_the_durable_tier_once(db: Path) -> None:
    put_chain(TieredSaver(sqlite_durable(db)), "popular", 3)
    durable = ControlledSqlite(db)
    tiered = TieredSaver(durable)
    results = read_together(tiered, durable, lambda: tiered.get_tuple(thread("popular")), 6)
    assert durable.calls["get_tuple"] == 1
    assert len(results) == 6 and all(result == results[0] for result in results)
    assert len({id(result.checkpoint) for result in results}) == 6  # each caller has its own objects
    assert tiered.stats().flight_waits == 5


def test_concurrent_async_misses_read_the_durable_tier_once(db: Path) -> None:
    put_chain(TieredSaver(sqlite_durable(db)), "popular", 3)
    durable = ControlledSqlite(db)
    tiered = TieredSaver(durable)

    async def main() -> list[Any]:
        durable.close_gate("get_tuple")
        reads = [asyncio.ensure_future(tiered.aget_tuple(thread("popular"))) for _ in range(6)]
        while flight_waiters(tiered) < 5:
            await asyncio.sleep(0.001)
        durable.gate.set()
        return await asyncio.gather(*reads)

    results = asyncio.run(main())
    assert durable.calls["get_tuple"] == 1 and all(result == results[0] for result in results)


# --- no durable round trip under the engine's lock -------------------------------------------------------------------


def test_a_slow_durable_write_never_holds_up_other_threads_hot_reads_and_writes(db: Path) -> None:
    durable = ControlledSqlite(db)
    tiered = TieredSaver(durable, write="through")
    put_chain(tiered, "busy", 1)
    put_chain(tiered, "other", 1)
    durable.close_gate("put")
    writer = threading.Thread(target=lambda: put_chain(tiered, "busy", 2))
    writer.start()
    assert durable.entered.wait(WAIT)  # the writer waits inside the durable put...
    assert tiered.get_tuple(thread("other")) is not None  # ...while hot reads go on
    assert len(list(tiered.list(thread("other")))) == 1
    assert tiered.stats().hot.threads == 2
    durable.gate.set()
    writer.join(WAIT)
    assert not writer.is_alive()


# --- write-through: checks first, failures leave the hot tier as it was ----------------------------------------------


@pytest.mark.parametrize("write", ["through", "back"])
def test_a_refused_write_is_written_nowhere(db: Path, write: str) -> None:
    durable = ControlledSqlite(db)
    tiered = TieredSaver(
        durable,
        config=InMemoryCheckpointConfig(max_checkpoint_bytes=2_000),
        write=write,
        oversize="refuse",
    )
    stored = put_chain(tiered, "t", 1)[0]
    tiered.flush()
    big = make_checkpoint({"text": "x" * 5_000}, {"text": "2.0"})
    with pytest.raises(CheckpointCapacityError, match="max_checkpoint_bytes"):
        tiered.put(stored, big, {}, {"text": "2.0"})
    with pytest.raises(CheckpointCapacityError, match="max_pending_write_bytes"):
        TieredSaver(
            durable,
            config=InMemoryCheckpointConfig(max_pending_write_bytes=100),
            write=write,
            oversize="refuse",
        ).put_writes(stored, [("text", "y" * 500)], "task")
    with pytest.raises(ValueError, match="max_identifier_length"):
        tiered.put(config("z" * 300), make_checkpoint({"a": 1}), {}, {"a": 1})
    tiered.flush()
    assert durable.calls["put"] == 1 and durable.calls["put_writes"] == 1  # the first chain only
    assert len(list(sqlite_durable(db).list(None))) == 1
    if write == "through":  # write-back's hot tier refuses them itself, uncounted as rejections before the durable
        assert tiered.stats().rejections == {"max_checkpoint_bytes": 1, "identifier": 1}


def test_a_durable_failure_raises_and_leaves_the_hot_tier_as_it_was(db: Path) -> None:
    durable = ControlledSqlite(db)
    tiered = TieredSaver(durable)
    stored = put_chain(tiered, "t", 2)
    before = tiered._store.export_thread("t")
    durable.failing = True
    with pytest.raises(sqlite3.OperationalError, match="disk I/O error"):
        put_chain(tiered, "t", 3)
    with pytest.raises(sqlite3.OperationalError):
        tiered.put_writes(stored[-1], [("step", 99)], "late")
    assert tiered._store.export_thread("t") == before
    assert tiered.stats().durable_errors == 2 and "disk I/O error" in (tiered.stats().last_durable_error or "")
    durable.failing = False
    put_chain(tiered, "u", 1)
    assert tuples(tiered, "t") == tuples(sqlite_durable(db), "t")


def test_store_wide_limits_never_refuse_a_write(db: Path) -> None:
    tiered = TieredSaver(
        sqlite_durable(db), config=InMemoryCheckpointConfig(max_checkpoints_per_thread=3, max_total_bytes=40_000)
    )
    put_chain(tiered, "long", 8)  # passes max_checkpoints_per_thread (reject): it leaves memory
    assert tiered.stats().left_out >= 1
    assert tuples(tiered, "long") == tuples(sqlite_durable(db), "long")
    assert len(tuples(tiered, "long")) == 8
    huge = make_checkpoint({"text": "x" * 60_000}, {"text": "1.0"})
    tiered.put(config("huge"), huge, {}, {"text": "1.0"})  # larger than max_total_bytes: durable only
    assert tiered.get_tuple(thread("huge")).checkpoint["channel_values"]["text"] == "x" * 60_000  # type: ignore[union-attr]
    tiered.check()


# --- write-back ------------------------------------------------------------------------------------------------------


def test_write_back_flushes_on_flush_eviction_and_close(db: Path) -> None:
    durable = ControlledSqlite(db)
    tiered = TieredSaver(
        durable, config=InMemoryCheckpointConfig(max_threads=1), write=WriteBack(flush_interval_seconds=float("inf"))
    )
    stored = put_chain(tiered, "a", 3)
    assert durable.calls["put"] == 0 and tiered.stats().dirty_bytes > 0 and tiered.stats().dirty_threads == 1
    assert tiered.flush() == 6  # three checkpoints, three write batches
    assert tuples(sqlite_durable(db), "a") == tuples(tiered, "a")
    put_chain(tiered, "b", 2)  # evicts "a": clean, nothing to flush
    calls = durable.calls["put"]
    put_chain(tiered, "a", 1)  # evicts "b" with unflushed writes: not flushed in the writer, they wait for a round
    assert durable.calls["put"] == calls and tiered.stats().spills == 0 and tiered._store.last_used("b") is None
    assert tiered.stats().dirty_threads == 2 and tuples(sqlite_durable(db), "b") == []
    tiered.flush()
    assert tiered.stats().spills == 1 and len(tuples(sqlite_durable(db), "b")) == 2
    tiered.close()
    assert tiered.stats().dirty_bytes == 0
    assert (
        tuples(sqlite_durable(db), "a")[0][0]["configurable"]["checkpoint_id"]
        != stored[-1]["configurable"]["checkpoint_id"]
    )


@pytest.mark.parametrize("write", ["through", "back"])
@pytest.mark.parametrize("evicted", [True, False], ids=["evicted", "hot"])
def test_rolling_history_in_the_hot_tier_hides_no_checkpoint_and_doubles_no_write(
    db: Path, write: str, evicted: bool
) -> None:
    """``on_checkpoint_limit="prune_oldest"`` decides what stays in memory only: a listing it pruned while
    admitting marked the namespace wholly hot (older checkpoints vanished from list and get_tuple), and one
    that re-admitted checkpoints still hot doubled their pending writes (found in review)."""
    rolling = InMemoryCheckpointConfig(max_threads=1, max_checkpoints_per_thread=3, on_checkpoint_limit="prune_oldest")
    tiered = TieredSaver(sqlite_durable(db), config=rolling, write=write)
    stored = put_chain(tiered, "a", 6)
    if evicted:
        put_chain(tiered, "b", 1)  # "a" leaves memory
    tiered.flush()
    durable = sqlite_durable(db)
    for _ in range(3):  # each listing admits what it read, which rolling history prunes again
        assert tuples(tiered, "a") == tuples(durable, "a") and len(tuples(durable, "a")) == 6
        assert tuples(tiered, "a", before=stored[3]) == tuples(durable, "a", before=stored[3])
        assert tuples(tiered, "a", filter={"step": 0}) == tuples(durable, "a", filter={"step": 0})
        assert tuples(tiered, "a", limit=4) == tuples(durable, "a", limit=4)
        oldest = tiered.get_tuple(stored[0])
        assert oldest is not None and oldest.checkpoint == durable.get_tuple(stored[0]).checkpoint  # type: ignore[union-attr]
    tiered.check()
    tiered.close()


class Asked(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


@pytest.mark.parametrize("write", ["through", "back"])
def test_rolling_history_and_a_fork_read_every_pending_write_once(db: Path, write: str) -> None:
    """A listing past the hot suffix after rolling history pruned re-admitted checkpoints still hot, which then
    reported a pending write twice, and replaying such a checkpoint applied it twice (found in review)."""
    durable = sqlite_durable(db)
    rolling = InMemoryCheckpointConfig(max_checkpoints_per_thread=6, on_checkpoint_limit="prune_oldest")
    tiered = TieredSaver(durable, config=rolling, write=write)
    builder = linear(
        Asked, {"a": lambda state: {"log": ["a"]}, "ask": lambda state: {"log": [f"ans:{interrupt('q')}"]}}
    )
    app = builder.compile(checkpointer=tiered)
    thread = {"configurable": {"thread_id": "t"}}
    for turn in range(3):
        app.invoke({"log": [f"in{turn}"]}, thread)
        app.invoke(Command(resume=f"r{turn}"), thread)
    waiting = [state for state in app.get_state_history(thread) if state.next == ("ask",)][-1]
    app.invoke(Command(resume="fork-yes"), app.update_state(waiting.config, {"log": ["forked"]}))
    tiered.flush()

    def pending(saver: Any, checkpoint: Any) -> list[Any]:
        return sorted((write[1], repr(write[2])) for write in saver.get_tuple(checkpoint).pending_writes)

    for item in list(durable.list(thread)):  # read whole first: SqliteSaver's list holds its lock while iterating
        assert pending(tiered, item.config) == pending(durable, item.config), item.metadata
    tiered.close()


@pytest.mark.parametrize("write", ["through", "back"])
def test_a_thread_expiring_inside_its_own_put_keeps_every_value(db: Path, write: str) -> None:
    """A put on a thread whose TTL passes during the put: the hot copy held the unchanged values when they were
    looked for, then expired with the thread, and the checkpoint was stored (and, write-back, flushed to the
    durable tier) without them (found in review)."""
    tiered = TieredSaver(
        sqlite_durable(db),
        config=InMemoryCheckpointConfig(idle_ttl_seconds=0.5),
        write=write_mode(write, flush_interval_seconds=float("inf")),
        clock=SteppingClock(),
    )
    first = tiered.put(
        config("a"), make_checkpoint({"big": "x" * 500, "n": 1}, {"big": 1, "n": 1}), {}, {"big": 1, "n": 1}
    )
    second = make_checkpoint({"big": "x" * 500, "n": 2}, {"big": 1, "n": 2})
    latest = tiered.put(first, second, {}, {"n": 2})  # "big" is unchanged: LangGraph hands over "n" only
    tiered.flush()
    expected = {"big": "x" * 500, "n": 2}
    assert sqlite_durable(db).get_tuple(latest).checkpoint["channel_values"] == expected  # type: ignore[union-attr]
    assert tiered.get_tuple(latest).checkpoint["channel_values"] == expected  # type: ignore[union-attr]
    tiered.close()


def test_write_back_flushes_periodically(db: Path) -> None:
    tiered = TieredSaver(sqlite_durable(db), write=WriteBack(flush_interval_seconds=0.01))
    put_chain(tiered, "a", 2)
    wait_until(lambda: tiered.stats().dirty_bytes == 0)
    assert len(tuples(sqlite_durable(db), "a")) == 2
    tiered.close()


def test_a_copy_keeps_the_periodic_flush_of_the_saver_it_came_from(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """compile() under strict msgpack keeps only a with_allowlist() copy; the flush stopped with the original."""
    monkeypatch.setattr("langgraph.checkpoint.serde._msgpack.STRICT_MSGPACK_ENABLED", True)  # as the variable does
    strict = SqliteSaver(sqlite3.connect(db, check_same_thread=False), serde=JsonPlusSerializer())
    original = TieredSaver(strict, write=WriteBack(flush_interval_seconds=0.01))
    copy = original.with_allowlist([("tests.tiered.test_tiers", "Anything")])
    assert copy is not original
    del original
    gc.collect()
    put_chain(copy, "a", 2)
    wait_until(lambda: copy.stats().dirty_bytes == 0)  # no flush() and no close(): the periodic flush
    assert len(tuples(sqlite_durable(db), "a")) == 2
    copy.close()


def test_entering_a_closed_saver_resumes_its_periodic_flush(db: Path) -> None:
    """close() stops the periodic flush; entering the saver as a context again starts it (it did not)."""
    tiered = TieredSaver(sqlite_durable(db), write=WriteBack(flush_interval_seconds=0.01))
    tiered.close()
    with tiered:
        put_chain(tiered, "a", 2)
        wait_until(lambda: tiered.stats().dirty_bytes == 0)  # no flush() and no close(): the periodic flush
        assert len(tuples(sqlite_durable(db), "a")) == 2


def test_write_back_backpressure_flushes_first_and_counts_the_wait(db: Path) -> None:
    """Writes coming faster than the bound allows wait for a flush, and stats() says how often and how long."""
    roomy = TieredSaver(sqlite_durable(db), write=WriteBack(flush_interval_seconds=float("inf")))
    put_chain(roomy, "roomy", 20)
    assert roomy.stats().backpressure_waits == 0 and roomy.stats().backpressure_seconds == 0
    roomy.close()
    tiered = TieredSaver(
        sqlite_durable(db), write=WriteBack(flush_interval_seconds=float("inf"), max_dirty_bytes=2_000)
    )
    put_chain(tiered, "a", 20)
    waited = tiered.stats()
    assert waited.dirty_bytes <= 2_000 and waited.flushes >= 1
    assert waited.backpressure_waits >= 1 and waited.backpressure_seconds > 0
    assert 1 <= len(tuples(sqlite_durable(db), "a")) < 20  # flushed to make room, before any flush() or close()
    tiered.close()
    assert tuples(sqlite_durable(db), "a") == tuples(tiered, "a")


def test_write_back_backpressure_refuses_with_the_durable_failure_then_recovers(db: Path) -> None:
    durable = ControlledSqlite(db)
    tiered = TieredSaver(durable, write=WriteBack(flush_interval_seconds=float("inf"), max_dirty_bytes=2_000))
    put_chain(tiered, "a", 1)
    durable.failing = True
    with pytest.raises(CheckpointCapacityError) as refused:
        put_chain(tiered, "a", 20)
    assert refused.value.limit == "max_dirty_bytes" and "disk I/O error" in str(refused.value)
    assert "nothing was changed" in str(refused.value)
    held = tiered.stats()
    assert held.dirty_bytes <= 2_000 and held.flush_failures >= 1
    before = tiered._store.export_thread("a")
    with pytest.raises(CheckpointCapacityError):
        tiered.put_writes(
            {"configurable": {"thread_id": "a", "checkpoint_ns": "", "checkpoint_id": "x"}}, [("s", "z" * 900)], "t"
        )
    assert tiered._store.export_thread("a") == before  # refused: nothing changed
    durable.failing = False
    put_chain(tiered, "b", 3)  # flushes the backlog first
    tiered.flush()
    assert tuples(sqlite_durable(db), "a") == tuples(tiered, "a")
    assert tiered.stats().dirty_bytes == 0


def test_write_back_keeps_an_evicted_dirty_thread_while_the_durable_tier_is_down(db: Path) -> None:
    durable = ControlledSqlite(db)
    tiered = TieredSaver(
        durable, config=InMemoryCheckpointConfig(max_threads=1), write=WriteBack(flush_interval_seconds=float("inf"))
    )
    put_chain(tiered, "a", 2)
    durable.failing = True
    put_chain(tiered, "b", 1)  # evicts "a", whose spill fails: its writes stay in memory
    assert tiered.stats().dirty_threads == 2 and tiered._store.last_used("a") is None
    with pytest.raises(sqlite3.OperationalError):
        tiered.get_tuple(thread("a"))  # not in memory, not durable yet: refused loudly, never stale
    durable.failing = False
    assert tiered.get_tuple(thread("a")) == sqlite_durable(db).get_tuple(thread("a"))
    tiered.close()
    assert len(tuples(sqlite_durable(db), "a")) == 2 and len(tuples(sqlite_durable(db), "b")) == 1


def test_write_back_falls_back_to_write_through_for_a_store_wide_refusal(db: Path) -> None:
    tiered = TieredSaver(
        sqlite_durable(db), config=InMemoryCheckpointConfig(max_checkpoints_per_thread=2), write="back"
    )
    put_chain(tiered, "a", 5)
    tiered.flush()
    assert len(tuples(sqlite_durable(db), "a")) == 5 and tuples(tiered, "a") == tuples(sqlite_durable(db), "a")


# --- deletion: a deleted thread never comes back ---------------------------------------------------------------------


@pytest.mark.parametrize("write", ["through", "back"])
def test_late_writes_of_a_deleted_thread_are_refused(db: Path, write: str) -> None:
    tiered = TieredSaver(sqlite_durable(db), write=write)
    stored = put_chain(tiered, "gone", 3)
    tiered.delete_thread("gone")
    with pytest.raises(ThreadDeletedError, match="gone"):
        tiered.put(stored[-1], make_checkpoint({"a": 1}), {}, {"a": 1})
    with pytest.raises(ThreadDeletedError):
        tiered.put_writes(stored[1], [("a", 1)], "late")
    tiered.flush()
    assert tiered.get_tuple(thread("gone")) is None and list(sqlite_durable(db).list(None)) == []
    put_chain(tiered, "gone", 1)  # a new run on the id starts afresh
    assert len(tuples(sqlite_durable(db) if write == "through" else tiered, "gone")) == 1
    assert tiered.stats().rejections["deleted_thread"] == 2


def test_a_read_through_under_way_does_not_bring_a_deleted_thread_back(db: Path) -> None:
    put_chain(TieredSaver(sqlite_durable(db)), "gone", 2)
    durable = ControlledSqlite(db)
    tiered = TieredSaver(durable)
    durable.close_gate("get_tuple")
    reader = threading.Thread(target=lambda: tiered.get_tuple(thread("gone")))
    reader.start()
    assert durable.entered.wait(WAIT)
    durable.gated = set()
    tiered.delete_thread("gone")
    durable.gate.set()
    reader.join(WAIT)
    assert tiered._store.last_used("gone") is None  # what it read was not admitted
    assert tiered.get_tuple(thread("gone")) is None


# --- both tiers: copy, prune, delete_for_runs ------------------------------------------------------------------------


@pytest.mark.parametrize("write", ["through", "back"])
def test_copy_prune_and_delete_for_runs_act_on_both_tiers(db: Path, write: str) -> None:
    from langgraph.checkpoint.bounded import BoundedInMemorySaver

    tiered = TieredSaver(sqlite_durable(db), write=write)
    ours = BoundedInMemorySaver()
    for saver in (tiered, ours):
        app = approval_graph(saver, {})
        app.invoke({"messages": ["one"]}, thread("source"))
        app.invoke(Command(resume="yes"), thread("source"))
        app.invoke({"messages": ["two"]}, thread("source"))
        saver.copy_thread("source", "copy")
        assert approval_graph(saver, {}).invoke(Command(resume="copied"), thread("copy"))["approved"] == "copied"
    run_ids = sorted({item.metadata.get("run_id") for item in tiered.list(thread("source"))} - {None})
    for saver in (tiered, ours):
        saver.delete_for_runs(run_ids[:1])
        saver.prune(["copy"], strategy="keep_latest")
    for thread_id in ("source", "copy"):
        got = [item.config["configurable"]["checkpoint_id"] for item in tiered.list(thread(thread_id))]
        assert len(got) == len(list(ours.list(thread(thread_id))))
        tiered.flush()
        durable = sqlite_durable(db).list(thread(thread_id))
        assert got == [item.config["configurable"]["checkpoint_id"] for item in durable]
    tiered.prune(["copy"], strategy="delete")
    assert tiered.get_tuple(thread("copy")) is None and sqlite_durable(db).get_tuple(thread("copy")) is None


# --- sides of the durable saver --------------------------------------------------------------------------------------


def test_an_async_durable_saver_serves_async_calls_and_says_why_sync_ones_fail_on_its_loop(db: Path) -> None:
    import aiosqlite
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    async def main() -> None:
        async with aiosqlite.connect(db) as connection:
            tiered = TieredSaver(AsyncSqliteSaver(connection), config=SMALL)
            assert "async" in tiered._durable_sides
            stock = StockSaver()
            for saver in (tiered, stock):
                app = approval_graph(saver, {})
                await app.ainvoke({"messages": ["hi"]}, thread("a"))
            for index in range(3):
                await approval_graph(tiered, {}).ainvoke({"messages": ["x"]}, thread(f"other-{index}"))
            result = await approval_graph(tiered, {}).ainvoke(Command(resume="ok"), thread("a"))
            assert result == await approval_graph(stock, {}).ainvoke(Command(resume="ok"), thread("a"))
            with pytest.raises(DurableSideError, match="use the async methods"):
                tiered.get_tuple(thread("never-read"))
            found = await asyncio.to_thread(tiered.get_tuple, thread("other-0"))  # from another thread: fine
            assert found is not None
            await tiered.aclose()

    asyncio.run(main())


def test_with_allowlist_copies_share_everything(db: Path) -> None:
    tiered = TieredSaver(sqlite_durable(db))
    copy = tiered.with_allowlist([("tests", "graphs", "ChatState")])
    put_chain(copy, "shared", 2)
    assert tiered.get_tuple(thread("shared")) == copy.get_tuple(thread("shared"))
    assert tiered.stats().hits == copy.stats().hits and copy._store is tiered._store


def test_settings_are_checked_naming_them(db: Path) -> None:
    durable = sqlite_durable(db)
    for kwargs, message in [
        ({"write": "sideways"}, "write must be 'through', 'back', WriteThrough"),
        ({"oversize": "maybe"}, "oversize must be one of"),
        ({"config": InMemoryCheckpointConfig(on_evict=print)}, "on_evict must be unset"),
        ({"config": InMemoryCheckpointConfig(autosave_path="x")}, "autosave_path must be unset"),
    ]:
        with pytest.raises(InvalidArgumentError, match=message):
            TieredSaver(durable, **kwargs)
    with pytest.raises(InvalidArgumentError, match="BaseCheckpointSaver"):
        TieredSaver(object())  # type: ignore[arg-type]


def test_what_is_known_of_threads_that_left_memory_stays_bounded() -> None:
    from langgraph.checkpoint.bounded.tiered.residency import SWEEP_FLOOR

    tiered = TieredSaver(StockSaver(), config=InMemoryCheckpointConfig(max_threads=2))
    for index in range(3 * SWEEP_FLOOR):
        tiered.put(config(f"t{index}"), make_checkpoint({"a": index}), {}, {"a": 1})
    assert tiered.stats().hot.threads == 2
    assert len(tiered._shared.residency) <= 2 * SWEEP_FLOOR + 2
