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
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from langgraph.checkpoint.bounded import TieredSaver, UnstorableWriteError, WriteBack
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


# --- the savers: stock (group commit) and written through their API ------------------------------------------------


def _through(saver_class: type[Any]) -> type[Any]:
    """A subclass overriding ``put`` and ``aput`` (delegating to the class's own): written through its API."""
    methods = {
        "put": lambda self, *args, **kwargs: saver_class.put(self, *args, **kwargs),
        "aput": lambda self, *args, **kwargs: saver_class.aput(self, *args, **kwargs),
    }
    return type(f"Through{saver_class.__name__}", (saver_class,), methods)


def _postgres_classes() -> tuple[type[Any], type[Any]]:
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    return _through(PostgresSaver), _through(AsyncPostgresSaver)


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


def _schema_conninfo(conninfo: str, schema: str) -> str:
    from psycopg import Connection

    with Connection.connect(conninfo, autocommit=True) as connection:
        connection.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        connection.execute(f"CREATE SCHEMA {schema}")
    return f"{conninfo} options='-c search_path={schema}'"


def _postgres_rows(conninfo: str) -> dict[str, list[Any]]:
    from psycopg import Connection

    with Connection.connect(conninfo, autocommit=True) as connection:
        return {
            table: [tuple(row) for row in connection.execute(query).fetchall()]
            for table, query in POSTGRES_TABLES.items()
        }


def _sqlite_rows(path: Path) -> dict[str, list[Any]]:
    with sqlite3.connect(path) as connection:
        return {table: connection.execute(query).fetchall() for table, query in SQLITE_TABLES.items()}


class _Counting:
    """A serde that counts its ``dumps_typed`` calls (what the saver serializes again)."""

    def __init__(self, serde: Any) -> None:
        self.serde, self.dumps = serde, 0

    def dumps_typed(self, obj: Any) -> Any:
        self.dumps += 1
        return self.serde.dumps_typed(obj)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.serde, name)


def _feed(tiered: TieredSaver, calls: list[tuple[str, tuple[Any, ...]]]) -> None:
    for method, arguments in calls:
        getattr(tiered, method)(*copy.deepcopy(arguments))


async def _afeed(tiered: TieredSaver, calls: list[tuple[str, tuple[Any, ...]]]) -> None:
    for method, arguments in calls:
        await getattr(tiered, "a" + method)(*copy.deepcopy(arguments))


def _flushed(durable: Any, calls: list[tuple[str, tuple[Any, ...]]]) -> tuple[int, bool, int]:
    """Feed the calls to a write-back saver over ``durable`` and flush: (writes flushed, grouped, re-serialized)."""
    tiered = TieredSaver(durable, write=BACK)
    _feed(tiered, calls)
    counting = durable.serde = _Counting(durable.serde)
    flushed = tiered.flush()
    tiered.check()
    return flushed, group_commit.groupable(tiered._tiers.durable), counting.dumps


async def _aflushed(durable: Any, calls: list[tuple[str, tuple[Any, ...]]]) -> tuple[int, bool, int]:
    tiered = TieredSaver(durable, write=BACK)
    await _afeed(tiered, calls)
    counting = durable.serde = _Counting(durable.serde)
    flushed = await tiered.aflush()
    tiered.check()
    return flushed, group_commit.groupable(tiered._tiers.durable), counting.dumps


@contextmanager
def _sqlite(path: Path, through: bool) -> Iterator[Any]:
    saver = (_through(SqliteSaver) if through else SqliteSaver)(sqlite3.connect(path, check_same_thread=False))
    yield saver
    saver.conn.close()


@asynccontextmanager
async def _async_sqlite(path: Path, through: bool) -> AsyncIterator[Any]:
    import aiosqlite

    async with aiosqlite.connect(path) as connection:
        saver = (_through(AsyncSqliteSaver) if through else AsyncSqliteSaver)(connection)
        await saver.setup()
        yield saver


@pytest.mark.parametrize("kind", KINDS)
def test_group_commit_writes_the_rows_the_savers_own_put_writes(
    kind: str, calls: list[tuple[str, tuple[Any, ...]]], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    puts = sum(method == "put" for method, _ in calls)
    outcomes: dict[bool, tuple[int, bool, int]] = {}
    rows: dict[bool, dict[str, list[Any]]] = {}
    if kind in ("sqlite", "async_sqlite"):
        for through in (False, True):
            path = tmp_path / f"{kind}-{through}.sqlite"
            if kind == "sqlite":
                with _sqlite(path, through) as durable:
                    outcomes[through] = _flushed(durable, calls)
            else:

                async def run(path: Path = path, through: bool = through) -> tuple[int, bool, int]:
                    async with _async_sqlite(path, through) as durable:
                        return await _aflushed(durable, calls)

                outcomes[through] = asyncio.run(run())
            rows[through] = _sqlite_rows(path)
        redone = puts  # SQLite's checkpoint row holds every value: each checkpoint is serialized whole once
    else:
        running = request.getfixturevalue("cluster")
        sync_class, async_class = _postgres_classes()
        from langgraph.checkpoint.postgres import PostgresSaver
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from psycopg import AsyncConnection, Connection
        from psycopg.rows import dict_row

        for through in (False, True):
            conninfo = _schema_conninfo(running.conninfo, f"group_{kind}_{'through' if through else 'batch'}")
            if kind == "postgres":
                connection = Connection.connect(conninfo, autocommit=True, prepare_threshold=0, row_factory=dict_row)
                with connection:
                    durable = (sync_class if through else PostgresSaver)(connection)
                    durable.setup()
                    outcomes[through] = _flushed(durable, calls)
            else:

                async def arun(
                    conninfo: str = conninfo, cls: Any = async_class if through else AsyncPostgresSaver
                ) -> tuple[int, bool, int]:
                    async with await AsyncConnection.connect(
                        conninfo, autocommit=True, prepare_threshold=0, row_factory=dict_row
                    ) as connection:
                        durable = cls(connection)
                        await durable.setup()
                        return await _aflushed(durable, calls)

                outcomes[through] = asyncio.run(arun())
            rows[through] = _postgres_rows(conninfo)
        redone = 0  # blobs and writes go in as the hot tier encoded them
    assert outcomes[False][:2] == (len(calls), True)  # every call flushed, by group commit
    assert outcomes[True][:2] == (len(calls), False)  # every call flushed, through the saver's API
    assert outcomes[False][2] == redone
    assert all(rows[True][table] for table in rows[True])  # something of every table was written
    for table in rows[True]:
        assert rows[False][table] == rows[True][table], table


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
