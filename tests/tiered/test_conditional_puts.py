"""Conditional puts (``saver/tiered/conditional.py``): ``put_if_newest`` / ``aput_if_newest`` over SQLite and
PostgreSQL, sync and async, one connection, a pipeline or a pool.

* The check passes: the rows stored are a plain ``put``'s, byte for byte (checkpoint, metadata,
  PostgreSQL's blobs), for primitive and non-primitive values, a ``DeltaChannel`` snapshot and a nested
  namespace; the returned config is the put's.
* A stale ``expected`` raises ``CheckpointConflictError`` naming the thread, and stores nothing; the
  namespace is free again right after (no transaction or lock left behind).
* A new namespace takes ``expected=None``; a second racer on it conflicts.
* A lost update, made deterministically: with plain puts two writers reading the same checkpoint fork
  the thread and the newest chain drops one update; the same interleaving with the guard conflicts,
  and the loser's retry lands on the winner's checkpoint.
* The lock, deterministically: the first caller waits inside its critical section (checked, not yet
  stored) while the second is seen waiting at the lock (SQLite: its ``BEGIN IMMEDIATE`` started;
  PostgreSQL: its advisory lock request not granted, read from ``pg_locks``); the second has not
  finished then, and once the first goes on, it conflicts. Also on a database whose transactions
  default to repeatable read (the read after the lock must see the winner), and, on a pool, with the
  waiting saver still answering reads. No sleep decides anything: the waits are for events, or for
  conditions polled (``pg_locks``), with generous deadlines that only turn a hang into a failure.
* A put failing inside the guard stores nothing (PostgreSQL: not even what the put had sent); a sync
  saver's async calls run on ``durable_pool``; a sync call on an async saver's own loop is refused;
  savers without a cross-process guard are refused with the reason.
* The headline: two OS processes (spawn), one sync and one async, race 25 updates each on one thread
  of one SQLite file and of one PostgreSQL database; the thread ends as one linear chain of 50
  checkpoints holding every update either process was acknowledged, and its counter says 50.

PostgreSQL runs on a throwaway server (``tests/support/postgres_server.py``); without one these tests are
skipped, loudly, or fail where ``BOUNDED_TESTS_REQUIRE_POSTGRES=1``.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import pickle
import sqlite3
import threading
import traceback
import uuid
from collections.abc import Callable, Coroutine, Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, Checkpoint, CheckpointMetadata, empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from langgraph.checkpoint.bounded import BoundedInMemorySaver
from langgraph.checkpoint.bounded.tiered.conditional import (
    CheckpointConflictError,
    aput_if_newest,
    conditional_support,
    put_if_newest,
)
from langgraph.checkpoint.bounded.tiered.durable import DurableSideError
from tests.support.durable_savers import PostgresCluster, cluster_fixture, set_up

T = TypeVar("T")

DEADLINE = 60.0  # seconds: only ever turns a hang into a failure, never decides an outcome
SQLITE_BUSY_SECONDS = 60.0  # how long a writer waits for SQLite's write lock before "database is locked"

SQLITE_KINDS = ["sqlite", "sqlite_autocommit", "async_sqlite"]  # autocommit: isolation_level=None
POSTGRES_KINDS = [
    "postgres",
    "postgres_pipeline",
    "postgres_pool",
    "async_postgres",
    "async_postgres_pipeline",
    "async_postgres_pool",
]
KINDS = SQLITE_KINDS + POSTGRES_KINDS


# --- a durable saver of each kind, and a raw look at its rows ------------------------------------------------


class LoopThread:
    """An event loop running in a thread of its own: the loop an async saver is made on and bound to."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="saver-loop", daemon=True)
        self.thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(DEADLINE)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(DEADLINE)
        self.loop.close()


@dataclass
class Gate:
    """Makes a saver's put wait, once armed: ``entered`` is set when a put reaches it, and it goes on
    when ``opened`` is set. ``thread_names`` records where each put ran; ``fail`` makes puts raise
    (``"before"`` storing, or ``"after"`` the saver's put returned)."""

    armed: bool = False
    entered: threading.Event = field(default_factory=threading.Event)
    opened: threading.Event = field(default_factory=threading.Event)
    thread_names: list[str] = field(default_factory=list)
    fail: str | None = None

    def before(self) -> None:
        self.thread_names.append(threading.current_thread().name)
        if self.fail == "before":
            raise RuntimeError("the put failed (simulated)")
        if self.armed:
            self.entered.set()
            assert self.opened.wait(DEADLINE), "the test never opened the gate"

    def after(self) -> None:
        if self.fail == "after":
            raise RuntimeError("the put failed after storing (simulated)")


def gated(base: type[Any]) -> type[Any]:
    """A subclass of a LangGraph saver whose put (sync or async) passes through ``self.gate`` first."""

    class Gated(base):  # type: ignore[misc,valid-type]
        gate: Gate

        def put(self, *args: Any) -> Any:
            if getattr(self, "loop", None) is not None:
                return super().put(*args)  # an async saver's sync put: hands over to aput, gated there
            self.gate.before()
            stored = super().put(*args)
            self.gate.after()
            return stored

        async def aput(self, *args: Any) -> Any:
            # The gate waits in a worker thread: the loop stays free for the other caller.
            await asyncio.get_running_loop().run_in_executor(None, self.gate.before)
            stored = await super().aput(*args)
            self.gate.after()
            return stored

    Gated.__name__ = base.__name__
    return Gated


@dataclass
class Backend:
    """One durable saver under test, the loop it lives on (async savers), and a raw view of its rows."""

    kind: str
    saver: Any
    where: str
    loop: LoopThread | None
    gate: Gate
    closing: contextlib.ExitStack

    @property
    def is_async(self) -> bool:
        return self.loop is not None

    def rows(self, thread_id: str) -> dict[str, list[tuple[Any, ...]]]:
        """Every stored row of the thread, as the database holds it (thread id left out), sorted."""
        if self.kind in SQLITE_KINDS:
            with contextlib.closing(sqlite3.connect(self.where)) as connection:
                checkpoints = connection.execute(
                    "SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata "
                    "FROM checkpoints WHERE thread_id = ?",
                    (thread_id,),
                ).fetchall()
            return {"checkpoints": sorted(checkpoints)}
        import psycopg

        with psycopg.Connection.connect(self.where, autocommit=True) as connection:
            checkpoints = connection.execute(
                "SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint::text, metadata::text "
                "FROM checkpoints WHERE thread_id = %s",
                (thread_id,),
            ).fetchall()
            blobs = connection.execute(
                "SELECT checkpoint_ns, channel, version, type, blob FROM checkpoint_blobs WHERE thread_id = %s",
                (thread_id,),
            ).fetchall()
        return {"checkpoints": sorted(checkpoints), "blobs": sorted(blobs)}


cluster = cluster_fixture("the conditional-write tests over PostgreSQL")


def _sqlite_path(tmp_path: Path) -> str:
    return str(tmp_path / "durable.sqlite")


def where_for(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The SQLite file or the PostgreSQL connection string a kind of saver uses (starting the server if needed)."""
    if kind in SQLITE_KINDS:
        return _sqlite_path(tmp_path)
    cluster: PostgresCluster = request.getfixturevalue("cluster")
    return cluster.conninfo


def open_backend(kind: str, where: str, *, gate: Gate | None = None) -> Backend:
    """A saver of ``kind`` on ``where``, with its own connection (or pool); a gated subclass when ``gate``."""
    closing = contextlib.ExitStack()
    gate = gate or Gate()
    loop: LoopThread | None = None
    if kind.startswith("async"):
        loop = LoopThread()
        closing.callback(loop.close)
    classes: dict[str, type[Any]] = {
        "sqlite": SqliteSaver,
        "sqlite_autocommit": SqliteSaver,
        "async_sqlite": AsyncSqliteSaver,
        "postgres": PostgresSaver,
        "postgres_pipeline": PostgresSaver,
        "postgres_pool": PostgresSaver,
        "async_postgres": AsyncPostgresSaver,
        "async_postgres_pipeline": AsyncPostgresSaver,
        "async_postgres_pool": AsyncPostgresSaver,
    }
    cls = gated(classes[kind])
    saver: Any
    if kind in ("sqlite", "sqlite_autocommit"):
        transactions: dict[str, Any] = {"isolation_level": None} if kind == "sqlite_autocommit" else {}
        connection = sqlite3.connect(where, check_same_thread=False, timeout=SQLITE_BUSY_SECONDS, **transactions)
        closing.callback(connection.close)
        saver = cls(connection)
    elif kind == "async_sqlite":
        assert loop is not None

        async def make_async_sqlite() -> Any:
            import aiosqlite

            connection = await aiosqlite.connect(where, timeout=SQLITE_BUSY_SECONDS)
            closing.callback(lambda: loop.run(connection.close()))
            return cls(connection)

        saver = loop.run(make_async_sqlite())
    elif kind.startswith("postgres"):
        from psycopg import Connection
        from psycopg.rows import dict_row
        from psycopg_pool import ConnectionPool

        options: dict[str, Any] = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
        if kind == "postgres_pool":
            pool: ConnectionPool[Any] = ConnectionPool(where, kwargs=options, min_size=1, max_size=2, open=True)
            closing.callback(pool.close)
            saver = cls(pool)
        else:
            connection_pg = Connection.connect(where, **options)
            closing.callback(connection_pg.close)
            if kind == "postgres_pipeline":
                pipe = closing.enter_context(connection_pg.pipeline())
                saver = cls(connection_pg, pipe)
            else:
                saver = cls(connection_pg)
    else:
        assert loop is not None

        async def make_async_postgres() -> Any:
            from psycopg import AsyncConnection
            from psycopg.rows import dict_row
            from psycopg_pool import AsyncConnectionPool

            options: dict[str, Any] = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
            if kind == "async_postgres_pool":
                pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
                    where, kwargs=options, min_size=1, max_size=2, open=False
                )
                await pool.open()
                closing.callback(lambda: loop.run(pool.close()))
                return cls(pool)
            connection = await AsyncConnection.connect(where, **options)
            closing.callback(lambda: loop.run(connection.close()))
            if kind == "async_postgres_pipeline":
                pipelines = contextlib.AsyncExitStack()
                pipe = await pipelines.enter_async_context(connection.pipeline())
                closing.callback(lambda: loop.run(pipelines.aclose()))
                return cls(connection, pipe)
            return cls(connection)

        saver = loop.run(make_async_postgres())
    saver.gate = gate
    return Backend(kind, saver, where, loop, gate, closing)


@contextlib.contextmanager
def backend(kind: str, where: str, *, gate: Gate | None = None) -> Iterator[Backend]:
    opened = open_backend(kind, where, gate=gate)
    with opened.closing:
        yield opened


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def where(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return where_for(kind, request, tmp_path)


@pytest.fixture
def durable(kind: str, where: str) -> Iterator[Backend]:
    with backend(kind, where) as opened:
        yield opened


# --- calling the two sides --------------------------------------------------------------------------------

SIDES = ["sync", "async"]


def guarded(
    durable: Backend,
    side: str,
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    new_versions: dict[str, Any],
    *,
    expected: str | None,
) -> RunnableConfig:
    """A conditional put from this thread: ``sync``; ``async`` on the saver's own loop (async savers) or in
    ``asyncio.run`` (sync savers: the durable pool); ``async-other-loop``: an async saver from another loop."""
    if side == "sync":
        return put_if_newest(durable.saver, config, checkpoint, metadata, new_versions, expected=expected)
    coroutine = aput_if_newest(durable.saver, config, checkpoint, metadata, new_versions, expected=expected)
    if side == "async" and durable.loop is not None:
        return durable.loop.run(coroutine)
    return asyncio.run(coroutine)


def checkpoint_of(values: dict[str, Any], *, versions: dict[str, Any] | None = None) -> Checkpoint:
    checkpoint = empty_checkpoint()
    checkpoint["id"] = str(uuid6())
    checkpoint["channel_values"] = values
    checkpoint["channel_versions"] = versions if versions is not None else {name: 1 for name in values}
    return checkpoint


def at(thread_id: str, namespace: str = "", parent: str | None = None) -> RunnableConfig:
    located: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": namespace}
    if parent is not None:
        located["checkpoint_id"] = parent
    return {"configurable": located}


def stored_id(config: RunnableConfig) -> str:
    return str(config["configurable"]["checkpoint_id"])


def newest_id(durable: Backend, thread_id: str, namespace: str = "") -> str | None:
    found = durable.saver.get_tuple(at(thread_id, namespace))
    return None if found is None else stored_id(found.config)


def new_thread() -> str:
    return f"thread-{uuid.uuid4()}"


def wait_until(condition: Callable[[], bool], what: str) -> None:
    """Wait for a condition another thread or process brings about (polled; the deadline only catches a hang)."""
    done = threading.Event()
    for _ in range(int(DEADLINE / 0.005)):
        if condition():
            return
        done.wait(0.005)
    raise AssertionError(f"gave up waiting for {what}")


# --- the check passes: a plain put's rows ----------------------------------------------------------------------


def steps(
    thread_id: str, namespace: str
) -> list[tuple[RunnableConfig, Checkpoint, CheckpointMetadata, dict[str, Any]]]:
    """Three puts of one namespace, each a child of the one before, with every kind of value a put splits:
    primitives (inline in PostgreSQL's checkpoint), objects and messages (blobs), a ``DeltaChannel``
    snapshot, a value unchanged from the step before (no new version: no new blob), ids from the config
    merged into the metadata (and ``__`` keys not), text with a NUL and non-ASCII characters."""
    first = checkpoint_of(
        {
            "count": 1,
            "title": "héllo",
            "flag": True,
            "ratio": 0.5,
            "nothing": None,
            "messages": [HumanMessage(content="hi", id="m1")],
            "notes": {"a": [1, 2, 3]},
        },
        versions={
            name: f"{1:032}.{0.25:016}" for name in ("count", "title", "flag", "ratio", "nothing", "messages", "notes")
        },
    )
    second = checkpoint_of(
        {
            "count": 2,
            "messages": [HumanMessage(content="hi", id="m1"), AIMessage(content="hello", id="m2")],
            "notes": {"a": [1, 2, 3]},
            "history": _DeltaSnapshot(["m1", "m2"]),
        },
        versions={
            "count": f"{2:032}.{0.5:016}",
            "messages": f"{2:032}.{0.5:016}",
            "notes": f"{1:032}.{0.25:016}",
            "history": f"{1:032}.{0.75:016}",
        },
    )
    third = checkpoint_of({"count": 3, "messages": [], "extra": b"\x00\x01bytes"})
    metadata: list[CheckpointMetadata] = [
        {"source": "input", "step": -1, "parents": {}},
        {"source": "loop", "step": 0, "parents": {"": "x"}, "writes": {"node": {"count": 2}}, "note": "a\u0000b"},  # type: ignore[typeddict-unknown-key]
        {"source": "update", "step": 1, "parents": {}, "run_id": "run-in-metadata"},
    ]
    new_versions = [
        dict(first["channel_versions"]),
        {name: version for name, version in second["channel_versions"].items() if name != "notes"},
        {"count": 1, "messages": 1, "extra": 1},
    ]
    made = []
    parent: str | None = None
    for checkpoint, meta, versions in zip((first, second, third), metadata, new_versions, strict=True):
        config = at(thread_id, namespace, parent)
        config["configurable"].update({"run_id": "run-1", "user_id": 7, "__pregel_secret": "not stored"})
        config["metadata"] = {"assistant_id": "assistant-é", "checkpoint_ns": "excluded"}
        made.append((config, checkpoint, meta, versions))
        parent = checkpoint["id"]
    return made


@pytest.mark.parametrize("side", SIDES)
def test_the_check_passes_and_stores_what_a_plain_put_stores(durable: Backend, side: str) -> None:
    plain_thread, guarded_thread = new_thread(), new_thread()
    for namespace in ("", f"outer:{uuid.uuid4()}|inner:{uuid.uuid4()}"):
        for config, checkpoint, metadata, versions in steps(plain_thread, namespace):
            expected = config["configurable"].get("checkpoint_id")
            plain = durable.saver.put(config, checkpoint, metadata, versions)
            mine = {**config, "configurable": {**config["configurable"], "thread_id": guarded_thread}}
            returned = guarded(durable, side, mine, checkpoint, metadata, versions, expected=expected)
            assert returned == {**plain, "configurable": {**plain["configurable"], "thread_id": guarded_thread}}
    plain_rows, guarded_rows = durable.rows(plain_thread), durable.rows(guarded_thread)
    assert len(plain_rows["checkpoints"]) == 6
    if "blobs" in plain_rows:
        assert plain_rows["blobs"], "the PostgreSQL puts split values into blobs"
    assert guarded_rows == plain_rows


# --- a stale expected: an error naming the thread, nothing stored ------------------------------------------------


@pytest.mark.parametrize("side", SIDES)
def test_a_stale_expected_raises_naming_the_thread_and_stores_nothing(durable: Backend, side: str) -> None:
    thread_id = new_thread()
    first = checkpoint_of({"count": 1})
    stored = guarded(durable, side, at(thread_id), first, {"step": 0}, {"count": 1}, expected=None)
    second = checkpoint_of({"count": 2, "items": ["b"]})
    guarded(durable, side, stored, second, {"step": 1}, {"count": 2, "items": 1}, expected=first["id"])
    before = durable.rows(thread_id)

    stale = checkpoint_of({"count": 2, "items": ["stale"]}, versions={"count": 9, "items": 9})
    with pytest.raises(CheckpointConflictError) as raised:
        guarded(durable, side, stored, stale, {"step": 1}, {"count": 9, "items": 9}, expected=first["id"])
    error = raised.value
    assert (error.thread_id, error.checkpoint_ns, error.expected, error.found) == (
        thread_id,
        "",
        first["id"],
        second["id"],
    )
    message = str(error)
    for part in (repr(thread_id), first["id"], second["id"], "Nothing was written", "get_state"):
        assert part in message
    assert durable.rows(thread_id) == before

    with pytest.raises(CheckpointConflictError) as raised:
        guarded(durable, side, at(thread_id), checkpoint_of({"count": 0}), {}, {"count": 1}, expected=None)
    assert (raised.value.expected, raised.value.found) == (None, second["id"])
    assert "expected it to have no checkpoint yet" in str(raised.value)
    assert durable.rows(thread_id) == before

    # Nothing was left behind (an open transaction, a held lock): the right expectation goes through.
    third = checkpoint_of({"count": 3})
    guarded(durable, side, at(thread_id, "", second["id"]), third, {}, {"count": 3}, expected=second["id"])
    assert newest_id(durable, thread_id) == third["id"]


def test_a_retried_put_already_stored_says_so(durable: Backend) -> None:
    thread_id = new_thread()
    first = checkpoint_of({"count": 1})
    put_if_newest(durable.saver, at(thread_id), first, {}, {"count": 1}, expected=None)
    with pytest.raises(CheckpointConflictError) as raised:
        put_if_newest(durable.saver, at(thread_id), first, {}, {"count": 1}, expected=None)
    assert raised.value.found == first["id"]
    assert "an earlier attempt of this put was stored" in str(raised.value)


def test_the_conflict_survives_pickling() -> None:
    error = CheckpointConflictError("t", "ns", "a", "b", checkpoint_id="c")
    copied = pickle.loads(pickle.dumps(error))
    assert (copied.thread_id, copied.checkpoint_ns, copied.expected, copied.found, copied.checkpoint_id) == (
        "t",
        "ns",
        "a",
        "b",
        "c",
    )
    assert str(copied) == str(error)


# --- a new namespace ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("side", SIDES)
def test_a_new_namespace_takes_expected_none_and_a_second_racer_conflicts(durable: Backend, side: str) -> None:
    thread_id = new_thread()
    root = checkpoint_of({"count": 1})
    guarded(durable, side, at(thread_id), root, {}, {"count": 1}, expected=None)
    namespace = f"child:{uuid.uuid4()}"

    with pytest.raises(CheckpointConflictError) as raised:
        guarded(durable, side, at(thread_id, namespace), checkpoint_of({"x": 1}), {}, {"x": 1}, expected=root["id"])
    assert (raised.value.checkpoint_ns, raised.value.found) == (namespace, None)
    assert repr(namespace) in str(raised.value) and "found none" in str(raised.value)

    first = checkpoint_of({"x": 1, "items": [1]})
    guarded(durable, side, at(thread_id, namespace), first, {}, {"x": 1, "items": 1}, expected=None)
    before = durable.rows(thread_id)
    with pytest.raises(CheckpointConflictError) as raised:
        racer = checkpoint_of({"x": 2, "items": [2]}, versions={"x": 5, "items": 5})
        guarded(durable, side, at(thread_id, namespace), racer, {}, {"x": 5, "items": 5}, expected=None)
    assert (raised.value.thread_id, raised.value.checkpoint_ns) == (thread_id, namespace)
    assert (raised.value.expected, raised.value.found) == (None, first["id"])
    assert durable.rows(thread_id) == before
    assert newest_id(durable, thread_id, namespace) == first["id"]
    assert newest_id(durable, thread_id) == root["id"], "namespaces are checked apart"


def test_an_async_saver_from_another_loop_is_handed_to_its_own(cluster: PostgresCluster, tmp_path: Path) -> None:
    for kind, where in (("async_sqlite", _sqlite_path(tmp_path)), ("async_postgres_pool", cluster.conninfo)):
        with backend(kind, where) as durable:
            thread_id = new_thread()
            first = checkpoint_of({"count": 1})
            guarded(durable, "async-other-loop", at(thread_id), first, {}, {"count": 1}, expected=None)
            with pytest.raises(CheckpointConflictError):
                guarded(durable, "async-other-loop", at(thread_id), checkpoint_of({}), {}, {}, expected=None)
            assert newest_id(durable, thread_id) == first["id"]
            assert durable.gate.thread_names, "the put ran"


# --- a failure inside the guard --------------------------------------------------------------------------------


@pytest.mark.parametrize("side", SIDES)
def test_a_put_failing_inside_the_guard_stores_nothing_and_frees_the_namespace(durable: Backend, side: str) -> None:
    thread_id = new_thread()
    first = checkpoint_of({"count": 1})
    guarded(durable, side, at(thread_id), first, {}, {"count": 1}, expected=None)
    before = durable.rows(thread_id)
    # PostgreSQL's put runs inside the transaction, so even rows it stored are rolled back; SQLite's put
    # commits as it returns, so there only a failure before it counts.
    failures = ["before", "after"] if durable.kind in POSTGRES_KINDS else ["before"]
    for failure in failures:
        durable.gate.fail = failure
        child = checkpoint_of({"count": 2, "items": [failure]}, versions={"count": 2, "items": 2})
        with pytest.raises(RuntimeError, match="simulated"):
            guarded(
                durable, side, at(thread_id, "", first["id"]), child, {}, {"count": 2, "items": 2}, expected=first["id"]
            )
        assert durable.rows(thread_id) == before
    durable.gate.fail = None
    child = checkpoint_of({"count": 2})
    guarded(durable, side, at(thread_id, "", first["id"]), child, {}, {"count": 2}, expected=first["id"])
    assert newest_id(durable, thread_id) == child["id"]


# --- the lost update, deterministically ---------------------------------------------------------------------


@pytest.mark.parametrize("side", SIDES)
def test_plain_puts_fork_where_the_guard_conflicts(durable: Backend, side: str) -> None:
    def race(thread_id: str, put: Callable[[str, str], str]) -> tuple[str, str, str]:
        root = checkpoint_of({"count": 0})
        durable.saver.put(at(thread_id), root, {}, {"count": 1})
        read_by_a = newest_id(durable, thread_id)
        read_by_b = newest_id(durable, thread_id)  # both read before either writes: the lost-update interleaving
        assert read_by_a == read_by_b == root["id"]
        a = put(thread_id, read_by_a)
        try:
            b = put(thread_id, read_by_b)
        except CheckpointConflictError as error:
            assert (error.expected, error.found) == (root["id"], a)
            b = put(thread_id, str(newest_id(durable, thread_id)))  # B reads again and retries
        return root["id"], a, b

    def plain(thread_id: str, parent: str) -> str:
        return stored_id(durable.saver.put(at(thread_id, "", parent), checkpoint_of({"count": 1}), {}, {"count": 2}))

    def conditional(thread_id: str, parent: str) -> str:
        child = checkpoint_of({"count": 1})
        return stored_id(guarded(durable, side, at(thread_id, "", parent), child, {}, {"count": 2}, expected=parent))

    forked = new_thread()
    root, a, b = race(forked, plain)
    assert children(durable, forked) == {root: sorted([a, b])}, "without the guard B's put forks the thread"
    assert parent_chain(durable, forked) == [b, root], "and A's acknowledged update is not in the newest chain"

    linear = new_thread()
    root, a, b = race(linear, conditional)
    assert parent_chain(durable, linear) == [b, a, root], "with the guard B conflicts, reads again, goes on from A"
    assert children(durable, linear) == {root: [a], a: [b]}


def parent_chain(durable: Backend, thread_id: str) -> list[str]:
    """The ids from the newest checkpoint back to the root, following parent links."""
    chain = []
    found = durable.saver.get_tuple(at(thread_id))
    while found is not None:
        chain.append(stored_id(found.config))
        found = None if found.parent_config is None else durable.saver.get_tuple(found.parent_config)
    return chain


def children(durable: Backend, thread_id: str) -> dict[str, list[str]]:
    """Parent id -> its children's ids (sorted)."""
    kids: dict[str, list[str]] = {}
    for item in durable.saver.list(at(thread_id)):
        if item.parent_config is not None:
            kids.setdefault(stored_id(item.parent_config), []).append(stored_id(item.config))
    return {parent: sorted(ids) for parent, ids in kids.items()}


# --- the lock, deterministically --------------------------------------------------------------------------------


@pytest.mark.parametrize("side", SIDES)
def test_the_second_caller_waits_at_the_lock_until_the_first_has_stored(kind: str, where: str, side: str) -> None:
    """A checks and stops inside its critical section; B starts and is seen waiting for the lock (not
    finished); A goes on and stores; B then checks, finds A's checkpoint and conflicts. Without the lock
    B would check while A waits, find the root still newest, and both would store."""
    one_wins(kind, where, side)


@pytest.fixture(scope="module")
def repeatable_read(cluster: PostgresCluster) -> str:
    """A database whose transactions default to repeatable read: one snapshot per transaction."""
    import psycopg

    with psycopg.Connection.connect(cluster.conninfo, autocommit=True) as connection:
        connection.execute("CREATE DATABASE repeatable_read")
        connection.execute("ALTER DATABASE repeatable_read SET default_transaction_isolation = 'repeatable read'")
    return set_up(cluster.conninfo.replace("dbname=postgres", "dbname=repeatable_read"))


@pytest.mark.parametrize("kind", ["postgres", "async_postgres"])
def test_the_newest_id_is_read_after_the_lock_whatever_the_default_isolation(kind: str, repeatable_read: str) -> None:
    """Under repeatable read a transaction's snapshot is taken by its first statement, the lock request,
    before it waits: B would then miss A's commit, pass the check and fork the thread. The conditional
    put sets read committed itself, so the read after the lock sees A's checkpoint."""
    one_wins(kind, repeatable_read, "sync")


def one_wins(kind: str, where: str, side: str) -> None:
    """A and B (savers of their own, as two processes have) both put a child of the root, A held inside
    its critical section until B is seen waiting at the lock: A stores, B conflicts."""
    gate_a = Gate()
    with backend(kind, where, gate=gate_a) as a, backend(kind, where) as b:
        thread_id = new_thread()
        root = checkpoint_of({"count": 0})
        b.saver.put(at(thread_id), root, {}, {"count": 1})
        b_at_lock = threading.Event()
        waiting = lock_waiter(b, b_at_lock)
        outcomes: dict[str, Any] = {}

        def attempt(name: str, durable: Backend) -> None:
            child = checkpoint_of({"count": 1, "by": [name]})
            try:
                outcomes[name] = stored_id(
                    guarded(
                        durable,
                        side,
                        at(thread_id, "", root["id"]),
                        child,
                        {},
                        {"count": 2, "by": 2},
                        expected=root["id"],
                    )
                )
            except BaseException as error:  # handed to the test's thread, which asserts on it
                outcomes[name] = error

        first, second = a_then_b(attempt, a, b, gate_a)
        wait_until(lambda: waiting() or not second.is_alive(), "B to wait at the lock (or to finish)")
        assert second.is_alive() and "b" not in outcomes, f"B finished while A held the lock: {outcomes}"
        gate_a.opened.set()
        first.join(DEADLINE)
        second.join(DEADLINE)

        assert isinstance(outcomes["a"], str), outcomes
        assert isinstance(outcomes["b"], CheckpointConflictError), outcomes
        assert (outcomes["b"].expected, outcomes["b"].found) == (root["id"], outcomes["a"])
        assert parent_chain(b, thread_id) == [outcomes["a"], root["id"]]
        assert len(b.rows(thread_id)["checkpoints"]) == 2


@pytest.mark.parametrize("kind", ["postgres_pool", "async_postgres_pool"])
def test_on_a_pool_a_wait_at_the_lock_holds_up_no_other_call(kind: str, where: str) -> None:
    """B's conditional put waits for A's lock on a connection of its own: B's saver still answers a read
    meanwhile (on one connection the saver's lock is held across the wait, and the read would wait too)."""
    gate_a = Gate()
    with backend(kind, where, gate=gate_a) as a, backend(kind, where) as b:
        thread_id = new_thread()
        root = checkpoint_of({"count": 0})
        b.saver.put(at(thread_id), root, {}, {"count": 1})
        waiting = lock_waiter(b, threading.Event())
        outcomes: dict[str, Any] = {}

        def attempt(name: str, durable: Backend) -> None:
            child = checkpoint_of({"count": 1})
            try:
                config = at(thread_id, "", root["id"])
                outcomes[name] = stored_id(
                    guarded(durable, "sync", config, child, {}, {"count": 2}, expected=root["id"])
                )
            except BaseException as error:  # handed to the test's thread, which asserts on it
                outcomes[name] = error

        first, second = a_then_b(attempt, a, b, gate_a)
        wait_until(waiting, "B to wait at the lock")
        read: list[str | None] = []
        reader = threading.Thread(target=lambda: read.append(newest_id(b, thread_id)))
        reader.start()
        reader.join(DEADLINE)  # the deadline only ends a hang: the read is answered at once, or never
        blocked = reader.is_alive()
        gate_a.opened.set()
        first.join(DEADLINE)
        second.join(DEADLINE)
        reader.join(DEADLINE)
        assert not blocked and read == [root["id"]], "B's saver answered a read while B waited at the lock"
        assert isinstance(outcomes["b"], CheckpointConflictError) and outcomes["b"].found == outcomes["a"]


def a_then_b(
    attempt: Callable[[str, Backend], None], a: Backend, b: Backend, gate_a: Gate
) -> tuple[threading.Thread, threading.Thread]:
    """Start A's attempt and wait until it holds its put at ``gate_a``; then start B's. Returns both threads."""
    gate_a.armed = True
    first = threading.Thread(target=attempt, args=("a", a))
    first.start()
    assert gate_a.entered.wait(DEADLINE), "A never reached its put"
    second = threading.Thread(target=attempt, args=("b", b))
    second.start()
    return first, second


def lock_waiter(durable: Backend, started: threading.Event) -> Callable[[], bool]:
    """A test of whether ``durable``'s next conditional put waits for the lock.

    SQLite: its connection has started ``BEGIN IMMEDIATE`` (a statement trace); PostgreSQL: an advisory
    lock request is not granted (``pg_locks``).
    """
    if durable.kind in ("sqlite", "sqlite_autocommit"):

        def trace(statement: str) -> None:
            if statement.startswith("BEGIN IMMEDIATE"):
                started.set()

        durable.saver.conn.set_trace_callback(trace)
        return started.is_set
    if durable.kind == "async_sqlite":
        assert durable.loop is not None

        def async_trace(statement: str) -> None:
            if statement.startswith("BEGIN IMMEDIATE"):
                started.set()

        durable.loop.run(durable.saver.conn.set_trace_callback(async_trace))
        return started.is_set
    import psycopg

    observer = psycopg.Connection.connect(durable.where, autocommit=True)
    durable.closing.callback(observer.close)

    def requested() -> bool:
        row = observer.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted").fetchone()
        return row is not None and row[0] > 0

    return requested


# --- where each side runs ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_sync_saver_s_async_conditional_put_runs_on_the_durable_pool(durable: Backend) -> None:
    thread_id = new_thread()
    guarded(durable, "async", at(thread_id), checkpoint_of({"count": 1}), {}, {"count": 1}, expected=None)
    assert durable.gate.thread_names and all(name.startswith("tiered-durable") for name in durable.gate.thread_names)


@pytest.mark.parametrize("kind", ["async_sqlite", "async_postgres"])
def test_a_sync_call_on_an_async_saver_s_own_loop_is_refused(durable: Backend) -> None:
    assert durable.loop is not None

    async def on_its_loop() -> None:
        put_if_newest(durable.saver, at(new_thread()), checkpoint_of({}), {}, {}, expected=None)

    with pytest.raises(DurableSideError, match="aput_if_newest"):
        durable.loop.run(on_its_loop())
    assert durable.gate.thread_names == []


# --- which savers --------------------------------------------------------------------------------------------


def test_every_kind_of_sqlite_and_postgres_saver_is_supported(durable: Backend) -> None:
    assert conditional_support(durable.saver) is None


@pytest.mark.parametrize("make", [InMemorySaver, BoundedInMemorySaver], ids=lambda make: make.__name__)
def test_other_savers_are_refused_with_the_reason(make: Callable[[], BaseCheckpointSaver[Any]]) -> None:
    saver = make()
    reason = conditional_support(saver)
    assert reason is not None and type(saver).__name__ in reason and "across processes" in reason
    with pytest.raises(ValueError) as raised:
        put_if_newest(saver, at(new_thread()), checkpoint_of({}), {}, {}, expected=None)
    assert str(raised.value) == reason
    with pytest.raises(ValueError):
        asyncio.run(aput_if_newest(saver, at(new_thread()), checkpoint_of({}), {}, {}, expected=None))
    assert not list(saver.list(None)), "nothing was stored"


def test_a_postgres_connection_outside_autocommit_is_refused(cluster: PostgresCluster) -> None:
    from psycopg import Connection
    from psycopg.rows import dict_row

    with Connection.connect(cluster.conninfo, autocommit=False, row_factory=dict_row) as connection:
        reason = conditional_support(PostgresSaver(connection))
    assert reason is not None and "autocommit" in reason


# --- the headline: two processes racing on one thread ---------------------------------------------------------

UPDATES_PER_PROCESS = 25


def race_worker(kind: str, where: str, thread_id: str, worker: int, start: Any, results: Any) -> None:
    """One process's updates: read the newest checkpoint, put a child of it counting one more, retry on a
    conflict; report the ids acknowledged (and how many conflicts it met). Runs in a spawned process."""
    try:
        if kind.startswith("async"):
            report = asyncio.run(_race_async(kind, where, thread_id, worker, start))
        else:
            report = _race_sync(kind, where, thread_id, worker, start)
        results.put(("ok", worker, report))
    except BaseException:
        results.put(("error", worker, traceback.format_exc()))


def _update(thread_id: str, found: Any, worker: int, update: int, saver: Any) -> tuple[Any, ...]:
    """A child of the newest checkpoint read (``found``), counting one more: the put's arguments and the id
    the guard expects."""
    parent = None if found is None else stored_id(found.config)
    count = 0 if found is None else found.checkpoint["channel_values"]["count"]
    version = saver.get_next_version(None if found is None else found.checkpoint["channel_versions"]["count"], None)
    child = checkpoint_of({"count": count + 1}, versions={"count": version})
    metadata = {"source": "loop", "step": count, "worker": worker, "update": update}
    return at(thread_id, "", parent), child, metadata, {"count": version}, parent


@dataclass
class _RaceStep:
    """A step of a racing process: a read of ``read`` (``put`` None), or a conditional put of ``put``'s
    arguments expecting ``expected``."""

    read: RunnableConfig
    put: tuple[Any, ...] | None = None
    expected: str | None = None


Race = Generator[_RaceStep, Any, tuple[list[str], int]]


def _race_plan(thread_id: str, worker: int, saver: Any) -> Race:
    """One process's updates, for both drivers (``_race_sync``, ``_race_async``): read the newest checkpoint,
    put a child of it counting one more, retry on a conflict; the ids acknowledged and the conflicts met."""
    acknowledged: list[str] = []
    conflicts = 0
    for update in range(UPDATES_PER_PROCESS):
        while True:
            found = yield _RaceStep(at(thread_id))
            config, child, metadata, versions, parent = _update(thread_id, found, worker, update, saver)
            try:
                stored = yield _RaceStep(at(thread_id), (config, child, metadata, versions), parent)
            except CheckpointConflictError:
                conflicts += 1
                continue
            acknowledged.append(stored_id(stored))
            break
    return acknowledged, conflicts


def _answer(plan: Race, result: Any, conflict: CheckpointConflictError | None) -> _RaceStep | tuple[list[str], int]:
    """The plan's next step, sent a step's result or thrown its conflict; or, once it is done, its answer."""
    try:
        return plan.send(result) if conflict is None else plan.throw(conflict)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


def _race_sync(kind: str, where: str, thread_id: str, worker: int, start: Any) -> tuple[list[str], int]:
    saver: Any
    with contextlib.ExitStack() as closing:
        if kind == "sqlite":
            connection = sqlite3.connect(where, check_same_thread=False, timeout=SQLITE_BUSY_SECONDS)
            closing.callback(connection.close)
            saver = SqliteSaver(connection)
        else:
            saver = closing.enter_context(PostgresSaver.from_conn_string(where))
        saver.get_tuple(at(thread_id))  # connected and set up before the race starts
        start.wait(DEADLINE)
        plan = _race_plan(thread_id, worker, saver)
        step = next(plan)
        while not isinstance(step, tuple):
            try:
                if step.put is None:
                    result, conflict = saver.get_tuple(step.read), None
                else:
                    result, conflict = put_if_newest(saver, *step.put, expected=step.expected), None
            except CheckpointConflictError as error:
                result, conflict = None, error
            step = _answer(plan, result, conflict)
        return step


async def _race_async(kind: str, where: str, thread_id: str, worker: int, start: Any) -> tuple[list[str], int]:
    async with contextlib.AsyncExitStack() as closing:
        saver: Any
        if kind == "async_sqlite":
            import aiosqlite

            connection = await aiosqlite.connect(where, timeout=SQLITE_BUSY_SECONDS)
            closing.push_async_callback(connection.close)
            saver = AsyncSqliteSaver(connection)
        else:
            saver = await closing.enter_async_context(AsyncPostgresSaver.from_conn_string(where))
        await saver.aget_tuple(at(thread_id))
        await asyncio.get_running_loop().run_in_executor(None, start.wait, DEADLINE)
        plan = _race_plan(thread_id, worker, saver)
        step = next(plan)
        while not isinstance(step, tuple):
            try:
                if step.put is None:
                    result, conflict = await saver.aget_tuple(step.read), None
                else:
                    result, conflict = await aput_if_newest(saver, *step.put, expected=step.expected), None
            except CheckpointConflictError as error:
                result, conflict = None, error
            step = _answer(plan, result, conflict)
        return step


@pytest.mark.parametrize("database", ["sqlite", "postgres"])
def test_two_processes_racing_on_one_thread_lose_nothing_acknowledged(
    database: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    where = where_for(database, request, tmp_path)
    if database == "sqlite":
        with contextlib.closing(sqlite3.connect(where)) as connection:
            SqliteSaver(connection).setup()  # the tables and WAL mode, before two processes race to make them
    thread_id = new_thread()
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(2)  # both set up and connected, then off together
    results = context.Queue()
    workers = [
        context.Process(target=race_worker, args=(kind, where, thread_id, number, start, results))
        for number, kind in enumerate([database, f"async_{database}"])
    ]
    for process in workers:
        process.start()
    reports = [results.get(timeout=DEADLINE * 4) for _ in workers]
    for process in workers:
        process.join(DEADLINE)
        assert process.exitcode == 0
    errors = [report for report in reports if report[0] == "error"]
    assert not errors, errors[0][2]
    acknowledged = {worker: ids for _, worker, (ids, _conflicts) in reports}
    assert [len(acknowledged[0]), len(acknowledged[1])] == [UPDATES_PER_PROCESS, UPDATES_PER_PROCESS]

    with backend(database, where) as durable:
        chain = parent_chain(durable, thread_id)
        every = list(durable.saver.list(at(thread_id)))
        newest = durable.saver.get_tuple(at(thread_id))
    assert len(every) == 2 * UPDATES_PER_PROCESS, "every checkpoint stored was acknowledged, and no other"
    assert len(chain) == len(every), "one linear parent chain holds every checkpoint: no fork"
    assert set(acknowledged[0]) | set(acknowledged[1]) == set(chain)
    assert newest is not None and newest.checkpoint["channel_values"]["count"] == 2 * UPDATES_PER_PROCESS
    by_worker = sorted(item.metadata["worker"] for item in every)  # type: ignore[typeddict-item]
    assert by_worker == [0] * UPDATES_PER_PROCESS + [1] * UPDATES_PER_PROCESS
