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
* checkpoints made an hour before their put (write-through, conditional, write-back) are found by the next
  pass, beyond any overlap;
* the landing ledger and the dirty ledger's lowest id keep their invariants.

And no write row outlives its checkpoint (issue 36): a prune collects the thread's writes whose checkpoint is
gone and sorts below the namespace's newest (a late write, as LangGraph's ``durability="async"`` delivers
a run's input writes after its later checkpoints, driven here by a real graph), and keeps a write made
before the put of its own new checkpoint, over SQLite and PostgreSQL.
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

from langgraph.checkpoint.bounded import InMemoryCheckpointConfig, RetentionPolicy, TieredSaver, WriteBack, WriteThrough
from langgraph.checkpoint.bounded.tiered.landing import Landings
from langgraph.checkpoint.bounded.tiered.retention.ids import checkpoint_id_at
from langgraph.checkpoint.bounded.tiered.retention.sweep import DISCOVERY_OVERLAP_SECONDS
from tests.support.durable_savers import ControlledSqlite, PostgresCluster, clean, cluster_fixture, sqlite_durable
from tests.support.graphs import linear, thread
from tests.support.helpers import config, make_checkpoint
from tests.support.tiered import WAIT
from tests.tiered.test_retention import Clock, tiered

SMALL = InMemoryCheckpointConfig(max_threads=4)
BACKENDS = ["sqlite", "async_sqlite", "postgres", "async_postgres"]
KEEP_LAST_TWO = RetentionPolicy(keep_last=2, sweep_interval_seconds=math.inf)


cluster = cluster_fixture("the retention discovery PostgreSQL tests")


class Count(TypedDict):
    count: int


def counter(checkpointer: Any) -> Any:
    """The retention guide's graph: three checkpoints an invoke."""
    builder = linear(Count, {"tick": lambda state: {"count": state["count"] + 1}})
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


def keeping_the_last_two(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest, scenario: Callable[[TieredSaver, Tables], None]
) -> None:
    """Runs ``scenario`` on a saver keeping each thread's last two checkpoints, over ``backend``'s fresh tables."""

    async def body() -> None:
        async with durable_of(backend, tmp_path, request) as (durable, tables):
            scenario(TieredSaver(durable, config=SMALL, retention=KEEP_LAST_TWO), tables)

    asyncio.run(body())


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
            write=WriteBack(flush_interval_seconds=math.inf),
            retention=KEEP_LAST_TWO,
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
        saver = tiered(
            None,
            clock,
            durable=durable,
            write=WriteBack(flush_interval_seconds=math.inf),
            config=SMALL,
            idle_ttl_seconds=60,
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
    saver = TieredSaver(durable, config=SMALL, retention=KEEP_LAST_TWO)
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
    def scenario(saver: TieredSaver, tables: Tables) -> None:
        made = time.time() - DISCOVERY_OVERLAP_SECONDS / 2  # ids made before the pass, by a slow writer
        saver.sweep()
        with tables.other_process() as other:
            put_ids(other, "late", ids_at(made, 5))

        report = saver.sweep()

        assert (report.pruned_threads, report.checkpoints) == (1, 3)
        assert tables.count("checkpoints", "late") == 2
        saver.close()

    keeping_the_last_two(backend, tmp_path, request, scenario)


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
    saver = TieredSaver(
        sqlite_durable(tmp_path / "d.db"), config=SMALL, write=WriteBack(flush_interval_seconds=math.inf)
    )
    ledger: Callable[[], str | None] = saver._shared.dirty.lowest_checkpoint_id
    assert ledger() is None
    ids = ids_at(time.time(), 3)
    put_ids(saver, "b", ids[1:])
    assert ledger() == ids[1]
    put_ids(saver, "a", ids[2:])
    assert ledger() == ids[1]
    put_ids(saver, "c", ids[:1])  # a lower id after higher ones (another thread): the lowest follows
    assert ledger() == ids[0]
    saver.flush()
    assert ledger() is None
    saver.close()


# --- write rows left without their checkpoint (issue 36) ----------------------------------------------------------


def orphans(tables: Tables) -> int:
    """Write rows whose checkpoint row is not there."""
    if tables.sqlite_path is not None:
        with contextlib.closing(sqlite3.connect(tables.sqlite_path)) as connection:
            return int(
                connection.execute(
                    "SELECT count(*) FROM writes w WHERE NOT EXISTS (SELECT 1 FROM checkpoints c WHERE "
                    "c.thread_id = w.thread_id AND c.checkpoint_ns = w.checkpoint_ns "
                    "AND c.checkpoint_id = w.checkpoint_id)"
                ).fetchone()[0]
            )
    from psycopg import Connection

    with Connection.connect(str(tables.conninfo), autocommit=True) as connection:
        row = connection.execute(
            "SELECT count(*) FROM checkpoint_writes w WHERE NOT EXISTS (SELECT 1 FROM checkpoints c WHERE "
            "c.thread_id = w.thread_id AND c.checkpoint_ns = w.checkpoint_ns AND c.checkpoint_id = w.checkpoint_id)"
        ).fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_prune_collects_writes_left_without_their_checkpoint(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    def scenario(saver: TieredSaver, tables: Tables) -> None:
        app = counter(saver)
        for _ in range(3):
            app.invoke({"count": 0}, thread("t"), durability="async")
        oldest = list(saver.list(thread("t")))[-1]
        saver.prune(["t"], strategy="keep_last", keep_last=2)
        # A step's writes arriving after the prune removed their checkpoint (LangGraph's async durability):
        saver.put_writes(oldest.config, [("count", 7)], "late-task")
        # A write made before the put of its own, brand-new checkpoint (LangGraph may): it must stay.
        fresh = make_checkpoint({"count": 9}, {"count": saver.get_next_version(None, None)})
        newest = saver.get_tuple(thread("t"))
        assert newest is not None
        early = config("t", "", fresh["id"])
        saver.put_writes(early, [("count", 8)], "early-task")
        assert orphans(tables) == 2

        before = saver.stats().retention
        saver.prune(["t"], strategy="keep_last", keep_last=2)

        after = saver.stats().retention
        assert (after.checkpoints - before.checkpoints, after.writes - before.writes) == (0, 1)
        assert orphans(tables) == 1  # the early write, whose checkpoint comes next
        saver.put(newest.config, fresh, {"source": "update", "step": 9, "parents": {}}, fresh["channel_versions"])
        stored = saver.get_tuple(config("t", "", fresh["id"]))
        assert stored is not None and [write[1:] for write in stored.pending_writes or []] == [("count", 8)]
        assert orphans(tables) == 0
        app.invoke({"count": 0}, thread("t"), durability="async")  # long again: the sweep collects too
        saver.put_writes(oldest.config, [("count", 7)], "late-task")
        assert saver.sweep().writes >= 1 and orphans(tables) == 0
        saver.close()

    keeping_the_last_two(backend, tmp_path, request, scenario)


class LateWrites(TieredSaver):
    """A tiered saver whose first ``put_writes`` once ``hold`` is set (the writes of a run's input checkpoint)
    waits, in LangGraph's background task, until the test lets it go; ``puts_done`` is set once ``puts`` more
    checkpoints were put. Under ``durability="async"`` LangGraph puts the run's later checkpoints meanwhile."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.hold = False
        self.waiting = threading.Event()
        self.go = threading.Event()
        self.puts = -1
        self.puts_done = threading.Event()
        self.lock = threading.Lock()
        self.writes_stored = 0  # put_writes calls done (LangGraph may make the last after the last put)
        self.stored_changed = threading.Condition(self.lock)

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        if self.hold:
            self.hold = False
            self.waiting.set()
            assert self.go.wait(WAIT), "the test never let the held writes go"
        super().put_writes(config, writes, task_id, task_path)
        with self.lock:
            self.writes_stored += 1
            self.stored_changed.notify_all()

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        stored = super().put(config, checkpoint, metadata, new_versions)
        self.puts -= 1
        if not self.puts:
            self.puts_done.set()
        return stored

    def wait_for_writes(self, count: int) -> bool:
        """Whether ``count`` put_writes calls were done within ``WAIT``."""
        with self.lock:
            return self.stored_changed.wait_for(lambda: self.writes_stored >= count, WAIT)


@pytest.mark.parametrize("write", ["through", "back"])
def test_writes_landing_after_a_pass_pruned_their_checkpoint_are_collected(tmp_path: Path, write: str) -> None:
    path = tmp_path / "late.db"
    saver = LateWrites(
        sqlite_durable(path),
        config=SMALL,
        write=write,
        retention=KEEP_LAST_TWO,
    )
    tables = Tables(path, None)
    app = counter(saver)
    app.invoke({"count": 0}, thread("t"), durability="async")
    per_run = saver.writes_stored  # put_writes calls a run makes
    saver.puts, saver.hold = 3, True  # the run's three checkpoints; its input's writes held
    runner = threading.Thread(target=lambda: app.invoke({"count": 0}, thread("t"), durability="async"))
    runner.start()
    assert saver.waiting.wait(WAIT) and saver.puts_done.wait(WAIT)
    # Every other write of the run done too (under load LangGraph's background puts finish in any order: one
    # landing after the flush would leave the thread in use, and the sweep would rightly pass it by).
    assert saver.wait_for_writes(2 * per_run - 1)
    saver.flush()
    swept = saver.sweep()
    assert (swept.pruned_threads, swept.checkpoints) == (1, 4)  # the input checkpoint went; its writes come later
    saver.go.set()
    runner.join(WAIT)
    saver.flush()
    landed = orphans(tables)
    assert landed == 2  # LangGraph's input writes (the value and the branch), under a checkpoint gone

    before = saver.stats().retention.writes
    saver.prune(["t"], strategy="keep_last", keep_last=2)

    assert saver.stats().retention.writes - before == landed and orphans(tables) == 0
    assert app.get_state(thread("t")).values == {"count": 1}
    saver.close()


def test_a_rewind_into_an_open_range_takes_effect_when_it_ends() -> None:
    from langgraph.checkpoint.bounded.tiered.retention.sweep import Window

    window = Window(since="b")
    assert window.open("f", lambda since: "a") and (window.start, window.upto) == ("a", "f")
    window.page_read("thread-9", full=True)  # cut short: resumes after thread-9 next pass
    window.rewind("c")  # a row landed at "c", maybe below a page read: not a restart (it could never end)
    window.rewind("d")
    window.check()
    assert (window.upto, window.after, window.rewound) == ("f", "thread-9", "c")
    window.page_read(None, full=False)
    assert (window.since, window.upto, window.rewound) == ("c", None, None)
    window.rewind("b")  # no range open: the next one starts there
    window.check()
    assert window.since == "b" and not window.open("b", lambda since: since)


@pytest.mark.parametrize(
    "settings",
    [{}, {"write": WriteThrough(processes="many")}, {"write": WriteBack(flush_interval_seconds=math.inf)}],
    ids=["through", "conditional", "back"],
)
def test_checkpoints_made_long_before_their_put_are_found(tmp_path: Path, settings: dict[str, Any]) -> None:
    """A put of a checkpoint made an hour before (``durability="exit"`` puts a run's checkpoints at its end)
    lands far below the windows, beyond any overlap: this process's next pass finds it all the same."""
    saver = TieredSaver(
        sqlite_durable(tmp_path / "old.db"),
        config=SMALL,
        retention=KEEP_LAST_TWO,
        **settings,
    )
    saver.sweep()
    put_ids(saver, "made-before", ids_at(time.time() - 3_600, 5))
    saver.flush()

    report = saver.sweep()

    assert (report.pruned_threads, report.checkpoints) == (1, 3)
    assert len(list(saver.list(thread("made-before")))) == 2
    saver.close()


def test_another_process_rows_written_after_the_clock_stepped_back_are_found(tmp_path: Path) -> None:
    path = tmp_path / "stepped.db"
    clock = Clock()
    now = time.time()
    clock.wall = now
    saver = TieredSaver(
        sqlite_durable(path),
        config=SMALL,
        retention=KEEP_LAST_TWO,
        clock=clock.monotonic,
        wall_clock=clock,
    )
    saver.sweep()
    clock.wall = now - 3_600  # the host's clock steps back; the other process writes with it
    tables = Tables(path, None)
    with tables.other_process() as other:
        put_ids(other, "theirs", ids_at(now - 3_600 - 1, 5))

    report = saver.sweep()  # this process wrote nothing: the clock alone moves its windows

    assert (report.pruned_threads, tables.count("checkpoints", "theirs")) == (1, 2)
    saver._sweeper.check()  # type: ignore[union-attr]
    saver.close()
