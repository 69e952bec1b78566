"""LangGraph's conformance suite on ``TieredSaver``: all eight capabilities, base and extended.

Over a real ``SqliteSaver`` file and a real PostgreSQL server (started from the
distribution's binaries, as the transfer test does, or skipped saying so
loudly), in both write modes, through the async methods (which the suite calls)
and again through the sync ones (a facade routes the suite's async calls to
them). Neither durable saver has ``copy_thread`` or ``delete_for_runs``, and
``SqliteSaver`` has no ``prune``: those pass through their emulation.
``AsyncPostgresSaver`` runs too, its async side native. The hot tier holds two
threads, so the suite's threads keep leaving memory and coming back.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES
from langgraph.checkpoint.conformance.report import ProgressCallbacks
from langgraph.checkpoint.sqlite import SqliteSaver

from langgraph.checkpoint.bounded import InMemoryCheckpointConfig, TieredSaver
from tests.support.drivers import SyncDriven
from tests.support.durable_savers import running_cluster, set_up

CAPABILITIES = sorted(c.value for c in ALL_CAPABILITIES)
HOT = InMemoryCheckpointConfig(max_threads=2)  # the suite's threads leave memory all the time


async def run_capability(factory: Any, capability: str) -> None:
    report = await validate(factory, capabilities={capability}, progress=ProgressCallbacks.quiet())
    result = report.results[capability]
    assert result.detected, f"{capability} is not implemented (its async method is not overridden)"
    assert result.passed, f"{capability} failed: {result.failures}"
    assert result.tests_passed > 0 and result.tests_failed == 0


def registered(name: str, make: Any, *, sync: bool) -> Any:
    """A conformance factory: a fresh tiered saver over ``make()``, checked and flushed at the end."""

    @checkpointer_test(name=name)
    async def factory() -> AsyncIterator[BaseCheckpointSaver[str]]:
        saver = make()
        yield SyncDriven(saver) if sync else saver
        saver.check()
        await saver.aclose()
        assert saver.stats().dirty_bytes == 0

    return factory


# --- SQLite, a file per saver ------------------------------------------------------------------------------------


@pytest.fixture
def sqlite_file(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "conformance.sqlite"


@pytest.mark.parametrize("capability", CAPABILITIES)
@pytest.mark.parametrize("write", ["through", "back"])
@pytest.mark.parametrize("side", ["async", "sync"])
async def test_every_capability_over_sqlite(sqlite_file: Path, write: str, side: str, capability: str) -> None:
    connections: list[sqlite3.Connection] = []

    def make() -> TieredSaver:
        connection = sqlite3.connect(sqlite_file, check_same_thread=False)
        connections.append(connection)
        return TieredSaver(SqliteSaver(connection), config=HOT, write=write)  # type: ignore[arg-type]

    try:
        await run_capability(registered(f"tiered-sqlite-{write}-{side}", make, sync=side == "sync"), capability)
    finally:
        for connection in connections:
            connection.close()


# --- PostgreSQL ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def postgres_conninfo() -> Iterator[str]:
    for cluster in running_cluster("the tiered conformance run over PostgreSQL"):
        yield set_up(cluster.conninfo)


@pytest.mark.parametrize("capability", CAPABILITIES)
@pytest.mark.parametrize("write", ["through", "back"])
@pytest.mark.parametrize("side", ["async", "sync"])
async def test_every_capability_over_postgres(postgres_conninfo: str, write: str, side: str, capability: str) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg import Connection
    from psycopg.rows import dict_row

    connections: list[Any] = []

    def make() -> TieredSaver:
        connection = Connection.connect(postgres_conninfo, autocommit=True, prepare_threshold=0, row_factory=dict_row)
        connections.append(connection)
        durable = PostgresSaver(connection)
        durable.setup()
        return TieredSaver(durable, config=HOT, write=write)  # type: ignore[arg-type]

    try:
        await run_capability(registered(f"tiered-postgres-{write}-{side}", make, sync=side == "sync"), capability)
    finally:
        for connection in connections:
            connection.close()


@pytest.mark.parametrize("capability", CAPABILITIES)
async def test_every_capability_over_async_postgres(postgres_conninfo: str, capability: str) -> None:
    """``AsyncPostgresSaver``: the async side native, bound to the suite's event loop."""
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg import AsyncConnection
    from psycopg.rows import dict_row

    connections: list[Any] = []

    @checkpointer_test(name="tiered-async-postgres")
    async def factory() -> AsyncIterator[BaseCheckpointSaver[str]]:
        connection = await AsyncConnection.connect(
            postgres_conninfo, autocommit=True, prepare_threshold=0, row_factory=dict_row
        )
        connections.append(connection)
        durable = AsyncPostgresSaver(connection)
        await durable.setup()
        saver = TieredSaver(durable, config=HOT)
        yield saver
        saver.check()
        await saver.aclose()

    try:
        await run_capability(factory, capability)
    finally:
        for connection in connections:
            await connection.close()
