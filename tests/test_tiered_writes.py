"""``TieredSaver``'s writes: what the durable tier can take is taken, what it cannot is refused before it is
acknowledged, and write-back's backlog is bounded in bytes and in age.

Durable failures and slow calls come from ``ControlledSqlite`` (tests/test_tiered_support.py); every wait is on
an event, never on time.
"""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver as StockSaver
from langgraph.graph import START, StateGraph

from langgraph.checkpoint.bounded import CheckpointCapacityError, InMemoryCheckpointConfig, TieredSaver
from tests.helpers import config, make_checkpoint
from tests.test_tiered_support import ControlledSqlite, sqlite_durable

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

    builder = StateGraph(WideState)
    builder.add_node("fill", fill)
    builder.add_edge(START, "fill")
    return builder.compile(checkpointer=checkpointer)


def sizes(state: Any) -> dict[str, int]:
    return {key: len(value) for key, value in state.values.items()}


@pytest.mark.parametrize("write", ["through", "back"])
@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_a_wide_state_over_the_hot_limits_goes_to_the_durable_tier(db: Path, write: str, use_async: bool) -> None:
    """LangGraph's wide-state graphs write checkpoints above the default 1 MiB max_checkpoint_bytes: the durable
    tier is the store of record, so they are stored there and their thread stays out of memory (counted)."""
    tiered = TieredSaver(sqlite_durable(db), write=write)  # type: ignore[arg-type]
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
    tiered = TieredSaver(sqlite_durable(db), write=write, oversize="refuse")  # type: ignore[arg-type]
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
        write=write,  # type: ignore[arg-type]
        flush_interval_seconds=math.inf,
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
        TieredSaver(sqlite_durable(db), oversize="drop")  # type: ignore[arg-type]
