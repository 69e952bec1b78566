"""Retention's discovery finds every due thread, whatever lands when: write-back's late flushes, a put in flight
while a pass runs, a wall clock stepped back, another process's late rows.

A pass reads windows of checkpoint ids (uuid6 ids hold their time). Each test makes a row land below a window
an earlier pass read, and checks that the next pass still finds its thread:

* the issue's case: write-back, five invokes, ``sweep()``, ``flush()``, ``sweep()`` keeps ``keep_last`` (it kept
  all 15), sync and async, over SQLite and PostgreSQL; the idle TTL likewise;
* a write-through put held inside the durable saver while a pass runs is pruned by the next pass, sync and async;
* a wall clock stepped back: this process's puts and another process's, made with the clock as it is, are
  pruned or deleted by the next pass;
* another process's rows landing after a pass, with ids from before it, are found by the next pass;
* the landing ledger and the dirty ledger's lowest id keep their invariants.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langgraph.graph import START, StateGraph

from langgraph.checkpoint.bounded import InMemoryCheckpointConfig, RetentionPolicy, TieredSaver
from langgraph.checkpoint.bounded.tiered.landing import Landings
from langgraph.checkpoint.bounded.tiered.retention.ids import checkpoint_id_at
from langgraph.checkpoint.bounded.tiered.retention.sweep import DISCOVERY_OVERLAP_SECONDS
from tests.support.durable_savers import ControlledSqlite, PostgresCluster, running_cluster, set_up, sqlite_durable
from tests.support.graphs import thread
from tests.support.helpers import config, make_checkpoint
from tests.support.tiered import WAIT
from tests.tiered.test_retention import Clock

SMALL = InMemoryCheckpointConfig(max_threads=4)
BACKENDS = ["sqlite", "async_sqlite", "postgres", "async_postgres"]


@pytest.fixture(scope="module")
def cluster() -> Iterator[PostgresCluster]:
    for running in running_cluster("the retention discovery PostgreSQL tests"):
        set_up(running.conninfo)
        yield running


class Count(TypedDict):
    count: int


def counter(checkpointer: Any) -> Any:
    """The retention guide's graph: three checkpoints an invoke."""
    builder = StateGraph(Count)
    builder.add_node("tick", lambda state: {"count": state["count"] + 1})
    builder.add_edge(START, "tick")
    return builder.compile(checkpointer=checkpointer)


class Tables:
    """Counts rows of the durable tables, and makes a second, plain saver on them (another process's)."""

    def __init__(self, sqlite_path: Path | None, conninfo: str | None) -> None:
        self.sqlite_path, self.conninfo = sqlite_path, conninfo

    def count(self, table: str, thread_id: str) -> int:
        if self.sqlite_path is not None:
            name = "writes" if table == "writes" else table
            with contextlib.closing(sqlite3.connect(self.sqlite_path)) as connection:
                query = f"SELECT count(*) FROM {name} WHERE thread_id = ?"
                return int(connection.execute(query, (thread_id,)).fetchone()[0])
        from psycopg import Connection

        name = "checkpoint_writes" if table == "writes" else table
        with Connection.connect(str(self.conninfo), autocommit=True) as connection:
            row = connection.execute(f"SELECT count(*) FROM {name} WHERE thread_id = %s", (thread_id,)).fetchone()
        assert row is not None
        return int(row[0])

    @contextlib.contextmanager
    def other_process(self) -> Iterator[Any]:
        """A plain durable saver on the same tables: the rows another process writes."""
        if self.sqlite_path is not None:
            other = sqlite_durable(self.sqlite_path)
            try:
                yield other
            finally:
                other.conn.close()
            return
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg import Connection
        from psycopg.rows import dict_row

        with Connection.connect(
            str(self.conninfo), autocommit=True, prepare_threshold=0, row_factory=dict_row
        ) as connection:
            yield PostgresSaver(connection)


def clean(conninfo: str) -> None:
    from psycopg import Connection

    with Connection.connect(conninfo, autocommit=True) as connection:
        for table in ("checkpoints", "checkpoint_writes", "checkpoint_blobs"):
            connection.execute(f"DELETE FROM {table}")


@contextlib.asynccontextmanager
async def durable_of(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[tuple[Any, Tables]]:
    """The durable saver of a backend, and its tables (a fresh SQLite file, or a cleaned PostgreSQL database)."""
    if "sqlite" in backend:
        path = tmp_path / "discovery.db"
        if backend == "sqlite":
            saver = sqlite_durable(path)
            saver.setup()
            yield saver, Tables(path, None)
            saver.conn.close()
            return
        import aiosqlite
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        async with aiosqlite.connect(path) as connection:
            saver = AsyncSqliteSaver(connection)
            await saver.setup()
            yield saver, Tables(path, None)
        return
    cluster: PostgresCluster = request.getfixturevalue("cluster")
    clean(cluster.conninfo)
    tables = Tables(None, cluster.conninfo)
    if backend == "postgres":
        with tables.other_process() as saver:
            yield saver, tables
        return
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg import AsyncConnection
    from psycopg.rows import dict_row

    async with await AsyncConnection.connect(
        cluster.conninfo, autocommit=True, prepare_threshold=0, row_factory=dict_row
    ) as connection:
        yield AsyncPostgresSaver(connection), tables


async def act(saver: TieredSaver, use_async: bool, name: str, *args: Any) -> Any:
    """``saver.<name>(*args)``, or its async twin ``a<name>``."""
    if use_async:
        return await getattr(saver, "a" + name)(*args)
    return getattr(saver, name)(*args)


async def invoke(app: Any, use_async: bool, thread_id: str, times: int) -> None:
    for _ in range(times):
        if use_async:
            await app.ainvoke({"count": 0}, thread(thread_id))
        else:
            app.invoke({"count": 0}, thread(thread_id))


def ids_at(start: float, count: int) -> list[str]:
    """``count`` checkpoint ids of the times from ``start``, a millisecond apart, ascending."""
    return [checkpoint_id_at(start + step / 1000) for step in range(count)]


def put_ids(saver: Any, thread_id: str, ids: list[str]) -> None:
    """A parent chain of checkpoints with these ids (through any saver's ``put``)."""
    parent: str | None = None
    version = None
    for step, checkpoint_id in enumerate(ids):
        version = saver.get_next_version(version, None)
        checkpoint = make_checkpoint({"step": step}, {"step": version}, checkpoint_id=checkpoint_id)
        metadata = {"source": "loop", "step": step, "parents": {}}
        stored = saver.put(config(thread_id, "", parent), checkpoint, metadata, {"step": version})
        parent = stored["configurable"]["checkpoint_id"]


# --- write-back: rows that land a flush after a pass ---------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
async def test_keep_last_prunes_what_write_back_flushed_after_a_pass(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    use_async = backend.startswith("async")
    async with durable_of(backend, tmp_path, request) as (durable, tables):
        saver = TieredSaver(
            durable,
            config=SMALL,
            write="back",
            flush_interval_seconds=math.inf,
            retention=RetentionPolicy(keep_last=2, sweep_interval_seconds=math.inf),
        )
        app = counter(saver)
        await invoke(app, use_async, "long", 5)

        first = await act(saver, use_async, "sweep")  # nothing durable yet: the thread is all unflushed
        assert first.pruned_threads == 0 and tables.count("checkpoints", "long") == 0
        await act(saver, use_async, "flush")
        assert tables.count("checkpoints", "long") == 15
        second = await act(saver, use_async, "sweep")

        assert (second.pruned_threads, second.checkpoints) == (1, 13)
        assert tables.count("checkpoints", "long") == 2
        state = await app.aget_state(thread("long")) if use_async else app.get_state(thread("long"))
        assert state.values == {"count": 1}
        saver._sweeper.check()  # type: ignore[union-attr]
        await act(saver, use_async, "close")


@pytest.mark.parametrize("backend", BACKENDS)
async def test_the_idle_ttl_deletes_what_write_back_flushed_after_the_ttl(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    use_async = backend.startswith("async")
    clock = Clock()
    async with durable_of(backend, tmp_path, request) as (durable, tables):
        saver = TieredSaver(
            durable,
            config=SMALL,
            write="back",
            flush_interval_seconds=math.inf,
            retention=RetentionPolicy(idle_ttl_seconds=60, sweep_interval_seconds=math.inf),
            clock=clock.monotonic,
            wall_clock=clock,
        )
        app = counter(saver)
        mark = time.time()
        await invoke(app, use_async, "quiet", 2)
        clock.idle_since(mark, 120)  # idle for longer than the TTL, and not flushed yet

        first = await act(saver, use_async, "sweep")
        assert first.deleted_threads == 0  # unflushed: in use here, not durable yet
        await act(saver, use_async, "flush")
        clock.idle_since(mark, 240)
        second = await act(saver, use_async, "sweep")

        assert (second.deleted_threads, second.checkpoints) == (1, 6)
        assert tables.count("checkpoints", "quiet") == 0
        await act(saver, use_async, "close")


# --- a write-through put in flight while a pass runs --------------------------------------------------------------


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
async def test_a_put_in_flight_during_a_pass_is_pruned_by_the_next(tmp_path: Path, use_async: bool) -> None:
    durable = ControlledSqlite(tmp_path / "flight.db")
    saver = TieredSaver(durable, config=SMALL, retention=RetentionPolicy(keep_last=2, sweep_interval_seconds=math.inf))
    put_ids(saver, "racing", ids_at(time.time() - 10, 2))  # two rows: not over keep_last yet
    third = ids_at(time.time() - 5, 1)  # made before the pass, landing after it
    durable.gated, durable.entered = {"put"}, threading.Event()
    durable.gate.clear()

    def put_third() -> None:
        version = saver.get_next_version("2", None)
        checkpoint = make_checkpoint({"step": 2}, {"step": version}, checkpoint_id=third[0])
        parent = next(item.config for item in saver.list(thread("racing")))["configurable"]["checkpoint_id"]
        metadata = {"source": "loop", "step": 2, "parents": {}}
        if use_async:
            asyncio.run(saver.aput(config("racing", "", parent), checkpoint, metadata, {"step": version}))
        else:
            saver.put(config("racing", "", parent), checkpoint, metadata, {"step": version})

    writer = threading.Thread(target=put_third)
    writer.start()
    assert durable.entered.wait(WAIT)
    during = await act(saver, use_async, "sweep")  # the third row has not landed: nothing is due
    durable.gate.set()
    writer.join(WAIT)
    assert during.pruned_threads == 0 and len(list(saver.list(thread("racing")))) == 3

    after = await act(saver, use_async, "sweep")

    assert (after.pruned_threads, after.checkpoints) == (1, 1)
    assert next(item.checkpoint["id"] for item in saver.list(thread("racing"))) == third[0]
    saver._shared.landings.check()
    saver.close()


# --- a wall clock stepped back -------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_rows_written_after_the_clock_stepped_back_are_pruned(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    clock = Clock()
    now = time.time()
    clock.wall = now

    async def body() -> None:
        async with durable_of(backend, tmp_path, request) as (durable, tables):
            saver = TieredSaver(
                durable,
                config=SMALL,
                retention=RetentionPolicy(keep_last=2, idle_ttl_seconds=60, sweep_interval_seconds=math.inf),
                clock=clock.monotonic,
                wall_clock=clock,
            )
            saver.sweep()  # the windows stand at ``now``
            clock.wall = now - 3_600  # the clock steps back an hour; what is written now holds that time
            put_ids(saver, "mine", ids_at(now - 3_600, 5))
            with tables.other_process() as other:
                put_ids(other, "theirs", ids_at(now - 3_600 + 0.5, 5))
            clock.wall = now - 3_600 + 10

            report = saver.sweep()

            assert report.pruned_threads == 2
            assert (tables.count("checkpoints", "mine"), tables.count("checkpoints", "theirs")) == (2, 2)
            clock.idle_since(now - 3_600 + 1, 120)  # both idle for two minutes, by the clock as it is now
            report = saver.sweep()
            assert report.deleted_threads == 2
            assert (tables.count("checkpoints", "mine"), tables.count("checkpoints", "theirs")) == (0, 0)
            saver._sweeper.check()  # type: ignore[union-attr]
            saver.close()

    asyncio.run(body())


# --- another process's rows landing after a pass ------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_another_process_rows_landing_after_a_pass_are_found_by_the_next(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    async def body() -> None:
        async with durable_of(backend, tmp_path, request) as (durable, tables):
            saver = TieredSaver(
                durable, config=SMALL, retention=RetentionPolicy(keep_last=2, sweep_interval_seconds=math.inf)
            )
            made = time.time() - DISCOVERY_OVERLAP_SECONDS / 2  # ids made before the pass, by a slow writer
            saver.sweep()
            with tables.other_process() as other:
                put_ids(other, "late", ids_at(made, 5))

            report = saver.sweep()

            assert (report.pruned_threads, report.checkpoints) == (1, 3)
            assert tables.count("checkpoints", "late") == 2
            saver.close()

    asyncio.run(body())


# --- the ledgers discovery reads -----------------------------------------------------------------------------------


def test_landings_bound_the_puts_begun_and_under_way() -> None:
    landings = Landings()
    assert landings.take() == (None, None, None)
    with landings.flight("b"):
        with landings.flight("a"), landings.flight("a"):
            assert landings.take() == ("a", "b", "a")
        landings.check()
        assert landings.take() == (None, None, "b")
        with landings.flight("c"):
            pass
        assert landings.take() == ("c", "c", "b")
    landings.check()
    assert landings.take() == (None, None, None)
    for step in range(500):  # stale ids under a long put are dropped, not kept forever
        with landings.flight("z"), landings.flight(f"y{step:04}"):
            pass
    assert len(landings.heap) <= 2 * len(landings.flying) + 64


def test_the_dirty_ledgers_lowest_id_follows_pushes_and_flushes(tmp_path: Path) -> None:
    saver = TieredSaver(sqlite_durable(tmp_path / "d.db"), config=SMALL, write="back", flush_interval_seconds=math.inf)
    ledger: Callable[[], str | None] = saver._shared.dirty.lowest_checkpoint_id
    assert ledger() is None
    ids = ids_at(time.time(), 3)
    put_ids(saver, "b", ids[1:])
    assert ledger() == ids[1]
    put_ids(saver, "a", ids[2:])
    assert ledger() == ids[1]
    put_ids(saver, "b", ids[:1])  # a lower id after higher ones (another root): the lowest follows
    assert ledger() == ids[0]
    saver.flush()
    assert ledger() is None
    saver.close()
