"""``TieredSaver.thread_storage``: a thread's size in each tier (issue 35, part 2).

* Over SQLite and PostgreSQL (sync and async savers, sync and async calls), the durable report is the database's
  own sums, checked here against the rows read back and measured in Python; the hot report is the engine's
  byte accounting of that thread.
* A thread with a subgraph and an interrupt (pending writes, two namespaces) is counted whole.
* An unknown thread reports zeros and creates nothing in either tier; a deleted thread reports zeros.
* A saver with no tables (``InMemorySaver``, or one only known through its API) is measured through its API,
  and the report says it is an estimate.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver

from langgraph.checkpoint.bounded import InMemoryCheckpointConfig, ThreadStorage, TieredSaver, TieredThreadStorage
from tests.support.durable_savers import ForeignSaver, clean, cluster_fixture, connect, postgres_saver
from tests.support.graphs import nested_graph, thread
from tests.tiered.test_async_durable import async_durable

cluster = cluster_fixture("the thread storage PostgreSQL tests")


@contextmanager
def sync_durable(kind: str, tmp_path: Path, cluster: Any) -> Iterator[Any]:
    if kind == "sqlite":
        saver = SqliteSaver(sqlite3.connect(tmp_path / "durable.sqlite", check_same_thread=False))
        saver.setup()
        yield saver
        saver.conn.close()
        return
    clean(cluster.conninfo)
    saver = postgres_saver(cluster.conninfo)
    yield saver
    saver.conn.close()


def database_sums(kind: str, where: Any, thread_id: str) -> tuple[int, int, int, dict[str, int]]:
    """(checkpoint bytes, write bytes, rows, bytes by channel) of a thread, read back row by row."""
    if kind == "sqlite":
        rows = where.execute("SELECT checkpoint, metadata FROM checkpoints WHERE thread_id = ?", (thread_id,))
        checkpoints = [len(c) + len(m) for c, m in rows.fetchall()]
        writes = [len(v) for (v,) in where.execute("SELECT value FROM writes WHERE thread_id = ?", (thread_id,))]
        return sum(checkpoints), sum(writes), len(checkpoints) + len(writes), {}
    with connect(where) as connection:
        checkpoints = connection.execute(
            "SELECT pg_column_size(checkpoint) + pg_column_size(metadata) AS n FROM checkpoints WHERE thread_id = %s",
            (thread_id,),
        ).fetchall()
        writes = connection.execute(
            "SELECT pg_column_size(blob) AS n FROM checkpoint_writes WHERE thread_id = %s", (thread_id,)
        ).fetchall()
        blobs = connection.execute(
            "SELECT channel, pg_column_size(blob) AS n FROM checkpoint_blobs WHERE thread_id = %s", (thread_id,)
        ).fetchall()
    by_channel: dict[str, int] = {}
    for row in blobs:
        by_channel[row["channel"]] = by_channel.get(row["channel"], 0) + (row["n"] or 0)
    rows = len(checkpoints) + len(writes) + len(blobs)
    return sum(r["n"] for r in checkpoints), sum(r["n"] or 0 for r in writes), rows, by_channel


def check_report(report: TieredThreadStorage, saver: TieredSaver, kind: str, where: Any, thread_id: str) -> None:
    checkpoint_bytes, write_bytes, rows, by_channel = database_sums(kind, where, thread_id)
    durable = report.durable
    assert (durable.tier, durable.estimated, durable.thread_id) == ("durable", False, thread_id)
    assert durable.checkpoint_bytes == checkpoint_bytes > 0
    assert durable.pending_write_bytes == write_bytes > 0  # the interrupt's write, the subgraph's
    assert dict(durable.by_channel) == by_channel
    assert durable.rows == rows
    assert durable.namespaces == 2  # the root graph and the subgraph's
    assert report.total_bytes == durable.total_bytes == checkpoint_bytes + write_bytes + sum(by_channel.values())
    stock = list(saver.durable.list({"configurable": {"thread_id": thread_id}}))
    assert durable.checkpoints == len(stock)
    assert durable.pending_writes == sum(len(item.pending_writes or ()) for item in stock)
    hot = report.hot
    stored = saver._store.threads[thread_id]
    assert (hot.tier, hot.checkpoints, hot.total_bytes) == ("hot", stored.checkpoints, stored.nbytes)
    assert hot.channel_values == stored.blobs and hot.pending_writes == stored.writes > 0
    assert sum(hot.by_channel.values()) == hot.channel_bytes > 0
    assert report.as_dict()["total_bytes"] == durable.total_bytes
    assert report.as_dict()["hot"]["total_bytes"] == hot.total_bytes  # type: ignore[index]


def unknown_is_empty(report: TieredThreadStorage, saver: TieredSaver) -> None:
    assert report.hot == ThreadStorage("nobody", "hot")
    assert report.durable.total_bytes == report.durable.rows == report.durable.namespaces == 0
    assert "nobody" not in saver._store.threads
    assert list(saver.durable.list({"configurable": {"thread_id": "nobody"}})) == []


@pytest.mark.parametrize("write", ["through", "back"])
@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_sync_report_is_the_database_sums_and_the_hot_accounting(
    kind: str, write: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    running = request.getfixturevalue("cluster") if kind == "postgres" else None
    with sync_durable(kind, tmp_path, running) as durable:
        saver = TieredSaver(durable, write=write)  # type: ignore[arg-type]
        graph = nested_graph(saver, {})
        graph.invoke({"messages": ["hi"]}, thread("t"))  # stops at the subgraph's interrupt
        saver.flush()
        where = durable.conn if kind == "sqlite" else running.conninfo  # type: ignore[union-attr]
        check_report(saver.thread_storage("t"), saver, kind, where, "t")
        unknown_is_empty(saver.thread_storage("nobody"), saver)
        saver.delete_thread("t")
        gone = saver.thread_storage("t")
        assert gone.total_bytes == gone.hot.total_bytes == 0 and "t" not in saver._store.threads
        saver.close()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_async_report_over_the_async_savers(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    running = request.getfixturevalue("cluster") if kind == "postgres" else None
    async with async_durable(kind, tmp_path, running) as durable:
        saver = TieredSaver(durable)
        graph = nested_graph(saver, {})
        await graph.ainvoke({"messages": ["hi"]}, thread("t"))
        report = await saver.athread_storage("t")
        if kind == "sqlite":
            with sqlite3.connect(next(tmp_path.glob("durable-*.sqlite"))) as connection:
                sums = database_sums(kind, connection, "t")
        else:
            sums = database_sums(kind, running.conninfo, "t")  # type: ignore[union-attr]
        assert (report.durable.checkpoint_bytes, report.durable.pending_write_bytes) == sums[:2]
        assert report.durable.rows == sums[2] and report.durable.namespaces == 2
        assert report.hot.total_bytes == saver._store.threads["t"].nbytes
        empty = await saver.athread_storage("nobody")
        assert empty.total_bytes == empty.hot.total_bytes == 0 and "nobody" not in saver._store.threads
        await saver.aclose()


async def test_async_call_over_a_sync_saver(tmp_path: Path) -> None:
    with sync_durable("sqlite", tmp_path, None) as durable:
        saver = TieredSaver(durable)
        await nested_graph(saver, {}).ainvoke({"messages": ["hi"]}, thread("t"))
        assert await saver.athread_storage("t") == saver.thread_storage("t")
        unknown_is_empty(await saver.athread_storage("nobody"), saver)
        saver.close()


@pytest.mark.parametrize("make", [InMemorySaver, ForeignSaver], ids=["InMemorySaver", "api-only"])
def test_a_saver_without_tables_is_estimated_through_its_api(make: Any) -> None:
    with pytest.warns(UserWarning) if make is InMemorySaver else _nothing():
        saver = TieredSaver(make(), config=InMemoryCheckpointConfig(max_threads=1))
    nested_graph(saver, {}).invoke({"messages": ["hi"]}, thread("t"))
    nested_graph(saver, {}).invoke({"messages": ["hi"]}, thread("other"))  # "t" leaves memory
    report = saver.thread_storage("t")
    assert report.durable.estimated and "estimated" in str(report)
    assert report.hot.total_bytes == 0  # not in memory: the report does not bring it back
    assert "t" not in saver._store.threads
    stock = list(saver.durable.list({"configurable": {"thread_id": "t"}}))
    assert report.durable.checkpoints == len(stock) and report.durable.namespaces == 2
    assert report.durable.pending_writes == sum(len(item.pending_writes or ()) for item in stock) > 0
    assert report.durable.channel_bytes > 0 and report.durable.checkpoint_bytes > 0
    assert saver.thread_storage("nobody").durable.total_bytes == 0
    saver.close()


@contextmanager
def _nothing() -> Iterator[None]:
    yield


@pytest.mark.parametrize("bad", [None, 3.5, b"x", ["t"]])
def test_an_invalid_thread_id_is_refused(bad: Any, tmp_path: Path) -> None:
    with sync_durable("sqlite", tmp_path, None) as durable:
        saver = TieredSaver(durable)
        with pytest.raises(ValueError, match="thread_id"):
            saver.thread_storage(bad)
        saver.close()
