"""Retention and interrupts: a thread waiting at ``interrupt()`` is never silently destroyed.

The app is a real graph: draft -> ask (``interrupt()``) -> finish (``tests.support.graphs.approval_graph``).
A conversation waits for its human longer than ``idle_ttl_seconds`` with ``strategy="delete"``:

* a sweep keeps it resumable (pruned as ``keep_latest`` prunes), and its resume gives what the stock saver
  gives, draft not run again;
* past ``interrupted_ttl_seconds`` a sweep deletes it (found again by a later pass of the same process), and
  its resume raises ``InterruptLostError`` naming the thread and the policy, stores nothing, in this process
  and in another saver over the same database (no tombstone there: the row of ``bounded_retention_removed``;
  another OS process too, and over ``AsyncSqliteSaver``),
  under ``durability="sync"`` and ``"async"``, through the sync and the async API, write-through and
  write-back; a new run on the thread then works, and so do its own interrupts;
* under ``durability="exit"`` LangGraph shows the saver no resume: the run starts afresh (documented);
* the table of removals is bounded; another saver than SQLite's and PostgreSQL's keeps the thread whole;
* ``TieredSaver.dropped_thread`` says what deleted a thread here.

SQLite and PostgreSQL for every SQL path; the clocks are injected (``Clock``), nothing sleeps.
"""

from __future__ import annotations

import asyncio
import logging
import math
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import WRITES_IDX_MAP
from langgraph.checkpoint.memory import InMemorySaver as StockSaver
from langgraph.types import Command

from langgraph.checkpoint.bounded import (
    InterruptLostError,
    RetentionPolicy,
    ThreadEvictedError,
    TieredSaver,
)
from langgraph.checkpoint.bounded.tiered.retention.waiting import INTERRUPT_CHANNEL, REMOVED_TABLE
from tests.saver.test_interrupts_and_eviction import App
from tests.support.durable_savers import ForeignSaver, PostgresCluster, cluster_fixture, connect, sqlite_durable
from tests.support.graphs import approval_graph, nested_graph, thread, without_interrupt_ids
from tests.support.paths import ROOT
from tests.tiered.test_retention import SMALL, Clock

DAY = 86_400.0
WEEK = 7 * DAY
DURABILITIES = ["sync", "async"]
NULL_TASK = "00000000-0000-0000-0000-000000000000"
APIS = [False, True]


# --- two databases ------------------------------------------------------------------------------------------------


cluster = cluster_fixture("the retention-and-interrupts PostgreSQL tests")


@dataclass
class Backend:
    """One durable database: a SQLite file, or a PostgreSQL database."""

    name: str
    path: Path | None = None
    conninfo: str | None = None

    def durable(self) -> Any:
        if self.path is not None:
            return sqlite_durable(self.path)
        from langgraph.checkpoint.postgres import PostgresSaver

        assert self.conninfo is not None
        return PostgresSaver(connect(self.conninfo))

    def query(self, sql: str, *parameters: Any) -> list[tuple[Any, ...]]:
        if self.path is not None:
            with sqlite3.connect(self.path) as connection:
                return [tuple(row) for row in connection.execute(sql, parameters).fetchall()]
        assert self.conninfo is not None
        with connect(self.conninfo) as connection:
            return [tuple(row.values()) for row in connection.execute(sql.replace("?", "%s"), parameters).fetchall()]

    def rows(self, thread_id: str) -> int:
        """Rows of the thread in every table LangGraph's saver has."""
        tables = ["checkpoints", "writes"] if self.path is not None else ["checkpoints", "checkpoint_writes"]
        if self.path is None:
            tables.append("checkpoint_blobs")
        return sum(int(self.query(f"SELECT count(*) FROM {t} WHERE thread_id = ?", thread_id)[0][0]) for t in tables)

    def removed(self) -> list[str]:
        """The thread ids of ``bounded_retention_removed`` (none when it does not exist)."""
        try:
            return sorted(str(row[0]) for row in self.query(f"SELECT thread_id FROM {REMOVED_TABLE}"))
        except Exception as error:  # the table is created by the first deletion of a waiting thread
            assert "no such table" in str(error) or "does not exist" in str(error), error
            return []


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "sqlite":
        return Backend("sqlite", path=tmp_path / "t.db")
    cluster: PostgresCluster = request.getfixturevalue("cluster")
    with connect(cluster.conninfo) as connection:
        for table in ("checkpoints", "checkpoint_writes", "checkpoint_blobs"):
            connection.execute(f"DELETE FROM {table}")
        connection.execute(f"DROP TABLE IF EXISTS {REMOVED_TABLE}")
    return Backend("postgres", conninfo=cluster.conninfo)


def saver_of(backend: Backend, clock: Clock, *, durable: Any = None, write: str = "through", **policy: Any) -> Any:
    """A tiered saver over the backend, with a retention policy when given one, swept only when asked."""
    retention = RetentionPolicy(sweep_interval_seconds=math.inf, **policy) if policy else None
    return TieredSaver(
        durable if durable is not None else backend.durable(),
        config=SMALL,
        write=write,  # type: ignore[arg-type]
        retention=retention,
        clock=clock.monotonic,
        wall_clock=clock,
    )


def run(app: Any, value: Any, thread_id: str, *, use_async: bool, durability: str) -> Any:
    config: Any = thread(thread_id)
    if use_async:
        return without_interrupt_ids(asyncio.run(app.ainvoke(value, config, durability=durability)))
    return without_interrupt_ids(app.invoke(value, config, durability=durability))


def test_the_channel_retention_reads_is_langgraphs_interrupt_channel() -> None:
    assert INTERRUPT_CHANNEL in WRITES_IDX_MAP  # a special channel of LangGraph's savers: __interrupt__


# --- past the idle TTL: kept resumable -------------------------------------------------------------------------


@pytest.mark.parametrize("durability", DURABILITIES)
@pytest.mark.parametrize("use_async", APIS, ids=["sync", "async"])
def test_a_thread_waiting_past_the_idle_ttl_is_kept_and_resumes(
    backend: Backend, use_async: bool, durability: str
) -> None:
    clock = Clock()
    saver = saver_of(backend, clock, idle_ttl_seconds=DAY)
    ours_calls: dict[str, int] = {}
    stock_calls: dict[str, int] = {}
    ours, stock = approval_graph(saver, ours_calls), approval_graph(StockSaver(), stock_calls)
    for app in (ours, stock):
        run(app, {"messages": ["hi"]}, "waiting", use_async=use_async, durability=durability)
        run(app, {"messages": ["hi"]}, "answered", use_async=use_async, durability=durability)
        run(app, Command(resume="yes"), "answered", use_async=use_async, durability=durability)
    clock.idle_since(time.time(), 30 * DAY)

    report = saver.sweep()

    assert (report.deleted_threads, report.pruned_threads) == (1, 1)  # the answered one went, the waiting one stays
    assert backend.rows("answered") == 0 and backend.rows("waiting") > 0
    assert len(list(saver.list(thread("waiting")))) == 1 and saver.dropped_thread("waiting") is None
    assert backend.removed() == []
    expected = run(stock, Command(resume="later"), "waiting", use_async=use_async, durability=durability)
    assert run(ours, Command(resume="later"), "waiting", use_async=use_async, durability=durability) == expected
    assert ours_calls == stock_calls  # draft did not run again
    assert ours.get_state(thread("waiting")).values == stock.get_state(thread("waiting")).values
    assert saver.sweep().deleted_threads == 0  # the answer was a write: no longer idle


def test_a_subgraph_waiting_past_the_idle_ttl_is_kept_and_resumes(tmp_path: Path) -> None:
    clock = Clock()
    saver = saver_of(Backend("sqlite", path=tmp_path / "t.db"), clock, idle_ttl_seconds=DAY)
    ours_calls: dict[str, int] = {}
    stock_calls: dict[str, int] = {}
    ours, stock = nested_graph(saver, ours_calls), nested_graph(StockSaver(), stock_calls)
    for app in (ours, stock):
        app.invoke({"messages": ["hi"]}, thread("nested"))
    clock.idle_since(time.time(), 30 * DAY)
    assert saver.sweep().deleted_threads == 0
    assert ours.invoke(Command(resume="inner yes"), thread("nested")) == stock.invoke(
        Command(resume="inner yes"), thread("nested")
    )
    assert ours_calls == stock_calls


def test_a_thread_that_started_waiting_since_it_was_found_idle_is_kept(tmp_path: Path) -> None:
    """The question is asked in the deletion's transaction: an interrupt another process wrote is seen."""
    path = tmp_path / "t.db"
    clock = Clock()
    saver = saver_of(Backend("sqlite", path=path), clock, idle_ttl_seconds=DAY, interrupted_ttl_seconds=WEEK)
    app = approval_graph(saver, {})
    app.invoke({"messages": ["hi"]}, thread("t"))
    app.invoke(Command(resume="yes"), thread("t"))  # answered: waits for nothing
    newest = saver.get_tuple(thread("t"))
    assert newest is not None
    clock.idle_since(time.time(), 2 * DAY)
    other = sqlite_durable(path)  # another process: this one holds no trace of what it writes
    other.put_writes(newest.config, [(INTERRUPT_CHANNEL, "asked again")], "task")
    report = saver.sweep()
    assert (report.deleted_threads, report.pruned_threads) == (0, 1)
    kept = other.get_tuple(thread("t"))
    assert kept is not None and [write[1] for write in kept.pending_writes or []] == [INTERRUPT_CHANNEL]


# --- past interrupted_ttl_seconds: deleted, and its resume refused everywhere --------------------------------------


def assert_refused(error: InterruptLostError, thread_id: str) -> None:
    assert isinstance(error, ThreadEvictedError)
    assert (error.thread_id, error.limit, error.limit_value) == (thread_id, "interrupted_ttl_seconds", WEEK)
    text = str(error)
    assert f"cannot resume thread {thread_id!r}" in text
    assert "RetentionPolicy(interrupted_ttl_seconds=604,800)" in text and "while it waited at an interrupt" in text
    assert "was not applied" in text and "nothing was stored" in text and "Start a new run" in text


@pytest.mark.parametrize("durability", DURABILITIES)
@pytest.mark.parametrize("use_async", APIS, ids=["sync", "async"])
def test_a_thread_waiting_past_interrupted_ttl_is_deleted_and_its_resume_refused_in_every_process(
    backend: Backend, use_async: bool, durability: str
) -> None:
    clock = Clock()
    saver = saver_of(backend, clock, idle_ttl_seconds=DAY, interrupted_ttl_seconds=WEEK)
    app = approval_graph(saver, {})
    run(app, {"messages": ["hi"]}, "waiting", use_async=use_async, durability=durability)
    mark = time.time()
    clock.idle_since(mark, 2 * DAY)
    assert saver.sweep().pruned_threads == 1 and saver.dropped_thread("waiting") is None  # kept
    clock.idle_since(mark, 8 * DAY)

    report = saver.sweep()  # the same process's next pass finds it again

    assert report.deleted_threads == 1 and backend.rows("waiting") == 0 and backend.removed() == ["waiting"]
    dropped = saver.dropped_thread("waiting")
    assert dropped is not None and (dropped.limit, dropped.limit_value) == ("interrupted_ttl_seconds", WEEK)
    assert dropped.dropped_at_wall == mark + 8 * DAY and dropped.newest_checkpoint_id is not None
    calls: dict[str, int] = {}
    for name, resumer in [("this process", saver), ("another process", saver_of(backend, clock))]:
        app = approval_graph(resumer, calls)
        with pytest.raises(InterruptLostError) as refused:
            run(app, Command(resume="yes"), "waiting", use_async=use_async, durability=durability)
        assert_refused(refused.value, "waiting")
        assert backend.rows("waiting") == 0, f"{name}: the refused resume stored something"
        assert resumer.get_tuple(thread("waiting")) is None and "waiting" not in resumer._store.thread_ids()
    # a new run (input) on the thread starts it afresh, and its own interrupt resumes, in any process
    other = saver_of(backend, clock)
    result = run(
        approval_graph(other, {}), {"messages": ["anew"]}, "waiting", use_async=use_async, durability=durability
    )
    assert result["__interrupt__"] == [{"question": "approve?", "draft": "draft 1"}]
    third = approval_graph(saver_of(backend, clock), {})
    done = run(third, Command(resume="yes"), "waiting", use_async=use_async, durability=durability)
    assert done["messages"] == ["anew", "draft 1", "done: yes"]
    # the answer read the row, found the thread started again, let the answer through and deleted the row
    assert backend.removed() == []


@pytest.mark.parametrize("durability", DURABILITIES)
def test_write_back_refuses_the_resume_too(tmp_path: Path, durability: str) -> None:
    backend = Backend("sqlite", path=tmp_path / "t.db")
    clock = Clock()
    saver = saver_of(backend, clock, write="back", idle_ttl_seconds=DAY, interrupted_ttl_seconds=WEEK)
    app = approval_graph(saver, {})
    run(app, {"messages": ["hi"]}, "waiting", use_async=False, durability=durability)
    saver.flush()
    clock.idle_since(time.time(), 8 * DAY)
    assert saver.sweep().deleted_threads == 1
    for resumer in (saver, saver_of(backend, clock, write="back")):
        with pytest.raises(InterruptLostError) as refused:
            run(approval_graph(resumer, {}), Command(resume="yes"), "waiting", use_async=False, durability=durability)
        assert_refused(refused.value, "waiting")
        resumer.flush()
        assert backend.rows("waiting") == 0 and resumer.stats().dirty_threads == 0


@pytest.mark.parametrize("durability", DURABILITIES)
@pytest.mark.parametrize("use_async", APIS, ids=["sync", "async"])
def test_a_node_that_fails_on_the_empty_state_first_stores_nothing_and_the_refusal_is_logged(
    tmp_path: Path, use_async: bool, durability: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Under async durability LangGraph runs the fresh start's first node before it sees the refusal, and the
    node's error is the one the run ends with: the refusal is in the log, and the rest of that run is refused."""
    backend = Backend("sqlite", path=tmp_path / "t.db")
    clock = Clock()
    saver = saver_of(backend, clock, idle_ttl_seconds=DAY, interrupted_ttl_seconds=WEEK)
    app = App(saver, strict=True)
    app.run("t", {"messages": ["hi"]}, use_async=use_async, durability=durability)
    clock.idle_since(time.time(), 8 * DAY)
    assert saver.sweep().deleted_threads == 1
    with (
        caplog.at_level(logging.WARNING, logger="langgraph.checkpoint.bounded.tiered"),
        pytest.raises(InterruptLostError if durability == "sync" else (InterruptLostError, IndexError)),
    ):
        app.run("t", Command(resume="yes"), use_async=use_async, durability=durability)
    logged = [record.getMessage() for record in caplog.records if "cannot resume" in record.getMessage()]
    assert len(logged) == 1 and "cannot resume thread 't'" in logged[0], logged
    assert backend.rows("t") == 0 and app.sent == []
    app.run("t", {"messages": ["again"]}, use_async=use_async, durability=durability)  # a new run is welcome
    assert app.waiting("t")


def test_under_exit_durability_the_resume_is_not_seen_and_starts_afresh(tmp_path: Path) -> None:
    """LangGraph sends the saver nothing of a resume under ``durability="exit"`` until the run ends, and then
    only what a new run sends: the saver cannot refuse it (as ``saver.interrupts`` says for the memory saver).
    The run starts afresh, as over the durable saver alone; ``dropped_thread`` says what happened."""
    backend = Backend("sqlite", path=tmp_path / "t.db")
    clock = Clock()
    saver = saver_of(backend, clock, idle_ttl_seconds=DAY, interrupted_ttl_seconds=WEEK)
    calls: dict[str, int] = {}
    app = approval_graph(saver, calls)
    app.invoke({"messages": ["hi"]}, thread("t"), durability="exit")
    clock.idle_since(time.time(), 8 * DAY)
    assert saver.sweep().deleted_threads == 1
    result = without_interrupt_ids(app.invoke(Command(resume="yes"), thread("t"), durability="exit"))
    assert result["__interrupt__"] == [{"question": "approve?", "draft": "draft 0"}]  # asked again, afresh
    assert calls["draft"] == 2
    dropped = saver.dropped_thread("t")
    assert dropped is not None and dropped.limit == "interrupted_ttl_seconds"


# --- the table of removals, other savers, dropped_thread --------------------------------------------------------


def test_the_table_of_removals_keeps_one_ttl_of_them(backend: Backend) -> None:
    clock = Clock()
    saver = saver_of(backend, clock, idle_ttl_seconds=DAY, interrupted_ttl_seconds=WEEK)
    app = approval_graph(saver, {})
    app.invoke({"messages": ["hi"]}, thread("first"))
    mark = time.time()
    clock.idle_since(mark, 8 * DAY)
    assert saver.sweep().deleted_threads == 1 and backend.removed() == ["first"]
    app.invoke({"messages": ["hi"]}, thread("second"))  # written now, in real time: 8 days before the clock
    clock.idle_since(mark, 16 * DAY)  # the first row is 8 days old: older than interrupted_ttl_seconds
    later = saver_of(backend, clock, idle_ttl_seconds=DAY, interrupted_ttl_seconds=WEEK)  # its first pass reads all
    assert later.sweep().deleted_threads == 1
    assert backend.removed() == ["second"]
    with pytest.raises(InterruptLostError):
        app.invoke(Command(resume="yes"), thread("second"))
    assert saver.stats().rejections["interrupted_ttl_seconds"] >= 1  # counted where refused writes are
    # past the table's memory, a resume in another process starts afresh, as over the durable saver alone
    fresh = approval_graph(saver_of(backend, clock), {})
    assert "__interrupt__" in fresh.invoke(Command(resume="x"), thread("first"))


@pytest.mark.parametrize("kind", ["other", "memory"])
def test_through_the_api_a_waiting_thread_is_kept_then_deleted_and_its_resume_refused(kind: str) -> None:
    """Over ``InMemorySaver`` a kept waiting thread is pruned as keep_latest prunes; over a saver retention may not
    rewrite (``policy.kind_problem``) it is kept whole."""
    clock = Clock()
    durable: Any = ForeignSaver() if kind == "other" else StockSaver()
    saver = saver_of(Backend("api"), clock, durable=durable, idle_ttl_seconds=DAY, interrupted_ttl_seconds=WEEK)
    app = approval_graph(saver, {})
    app.invoke({"messages": ["hi"]}, thread("waiting"))
    app.invoke({"messages": ["hi"]}, thread("answered"))
    app.invoke(Command(resume="yes"), thread("answered"))
    whole = len(list(durable.list(thread("waiting"))))
    mark = time.time()
    clock.idle_since(mark, 2 * DAY)
    assert saver.sweep().deleted_threads == 1  # the answered one
    assert len(list(durable.list(thread("waiting")))) == (whole if kind == "other" else 1)
    clock.idle_since(mark, 8 * DAY)
    assert saver.sweep().deleted_threads == 1 and list(durable.list(thread("waiting"))) == []
    with pytest.raises(InterruptLostError) as refused:
        app.invoke(Command(resume="yes"), thread("waiting"))
    assert_refused(refused.value, "waiting")
    assert list(durable.list(thread("waiting"))) == []
    assert "__interrupt__" in app.invoke({"messages": ["anew"]}, thread("waiting"))


def test_dropped_thread_says_what_deleted_a_thread_here(tmp_path: Path) -> None:
    clock = Clock()
    saver = saver_of(Backend("sqlite", path=tmp_path / "t.db"), clock, idle_ttl_seconds=DAY)
    app = approval_graph(saver, {})
    for name in ("idle", "deleted"):
        app.invoke({"messages": ["hi"]}, thread(name))
        app.invoke(Command(resume="yes"), thread(name))
    mark = time.time()
    saver.delete_thread("deleted")
    deleted = saver.dropped_thread("deleted")
    assert deleted is not None and (deleted.limit, deleted.limit_value) == ("delete_thread", 0)
    assert deleted.newest_checkpoint_id is not None and deleted.dropped_at_utc.year >= 2025
    saver.copy_thread("idle", "deleted")  # written on purpose again: no longer a dropped thread
    assert saver.dropped_thread("deleted") is None
    clock.idle_since(mark, 2 * DAY)
    assert saver.sweep().deleted_threads == 2  # idle, and its copy
    idle = saver.dropped_thread("idle")
    assert idle is not None and (idle.limit, idle.limit_value, idle.dropped_at_wall) == (
        "idle_ttl_seconds",
        DAY,
        mark + 2 * DAY,
    )
    assert saver.dropped_thread("never") is None


# --- the policy ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"idle_ttl_seconds": DAY, "interrupted_ttl_seconds": 3600}, "interrupted_ttl_seconds must be at least"),
        ({"interrupted_ttl_seconds": WEEK}, "interrupted_ttl_seconds needs idle_ttl_seconds"),
        (
            {"idle_ttl_seconds": DAY, "strategy": "keep_latest", "interrupted_ttl_seconds": WEEK},
            "interrupted_ttl_seconds needs idle_ttl_seconds and strategy='delete'",
        ),
        ({"idle_ttl_seconds": DAY, "interrupted_ttl_seconds": -1}, "interrupted_ttl_seconds must be a positive"),
        ({"idle_ttl_seconds": DAY, "interrupted_ttl_seconds": math.inf}, "interrupted_ttl_seconds must be a positive"),
        ({"idle_ttl_seconds": DAY, "interrupted_ttl_seconds": math.nan}, "interrupted_ttl_seconds must be a positive"),
        ({"idle_ttl_seconds": DAY, "interrupted_ttl_seconds": "week"}, "interrupted_ttl_seconds must be a positive"),
    ],
)
def test_bad_interrupted_ttl_values_are_refused_naming_the_field(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RetentionPolicy(**settings)
    assert RetentionPolicy(idle_ttl_seconds=DAY, interrupted_ttl_seconds=DAY).interrupted_ttl_seconds == DAY


# --- the async durable savers: the same statements, on their own loop ------------------------------------------


async def test_over_async_sqlite_saver_the_resume_is_refused_in_every_process(tmp_path: Path) -> None:
    import aiosqlite
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    backend = Backend("sqlite", path=tmp_path / "t.db")
    clock = Clock()
    async with aiosqlite.connect(backend.path) as first, aiosqlite.connect(backend.path) as second:
        durable, other_durable = AsyncSqliteSaver(first), AsyncSqliteSaver(second)
        await durable.setup()
        saver = saver_of(backend, clock, durable=durable, idle_ttl_seconds=DAY, interrupted_ttl_seconds=WEEK)
        app = approval_graph(saver, {})
        await app.ainvoke({"messages": ["hi"]}, thread("waiting"))
        mark = time.time()
        clock.idle_since(mark, 2 * DAY)
        assert (await saver.asweep()).pruned_threads == 1
        clock.idle_since(mark, 8 * DAY)
        assert (await saver.asweep()).deleted_threads == 1 and backend.removed() == ["waiting"]
        for resumer in (saver, saver_of(backend, clock, durable=other_durable)):
            with pytest.raises(InterruptLostError) as refused:
                await approval_graph(resumer, {}).ainvoke(Command(resume="yes"), thread("waiting"))
            assert_refused(refused.value, "waiting")
            assert backend.rows("waiting") == 0
        result = await approval_graph(saver, {}).ainvoke({"messages": ["anew"]}, thread("waiting"))
        assert "__interrupt__" in result
        await saver.aclose()


RESUMER = """
import sys
from langgraph.types import Command
from langgraph.checkpoint.bounded import InterruptLostError, TieredSaver
from tests.support.durable_savers import sqlite_durable
from tests.support.graphs import approval_graph, thread

app = approval_graph(TieredSaver(sqlite_durable(sys.argv[1])), {})
try:
    app.invoke(Command(resume="yes"), thread("waiting"), durability=sys.argv[2])
except InterruptLostError as error:
    print(type(error).__name__, error.limit, error.thread_id)
"""


@pytest.mark.parametrize("durability", DURABILITIES)
def test_a_resume_in_another_os_process_is_refused(tmp_path: Path, durability: str) -> None:
    backend = Backend("sqlite", path=tmp_path / "t.db")
    clock = Clock()
    saver = saver_of(backend, clock, idle_ttl_seconds=DAY, interrupted_ttl_seconds=WEEK)
    approval_graph(saver, {}).invoke({"messages": ["hi"]}, thread("waiting"), durability=durability)
    clock.idle_since(time.time(), 8 * DAY)
    assert saver.sweep().deleted_threads == 1
    done = subprocess.run(
        [sys.executable, "-c", RESUMER, str(backend.path), durability],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["InterruptLostError", "interrupted_ttl_seconds", "waiting"], done.stdout
    assert "cannot resume thread 'waiting'" in done.stderr  # the warning, logged
    assert backend.rows("waiting") == 0


@pytest.mark.parametrize("write", ["through", "back"])
def test_a_resume_is_refused_though_this_process_still_holds_the_thread_another_deleted(
    backend: Backend, write: str
) -> None:
    """Another process deletes a waiting thread past ``interrupted_ttl_seconds`` while this one still holds its hot
    copy (the hot tier's idle TTL is the longer): the resume here is refused too, and stores nothing; a new run
    this process starts on the thread afterwards resumes normally, though the removal's row is still there."""
    here = saver_of(backend, Clock(), write=write)  # its clock stands still: the thread stays in its memory
    app = approval_graph(here, {})
    run(app, {"messages": ["hi"]}, "held", use_async=False, durability="sync")
    here.flush()
    mark, clock = time.time(), Clock()
    sweeper = saver_of(backend, clock, idle_ttl_seconds=DAY, interrupted_ttl_seconds=WEEK)
    clock.idle_since(mark, 8 * DAY)
    assert sweeper.sweep().deleted_threads == 1 and backend.rows("held") == 0
    assert "held" in here._store.thread_ids()
    with pytest.raises(InterruptLostError) as refused:
        run(app, Command(resume="yes"), "held", use_async=False, durability="sync")
    assert_refused(refused.value, "held")
    here.flush()
    if write == "back":  # the run's writes were all refused before any reached the durable tier
        assert backend.rows("held") == 0
    # write-through: the resumed step's checkpoint may reach the durable tier before the answer's write is refused
    # (LangGraph sends them from different threads): a known limit, in the retention guide
    result = run(app, {"messages": ["anew"]}, "held", use_async=False, durability="sync")
    assert result["__interrupt__"] == [{"question": "approve?", "draft": "draft 1"}]
    done = run(app, Command(resume="yes"), "held", use_async=False, durability="sync")
    assert done["messages"] == ["anew", "draft 1", "done: yes"]
