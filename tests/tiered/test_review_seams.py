"""Where today's features meet (review of group commit, backpressure, persist="latest" and byte quotas): each test
here exercises two of them together, SQLite and PostgreSQL, sync and async where the code has both paths."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any

import pytest

from langgraph.checkpoint.bounded import TieredSaver, WriteBack
from tests.support.durable_savers import cluster_fixture, sqlite_durable
from tests.support.graphs import chat_graph, describe, thread
from tests.tiered.test_write_less import EVERY_SIDE, durable_of, flush

cluster = cluster_fixture("the review's seam tests over PostgreSQL")


def invoke(app: Any, value: Any, config: Any, use_async: bool) -> Any:
    if use_async:
        return asyncio.run(app.ainvoke(value, config))
    return app.invoke(value, config)


@EVERY_SIDE
def test_persist_latest_a_fork_from_a_skipped_checkpoint_still_in_memory_is_flushed(
    tmp_path: Path, request: pytest.FixtureRequest, backend: str, use_async: bool
) -> None:
    """persist="latest" + the late-flush parent check: the guide says a thread's history is whole while it is in
    memory, so a fork (time travel) from an intermediate checkpoint an earlier flush skipped is acknowledged.
    Its flush must write it (reparented to what is durable, with every value it references), not refuse it as
    "another process deleted the thread" and drop the thread's unflushed writes."""
    durable = durable_of(backend, tmp_path, request)
    tiered = TieredSaver(durable, write=WriteBack(flush_interval_seconds=math.inf, persist="latest"))
    app = chat_graph(tiered, {})
    invoke(app, {"messages": ["first"]}, thread("fork"), use_async)
    invoke(app, {"messages": ["second"]}, thread("fork"), use_async)
    flush(tiered, use_async)  # skips every intermediate checkpoint of both turns
    assert tiered._shared.dirty.skipped > 0
    history = list(app.get_state_history(thread("fork")))  # whole: the thread is in memory
    skipped = next(snapshot for snapshot in history if snapshot.next == ("tool",))  # mid-turn: after "agent"
    invoke(app, None, skipped.config, use_async)  # replay from it: a fork, acknowledged in memory
    forked = describe(app.get_state(thread("fork")))
    flush(tiered, use_async)  # raises UnstorableWriteError today: the fork's parent was never written
    assert tiered.stats().dirty_threads == 0
    listed = list(durable.list(thread("fork")))
    held = {item.config["configurable"]["checkpoint_id"] for item in listed}
    assert all(
        item.parent_config is None or item.parent_config["configurable"]["checkpoint_id"] in held for item in listed
    )
    forked["has_parent"] = describe(chat_graph(durable, {}).get_state(thread("fork")))["has_parent"]
    assert describe(chat_graph(durable, {}).get_state(thread("fork"))) == forked
    tiered.close()


def test_a_cancelled_group_flush_releases_the_threads_it_claimed(tmp_path: Path) -> None:
    """Group commit + cancellation: an ``aflush()`` cancelled while its group commit is under way (a request
    cancelled under backpressure, an ``asyncio.wait_for`` timing out) must leave its threads claimable. The
    batch's claims are released in a generator's ``finally``, which ``aflush_all`` never closes: while anything
    holds the cancellation's traceback (the task, a logged exception), every later flush of those threads waits
    for a flusher that is gone."""
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    from langgraph.checkpoint.bounded.tiered.backends.sqlite import SqliteBackend
    from tests.support.helpers import config, make_checkpoint
    from tests.support.tiered import WAIT

    async def scenario() -> None:
        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "durable.sqlite")) as durable:
            tiered = TieredSaver(durable, write=WriteBack(flush_interval_seconds=math.inf))
            for name in ("a", "b"):  # two dirty threads: one group commit
                await tiered.aput(config(name), make_checkpoint({"n": 1}), {}, {"n": 1})
            entered, original = asyncio.Event(), SqliteBackend.awrite_batch

            async def stuck(self: Any, saver: Any, batch: Any, prepared: Any = None) -> set[str]:
                entered.set()
                await asyncio.Event().wait()  # the durable tier never answers: the flush is cancelled here
                return set()

            SqliteBackend.awrite_batch = stuck  # type: ignore[method-assign]
            try:
                task = asyncio.create_task(tiered.aflush())
                await entered.wait()
                task.cancel()
                with pytest.raises(asyncio.CancelledError) as cancelled:
                    await task  # kept below, as a caller logging it, or a wait_for's TimeoutError's cause, keeps it
            finally:
                SqliteBackend.awrite_batch = original  # type: ignore[method-assign]
            await asyncio.wait_for(tiered.aflush(), WAIT)  # times out today: "a" and "b" are still claimed
            assert tiered.stats().dirty_threads == 0
            assert cancelled.type is asyncio.CancelledError  # held until now
            await tiered.aclose()

    asyncio.run(scenario())


@EVERY_SIDE
def test_thread_storage_of_a_thread_evicted_with_unflushed_writes_is_not_zero(
    tmp_path: Path, request: pytest.FixtureRequest, backend: str, use_async: bool
) -> None:
    """Backpressure + thread_storage: eviction no longer flushes a dirty thread, so a thread evicted before any
    flush is held only by the ledger. A read of it flushes it first; thread_storage must not report it as a
    thread the saver does not hold (zeros in both tiers, ``total_bytes`` 0) while its state is one read away."""
    from langgraph.checkpoint.bounded import InMemoryCheckpointConfig

    durable = durable_of(backend, tmp_path, request)
    tiered = TieredSaver(
        durable, config=InMemoryCheckpointConfig(max_threads=1), write=WriteBack(flush_interval_seconds=math.inf)
    )
    app = chat_graph(tiered, {})
    invoke(app, {"messages": ["hello"]}, thread("first"), use_async)
    invoke(app, {"messages": ["hello"]}, thread("second"), use_async)  # evicts "first", dirty, unflushed
    assert tiered.stats().dirty_threads == 2
    report = asyncio.run(tiered.athread_storage("first")) if use_async else tiered.thread_storage("first")
    assert report.hot.total_bytes + report.durable.total_bytes > 0, "an unflushed thread reported as absent"
    assert report.total_bytes > 0
    tiered.close()


def test_max_checkpoint_bytes_counts_what_a_put_changes_even_over_sqlite(tmp_path: Path) -> None:
    """Byte quotas + the SQLite saver's format, as documented (size guide, ``WriteThrough.max_checkpoint_bytes``):
    the limit counts what a put adds, the values it changes. A put changing more than the limit is refused and
    writes nothing; a small change beside a large unchanged value is taken, and its ``SqliteSaver`` row, which
    repeats the unchanged value, may be larger than the limit, each of its values having passed it."""
    from langgraph.checkpoint.bounded import CheckpointTooLargeError, WriteThrough
    from tests.support.helpers import config, make_checkpoint

    limit = 20_000
    durable = sqlite_durable(tmp_path / "durable.sqlite")
    tiered = TieredSaver(durable, write=WriteThrough(max_checkpoint_bytes=limit))
    document = "d" * 15_000
    first = tiered.put(
        config("big"), make_checkpoint({"doc": document, "n": 0}, {"doc": 1, "n": 1}), {}, {"doc": 1, "n": 1}
    )
    too_much = make_checkpoint({"doc": "e" * 25_000, "n": 0}, {"doc": 2, "n": 1})
    with pytest.raises(CheckpointTooLargeError, match="big"):
        tiered.put(first, too_much, {}, {"doc": 2})
    assert durable.conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0] == 1  # nothing written
    small_change = make_checkpoint({"doc": document, "n": "n" * 10_000}, {"doc": 1, "n": 2})
    tiered.put(first, small_change, {}, {"n": 2})  # 10 KB changed: taken
    written = durable.conn.execute("SELECT max(length(checkpoint)) FROM checkpoints").fetchone()[0]
    assert written > limit  # the row repeats the unchanged 15 KB document: documented, not refused
    tiered.close()
