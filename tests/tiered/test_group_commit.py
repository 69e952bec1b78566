"""Group commit (``tiered.group_commit``): a write-back flush writes many threads' unflushed writes in one
transaction, through the backend that owns the saver's SQL, and the rows are the saver's own.

* The differential test: the same calls (every graph scenario's puts and writes, and writes made to hit each
  ``ON CONFLICT`` rule: primitives inline, bytes, ``None``, special channels' upserts, a batch written twice)
  flushed by group commit into one database and through the saver's own ``put`` / ``put_writes`` (a subclass
  that overrides them, so it is written through its API) into another: the tables are identical, row for row
  (SQLite, PostgreSQL; sync and async savers). Over PostgreSQL nothing is serialized again.
* One transaction for many threads; a refused batch retried a thread at a time (the bad thread alone fails, is
  struck, and is poisoned while the others flush); a thread whose parent another process deleted is refused
  inside the same transaction, the others written.
"""

from __future__ import annotations

import asyncio
import copy
import math
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from langgraph.checkpoint.bounded import (
    CompressingSerializer,
    TieredSaver,
    UnstorableWriteError,
    WriteBack,
    WriteThrough,
)
from langgraph.checkpoint.bounded.tiered import group_commit
from langgraph.checkpoint.bounded.tiered.backends.sqlite import SqliteBackend
from tests.support.durable_savers import cluster_fixture
from tests.support.graphs import SCENARIOS, Runner
from tests.support.helpers import config, make_checkpoint

cluster = cluster_fixture("the group commit tests")

KINDS = ["sqlite", "async_sqlite", "postgres", "async_postgres"]
BACK = WriteBack(flush_interval_seconds=math.inf, max_dirty_bytes=1 << 30, max_dirty_seconds=math.inf)


# --- the calls: recorded once, replayed into both paths -----------------------------------------------------------


class _Recorder(InMemorySaver):
    """An ``InMemorySaver`` that keeps a copy of every ``put`` and ``put_writes`` call, its thread renamed."""

    def __init__(self, prefix: str, calls: list[tuple[str, tuple[Any, ...]]]) -> None:
        super().__init__()
        self.prefix, self.calls = prefix, calls

    def _renamed(self, config: Any) -> Any:
        located = config["configurable"]
        configurable = {k: copy.deepcopy(v) for k, v in located.items() if not k.startswith("__")}
        configurable["thread_id"] = f"{self.prefix}-{located['thread_id']}"
        return {"configurable": configurable}

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        arguments = (copy.deepcopy(checkpoint), copy.deepcopy(metadata), dict(new_versions))
        self.calls.append(("put", (self._renamed(config), *arguments)))
        return super().put(config, checkpoint, metadata, new_versions)

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        self.calls.append(("put_writes", (self._renamed(config), copy.deepcopy(list(writes)), task_id, task_path)))
        super().put_writes(config, writes, task_id, task_path)


def _synthetic(calls: list[tuple[str, tuple[Any, ...]]]) -> None:
    """Calls made to meet every rule of the rows: primitives and ``None`` inline (PostgreSQL), bytes and nested
    values as blobs, a channel with no new version, special channels' batches upserted (the last wins), a mixed
    batch inserted (the first wins), the same batch twice, a write before its checkpoint's put."""
    values = {"text": "é\u2603", "number": 7, "ratio": 0.5, "flag": True, "nothing": None, "raw": b"\x00\x01"}
    values |= {"nested": {"a": [1, 2, {"b": "c"}]}, "listed": ["x", 1]}
    first = make_checkpoint(values, dict.fromkeys(values, "00000001.0"))
    calls.append(
        ("put", (config("synthetic"), first, {"source": "input", "step": -1, "parents": {}}, first["channel_versions"]))
    )
    stored = config("synthetic", "", first["id"])
    second = make_checkpoint(values | {"number": 8}, dict.fromkeys(values, "00000001.0") | {"number": "00000002.0"})
    early = config("synthetic", "", second["id"])
    calls.append(("put_writes", (early, [("number", 9)], "task-early", "")))  # before its checkpoint's put
    calls.append(("put", (stored, second, {"source": "loop", "step": 0, "writes": {"x": 1}}, {"number": "00000002.0"})))
    for value in ("first", "second"):  # all special: upserted, the last wins
        calls.append(("put_writes", (early, [("__interrupt__", value), ("__error__", value)], "task-special", "")))
    for value in ("first", "second"):  # mixed: inserted, the first wins
        calls.append(("put_writes", (early, [("text", value), ("__interrupt__", value)], "task-mixed", "~path")))
    calls.append(("put_writes", (early, [("__resume__", "answer")], "task-mixed", "~path")))  # upsert after an insert


def recorded_calls() -> list[tuple[str, tuple[Any, ...]]]:
    calls: list[tuple[str, tuple[Any, ...]]] = []
    for name, (factory, scenario) in sorted(SCENARIOS.items()):
        counts: dict[str, int] = {}
        runner = Runner(factory(_Recorder(name, calls), counts), use_async=False, durability="sync", calls=counts)
        asyncio.run(scenario(runner))
    _synthetic(calls)
    return calls


@pytest.fixture(scope="module")
def calls() -> list[tuple[str, tuple[Any, ...]]]:
    return recorded_calls()


# --- the savers: stock (our SQL) and written through their API -----------------------------------------------------


def _through(saver_class: type[Any]) -> type[Any]:
    """A subclass overriding ``put`` and ``aput`` (delegating to the class's own): written through its API."""
    methods = {
        "put": lambda self, *args, **kwargs: saver_class.put(self, *args, **kwargs),
        "aput": lambda self, *args, **kwargs: saver_class.aput(self, *args, **kwargs),
    }
    return type(f"Through{saver_class.__name__}", (saver_class,), methods)


SQLITE_TABLES = {
    "checkpoints": "SELECT * FROM checkpoints ORDER BY thread_id, checkpoint_ns, checkpoint_id",
    "writes": "SELECT * FROM writes ORDER BY thread_id, checkpoint_ns, checkpoint_id, task_id, idx",
}
POSTGRES_TABLES = {
    "checkpoints": "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint::text, "
    "metadata::text FROM checkpoints ORDER BY thread_id, checkpoint_ns, checkpoint_id",
    "checkpoint_blobs": "SELECT * FROM checkpoint_blobs ORDER BY thread_id, checkpoint_ns, channel, version",
    "checkpoint_writes": "SELECT * FROM checkpoint_writes "
    "ORDER BY thread_id, checkpoint_ns, checkpoint_id, task_id, idx",
}


class _Counting:
    """What a saver serializes again: a copy of its serde for the saver (the hot tier keeps the original), whose
    ``dumps_typed`` calls a patch of its class counts while ``counting()`` is entered, so that the copy keeps its
    class and has no attribute of its own (``spliced`` splices only for unmodified serializers it knows).
    ``whole``: checkpoints serialized whole; ``other``: anything else (fields, a channel's value)."""

    def __init__(self, serde: Any) -> None:
        self.serde = copy.copy(serde)
        self.whole = self.other = 0

    @contextmanager
    def counting(self) -> Iterator[None]:
        cls = type(self.serde)
        dumps = cls.dumps_typed

        def counted(serde: Any, obj: Any) -> Any:
            if serde is self.serde:
                if isinstance(obj, dict) and "channel_values" in obj:
                    self.whole += 1
                else:
                    self.other += 1
            return dumps(serde, obj)

        cls.dumps_typed = counted
        try:
            yield
        finally:
            cls.dumps_typed = dumps


@asynccontextmanager
async def _durable(
    kind: str, where: str, *, through: bool, pool: bool = False, serde: Any = None
) -> AsyncIterator[Any]:
    """A fresh durable saver of ``kind`` (its own SQLite file, or PostgreSQL schema, named by ``where``), written
    through its API when ``through``; over a ``psycopg_pool`` pool when ``pool``; SQLite's with ``serde``."""
    if kind == "sqlite":
        connection = sqlite3.connect(where, check_same_thread=False)
        saver = (_through(SqliteSaver) if through else SqliteSaver)(connection, serde=serde)
        yield saver
        saver.conn.close()
        return
    if kind == "async_sqlite":
        import aiosqlite

        async with aiosqlite.connect(where) as connection:
            saver = (_through(AsyncSqliteSaver) if through else AsyncSqliteSaver)(connection, serde=serde)
            await saver.setup()
            yield saver
        return
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg import AsyncConnection, Connection
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool, ConnectionPool

    kwargs: dict[str, Any] = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    if kind == "postgres":
        saver_class = _through(PostgresSaver) if through else PostgresSaver
        if pool:
            with ConnectionPool(where, kwargs=kwargs, min_size=1, max_size=4, open=True) as connections:
                saver = saver_class(connections)
                saver.setup()
                yield saver
            return
        with Connection.connect(where, **kwargs) as connection:
            saver = saver_class(connection)
            saver.setup()
            yield saver
        return
    async_class = _through(AsyncPostgresSaver) if through else AsyncPostgresSaver
    if pool:
        async with AsyncConnectionPool(where, kwargs=kwargs, min_size=1, max_size=4, open=False) as connections:
            saver = async_class(connections)
            await saver.setup()
            yield saver
        return
    async with await AsyncConnection.connect(where, **kwargs) as connection:
        saver = async_class(connection)
        await saver.setup()
        yield saver


def _unspliced(calls: list[tuple[str, tuple[Any, ...]]]) -> int:
    """The puts whose checkpoint holds a value JsonPlusSerializer does not store as msgpack (bytes): those
    ``spliced`` leaves to the saver's serde, which serializes the checkpoint whole."""
    return sum(
        method == "put"
        and any(
            _SERDE.dumps_typed(value)[0] not in ("msgpack", "null") for value in arguments[1]["channel_values"].values()
        )
        for method, arguments in calls
    )


def _where(kind: str, name: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """A fresh place for one saver's tables: a SQLite file, or a PostgreSQL schema (on the search path)."""
    if kind in ("sqlite", "async_sqlite"):
        return str(tmp_path / f"{name}.sqlite")
    from psycopg import Connection

    conninfo = request.getfixturevalue("cluster").conninfo
    with Connection.connect(conninfo, autocommit=True) as connection:
        connection.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
        connection.execute(f"CREATE SCHEMA {name}")
    return f"{conninfo} options='-c search_path={name}'"


def _rows(kind: str, where: str) -> dict[str, list[Any]]:
    if kind in ("sqlite", "async_sqlite"):
        with sqlite3.connect(where) as connection:
            return {
                table: [_set_free(row) for row in connection.execute(query).fetchall()]
                for table, query in SQLITE_TABLES.items()
            }
    from psycopg import Connection

    with Connection.connect(where, autocommit=True) as connection:
        return {
            table: [_set_free(tuple(row)) for row in connection.execute(query).fetchall()]
            for table, query in POSTGRES_TABLES.items()
        }


_SERDE = JsonPlusSerializer()


def _set_free(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """``row`` as compared: byte for byte, except a serialized value holding a ``set`` (a ``(type, bytes)`` pair
    of columns), compared decoded: msgpack writes a set in its iteration order, which a deep copy of the same set
    may change, so the same value can serialize to other bytes from one run to the next."""
    compared = list(row)
    for index in range(len(row) - 1):
        kind, data = row[index], row[index + 1]
        if isinstance(kind, str) and isinstance(data, (bytes, memoryview)) and kind != "empty":
            try:
                value = _SERDE.loads_typed((kind, bytes(data)))
            except Exception:  # not a serialized value: compared as bytes
                continue
            if _holds_set(value):
                compared[index + 1] = ("decoded", _canonical(value))
    return tuple(compared)


def _holds_set(value: Any) -> bool:
    if isinstance(value, (set, frozenset)):
        return True
    if isinstance(value, dict):
        return any(_holds_set(item) for item in value.values())
    return isinstance(value, (list, tuple)) and any(_holds_set(item) for item in value)


def _canonical(value: Any) -> Any:
    if isinstance(value, (set, frozenset)):
        return ("set", sorted(repr(_canonical(item)) for item in value))
    if isinstance(value, dict):
        return {key: _canonical(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical(item) for item in value]
    return value


async def _feed(target: Any, calls: list[tuple[str, tuple[Any, ...]]], use_async: bool) -> None:
    for method, arguments in calls:
        if use_async:
            await getattr(target, "a" + method)(*copy.deepcopy(arguments))
        else:
            getattr(target, method)(*copy.deepcopy(arguments))


async def _written(
    kind: str, where: str, calls: list[tuple[str, tuple[Any, ...]]], mode: str, pool: bool = False, serde: Any = None
) -> tuple[int, bool, int]:
    """Write the calls over a fresh durable saver of ``kind``: ``mode`` ``"batch"`` (write-back, flushed by group
    commit), ``"api"`` (write-back over a saver written through its API), ``"through"`` (write-through), or
    ``"stock"`` (the saver alone). Return (writes flushed, grouped, checkpoints the saver serialized whole again,
    other values it serialized again)."""
    use_async = kind.startswith("async")
    async with _durable(kind, where, through=mode == "api", pool=pool, serde=serde) as durable:
        if mode == "stock":
            await _feed(durable, calls, use_async)
            return 0, False, 0, 0
        tiered = TieredSaver(durable, write=BACK if mode in ("batch", "api") else WriteThrough())
        counting = _Counting(durable.serde)
        if mode == "through":
            durable.serde = counting.serde
            with counting.counting():
                await _feed(tiered, calls, use_async)
        else:
            await _feed(tiered, calls, use_async)
            durable.serde = counting.serde
        with counting.counting():
            flushed = await tiered.aflush() if use_async else tiered.flush()
        tiered.check()
        return flushed, group_commit.groupable(tiered._tiers.durable), counting.whole, counting.other


@pytest.mark.parametrize("kind", KINDS)
def test_group_commit_writes_the_rows_the_savers_own_put_writes(
    kind: str, calls: list[tuple[str, tuple[Any, ...]]], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Write-back: a flush by group commit and a flush through the saver's API leave identical tables."""
    rows, outcomes = {}, {}
    for mode in ("batch", "api"):
        where = _where(kind, f"group_{kind}_{mode}", tmp_path, request)
        outcomes[mode] = asyncio.run(_written(kind, where, calls, mode))
        rows[mode] = _rows(kind, where)
    sql = kind.removeprefix("async_")
    puts = sum(method == "put" for method, _ in calls)
    assert outcomes["api"][:2] == (len(calls), False)  # every call flushed, through the saver's API
    assert all(rows["api"].values())  # something in every table
    for table in rows["api"]:
        assert rows["batch"][table] == rows["api"][table], table
    # PostgreSQL's blobs and every write go in as the hot tier encoded them; SQLite's checkpoint row, which holds
    # every value, is spliced from them (``spliced``) except where a value is not msgpack (bytes): serialized whole.
    # Nothing else is serialized again.
    assert outcomes["batch"] == (len(calls), True, _unspliced(calls) if sql == "sqlite" else 0, 0)
    assert puts > 50 > _unspliced(calls)


@pytest.mark.parametrize(
    ("kind", "pool"), [(kind, False) for kind in KINDS] + [("postgres", True), ("async_postgres", True)]
)
def test_write_through_writes_the_rows_of_the_savers_own_put_writes(
    kind: str, pool: bool, calls: list[tuple[str, tuple[Any, ...]]], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Write-through on the same path: the tables are those the saver alone makes of the same calls, and the
    saver serialized nothing again over PostgreSQL. Over SQLite the row is spliced from the new values as the hot
    tier encoded them; the checkpoint's other fields, and the values of channels the step did not change, are
    encoded there and then, as ``SqliteSaver.put`` encodes them (the hot tier has them, as values of earlier
    checkpoints, not of this one)."""
    rows, outcomes = {}, {}
    for mode in ("through", "stock"):
        where = _where(kind, f"through_{kind}_{mode}_{pool}".lower(), tmp_path, request)
        outcomes[mode] = asyncio.run(_written(kind, where, calls, mode, pool))
        rows[mode] = _rows(kind, where)
    puts = sum(method == "put" for method, _ in calls)
    assert all(rows["stock"].values())
    for table in rows["stock"]:
        assert rows["through"][table] == rows["stock"][table], table
    sqlite = kind.endswith("sqlite")
    assert outcomes["through"][:3] == (0, True, _unspliced(calls) if sqlite else 0)
    assert (outcomes["through"][3] > 0) == sqlite
    assert puts > 50 > _unspliced(calls)


def _long_chat(calls: list[tuple[str, tuple[Any, ...]]]) -> list[tuple[str, tuple[Any, ...]]]:
    """The calls, and a thread whose message list grows past the compression threshold: values the hot tier
    stores compressed, which the SQLite row keeps as their frames."""
    more = list(calls)
    parent = None
    for turn in range(6):
        text = [
            f"turn {index}: the assistant looks the forecast up and answers the user. " * 8 for index in range(turn)
        ]
        checkpoint = make_checkpoint({"messages": text, "turn": turn}, {"messages": f"{turn + 1:08d}.0", "turn": "1"})
        more.append(
            ("put", (config("long-chat", "", parent), checkpoint, {"step": turn}, {"messages": f"{turn + 1:08d}.0"}))
        )
        more.append(
            ("put_writes", (config("long-chat", "", checkpoint["id"]), [("messages", text[-1:])], f"t{turn}", ""))
        )
        parent = checkpoint["id"]
    return more


@pytest.mark.parametrize("kind", ["sqlite", "async_sqlite"])
@pytest.mark.parametrize("mode", ["batch", "through"])
def test_compressed_sqlite_rows_keep_the_hot_tiers_frames_and_read_as_the_savers_own(
    kind: str, mode: str, calls: list[tuple[str, tuple[Any, ...]]], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Under ``CompressingSerializer``, a spliced row is the hot tier's zstd frames one after the other: not the
    saver's bytes, but the same checkpoint once read, and nothing is serialized (nor compressed) twice."""
    more = _long_chat(calls)
    rows, outcomes = {}, {}
    reference = "api" if mode == "batch" else "stock"  # write-back's replay through the API, or the saver alone
    for written in (mode, reference):
        where = _where(kind, f"compressed_{kind}_{written}", tmp_path, request)
        serde = CompressingSerializer(threshold_bytes=0)
        outcomes[written] = asyncio.run(_written(kind, where, more, written, serde=serde))
        rows[written] = _rows(kind, where)
    assert outcomes[mode][1:3] == (True, _unspliced(more))
    assert rows[mode]["writes"] == rows[reference]["writes"]
    reader = CompressingSerializer()
    decoded = {
        written: [(*row[:4], _canonical(reader.loads_typed((row[4], row[5]))), row[6]) for row in found["checkpoints"]]
        for written, found in rows.items()
    }
    assert decoded[mode] == decoded[reference]
    tags = {row[4] for row in rows[mode]["checkpoints"]}
    assert "msgpack~zstd-frames" in tags and "msgpack~zstd-frames" not in {
        row[4] for row in rows[reference]["checkpoints"]
    }


# --- the orchestration: one transaction, a refused batch, a deleted parent -----------------------------------------


def _put_turns(tiered: TieredSaver, thread_ids: list[str], turns: int) -> dict[str, str]:
    heads: dict[str, str] = {}
    for turn in range(turns):
        for thread_id in thread_ids:
            checkpoint = make_checkpoint({"turn": turn, "text": f"{thread_id} {turn}" * 5})
            stored = tiered.put(
                config(thread_id, "", heads.get(thread_id)), checkpoint, {"step": turn}, checkpoint["channel_versions"]
            )
            tiered.put_writes(stored, [("text", f"write {turn}")], f"task-{turn}")
            heads[thread_id] = stored["configurable"]["checkpoint_id"]
    return heads


def test_a_flush_of_many_threads_is_one_transaction(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    durable = SqliteSaver(sqlite3.connect(tmp_path / "one.sqlite", check_same_thread=False))
    tiered = TieredSaver(durable, write=BACK)
    threads = [f"thread-{index}" for index in range(50)]
    _put_turns(tiered, threads, 10)
    batches: list[int] = []
    write_batch = SqliteBackend.write_batch

    def counted(self: Any, saver: Any, batch: Any, prepared: Any = None) -> set[str]:
        batches.append(len(batch.items))
        return write_batch(self, saver, batch, prepared)

    monkeypatch.setattr(SqliteBackend, "write_batch", counted)
    assert tiered.flush() == 1000
    assert batches == [group_commit.BATCH_ITEMS]  # 50 threads x 20 writes, one transaction
    assert not tiered._shared.dirty and tiered.stats().flushed_writes == 1000
    tiered.check()


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_a_refused_batch_is_retried_a_thread_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, use_async: bool
) -> None:
    """One thread's write the durable tier refuses fails the batch: the threads are flushed one by one, the
    others' writes land, and the bad thread alone is struck, then poisoned; it never blocks the others."""
    durable = SqliteSaver(sqlite3.connect(tmp_path / "refused.sqlite", check_same_thread=False))
    tiered = TieredSaver(durable, write=BACK)
    write_batch = SqliteBackend.write_batch

    def refusing(self: Any, saver: Any, batch: Any, prepared: Any = None) -> set[str]:
        if any(item.thread_id == "poison" for item in batch.items):
            raise TypeError("a value the durable tier cannot store (simulated)")
        return write_batch(self, saver, batch, prepared)

    monkeypatch.setattr(SqliteBackend, "write_batch", refusing)
    threads = ["healthy-1", "poison", "healthy-2"]
    for round_ in range(2):
        _put_turns(tiered, threads, 1 + round_)
        flush: Callable[[], int] = tiered.flush if not use_async else lambda: asyncio.run(tiered.aflush())
        with pytest.raises((TypeError, UnstorableWriteError)):
            flush()
        assert set(tiered._shared.dirty.threads) == {"poison"} or round_ == 1
        healthy = [tuple for thread in ("healthy-1", "healthy-2") for tuple in durable.list(config(thread))]
        assert healthy  # the others' writes landed despite the poison
    stats = tiered.stats()
    assert stats.unstorable_threads == 1 and not tiered._shared.dirty
    assert not list(durable.list(config("poison")))
    tiered.check()


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_a_thread_deleted_by_another_process_is_refused_inside_the_batch(tmp_path: Path, use_async: bool) -> None:
    """The late-flush check reads every thread's parent in the batch's own transaction: a thread another process
    deleted is refused (nothing of it written), the others are written, and the reads were no round trips of
    their own (no ``get_tuple``)."""
    path = tmp_path / "deleted.sqlite"
    durable = SqliteSaver(sqlite3.connect(path, check_same_thread=False))
    tiered = TieredSaver(durable, write=BACK)
    threads = ["kept", "deleted", "also-kept"]
    _put_turns(tiered, threads, 1)
    tiered.flush()
    for thread_id in threads:
        found = durable.get_tuple(config(thread_id))
        assert found is not None
        checkpoint = make_checkpoint({"turn": 1})
        tiered.put(found.config, checkpoint, {"step": 1}, checkpoint["channel_versions"])
    other = SqliteSaver(sqlite3.connect(path, check_same_thread=False))
    other.delete_thread("deleted")  # another process, while the writes wait
    checks = tiered._shared.counters.parent_checks
    with pytest.raises(UnstorableWriteError, match="deleted"):
        tiered.flush() if not use_async else asyncio.run(tiered.aflush())
    assert tiered._shared.counters.parent_checks == checks + 3
    assert not list(durable.list(config("deleted")))
    assert len(list(durable.list(config("kept")))) == 2 and len(list(durable.list(config("also-kept")))) == 2
    assert not tiered._shared.dirty
    tiered.check()


# --- write-through over PostgreSQL: a pool's connections, not the saver's one lock ---------------------------------


class _CountingLock:
    """The saver's lock, counting how often it is taken (sync or async)."""

    def __init__(self, lock: Any) -> None:
        self.lock, self.taken = lock, 0

    def __enter__(self) -> Any:
        self.taken += 1
        return self.lock.__enter__()

    def __exit__(self, *exc: Any) -> Any:
        return self.lock.__exit__(*exc)

    async def __aenter__(self) -> Any:
        self.taken += 1
        return await self.lock.__aenter__()

    async def __aexit__(self, *exc: Any) -> Any:
        return await self.lock.__aexit__(*exc)


@pytest.mark.parametrize("pool", [False, True], ids=["connection", "pool"])
@pytest.mark.parametrize("kind", ["postgres", "async_postgres"])
def test_write_through_over_a_pool_never_queues_on_the_savers_lock(
    kind: str, pool: bool, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Over a ``psycopg_pool`` pool each write-through put and put_writes takes a connection of the pool: the
    saver's per-instance lock (which its own put takes even with a pool) is never taken; over one connection it
    is, as the saver's own calls take it."""
    where = _where(kind, f"lock_{kind}_{pool}".lower(), tmp_path, request)
    use_async = kind.startswith("async")

    async def run() -> int:
        async with _durable(kind, where, through=False, pool=pool) as durable:
            tiered = TieredSaver(durable)
            counting = durable.lock = _CountingLock(durable.lock)
            parent: str | None = None
            for step in range(3):
                checkpoint = make_checkpoint({"step": step, "text": ["a list", step]})
                arguments = (config("locked", "", parent), checkpoint, {"step": step}, checkpoint["channel_versions"])
                stored = await tiered.aput(*arguments) if use_async else tiered.put(*arguments)
                writes = (stored, [("text", f"write {step}")], f"task-{step}")
                await tiered.aput_writes(*writes) if use_async else tiered.put_writes(*writes)
                parent = stored["configurable"]["checkpoint_id"]
            return counting.taken

    taken = asyncio.run(run())
    assert (taken == 0) if pool else (taken >= 6)
    assert len(_rows(kind, where)["checkpoints"]) == 3 and len(_rows(kind, where)["checkpoint_writes"]) == 3


@pytest.mark.parametrize("pool", [False, True], ids=["connection", "pool"])
@pytest.mark.parametrize("kind", ["postgres", "async_postgres"])
def test_durable_reads_over_a_pool_never_queue_on_the_savers_lock(
    kind: str, pool: bool, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A hot miss's ``get_tuple`` and a ``list`` read the durable tier on a connection of the pool, not under the
    saver's per-instance lock (queued there, many conversations' first reads ran one at a time behind writes that
    never take it); over one connection they take it, as the saver's own reads do. The reads find what is stored."""
    where = _where(kind, f"reads_{kind}_{pool}".lower(), tmp_path, request)
    use_async = kind.startswith("async")

    async def run() -> tuple[int, Any, int]:
        async with _durable(kind, where, through=False, pool=pool) as durable:
            checkpoint = make_checkpoint({"text": ["stored"]})
            arguments = (config("cold"), checkpoint, {"step": 1}, checkpoint["channel_versions"])
            await durable.aput(*arguments) if use_async else durable.put(*arguments)
            tiered = TieredSaver(durable)  # a fresh hot tier: the thread is cold
            counting = durable.lock = _CountingLock(durable.lock)
            if use_async:
                found = await tiered.aget_tuple(config("cold"))
                listed = [item async for item in tiered.alist(config("cold"))]
            else:
                found = tiered.get_tuple(config("cold"))
                listed = list(tiered.list(config("cold")))
            return counting.taken, found, len(listed)

    taken, found, listed = asyncio.run(run())
    assert (taken == 0) if pool else (taken >= 1)
    assert found is not None and found.checkpoint["channel_values"]["text"] == ["stored"] and listed == 1


@pytest.mark.parametrize("kind", ["postgres", "async_postgres"])
def test_a_batch_postgresql_refuses_is_rolled_back_and_retried_a_thread_at_a_time(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """PostgreSQL refuses one thread's write (a NUL character in a text column) in the middle of a group commit:
    the transaction is rolled back (nothing of the batch is written, the connection stays usable), the threads
    are flushed one at a time, and only the bad thread stays unflushed; a second failure poisons it."""
    where = _where(kind, f"refused_{kind}", tmp_path, request)
    use_async = kind.startswith("async")

    async def run() -> tuple[int, int, set[str]]:
        async with _durable(kind, where, through=False) as durable:
            tiered = TieredSaver(durable, write=BACK)
            for round_ in range(2):
                for thread_id in ("healthy-1", "bad", "healthy-2"):
                    checkpoint = make_checkpoint({"turn": round_, "text": [thread_id]})
                    parent = None if round_ == 0 else durable_heads[thread_id]
                    arguments = (
                        config(thread_id, "", parent),
                        checkpoint,
                        {"step": round_},
                        checkpoint["channel_versions"],
                    )
                    stored = await tiered.aput(*arguments) if use_async else tiered.put(*arguments)
                    durable_heads[thread_id] = stored["configurable"]["checkpoint_id"]
                    path = "bad\x00path" if thread_id == "bad" else ""
                    writes = (stored, [("text", "a write")], f"task-{round_}", path)
                    await tiered.aput_writes(*writes) if use_async else tiered.put_writes(*writes)
                with pytest.raises(Exception, match=r"NUL|0x00|dropped"):
                    await tiered.aflush() if use_async else tiered.flush()
                assert set(tiered._shared.dirty.threads) <= {"bad"}
            tiered.check()
            stats = tiered.stats()
            return stats.unstorable_threads, stats.flush_failures, set(tiered._shared.dirty.threads)

    durable_heads: dict[str, str] = {}
    unstorable, failures, dirty = asyncio.run(run())
    assert unstorable == 1 and failures >= 2 and not dirty
    rows = _rows(kind, where)
    assert {row[0] for row in rows["checkpoints"]} == {"healthy-1", "healthy-2"}
    assert len(rows["checkpoint_writes"]) == 4


def test_over_a_pipelined_postgres_saver_each_write_is_committed_when_acknowledged(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """``PostgresSaver(conn, pipe)`` keeps its connection in pipeline mode: a write-through put and put_writes,
    and a write-back flush, are committed (another connection reads them) when they return."""
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg import Connection
    from psycopg.rows import dict_row

    where = _where("postgres", "pipelined", tmp_path, request)
    with Connection.connect(where, autocommit=True, prepare_threshold=0, row_factory=dict_row) as plain:
        PostgresSaver(plain).setup()  # its migrations cannot run in pipeline mode
    connection = Connection.connect(where, autocommit=True, prepare_threshold=0, row_factory=dict_row)
    with connection, connection.pipeline() as pipe:
        durable = PostgresSaver(connection, pipe)
        tiered = TieredSaver(durable)
        checkpoint = make_checkpoint({"messages": ["a", "list"]})
        stored = tiered.put(config("through"), checkpoint, {"step": 1}, checkpoint["channel_versions"])
        tiered.put_writes(stored, [("messages", ["more"])], "task")
        seen = {table: len(rows) for table, rows in _rows("postgres", where).items()}
        assert seen == {"checkpoints": 1, "checkpoint_blobs": 1, "checkpoint_writes": 1}
        back = TieredSaver(durable, write=BACK)
        for index in range(3):
            checkpoint = make_checkpoint({"messages": [index]})
            back.put(config(f"back-{index}"), checkpoint, {"step": 1}, checkpoint["channel_versions"])
        assert back.flush() == 3
        assert len(_rows("postgres", where)["checkpoints"]) == 4
        assert durable.get_tuple(config("back-1")) is not None


def test_a_connection_that_keeps_its_own_transaction_is_written_through_the_savers_api(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A psycopg connection without autocommit keeps a transaction open, where ours cannot begin: the tiered
    saver writes through the saver's own put and put_writes, which work inside it."""
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg import Connection
    from psycopg.rows import dict_row

    where = _where("postgres", "not_autocommit", tmp_path, request)
    with Connection.connect(where, autocommit=True, prepare_threshold=0, row_factory=dict_row) as plain:
        PostgresSaver(plain).setup()
    with Connection.connect(where, autocommit=False, prepare_threshold=0, row_factory=dict_row) as connection:
        durable = PostgresSaver(connection)
        tiered = TieredSaver(durable)
        assert not group_commit.groupable(tiered._tiers.durable)
        checkpoint = make_checkpoint({"messages": ["a"]})
        stored = tiered.put(config("kept"), checkpoint, {"step": 1}, checkpoint["channel_versions"])
        tiered.put_writes(stored, [("messages", ["b"])], "task")
        connection.commit()
    assert len(_rows("postgres", where)["checkpoints"]) == 1


@pytest.mark.parametrize("pool", [False, True], ids=["connection", "pool"])
@pytest.mark.parametrize("kind", ["postgres", "async_postgres"])
def test_a_write_through_put_is_one_implicit_transaction_without_begin_or_commit(
    kind: str, pool: bool, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In pipeline mode a write-through put sends its two statements alone (no ``BEGIN``, no ``COMMIT``: the
    statements between the pipeline's syncs are one transaction of the server's), and it stays atomic: when the
    checkpoints row fails (a trigger refuses it) after the blob rows were sent, none of the put is stored, the
    error reaches the caller, and the next put on the same connection is written."""
    from psycopg import AsyncCursor, Connection, Cursor

    where = _where(kind, f"implicit_{kind}_{pool}".lower(), tmp_path, request)
    use_async = kind.startswith("async")
    sent: list[str] = []
    for cursor_class in (Cursor, AsyncCursor):
        for method in ("execute", "executemany"):
            original = getattr(cursor_class, method)

            def recorded(self: Any, query: Any, *rest: Any, _original: Any = original, **options: Any) -> Any:
                sent.append(str(query).split()[0].upper())
                return _original(self, query, *rest, **options)

            monkeypatch.setattr(cursor_class, method, recorded)

    async def run() -> None:
        async with _durable(kind, where, through=False, pool=pool) as durable:
            with Connection.connect(where, autocommit=True) as admin:
                admin.execute(
                    "CREATE FUNCTION refuse() RETURNS trigger AS $$ BEGIN IF NEW.thread_id = 'refused' THEN "
                    "RAISE EXCEPTION 'refused by the test'; END IF; RETURN NEW; END $$ LANGUAGE plpgsql"
                )
                admin.execute(
                    "CREATE TRIGGER refuse BEFORE INSERT ON checkpoints FOR EACH ROW EXECUTE FUNCTION refuse()"
                )
            tiered = TieredSaver(durable, write=WriteThrough())
            for thread_id in ("kept", "refused", "after"):
                checkpoint = make_checkpoint({"messages": ["a", "list", thread_id]})
                arguments = (config(thread_id), checkpoint, {"step": 1}, checkpoint["channel_versions"])
                sent.clear()
                if thread_id == "refused":
                    with pytest.raises(Exception, match="refused by the test"):
                        await tiered.aput(*arguments) if use_async else tiered.put(*arguments)
                else:
                    await tiered.aput(*arguments) if use_async else tiered.put(*arguments)
                assert [word for word in sent if word != "SELECT"] == ["INSERT", "INSERT"]  # SELECT: schema check

    asyncio.run(run())
    rows = _rows(kind, where)
    assert {row[0] for row in rows["checkpoints"]} == {"kept", "after"}
    assert {row[0] for row in rows["checkpoint_blobs"]} == {"kept", "after"}
