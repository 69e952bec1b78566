"""Retention of the durable tier: ``RetentionPolicy``, ``sweep()``, the background sweep, and their edges.

Over a SQLite file (the SQL path: one transaction per thread) and over LangGraph's ``InMemorySaver``
(the API path), with a wall clock the tests move (checkpoint ids hold real time; the clock says
how old they are):

* a thread past its TTL is gone from ``list()``, ``get_tuple()`` and the tables after one sweep, and
  what went is counted exactly (rows, and bytes as SQLite measures them); fresh threads are untouched;
* ``strategy="keep_latest"`` keeps each namespace's newest checkpoint and its pending writes: an
  interrupted thread resumes after the sweep and no completed task runs again;
* ``keep_last`` bounds every namespace, keeps what ``DeltaChannel`` values need, and removes the
  subgraph calls whose root checkpoint went; no checkpoint is left with a parent that is not there;
* a thread in use (unflushed writes, or read within the TTL in this process) is left for later, and
  counted as due; a bounded pass leaves the rest due; a repeated sweep finds nothing;
* a late write continuing a swept thread is refused; a fresh start on its id is welcome;
* two savers sweeping one file at once remove each thread once; a failing durable tier is counted;
* the background sweep runs by itself; bad settings are refused naming the field.
"""

from __future__ import annotations

import asyncio
import math
import operator
import sqlite3
import sys
import threading
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.memory import InMemorySaver as StockSaver
from langgraph.types import Command

from langgraph.checkpoint.bounded import (
    BoundedInMemorySaver,
    InMemoryCheckpointConfig,
    RetentionPolicy,
    ThreadDeletedError,
    TieredSaver,
    WriteBack,
)
from langgraph.checkpoint.bounded.tiered.retention.ids import checkpoint_id_at, time_of
from tests.support.durable_savers import ControlledSqlite, ForeignSaver, sqlite_durable
from tests.support.graphs import approval_graph, delta_graph, describe, linear, nested_graph, thread


class Log(TypedDict):
    log: Annotated[list[str], operator.add]


def three_steps(checkpointer: Any) -> Any:
    """START -> a -> b: four checkpoints a turn (input, and one after each step), two pending writes a step."""
    builder = linear(
        Log, {"a": lambda state: {"log": ["a"]}, "b": lambda state: {"log": [f"b after {len(state['log'])}"]}}
    )
    return builder.compile(checkpointer=checkpointer)


SMALL = InMemoryCheckpointConfig(max_threads=2)
DAY = 86_400.0


class Clock:
    """The saver's two clocks, which a test moves: the wall clock retention reads (frozen once moved: the
    checkpoint ids LangGraph makes hold real time, so a moving fake wall clock would age what is written
    after it moved), and the monotonic clock of the hot tier's uses (moved by the same amount)."""

    def __init__(self) -> None:
        self.wall: float | None = None
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() if self.wall is None else self.wall

    def monotonic(self) -> float:
        return time.monotonic() + self.offset

    def idle_since(self, mark: float, seconds: float) -> None:
        """Now is ``seconds`` after ``mark`` (a ``time.time()``): what was written before ``mark`` has been idle
        for longer than ``seconds``, what came after has not; every use in memory so far is that old too."""
        self.wall = mark + seconds
        self.offset += seconds


def rows(path: Path, table: str, thread_id: str | None = None) -> int:
    with sqlite3.connect(path) as connection:
        if thread_id is None:
            return int(connection.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
        return int(connection.execute(f"SELECT count(*) FROM {table} WHERE thread_id = ?", (thread_id,)).fetchone()[0])


def payload_bytes(path: Path, thread_id: str) -> int:
    with sqlite3.connect(path) as connection:
        checkpoints = connection.execute(
            "SELECT coalesce(sum(length(checkpoint) + length(metadata)), 0) FROM checkpoints WHERE thread_id = ?",
            (thread_id,),
        ).fetchone()[0]
        writes = connection.execute(
            "SELECT coalesce(sum(length(value)), 0) FROM writes WHERE thread_id = ?", (thread_id,)
        ).fetchone()[0]
    return int(checkpoints) + int(writes)


def dangling_parents(path: Path) -> list[tuple[str, str]]:
    """Checkpoints whose parent id names a checkpoint that is not there."""
    with sqlite3.connect(path) as connection:
        return connection.execute(
            "SELECT c.thread_id, c.checkpoint_id FROM checkpoints c WHERE c.parent_checkpoint_id IS NOT NULL "
            "AND NOT EXISTS (SELECT 1 FROM checkpoints p WHERE p.thread_id = c.thread_id "
            "AND p.checkpoint_ns = c.checkpoint_ns AND p.checkpoint_id = c.parent_checkpoint_id)"
        ).fetchall()


def tiered(
    path: Path | None,
    clock: Clock,
    *,
    durable: Any = None,
    write: WriteBack | None = None,
    config: InMemoryCheckpointConfig = SMALL,
    **policy: Any,
) -> TieredSaver:
    """A tiered saver over ``durable`` (unless given, a SQLite file at ``path``), swept only when asked (no
    retention when ``policy`` sets neither ``idle_ttl_seconds`` nor ``keep_last``), writing through unless
    ``write`` says otherwise."""
    settings: dict[str, Any] = {"sweep_interval_seconds": math.inf, **policy}
    if durable is None:
        assert path is not None
        durable = sqlite_durable(path)
    removes = settings.get("idle_ttl_seconds") is not None or settings.get("keep_last") is not None
    return TieredSaver(
        durable,
        config=config,
        retention=RetentionPolicy(**settings) if removes else None,
        clock=clock.monotonic,
        wall_clock=clock,
        **({} if write is None else {"write": write}),
    )


def run_turns(saver: Any, thread_ids: list[str], turns: int = 2) -> Any:
    app = three_steps(saver)
    for thread_id in thread_ids:
        for turn in range(turns):
            app.invoke({"log": [f"{thread_id} {turn}"]}, thread(thread_id))
    return app


# --- the time inside an id ---------------------------------------------------------------------------------------


def _version_4(made: str) -> str:
    """A uuid6 string with its version digit (the 15th character) made 4: the digit, not the first "-6" (a
    time field may start with 6 too)."""
    return made[:14] + "4" + made[15:]


def test_checkpoint_ids_sort_as_their_times() -> None:
    before = time.time()
    made = str(uuid6(clock_seq=0))
    after = time.time()
    found = time_of(made)
    assert found is not None and before - 1e-6 <= found <= after + 1e-6
    assert checkpoint_id_at(before - 0.001) < made < checkpoint_id_at(after + 0.001)
    assert time_of("not an id") is None and time_of(_version_4(str(uuid6()))) is None


# --- the idle TTL ------------------------------------------------------------------------------------------------


def test_a_thread_past_its_ttl_is_gone_after_one_sweep(tmp_path: Path) -> None:
    clock = Clock()
    path = tmp_path / "t.db"
    saver = tiered(path, clock, idle_ttl_seconds=DAY)
    run_turns(saver, ["old-1", "old-2"])
    mark = time.time()
    run_turns(saver, ["fresh"])
    clock.idle_since(mark, DAY)
    removed_rows = sum(rows(path, "checkpoints", t) for t in ("old-1", "old-2"))
    removed_writes = sum(rows(path, "writes", t) for t in ("old-1", "old-2"))
    removed_bytes = sum(payload_bytes(path, t) for t in ("old-1", "old-2"))
    fresh_before = [t.checkpoint["id"] for t in saver.list(thread("fresh"))]

    report = saver.sweep()

    assert (report.deleted_threads, report.pruned_threads) == (2, 0)
    assert (report.checkpoints, report.writes, report.nbytes) == (removed_rows, removed_writes, removed_bytes)
    for gone in ("old-1", "old-2"):
        assert saver.get_tuple(thread(gone)) is None and list(saver.list(thread(gone))) == []
        assert rows(path, "checkpoints", gone) == rows(path, "writes", gone) == 0
        assert sqlite_durable(path).get_tuple(thread(gone)) is None  # another process sees it gone too
    assert [t.checkpoint["id"] for t in saver.list(thread("fresh"))] == fresh_before
    stats = saver.stats().retention
    assert (stats.sweeps, stats.deleted_threads, stats.checkpoints, stats.nbytes) == (1, 2, removed_rows, removed_bytes)
    again = saver.sweep()
    assert (again.deleted_threads, again.checkpoints, again.due) == (0, 0, 0)


def test_keep_latest_keeps_what_an_interrupted_run_resumes_from(tmp_path: Path) -> None:
    clock = Clock()
    saver = tiered(tmp_path / "t.db", clock, idle_ttl_seconds=DAY, strategy="keep_latest")
    stock_calls: dict[str, int] = {}
    ours_calls: dict[str, int] = {}
    stock = approval_graph(StockSaver(), stock_calls)
    ours = approval_graph(saver, ours_calls)
    for app in (stock, ours):
        app.invoke({"messages": ["hi"]}, thread("waiting"))
        app.invoke(Command(resume="yes"), thread("waiting"))
        app.invoke({"messages": ["again"]}, thread("waiting"))  # waits at the interrupt again
    kept_before = describe(ours.get_state(thread("waiting")))
    clock.idle_since(time.time(), DAY)

    report = saver.sweep()

    assert report.pruned_threads == 1 and report.deleted_threads == 0 and report.checkpoints > 0
    assert len(list(saver.list(thread("waiting")))) == 1
    assert describe(ours.get_state(thread("waiting"))) == {**kept_before, "has_parent": False}
    assert ours.invoke(Command(resume="later"), thread("waiting")) == stock.invoke(
        Command(resume="later"), thread("waiting")
    )
    assert ours_calls == stock_calls  # draft did not run again


def test_a_late_write_continuing_a_swept_thread_is_refused(tmp_path: Path) -> None:
    clock = Clock()
    saver = tiered(tmp_path / "t.db", clock, idle_ttl_seconds=DAY)
    run_turns(saver, ["gone"])
    newest = saver.get_tuple(thread("gone"))
    assert newest is not None
    clock.idle_since(time.time(), DAY)
    assert saver.sweep().deleted_threads == 1
    with pytest.raises(ThreadDeletedError, match="gone"):
        saver.put(newest.config, newest.checkpoint, newest.metadata, {})
    run_turns(saver, ["gone"], turns=1)  # a fresh start on the same id is welcome
    assert len(list(saver.list(thread("gone")))) == 4


# --- keep_last -----------------------------------------------------------------------------------------------------


def test_keep_last_bounds_every_namespace_and_leaves_no_dangling_parent(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    saver = tiered(path, Clock(), keep_last=3)
    app = run_turns(saver, ["long"], turns=5)
    values = app.get_state(thread("long")).values
    report = saver.sweep()
    assert report.pruned_threads == 1 and report.checkpoints == 5 * 4 - 3
    assert rows(path, "checkpoints", "long") == 3
    assert dangling_parents(path) == []
    assert app.get_state(thread("long")).values == values
    assert saver.sweep().checkpoints == 0  # nothing written since: nothing more to find


def test_keep_last_keeps_the_ancestors_a_delta_channel_needs(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    saver = tiered(path, Clock(), keep_last=2)
    stock_app = delta_graph(StockSaver(), {})
    app = delta_graph(saver, {})
    for turn in range(5):
        for each in (stock_app, app):
            each.invoke({"items": [f"user {turn}"]}, thread("delta"))
    saver.sweep()
    kept = list(app.get_state_history(thread("delta")))
    assert 2 < len(kept) < 20  # more than keep_last: the ancestors back to a snapshot
    stock = {s.config["configurable"]["checkpoint_id"]: s for s in stock_app.get_state_history(thread("delta"))}
    by_step = {s.metadata["step"]: s.values for s in stock.values()}
    assert all(snapshot.values == by_step[snapshot.metadata["step"]] for snapshot in kept)
    assert dangling_parents(path) == []
    app.invoke({"items": ["after"]}, thread("delta"))
    stock_app.invoke({"items": ["after"]}, thread("delta"))
    assert app.get_state(thread("delta")).values == stock_app.get_state(thread("delta")).values


def test_subgraph_calls_go_with_their_root_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    saver = tiered(path, Clock(), keep_last=2)
    calls: dict[str, int] = {}
    stock_calls: dict[str, int] = {}
    app = nested_graph(saver, calls)
    stock = nested_graph(StockSaver(), stock_calls)
    for each in (app, stock):
        for turn in range(3):
            each.invoke({"messages": [f"go {turn}"]}, thread("nested"))
            each.invoke(Command(resume=f"answer {turn}"), thread("nested"))
        each.invoke({"messages": ["last"]}, thread("nested"))  # waits inside the subgraph

    def namespaces() -> set[str]:
        with sqlite3.connect(path) as connection:
            return {row[0] for row in connection.execute("SELECT DISTINCT checkpoint_ns FROM checkpoints")}

    assert len(namespaces()) == 1 + 4  # the root, and one per subgraph call
    saver.sweep()
    assert len(namespaces()) == 2  # the root, and the call the thread waits in
    ours = describe(app.get_state(thread("nested"), subgraphs=True))
    assert ours == {**describe(stock.get_state(thread("nested"), subgraphs=True)), "has_parent": ours["has_parent"]}
    assert app.invoke(Command(resume="end"), thread("nested")) == stock.invoke(Command(resume="end"), thread("nested"))
    assert calls == stock_calls


def answers(saver: Any, thread_id: str) -> list[tuple[Any, ...]]:
    """Every checkpoint of every namespace a saver lists for the thread: where, parent and pending writes (raw
    channel values differ between savers by design: graphs rebuild a ``DeltaChannel``'s)."""
    found = []
    for item in saver.list({"configurable": {"thread_id": thread_id}}):
        parent = (item.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        location = item.config["configurable"]
        found.append(
            (
                location["checkpoint_ns"],
                location["checkpoint_id"],
                parent,
                sorted((task, channel) for task, channel, _ in item.pending_writes or ()),
            )
        )
    return sorted(found)


def history_of(app: Any) -> list[Any]:
    return list(app.get_state_history(thread("long")))


@pytest.mark.parametrize("graph", ["steps", "delta", "nested"])
def test_a_pruned_thread_stays_hot_and_answers_as_the_durable_tier(tmp_path: Path, graph: str) -> None:
    saver = tiered(tmp_path / "t.db", Clock(), keep_last=2)
    if graph == "steps":
        app = run_turns(saver, ["long"], turns=4)
    elif graph == "delta":
        app = delta_graph(saver, {})
        for turn in range(5):
            app.invoke({"items": [f"user {turn}"]}, thread("long"))
    else:
        app = nested_graph(saver, {})
        for turn in range(3):
            app.invoke({"messages": [f"go {turn}"]}, thread("long"))
            app.invoke(Command(resume=f"answer {turn}"), thread("long"))
        app.invoke({"messages": ["last"]}, thread("long"))
    history = {snapshot.config["configurable"]["checkpoint_id"]: snapshot.values for snapshot in history_of(app)}
    assert saver.sweep().pruned_threads == 1
    misses = saver.stats().misses
    assert answers(saver, "long") == answers(saver.durable, "long")  # parents too: none left that is not there
    kept = history_of(app)
    assert saver.stats().misses == misses  # answered from memory: the prune kept the thread hot
    assert 2 <= len(kept) < len(history)
    assert all(snapshot.values == history[snapshot.config["configurable"]["checkpoint_id"]] for snapshot in kept)
    saver._hot.store.check()


def test_a_partial_hot_copy_loses_the_parent_the_prune_removed(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    run_turns(TieredSaver(sqlite_durable(path)), ["long"], turns=3)
    saver = TieredSaver(sqlite_durable(path), config=SMALL)
    latest = saver.get_tuple(thread("long"))  # only the latest comes to memory: its parent is durable only
    assert latest is not None and latest.parent_config is not None
    saver.prune(["long"], strategy="keep_last", keep_last=1)
    hot, durable = saver.get_tuple(thread("long")), saver.durable.get_tuple(thread("long"))
    assert hot is not None and durable is not None
    assert hot.config == durable.config and hot.parent_config is None and durable.parent_config is None
    assert saver.stats().misses == 1  # the first read; the prune kept the copy
    saver._hot.store.check()


@pytest.mark.parametrize("method", ["list", "get_tuple"])
def test_a_read_that_began_before_a_prune_does_not_bring_back_what_it_removed(tmp_path: Path, method: str) -> None:
    durable = ControlledSqlite(tmp_path / "t.db")
    saver = tiered(tmp_path / "t.db", Clock(), durable=durable, keep_last=2)
    run_turns(saver, ["long"], turns=4)
    run_turns(saver, ["x", "y"], turns=1)  # "long" leaves memory: the read below misses
    durable.held = {method}  # it reads the durable tier, then waits while the prune runs
    reads = {"list": lambda: list(saver.list(thread("long"))), "get_tuple": lambda: saver.get_tuple(thread("long"))}
    reader = threading.Thread(target=reads[method], daemon=True)
    reader.start()
    assert durable.holding.wait(30)
    saver.prune(["long"], strategy="keep_last", keep_last=2)  # a read in flight does not hold it up
    durable.release.set()
    reader.join(30)
    assert not reader.is_alive()
    assert answers(saver, "long") == answers(durable, "long") and len(answers(durable, "long")) == 2
    saver._hot.store.check()


# --- what a sweep leaves alone, and its bounds ------------------------------------------------------------------


def test_a_thread_read_within_the_ttl_here_is_kept_and_counted_due(tmp_path: Path) -> None:
    clock = Clock()
    saver = tiered(tmp_path / "t.db", clock, idle_ttl_seconds=DAY)
    run_turns(saver, ["read", "idle"])
    clock.idle_since(time.time(), DAY)
    assert saver.get_tuple(thread("read")) is not None  # a read in this process refreshes its TTL here
    report = saver.sweep()
    assert (report.deleted_threads, report.due, report.in_use) == (1, 1, 1)
    assert saver.stats().retention.due_threads == 1
    assert saver.get_tuple(thread("read")) is not None and saver.get_tuple(thread("idle")) is None


def test_write_back_unflushed_writes_keep_a_thread(tmp_path: Path) -> None:
    clock = Clock()
    durable = sqlite_durable(tmp_path / "t.db")
    saver = tiered(None, clock, durable=durable, write=WriteBack(flush_interval_seconds=math.inf), idle_ttl_seconds=60)
    run_turns(saver, ["dirty"])
    clock.idle_since(time.time(), 120)
    report = saver.sweep()  # the durable tier has nothing of it yet, and the thread is unflushed
    assert report.deleted_threads == 0
    saver.flush()
    assert len(list(durable.list(thread("dirty")))) == 8


def test_a_bounded_pass_leaves_the_rest_due_and_the_next_takes_them(tmp_path: Path) -> None:
    clock = Clock()
    saver = tiered(tmp_path / "t.db", clock, idle_ttl_seconds=DAY)
    names = [f"idle-{n}" for n in range(5)]
    run_turns(saver, names, turns=1)
    clock.idle_since(time.time(), DAY)
    first = saver.sweep(max_threads=2)
    assert (first.deleted_threads, first.due) == (2, 3)
    second = saver.sweep(max_threads=2)
    assert (second.deleted_threads, second.due) == (2, 1)
    assert saver.sweep().deleted_threads == 1
    assert all(saver.get_tuple(thread(name)) is None for name in names)


def test_threads_in_use_do_not_starve_a_bounded_pass(tmp_path: Path) -> None:
    clock = Clock()
    saver = tiered(tmp_path / "t.db", clock, idle_ttl_seconds=DAY)
    run_turns(saver, ["a-read", "b-idle"], turns=1)
    clock.idle_since(time.time(), DAY)
    assert saver.get_tuple(thread("a-read")) is not None  # in use, and found first: skipping it costs no durable call
    report = saver.sweep(max_threads=1)
    assert (report.deleted_threads, report.in_use, report.due) == (1, 1, 1)
    assert saver.get_tuple(thread("b-idle")) is None and saver.get_tuple(thread("a-read")) is not None


def test_a_failed_search_keeps_the_threads_left_due(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from langgraph.checkpoint.bounded.tiered.retention import sweep

    monkeypatch.setattr(sweep, "DISCOVERY_PAGE", 1)  # one thread a search: the second search finds "b-idle"
    clock = Clock()
    durable = ControlledSqlite(tmp_path / "t.db")
    saver = tiered(tmp_path / "t.db", clock, durable=durable, idle_ttl_seconds=DAY)
    run_turns(saver, ["a-read", "b-idle"], turns=1)
    assert saver.sweep().deleted_threads == 0  # nothing due yet: makes the index, so the searches come next
    clock.idle_since(time.time(), DAY)
    saver.get_tuple(thread("a-read"))  # in use at this pass: left due, then the search for more fails
    original, searches = durable.cursor, []

    def failing_second_search(*args: Any, **kwargs: Any) -> Any:
        searches.append(1)
        if len(searches) == 2:
            raise sqlite3.OperationalError("disk I/O error")
        return original(*args, **kwargs)

    durable.cursor = failing_second_search  # type: ignore[method-assign]
    with pytest.raises(sqlite3.OperationalError):
        saver.sweep()
    durable.cursor = original  # type: ignore[method-assign]
    assert saver.stats().retention.due_threads == 1  # not lost, though the search's window moved past it
    clock.idle_since(time.time(), DAY)  # no longer in use
    assert saver.sweep().deleted_threads == 2
    assert rows(tmp_path / "t.db", "checkpoints") == 0


def sqlite_connections() -> list[Any]:
    """Every way of opening the durable tier's connection: the default, autocommit by isolation_level, a
    transaction left open, and Python 3.12's ``autocommit`` (where ``commit()`` may do nothing, or a
    transaction is always open)."""
    kinds: list[Any] = [{}, {"isolation_level": None}, "open transaction"]
    if sys.version_info >= (3, 12):
        kinds += [{"autocommit": True}, {"autocommit": False}]
    return kinds


@pytest.mark.parametrize("opened", sqlite_connections(), ids=str)
def test_a_sweep_commits_and_unlocks_on_every_kind_of_connection(tmp_path: Path, opened: Any) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver

    path = tmp_path / "t.db"
    run_turns(TieredSaver(sqlite_durable(path)), ["idle"], turns=1)
    connection = sqlite3.connect(path, check_same_thread=False, **({} if isinstance(opened, str) else opened))
    if opened == "open transaction":
        connection.execute("CREATE TABLE IF NOT EXISTS other (x)")
        connection.commit()
        connection.execute("INSERT INTO other VALUES (1)")  # opens a transaction, left for the sweep to end
    clock = Clock()
    saver = tiered(path, clock, durable=SqliteSaver(connection), idle_ttl_seconds=DAY)
    clock.idle_since(time.time(), DAY)
    assert saver.sweep().deleted_threads == 1
    other = sqlite3.connect(path, timeout=0.5)  # another process writes at once: nothing left locked
    other.execute("INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id) VALUES ('x', '', '1')")
    other.commit()
    assert rows(path, "checkpoints", "idle") == 0 and rows(path, "writes", "idle") == 0


@pytest.mark.parametrize("statement", ["idle_threads", "long_threads"])
def test_sqlite_finds_due_threads_on_the_index_not_by_reading_every_row(tmp_path: Path, statement: str) -> None:
    from langgraph.checkpoint.bounded.tiered.backends.base import INDEX
    from langgraph.checkpoint.bounded.tiered.backends.sqlite import SqliteDialect

    path = tmp_path / "t.db"
    saver = tiered(path, Clock(), idle_ttl_seconds=DAY, keep_last=2)
    run_turns(saver, ["a", "b"], turns=1)
    saver.sweep()  # makes the index
    with sqlite3.connect(path) as connection:
        plan = connection.execute(f"EXPLAIN QUERY PLAN {getattr(SqliteDialect(), statement)()}", ("", "", "", 1, 10))
        searches = [str(row[-1]) for row in plan if str(row[-1]).startswith(("SEARCH", "SCAN"))]
    assert f"USING COVERING INDEX {INDEX} (checkpoint_id>? AND checkpoint_id<?)" in searches[0], searches


def test_two_savers_sweeping_one_file_remove_each_thread_once(tmp_path: Path) -> None:
    clock = Clock()
    path = tmp_path / "t.db"
    names = [f"idle-{n}" for n in range(40)]
    run_turns(tiered(path, clock), names, turns=1)
    clock.idle_since(time.time(), DAY)
    savers = [tiered(path, clock, idle_ttl_seconds=DAY, keep_last=2) for _ in range(2)]
    reports: list[Any] = []
    start = threading.Barrier(2)

    def sweep(saver: TieredSaver) -> None:
        start.wait()
        reports.append(saver.sweep())

    workers = [threading.Thread(target=sweep, args=(saver,)) for saver in savers]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    assert sum(report.deleted_threads for report in reports) == 40
    assert sum(report.failures for report in reports) == 0
    assert rows(path, "checkpoints") == rows(path, "writes") == 0


def test_a_failing_durable_tier_fails_the_pass_and_is_counted(tmp_path: Path) -> None:
    clock = Clock()
    durable = ControlledSqlite(tmp_path / "t.db")
    saver = tiered(tmp_path / "t.db", clock, durable=durable, idle_ttl_seconds=DAY)
    run_turns(saver, ["a"])
    clock.idle_since(time.time(), DAY)
    original = durable.cursor

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise sqlite3.OperationalError("disk I/O error")

    durable.cursor = broken  # type: ignore[method-assign]
    with pytest.raises(sqlite3.OperationalError):
        saver.sweep()
    stats = saver.stats().retention
    assert stats.sweep_failures == 1 and "disk I/O error" in (stats.last_sweep_error or "")
    durable.cursor = original  # type: ignore[method-assign]
    assert saver.sweep().deleted_threads == 1


def test_the_background_sweep_runs_by_itself(tmp_path: Path) -> None:
    clock = Clock()
    saver = tiered(tmp_path / "t.db", clock, idle_ttl_seconds=DAY, sweep_interval_seconds=0.05)
    run_turns(saver, ["a", "b", "c"], turns=1)
    clock.idle_since(time.time(), DAY)
    deadline = time.monotonic() + 30
    while saver.stats().retention.deleted_threads < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert saver.stats().retention.deleted_threads == 3
    saver.close()


async def test_asweep_on_the_event_loop(tmp_path: Path) -> None:
    clock = Clock()
    saver = tiered(tmp_path / "t.db", clock, idle_ttl_seconds=DAY)
    app = three_steps(saver)
    await app.ainvoke({"log": ["x"]}, thread("async"))
    clock.idle_since(time.time(), DAY)
    ticks = 0

    async def ticking() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    ticker = asyncio.create_task(ticking())
    report = await saver.asweep()
    ticker.cancel()
    assert report.deleted_threads == 1 and await saver.aget_tuple(thread("async")) is None
    assert ticks > 0  # the loop ran meanwhile


def test_through_the_api_of_another_saver(tmp_path: Path) -> None:
    clock = Clock()
    durable = StockSaver()
    saver = tiered(None, clock, durable=durable, idle_ttl_seconds=DAY, keep_last=3)
    run_turns(saver, ["idle"], turns=1)
    mark = time.time()
    app = run_turns(saver, ["long"], turns=3)
    values = app.get_state(thread("long")).values
    clock.idle_since(mark, DAY)
    report = saver.sweep()
    assert (report.deleted_threads, report.pruned_threads) == (1, 1)
    assert list(durable.list(thread("idle"))) == [] and len(list(durable.list(thread("long")))) == 3
    assert app.get_state(thread("long")).values == values


# --- bad settings ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        ({"idle_ttl_seconds": 0}, "idle_ttl_seconds"),
        ({"idle_ttl_seconds": -1}, "idle_ttl_seconds"),
        ({"idle_ttl_seconds": math.nan}, "idle_ttl_seconds"),
        ({"idle_ttl_seconds": math.inf}, "idle_ttl_seconds"),
        ({"idle_ttl_seconds": "1 day"}, "idle_ttl_seconds"),
        ({"idle_ttl_seconds": True}, "idle_ttl_seconds"),
        ({"strategy": "keep_all"}, "strategy"),
        ({"keep_last": 0}, "keep_last"),
        ({"keep_last": 2.5}, "keep_last"),
        ({"keep_last": True}, "keep_last"),
        ({"keep_last": 2**31}, "keep_last"),  # past what SQL takes as an integer: every pass would fail
        ({"sweep_interval_seconds": 0}, "sweep_interval_seconds"),
        ({"max_threads_per_sweep": 0}, "max_threads_per_sweep"),
        ({"max_threads_per_sweep": 2**63}, "max_threads_per_sweep"),
    ],
)
def test_bad_policy_values_are_refused_naming_the_field(settings: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        RetentionPolicy(**settings)


def test_the_agent_server_ttl_block_maps_to_a_policy() -> None:
    policy = RetentionPolicy.from_agent_server_ttl(
        {"strategy": "keep_latest", "default_ttl": 43200, "sweep_interval_minutes": 10}, keep_last=20
    )
    assert policy == RetentionPolicy(
        idle_ttl_seconds=43200 * 60, strategy="keep_latest", keep_last=20, sweep_interval_seconds=600
    )
    with pytest.raises(ValueError, match="unknown keys"):
        RetentionPolicy.from_agent_server_ttl({"default_ttl": 1, "interval": 5})
    with pytest.raises(ValueError, match="default_ttl"):
        RetentionPolicy.from_agent_server_ttl({"default_ttl": -5})


def test_a_tiered_saver_refuses_what_it_cannot_keep(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="retention must be a RetentionPolicy"):
        TieredSaver(sqlite_durable(tmp_path / "t.db"), retention={"idle_ttl_seconds": 5})

    with pytest.raises(ValueError, match="keep_last and strategy='keep_latest'"):
        TieredSaver(ForeignSaver(), retention=RetentionPolicy(keep_last=5))
    TieredSaver(ForeignSaver(), retention=RetentionPolicy(idle_ttl_seconds=5))  # deleting whole threads works
    with pytest.raises(ValueError, match="needs a retention policy"):
        TieredSaver(sqlite_durable(tmp_path / "u.db")).sweep()
    with pytest.raises(ValueError, match="max_threads"):
        tiered(tmp_path / "v.db", Clock(), keep_last=1).sweep(max_threads=0)


@pytest.mark.parametrize("make", [lambda path: BoundedInMemorySaver(), lambda path: TieredSaver(sqlite_durable(path))])
@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"strategy": "keep_last"}, "keep_last must be a whole number"),
        ({"strategy": "keep_last", "keep_last": 0}, "keep_last must be a whole number"),
        ({"strategy": "keep_last", "keep_last": "3"}, "keep_last must be a whole number"),
        ({"strategy": "keep_latest", "keep_last": 3}, "keep_last goes with strategy='keep_last'"),
        ({"strategy": "keep_some"}, "strategy must be one of"),
    ],
)
def test_bad_prune_arguments_change_nothing(make: Any, arguments: dict[str, Any], message: str, tmp_path: Path) -> None:
    saver = make(tmp_path / "t.db")
    run_turns(saver, ["t"], turns=2)
    before = [t.checkpoint["id"] for t in saver.list(thread("t"))]
    with pytest.raises(ValueError, match=message):
        saver.prune(["t"], **arguments)
    assert [t.checkpoint["id"] for t in saver.list(thread("t"))] == before
