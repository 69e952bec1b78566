"""Group commit over PostgreSQL against another process's ``delete_thread``: the parents the batch checks in its own
transaction are locked (``FOR KEY SHARE``), so a deletion committing between that check and the batch's ``COMMIT``
cannot leave children of a deleted parent: the flush waits for it, then finds the parent gone and refuses."""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import pytest

from langgraph.checkpoint.bounded import TieredSaver, UnstorableWriteError, WriteBack
from tests.support.durable_savers import clean, cluster_fixture, connect
from tests.support.helpers import config, make_checkpoint
from tests.support.tiered import WAIT, wait_until

cluster = cluster_fixture("group commit's race with another process's delete_thread")


@contextmanager
def _side(use_async: bool) -> Iterator[Callable[[Callable[[], Any]], Future[Any]]]:
    """Where the saver runs: a thread of its own (sync), or an event loop in a thread of its own (async: one loop
    for the connection's whole life). Yields ``submit(make)``: runs ``make()`` (or awaits it) there."""
    if not use_async:
        with ThreadPoolExecutor(1) as pool:
            yield pool.submit
        return
    loop = asyncio.new_event_loop()
    runner = threading.Thread(target=loop.run_forever)
    runner.start()
    try:
        yield lambda make: asyncio.run_coroutine_threadsafe(make(), loop)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        runner.join(WAIT)
        loop.close()


async def _async_saver(conninfo: str) -> Any:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg import AsyncConnection
    from psycopg.rows import dict_row

    opened = await AsyncConnection.connect(conninfo, autocommit=True, prepare_threshold=0, row_factory=dict_row)
    return AsyncPostgresSaver(opened)


def _rows(conninfo: str) -> list[tuple[str, str | None]]:
    with connect(conninfo) as connection:
        query = "SELECT checkpoint_id, parent_checkpoint_id FROM checkpoints WHERE thread_id = %s"
        return [(row["checkpoint_id"], row["parent_checkpoint_id"]) for row in connection.execute(query, ("t",))]


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_a_delete_committing_during_the_batch_leaves_no_child_of_a_deleted_parent(
    cluster: Any, use_async: bool
) -> None:
    """Another process's deletion holds its transaction open (its rows locked, not yet gone) while our flush of a
    child runs: the flush's parent check must wait for it (seen in ``pg_blocking_pids``), then, the deletion
    committed, find the parent gone and refuse. A plain SELECT saw the parent, wrote the child, and left it
    under a deleted parent."""
    from langgraph.checkpoint.postgres import PostgresSaver

    conninfo = cluster.conninfo
    clean(conninfo)
    first, second = make_checkpoint({"n": [1]}), make_checkpoint({"n": [2]}, {"n": 2})
    with _side(use_async) as submit:
        if use_async:
            durable = submit(lambda: _async_saver(conninfo)).result(WAIT)
            tiered = TieredSaver(durable, write=WriteBack(flush_interval_seconds=math.inf))
            put, flush = tiered.aput, tiered.aflush
        else:
            durable = PostgresSaver(connect(conninfo))
            tiered = TieredSaver(durable, write=WriteBack(flush_interval_seconds=math.inf))
            put, flush = tiered.put, tiered.flush  # type: ignore[assignment]
        parent = submit(lambda: put(config("t"), first, {}, first["channel_versions"])).result(WAIT)
        submit(flush).result(WAIT)
        submit(lambda: put(parent, second, {}, {"n": 2})).result(WAIT)  # its flush checks the parent in the batch
        with connect(conninfo) as deleter, connect(conninfo) as watcher:
            deleter.execute("BEGIN")
            for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes"):
                deleter.execute(f"DELETE FROM {table} WHERE thread_id = %s", ("t",))
            pid = deleter.execute("SELECT pg_backend_pid() AS pid").fetchone()["pid"]
            flushed = submit(flush)
            blocked = "SELECT count(*) AS n FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))"
            wait_until(lambda: flushed.done() or watcher.execute(blocked, (pid,)).fetchone()["n"] > 0)
            waited = not flushed.done()
            deleter.execute("COMMIT")
            error = flushed.exception(WAIT)
        remaining = _rows(conninfo)
        assert remaining == [], f"rows left under the deleted parent: {remaining}"
        assert waited, "the flush's parent check did not wait for the deletion's transaction"
        assert isinstance(error, UnstorableWriteError)
        assert not tiered._shared.dirty
        tiered.check()
        if use_async:
            submit(durable.conn.close).result(WAIT)
        else:
            durable.conn.close()
