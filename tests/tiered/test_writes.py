"""``TieredSaver``'s writes: what the durable tier can take is taken, what it cannot is refused before it is
acknowledged, and write-back's backlog is bounded in bytes and in age.

Durable failures and slow calls come from ``ControlledSqlite`` (tests/support/durable_savers.py); every wait is on
an event, never on time.
"""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver as StockSaver

from langgraph.checkpoint.bounded import CheckpointCapacityError, InMemoryCheckpointConfig, TieredSaver, WriteBack
from tests.support.durable_savers import ControlledSqlite, sqlite_durable
from tests.support.graphs import linear
from tests.support.helpers import config, make_checkpoint
from tests.support.tiered import write_mode

WIDE_KEYS = 300


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "durable.sqlite"


# --- 12. a write the durable tier can take is never refused for the hot tier's size limits ---------------------------

WideState = TypedDict("WideState", {f"key_{i}": str for i in range(WIDE_KEYS)}, total=False)  # type: ignore[misc]


def wide_graph(checkpointer: Any) -> Any:
    """LangGraph's wide_state benchmark shape: 300 keys, each rewritten by a step (a state of about 1.2 MiB)."""

    def fill(state: WideState) -> dict[str, str]:
        turn = len(state.get("key_0", "")) // 4_096  # type: ignore[misc]
        return {f"key_{i}": f"{i:04d}{turn}".ljust(4_096 * (turn + 1), "x") for i in range(WIDE_KEYS)}

    builder = linear(WideState, {"fill": fill})
    return builder.compile(checkpointer=checkpointer)


def sizes(state: Any) -> dict[str, int]:
    return {key: len(value) for key, value in state.values.items()}


@pytest.mark.parametrize("write", ["through", "back"])
@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_a_wide_state_over_the_hot_limits_goes_to_the_durable_tier(db: Path, write: str, use_async: bool) -> None:
    """LangGraph's wide-state graphs write checkpoints above the default 1 MiB max_checkpoint_bytes: the durable
    tier is the store of record, so they are stored there and their thread stays out of memory (counted)."""
    tiered = TieredSaver(sqlite_durable(db), write=write)
    app, stock = wide_graph(tiered), wide_graph(StockSaver())
    thread = {"configurable": {"thread_id": "wide"}}
    for _ in range(2):
        if use_async:
            asyncio.run(app.ainvoke({}, thread))
        else:
            app.invoke({}, thread)
        stock.invoke({}, thread)
    assert sizes(app.get_state(thread)) == sizes(stock.get_state(thread))
    assert sum(sizes(app.get_state(thread)).values()) > 2 * 1024 * 1024  # over the hot tier's limit indeed
    stats = tiered.stats()
    assert stats.oversize >= 1
    assert stats.hot.rejections == {} or "max_checkpoint_bytes" in stats.hot.rejections
    tiered.flush()
    durable_state = wide_graph(sqlite_durable(db)).get_state(thread)
    assert sizes(durable_state) == sizes(stock.get_state(thread))
    assert [len(list(app.get_state_history(thread)))] == [len(list(stock.get_state_history(thread)))]
    tiered.check()
    tiered.close()


@pytest.mark.parametrize("write", ["through", "back"])
def test_oversize_refuse_keeps_the_memory_savers_refusal(db: Path, write: str) -> None:
    tiered = TieredSaver(sqlite_durable(db), write=write, oversize="refuse")
    with pytest.raises(CheckpointCapacityError, match=r"max_(checkpoint|pending_write)_bytes"):
        wide_graph(tiered).invoke({}, {"configurable": {"thread_id": "wide"}})
    tiered.flush()
    written = [item.checkpoint["channel_values"] for item in sqlite_durable(db).list(config("wide"))]
    assert not any("key_0" in values for values in written)  # the refused state was written nowhere


@pytest.mark.parametrize("write", ["through", "back"])
def test_an_oversized_batch_of_writes_goes_to_the_durable_tier(db: Path, write: str) -> None:
    durable = ControlledSqlite(db)
    tiered = TieredSaver(
        durable,
        config=InMemoryCheckpointConfig(max_pending_write_bytes=1_000),
        write=write_mode(write, flush_interval_seconds=math.inf),
    )
    stored = tiered.put(config("t"), make_checkpoint({"x": 1}, {"x": 1}), {"step": 0}, {"x": 1})
    tiered.put_writes(stored, [("x", "y" * 5_000)], "big-task")
    got = tiered.get_tuple(config("t"))
    assert got is not None and got.pending_writes == [("big-task", "x", "y" * 5_000)]
    assert tiered.stats().oversize == 1
    tiered.flush()
    alone = sqlite_durable(db).get_tuple(config("t"))
    assert alone is not None and alone.pending_writes == [("big-task", "x", "y" * 5_000)]
    tiered.check()


def test_oversize_is_checked_naming_it(db: Path) -> None:
    with pytest.raises(ValueError, match="oversize must be one of"):
        TieredSaver(sqlite_durable(db), oversize="drop")


# --- 3. one write the durable tier cannot store never stops the other threads' flushes --------------------------------


def turn_args(thread_id: str, parent: Any, value: int, size: int) -> tuple[Any, ...]:
    version = f"{value:032}.0"
    checkpoint = make_checkpoint({"n": value, "pad": "p" * size}, {"n": version, "pad": version})
    located = config(thread_id, "", None if parent is None else parent["configurable"]["checkpoint_id"])
    return located, checkpoint, {"step": value}, {"n": version, "pad": version}


def put_turn(tiered: TieredSaver, thread_id: str, parent: Any, value: int, size: int = 10) -> Any:
    return tiered.put(*turn_args(thread_id, parent, value, size))


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_an_unstorable_write_never_stops_the_other_threads_flushes(
    db: Path, caplog: pytest.LogCaptureFixture, use_async: bool
) -> None:
    """Write-back acknowledged a write the durable tier cannot store; every flush then failed at that thread
    first (it is dirty longest), no healthy thread ever reached SQLite, and once max_dirty_bytes was reached every
    write of every thread was refused, for good, and close() raised."""
    from langgraph.checkpoint.bounded import UnstorableWriteError

    durable = ControlledSqlite(db)
    durable.unstorable = {"poison"}
    tiered = TieredSaver(durable, write=WriteBack(flush_interval_seconds=math.inf, max_dirty_bytes=20_000))
    poisoned = put_turn(tiered, "poison", None, 0, size=2_000)  # acknowledged: write-back cannot know

    async def turns(healthy: dict[str, Any]) -> None:
        for turn in range(1, 6):
            for thread_id, parent in healthy.items():
                healthy[thread_id] = await tiered.aput(*turn_args(thread_id, parent, turn, 200))

    healthy = {f"healthy-{index}": put_turn(tiered, f"healthy-{index}", None, 0) for index in range(50)}
    if use_async:  # far past max_dirty_bytes in all: backpressure flushes, and must get past the poison
        asyncio.run(turns(healthy))
    else:
        for turn in range(1, 6):
            for thread_id, parent in healthy.items():
                healthy[thread_id] = put_turn(tiered, thread_id, parent, turn, size=200)
    stats = tiered.stats()
    assert stats.unstorable_threads == 1 and stats.unstorable_writes == 1
    assert stats.last_unstorable is not None and "'poison'" in stats.last_unstorable
    assert any("'poison'" in record.getMessage() for record in caplog.records if record.levelname == "ERROR")
    if use_async:
        asyncio.run(tiered.aflush())
    else:
        tiered.flush()  # nothing unstorable is left to fail it
    assert tiered.stats().dirty_bytes == 0
    alone = sqlite_durable(db)
    for thread_id in healthy:
        got = alone.get_tuple(config(thread_id))
        assert got is not None and got.checkpoint["channel_values"]["n"] == 5, thread_id
    with pytest.raises(UnstorableWriteError, match="'poison'"):
        put_turn(tiered, "poison", poisoned, 1)  # it continues what was dropped: refused, naming the thread
    assert tiered.get_tuple(config("poison")) is None  # the durable tier never had it
    fresh = put_turn(tiered, "poison", None, 7)  # a new run on the thread (from what the durable tier holds)
    assert fresh["configurable"]["thread_id"] == "poison"
    durable.unstorable.clear()
    tiered.close()
    tiered.check()
    assert alone.get_tuple(config("poison")).checkpoint["channel_values"]["n"] == 7  # type: ignore[union-attr]


def test_a_durable_outage_poisons_no_thread(db: Path) -> None:
    """Every thread fails alike while the durable tier is down: no thread's writes are dropped."""
    durable = ControlledSqlite(db)
    tiered = TieredSaver(durable, write=WriteBack(flush_interval_seconds=math.inf))
    parents = {f"t-{index}": put_turn(tiered, f"t-{index}", None, 0) for index in range(5)}
    tiered.flush()
    durable.failing = True
    for thread_id, parent in parents.items():
        parents[thread_id] = put_turn(tiered, thread_id, parent, 1)
    for _ in range(4):
        with pytest.raises(Exception, match="disk I/O error"):
            tiered.flush()
    assert tiered.stats().unstorable_threads == 0 and tiered.stats().dirty_threads == 5
    durable.failing = False
    tiered.flush()
    for thread_id in parents:
        assert sqlite_durable(db).get_tuple(config(thread_id)).checkpoint["channel_values"]["n"] == 1  # type: ignore[union-attr]


def test_a_thread_whose_flushes_fail_for_want_of_the_tier_is_never_poisoned(db: Path) -> None:
    """A connection error about one thread's flushes (a flaky network) while others go through is no strike:
    only a refusal of what was written poisons a thread."""
    durable = ControlledSqlite(db)
    durable.unreachable = {"t-0"}
    tiered = TieredSaver(durable, write=WriteBack(flush_interval_seconds=math.inf))
    parents = {f"t-{index}": put_turn(tiered, f"t-{index}", None, 0) for index in range(3)}
    for turn in range(1, 5):
        for thread_id, parent in parents.items():
            parents[thread_id] = put_turn(tiered, thread_id, parent, turn)
        with pytest.raises(Exception, match="unable to open"):
            tiered.flush()
    assert tiered.stats().unstorable_threads == 0 and tiered.stats().dirty_threads == 1
    durable.unreachable.clear()
    tiered.flush()
    assert sqlite_durable(db).get_tuple(config("t-0")).checkpoint["channel_values"]["n"] == 4  # type: ignore[union-attr]


# --- 5. max_dirty_bytes counts what the ledger keeps alive ------------------------------------------------------------


def ledger_references(tiered: TieredSaver) -> int:
    """The bytes of every distinct value the ledger of unflushed writes references, counted by walking it."""
    seen: dict[int, int] = {}
    for backlog in tiered._shared.dirty.threads.values():
        for item in getattr(backlog, "items", backlog):  # a thread's unflushed writes
            for value in getattr(item, "values", {}).values():
                seen[id(value)] = len(value[1])
            for write in getattr(item, "writes", ()):
                seen[id(write)] = len(write.value_data)
    return sum(seen.values())


def test_dirty_bytes_count_the_unchanged_values_an_evicted_thread_keeps(db: Path) -> None:
    """A write-back put on a thread that left memory re-encodes every unchanged value it references, and the
    ledger keeps them: 150 small turns on a thread with a 900 KB channel, the durable tier down, held 131 MiB
    more while dirty_bytes read 24 KB against a 1 MiB limit. Now they count, and the writes are refused first."""
    durable = ControlledSqlite(db)
    bound = 1024 * 1024
    tiered = TieredSaver(
        durable,
        config=InMemoryCheckpointConfig(max_threads=1, max_checkpoint_bytes=4 * bound),
        write=WriteBack(flush_interval_seconds=math.inf, max_dirty_bytes=bound),
    )
    big = "B" * 900_000
    versions = {"big": "1", "n": "0"}
    parent = tiered.put(config("big"), make_checkpoint({"big": big, "n": 0}, versions), {}, versions)
    other = tiered.put(config("other"), make_checkpoint({"n": 0}, {"n": "0"}), {}, {"n": "0"})
    tiered.flush()
    durable.failing = True
    refused = 0
    for turn in range(1, 151):
        try:
            version = f"{turn:032}.0"
            checkpoint = make_checkpoint({"big": big, "n": turn}, {"big": "1", "n": version})
            parent = tiered.put(parent, checkpoint, {"step": turn}, {"n": version})  # "big" unchanged
            other = tiered.put(other, make_checkpoint({"n": turn}, {"n": version}), {}, {"n": version})
        except CheckpointCapacityError as error:
            assert "max_dirty_bytes" in str(error) and "disk I/O error" in str(error)
            refused += 1
        held = ledger_references(tiered)
        assert held <= bound + 1_000_000, f"turn {turn}: the ledger holds {held:,} bytes against a bound of 1 MiB"
        assert tiered.stats().dirty_bytes >= held  # what it keeps is what it counts
    assert refused > 100  # the bound refused most turns, naming the durable failure
    tiered.check()
    durable.failing = False
    tiered.flush()
    assert sqlite_durable(db).get_tuple(config("big")).checkpoint["channel_values"]["big"] == big  # type: ignore[union-attr]


# --- 6. a crash loses at most the last max_dirty_seconds of writes while the durable tier takes them --------------


class SteppingClock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_a_write_flushes_what_is_older_than_max_dirty_seconds_first(db: Path, use_async: bool) -> None:
    """Writing back to back faster than the durable tier commits, a kill -9 lost 5.3 s of acknowledged work with
    flush_interval_seconds=0.3: only the byte bound pressed. Now a write that finds a write older than
    max_dirty_seconds (the flush interval by default) first runs one round, which flushes every dirty thread,
    the oldest first (issue 34: one flush, as big a batch as is dirty, not one per waiting writer)."""
    clock = SteppingClock()
    durable = ControlledSqlite(db)
    tiered = TieredSaver(durable, write=WriteBack(flush_interval_seconds=0.3), clock=clock)
    tiered.close()  # no periodic flush: only the writes' own backpressure may flush
    first = put_turn(tiered, "a", None, 0)
    clock.now += 0.2
    if use_async:
        asyncio.run(tiered.aput(*turn_args("b", None, 0, 10)))
    else:
        put_turn(tiered, "b", None, 0)
    assert durable.calls["put"] == 0  # a is 0.2 s old: it may wait
    assert tiered.stats().oldest_dirty_seconds == pytest.approx(0.2)
    clock.now += 0.2
    if use_async:
        asyncio.run(tiered.aput(*turn_args("a", first, 1, 10)))
    else:
        put_turn(tiered, "a", first, 1)
    assert sqlite_durable(db).get_tuple(config("a")) is not None  # 0.4 s old: flushed before this write
    assert sqlite_durable(db).get_tuple(config("b")) is not None  # and the rest of what was dirty, in one round
    assert tiered.stats().backpressure_waits == 1
    assert tiered.stats().dirty_threads == 1  # what this write added


def test_age_never_refuses_a_write_while_the_durable_tier_is_down(db: Path) -> None:
    clock = SteppingClock()
    durable = ControlledSqlite(db)
    tiered = TieredSaver(durable, write=WriteBack(flush_interval_seconds=0.3), clock=clock)
    tiered.close()
    durable.failing = True
    parent = put_turn(tiered, "a", None, 0)
    for turn in range(1, 6):
        clock.now += 1.0
        parent = put_turn(tiered, "a", parent, turn)  # old writes wait; the bytes still fit, so writes go on
    assert tiered.stats().dirty_threads == 1
    calls = durable.calls["put"]
    put_turn(tiered, "a", parent, 6)  # within max_dirty_seconds of the failed flush: no new attempt
    assert durable.calls["put"] == calls
    durable.failing = False
    tiered.flush()
    assert sqlite_durable(db).get_tuple(config("a")).checkpoint["channel_values"]["n"] == 6  # type: ignore[union-attr]
