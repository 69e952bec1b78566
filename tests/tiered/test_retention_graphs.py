"""``prune(strategy="keep_last")`` under real graphs: what retention keeps answers as the stock saver does.

Every graph scenario of ``tests/support/graphs.py`` (interrupts and resumes, subgraphs that interrupt,
``Send`` fan-out, time travel and forks, a failing branch resumed, ``DeltaChannel`` history) runs twice:
on LangGraph's ``InMemorySaver``, and on a saver pruned to ``KEEP_LAST`` checkpoints per namespace after
every invoke and every state update. Both runs see their history through the same window, the newest
``KEEP_LAST - 1`` snapshots, so the scenarios time-travel to the same checkpoints. The traces (results,
states, histories in the window, how many times each node ran) must be equal: a resume after a prune
re-runs no completed task, a subgraph resumes inside its call, and an old checkpoint of a
``DeltaChannel`` thread rebuilds its value.

Pruned savers: the memory saver (its engine's rule), and ``TieredSaver`` over a SQLite file (one
transaction per thread, write-through and write-back) and over LangGraph's ``InMemorySaver`` (the
rewrite through the API). PostgreSQL's are in ``test_retention_postgres.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver as StockSaver
from langgraph.types import StateSnapshot

from langgraph.checkpoint.bounded import BoundedInMemorySaver, InMemoryCheckpointConfig, TieredSaver
from tests.support.durable_savers import sqlite_durable
from tests.support.graphs import SCENARIOS, Runner

KEEP_LAST = 4
WIDER = {"replay_and_fork": 12}  # it forks from a checkpoint of its first run after two more: kept that long
SMALL = InMemoryCheckpointConfig(max_threads=2)


@dataclass
class KeptWindow(Runner):
    """A runner that prunes every thread it touches to ``keep_last`` checkpoints per namespace after each
    invoke and update (``prune`` None: never), and shows the newest ``keep_last - 1`` snapshots of a
    history."""

    keep_last: int = KEEP_LAST
    prune: Callable[[str], Any] | None = None

    async def _pruned(self, config: RunnableConfig) -> None:
        if self.prune is None:
            return
        done = self.prune(str(config["configurable"]["thread_id"]))
        if asyncio.iscoroutine(done):
            await done

    async def invoke(self, value: Any, config: RunnableConfig) -> Any:
        try:
            return await super().invoke(value, config)
        finally:
            await self._pruned(config)

    async def update(self, config: RunnableConfig, values: Any, as_node: str | None = None) -> RunnableConfig:
        updated = await super().update(config, values, as_node=as_node)
        await self._pruned(config)
        return updated

    async def raw_history(self, config: RunnableConfig) -> list[StateSnapshot]:
        return (await super().raw_history(config))[: self.keep_last - 1]

    async def history(self, config: RunnableConfig) -> list[dict[str, Any]]:
        # Whether a snapshot has a parent is left out: a fork's first checkpoint hangs from one the window
        # cut (a durable tier's prune leaves it with no parent, as PostgresSaver.prune does; the memory
        # saver keeps the id). test_retention checks that no durable checkpoint is left with a parent that
        # is not there.
        return [{**entry, "has_parent": None} for entry in await super().history(config)]


def pruner(saver: Any, use_async: bool, keep_last: int = KEEP_LAST) -> Callable[[str], Any]:
    if use_async:
        return lambda thread_id: saver.aprune([thread_id], strategy="keep_last", keep_last=keep_last)
    return lambda thread_id: saver.prune([thread_id], strategy="keep_last", keep_last=keep_last)


SAVERS: dict[str, Callable[[Path], BaseCheckpointSaver]] = {
    "memory": lambda path: BoundedInMemorySaver(),
    "tiered-sqlite-through": lambda path: TieredSaver(sqlite_durable(path / "t.db"), config=SMALL),
    "tiered-sqlite-back": lambda path: TieredSaver(sqlite_durable(path / "t.db"), config=SMALL, write="back"),
    "tiered-stock-memory": lambda path: TieredSaver(StockSaver(), config=SMALL),
}


@pytest.fixture(params=sorted(SAVERS))
def pruned_saver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseCheckpointSaver]:
    saver = SAVERS[request.param](tmp_path)
    yield saver
    if isinstance(saver, TieredSaver):
        saver.close()


async def traces(
    factory: Any, scenario: Any, saver: BaseCheckpointSaver, use_async: bool, keep_last: int
) -> tuple[Any, Any]:
    stock_calls: dict[str, int] = {}
    stock = KeptWindow(factory(StockSaver(), stock_calls), use_async, "async", stock_calls, keep_last)
    ours_calls: dict[str, int] = {}
    prune = pruner(saver, use_async, keep_last)
    ours = KeptWindow(factory(saver, ours_calls), use_async, "async", ours_calls, keep_last, prune)
    return await scenario(stock), await scenario(ours)


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_what_keep_last_keeps_answers_as_the_stock_saver(
    name: str, use_async: bool, pruned_saver: BaseCheckpointSaver
) -> None:
    factory, scenario = SCENARIOS[name]
    expected, actual = await traces(factory, scenario, pruned_saver, use_async, WIDER.get(name, KEEP_LAST))
    assert actual == expected


async def test_the_prunes_removed_checkpoints(tmp_path: Path) -> None:
    """The equality above is not for want of pruning: the pruned thread holds far fewer checkpoints."""
    factory, scenario = SCENARIOS["interrupt_and_resume"]
    saver = TieredSaver(sqlite_durable(tmp_path / "t.db"), config=SMALL)
    stock_saver = StockSaver()
    calls: dict[str, int] = {}
    await scenario(KeptWindow(factory(stock_saver, calls), False, "async", calls))
    await scenario(KeptWindow(factory(saver, {}), False, "async", {}, prune=pruner(saver, False)))
    config: RunnableConfig = {"configurable": {"thread_id": "approval"}}
    assert len(list(saver.list(config))) == KEEP_LAST < len(list(stock_saver.list(config)))
    assert saver.stats().retention.pruned_threads > 0
    assert saver.stats().retention.checkpoints == len(list(stock_saver.list(config))) - KEEP_LAST


def test_a_delta_channel_thread_pruned_over_sqlite_keeps_its_snapshot(tmp_path: Path) -> None:
    """``SqliteSaver`` keeps each checkpoint's values inline: a kept checkpoint that shares its
    ``DeltaChannel`` version with the snapshot before it (a turn's input checkpoint) holds no value of its
    own, so that snapshot must stay (the engine, which shares values by version, would let it go)."""
    from tests.support.graphs import delta_graph, thread

    saver = TieredSaver(sqlite_durable(tmp_path / "t.db"), config=SMALL)
    app = delta_graph(saver, {})
    stock = delta_graph(StockSaver(), {})
    for turn in range(4):
        for each in (app, stock):
            each.invoke({"items": [f"user {turn}"]}, thread("delta"))
        saver.prune(["delta"], strategy="keep_last", keep_last=4)  # the turn's input checkpoint is kept
        by_step = {s.metadata["step"]: s.values for s in stock.get_state_history(thread("delta"))}
        assert all(s.values == by_step[s.metadata["step"]] for s in app.get_state_history(thread("delta")))
