"""``SqliteSaver`` and ``AsyncSqliteSaver``: their connection, their SQL, their format, and their tables.

* **format**: metadata as JSON text (``{1: 'a'}`` reads back as ``{'1': 'a'}``, a ``datetime`` cannot be stored
  at all); ``list(filter=...)`` is ``json_extract`` equality (a dotted key is a path, a bad key raises); the
  ``writes`` rows read directly (a write's ``idx`` and ``task_path``, which the API does not return).
* **transactions**: ``BEGIN IMMEDIATE`` (the file's write lock: no other writer commits between a check and a
  delete or a put), the statements, ``COMMIT``; on the saver's own connection under its own lock
  (``SqliteSaver.lock``, ``AsyncSqliteSaver``'s ``asyncio.Lock``).
* **conditional puts** (``conditional``): ``BEGIN IMMEDIATE``, the newest id, the saver's own put on a view of
  it whose lock is a no-op, ``COMMIT`` (a conflict rolls back). The checkpoint is serialized before the write
  lock is taken.
* **tables**: ``SCHEMA``, as ``SqliteSaver.setup()`` creates them (``checkpoints``, ``writes``), checked once
  per saver with ``PRAGMA table_info`` before our own SQL first runs.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, NamedTuple, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointMetadata, get_checkpoint_metadata

from ...engine import InvalidArgumentError, WriteRecord
from .base import (
    Batch,
    ConditionalPut,
    Kind,
    MetadataFilter,
    Newest,
    Plan,
    Table,
    declared_tables,
    exact_digest,
    kind_of,
)
from .generic import python_filter
from .spliced import splicer
from .sql import (
    SqlBackend,
    SqlDialect,
    by_checkpoint,
    drive_async,
    drive_sync,
    full_checkpoint,
    group_rows,
    missing_parents,
    presented,
    scalar,
    view,
)

__all__ = ["SCHEMA", "SqliteBackend", "SqliteDialect"]

T = TypeVar("T")

SCHEMA: Mapping[str, Table] = declared_tables(
    """
    checkpoints (thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL, checkpoint_id TEXT NOT NULL,
        parent_checkpoint_id TEXT, type TEXT, checkpoint BLOB, metadata BLOB,
        PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id))
    writes (thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL, checkpoint_id TEXT NOT NULL,
        task_id TEXT NOT NULL, task_path TEXT NOT NULL, idx INTEGER NOT NULL, channel TEXT NOT NULL, type TEXT,
        value BLOB, PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx))
    """
)
"""The tables ``SqliteSaver.setup()`` creates (langgraph-checkpoint-sqlite 3.x, which the tests run): column ->
(declared type, NOT NULL), and the primary key."""


class SqliteDialect(SqlDialect):
    """The statements of ``SqliteSaver``'s tables: values inline, metadata as JSON text."""

    writes_table = "writes"
    checkpoint_bytes = "length(checkpoint) + length(metadata)"
    write_bytes = "length(value)"
    delta_flag = (
        "(json_extract(CAST(metadata AS TEXT), '$.counters_since_delta_snapshot') IS NOT NULL "
        "OR json_extract(CAST(metadata AS TEXT), '$.delta_writes_versioned') IS NOT NULL)"
    )
    root_parent = "json_extract(CAST(metadata AS TEXT), '$.parents.\"\"')"
    # Unary + keeps SQLite's planner off the primary key (thread_id first) for a ``thread_id > ?`` page bound,
    # which it prefers to retention's index without ANALYZE statistics: that would read every row.
    not_by_key = "+"
    real = "REAL"

    def table_exists(self, table: str) -> Plan[bool]:
        rows = yield "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
        return bool(rows)

    def read_schema(self, tables: Sequence[str]) -> Plan[dict[str, Table | None]]:
        """Each table by ``PRAGMA table_info``: its columns (type, NOT NULL) and primary key (the ``pk`` order)."""
        found: dict[str, Table | None] = {}
        for table in tables:
            rows = yield f"PRAGMA table_info({table})", ()
            if not rows:
                found[table] = None
                continue
            columns = {str(name): (str(kind), bool(not_null)) for _, name, kind, not_null, _, _ in rows}
            key = tuple(str(row[1]) for row in sorted((row for row in rows if row[5]), key=lambda row: row[5]))
            found[table] = Table(columns, key)
        return found


_NEWEST = (
    "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? "
    "ORDER BY checkpoint_id DESC LIMIT 1"
)
_WRITES_OF_ONE = (
    "SELECT task_id, idx, channel, type, value FROM writes "
    "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
)
_PUT = (
    "INSERT OR REPLACE INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, "
    "checkpoint, metadata) VALUES (?, ?, ?, ?, ?, ?, ?)"
)
_WRITE_COLUMNS = "writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, value)"
_UPSERT_WRITES = f"INSERT OR REPLACE INTO {_WRITE_COLUMNS} VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
_INSERT_WRITES = f"INSERT OR IGNORE INTO {_WRITE_COLUMNS} VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
_PARENT = "SELECT thread_id, checkpoint_ns, checkpoint_id FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? "
_PARENT += "AND checkpoint_id = ?"


class _Statements(NamedTuple):
    """A group commit's statements and rows (``SqliteSaver.put`` / ``put_writes``'s own), made before the lock."""

    parents: list[tuple[str, str, str]]
    steps: list[tuple[str, list[tuple[Any, ...]]]]

    def without(self, gone: set[str]) -> list[tuple[str, list[tuple[Any, ...]]]]:
        if not gone:
            return self.steps
        return [(sql, [row for row in rows if row[0] not in gone]) for sql, rows in self.steps]


def _statements(saver: Any, batch: Batch) -> _Statements:
    """The rows ``SqliteSaver.put`` and ``put_writes`` write for the batch's items: the checkpoint serialized
    whole by the saver's serde (values inline), its metadata as the saver's JSON; write rows as encoded.
    The checkpoint's bytes are spliced from the values the hot tier encoded (``spliced``), or, under a serializer
    that cannot be spliced, serialized whole again. Runtime complexity: O(fields and channels) a checkpoint
    spliced; decoding and serializing it otherwise."""
    rows = group_rows(batch.items)
    dumps = saver.serde.dumps_typed
    splice = splicer(saver.serde)
    puts = []
    for put in rows.puts:
        given = put.given
        spliced = splice(put, batch.loads) if splice is not None else None
        if spliced is not None:
            kind, data = spliced
        else:
            kind, data = dumps(full_checkpoint(put, batch.loads) if given is None else given[1])
        merged = get_checkpoint_metadata(put.config(), batch.loads(put.metadata) if given is None else given[2])
        metadata = json.dumps(merged, ensure_ascii=False).encode("utf-8", "ignore")
        puts.append((put.thread_id, put.namespace, put.checkpoint_id, put.parent_id, kind, data, metadata))
    steps = [(_PUT, puts), (_UPSERT_WRITES, rows.upserts), (_INSERT_WRITES, rows.inserts)]
    parents = [(thread, namespace, cid) for thread, (namespace, cid) in batch.parents.items()]
    return _Statements(parents, [(sql, found) for sql, found in steps if found])


_SQLITE_KEY = re.compile(r"^[A-Za-z0-9_]+$")


def _writes(saver: Any, thread_id: str, namespace: str, checkpoint_ids: Sequence[str]) -> tuple[str, tuple[Any, ...]]:
    task_path = "task_path" if getattr(saver, "_has_task_path", True) else "''"
    marks = ", ".join("?" * len(checkpoint_ids))
    query = (
        f"SELECT checkpoint_id, task_id, idx, channel, type, value, {task_path} FROM writes "
        f"WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id IN ({marks})"
    )
    return query, (thread_id, namespace, *checkpoint_ids)


class SqliteBackend(SqlBackend):
    """``SqliteSaver`` and ``AsyncSqliteSaver`` (the sync methods for the first, the ``a``-prefixed for the other)."""

    kind: Kind = "sqlite"
    dialect = SqliteDialect()
    schema = SCHEMA
    distribution = "langgraph-checkpoint-sqlite"

    def expected(self, saver: Any) -> Mapping[str, Table]:
        if getattr(saver, "_has_task_path", True):
            return self.schema
        # A read-only database made before ``task_path`` existed: SqliteSaver reads its writes without it.
        writes = self.schema["writes"]
        columns = {name: column for name, column in writes.columns.items() if name != "task_path"}
        return {**self.schema, "writes": Table(columns, writes.primary_key)}

    # --- format ---------------------------------------------------------------------------------------------------

    def normalize_metadata(self, config: RunnableConfig, metadata: CheckpointMetadata) -> CheckpointMetadata:
        if not isinstance(metadata, Mapping):
            return metadata  # not metadata at all: refused by the encoding, naming it
        merged = get_checkpoint_metadata(config, metadata)
        try:
            text = json.dumps(merged, ensure_ascii=False)
        except (TypeError, ValueError) as error:
            raise InvalidArgumentError(
                f"metadata cannot be stored by the durable tier's SqliteSaver, as JSON: {error}"
            ) from None
        normalized: CheckpointMetadata = json.loads(text.encode("utf-8", "ignore"))
        return normalized

    def hot_filter(self, filter: Mapping[Any, Any]) -> MetadataFilter | None:
        """``json_extract(metadata, '$.key') = value`` (``IS NULL`` for None): for plain keys and scalar values the
        same as Python equality (SQLite's true is 1, as Python's; a missing key is NULL); a dotted key (a path), a
        key SqliteSaver refuses, a dict or list value (compared as JSON text), or a string that reads as JSON
        text go to the durable tier."""
        for key, value in filter.items():
            if not isinstance(key, str) or not _SQLITE_KEY.match(key) or not scalar(value):
                return None
            if isinstance(value, str) and value[:1] in ("{", "["):
                return None
        return python_filter(filter)

    def writes_digest(self, writes: Sequence[WriteRecord]) -> str | None:
        return exact_digest((w.task_id, w.idx, w.channel, w.value_type, w.value_data) for w in writes)

    # --- reads of its tables --------------------------------------------------------------------------------------

    def newest(self, saver: Any, thread_id: str, namespace: str) -> Newest | None:
        self.verify(saver)
        with saver.cursor(transaction=False) as cursor:
            row = cursor.execute(_NEWEST, (thread_id, namespace)).fetchone()
            if row is None:
                return Newest(None, None)
            rows = cursor.execute(_WRITES_OF_ONE, (thread_id, namespace, row[0])).fetchall()
        return Newest(str(row[0]), exact_digest(rows))

    async def anewest(self, saver: Any, thread_id: str, namespace: str) -> Newest | None:
        await self.averify(saver)
        async with saver.lock, saver.conn.execute(_NEWEST, (thread_id, namespace)) as cursor:
            row = await cursor.fetchone()
        if row is None:
            return Newest(None, None)
        async with saver.lock, saver.conn.execute(_WRITES_OF_ONE, (thread_id, namespace, row[0])) as cursor:
            rows = await cursor.fetchall()
        return Newest(str(row[0]), exact_digest(rows))

    def exact_writes(
        self, saver: Any, thread_id: str, namespace: str, checkpoint_ids: Sequence[str]
    ) -> dict[str, list[WriteRecord]] | None:
        self.verify(saver)
        query, parameters = _writes(saver, thread_id, namespace, checkpoint_ids)
        with saver.cursor(transaction=False) as cursor:
            rows = cursor.execute(query, parameters).fetchall()
        return by_checkpoint(rows, checkpoint_ids)

    async def aexact_writes(
        self, saver: Any, thread_id: str, namespace: str, checkpoint_ids: Sequence[str]
    ) -> dict[str, list[WriteRecord]] | None:
        query, parameters = _writes(saver, thread_id, namespace, checkpoint_ids)
        await self.averify(saver)
        async with saver.lock, saver.conn.execute(query, parameters) as cursor:
            rows = await cursor.fetchall()
        return by_checkpoint(rows, checkpoint_ids)

    # --- the schema, once per saver -------------------------------------------------------------------------------

    def verify_now(self, saver: Any) -> None:
        if self.verified(saver) or kind_of(saver) != "sqlite":
            return  # an async saver's connection is its loop's: checked at the first use
        with saver.lock:  # not saver.cursor(): that would run setup(), creating the tables at construction
            cursor = saver.conn.cursor()
            try:
                found = drive_sync(cursor, self.sql.read_schema(list(self.expected(saver))))
            finally:
                cursor.close()
        writes = found.get("writes")
        if writes is not None and "task_path" not in writes.columns:
            return  # a database older than task_path: setup() adds it, or reads without it (read-only): at first use
        self.judge(saver, found)

    def verify(self, saver: Any) -> None:
        """Check the tables before our first statement on them (after the saver's set-up). Runtime complexity:
        O(1) once checked; else one ``PRAGMA`` per table."""
        if self.verified(saver):
            return
        with saver.cursor(transaction=False) as cursor:
            found = drive_sync(cursor, self.sql.read_schema(list(self.expected(saver))))
        self.judge(saver, found)

    async def averify(self, saver: Any) -> None:
        """``verify`` for ``AsyncSqliteSaver``, on its own loop."""
        if self.verified(saver):
            return
        await saver.setup()
        async with saver.lock:
            cursor = await saver.conn.cursor()
            try:
                found = await drive_async(cursor, self.sql.read_schema(list(self.expected(saver))))
            finally:
                await cursor.close()
        self.judge(saver, found)

    # --- a plan in one transaction --------------------------------------------------------------------------------

    def run_sync(self, saver: Any, plan: Plan[T], *, transaction: bool = True) -> T:
        self.verify(saver)
        with saver.cursor(transaction=False) as cursor:
            connection = saver.conn
            if not transaction:
                return drive_sync(cursor, plan)
            if connection.in_transaction:  # autocommit=False (Python 3.12): the connection keeps one open
                try:
                    result = drive_sync(cursor, plan)
                except BaseException:
                    connection.rollback()
                    raise
                connection.commit()
                return result
            # Statements, not connection.commit(), which does nothing under autocommit=True (Python 3.12): the
            # transaction would stay open, and the database locked.
            cursor.execute("BEGIN IMMEDIATE")
            try:
                result = drive_sync(cursor, plan)
            except BaseException:
                if connection.in_transaction:  # SQLite may have rolled it back itself (a full disk)
                    cursor.execute("ROLLBACK")
                raise
            cursor.execute("COMMIT")
            return result

    async def run_async(self, saver: Any, plan: Plan[T], *, transaction: bool = True) -> T:
        await self.averify(saver)
        await saver.setup()
        async with saver.lock:
            connection = saver.conn
            cursor = await connection.cursor()
            try:
                if not transaction:
                    return await drive_async(cursor, plan)
                if connection.in_transaction:  # as in run_sync
                    try:
                        result = await drive_async(cursor, plan)
                    except BaseException:
                        await connection.rollback()
                        raise
                    await connection.commit()
                    return result
                await cursor.execute("BEGIN IMMEDIATE")  # statements, as in run_sync
                try:
                    result = await drive_async(cursor, plan)
                except BaseException:
                    if connection.in_transaction:
                        await cursor.execute("ROLLBACK")
                    raise
                await cursor.execute("COMMIT")
                return result
            finally:
                await cursor.close()

    # --- conditional puts -----------------------------------------------------------------------------------------

    def conditional_problem(self, saver: Any) -> str | None:
        if kind_of(saver) == "sqlite" and getattr(saver.conn, "autocommit", None) is False:
            return (
                f"{type(saver).__name__}'s sqlite3 connection was opened with autocommit=False, which keeps a "
                f"transaction open at all times, so BEGIN IMMEDIATE cannot take the write lock: open it with the "
                f"default transaction control"
            )
        return None

    def put_if_newest(self, saver: Any, call: ConditionalPut) -> RunnableConfig:
        self.verify(saver)
        serde = presented(saver, call)
        with saver.cursor(transaction=False) as cursor:  # the saver's lock, and its set-up on first use
            connection = saver.conn
            if connection.in_transaction:
                connection.commit()  # left open by someone else: the saver's own next write would commit it too
            cursor.execute("BEGIN IMMEDIATE")
            try:
                row = cursor.execute(_NEWEST, (call.thread_id, call.namespace)).fetchone()
                call.check(None if row is None else str(row[0]))
                stored: RunnableConfig = view(saver, lock=contextlib.nullcontext(), serde=serde).put(
                    call.config, call.checkpoint, call.metadata, call.new_versions
                )
                if connection.in_transaction:  # where the put's commit() does nothing (Python 3.12's autocommit=True)
                    cursor.execute("COMMIT")
            except BaseException:
                if connection.in_transaction:
                    cursor.execute("ROLLBACK")
                raise
        return stored

    async def aput_if_newest(self, saver: Any, call: ConditionalPut) -> RunnableConfig:
        serde = presented(saver, call)
        async with _immediate(self, saver) as connection:
            async with connection.execute(_NEWEST, (call.thread_id, call.namespace)) as cursor:
                row = await cursor.fetchone()
            call.check(None if row is None else str(row[0]))
            stored: RunnableConfig = await view(saver, lock=contextlib.nullcontext(), serde=serde).aput(
                call.config, call.checkpoint, call.metadata, call.new_versions
            )
        return stored

    # --- group commits --------------------------------------------------------------------------------------------

    def prepare(self, saver: Any, batch: Batch) -> Any:
        """The batch's statements and rows, made off any connection (no I/O: a worker thread may make them).
        Runtime complexity: O(rows), plus decoding what the rows need."""
        return _statements(saver, batch)

    def write_batch(self, saver: Any, batch: Batch, prepared: Any = None) -> set[str]:
        """The batch in one ``BEGIN IMMEDIATE`` transaction, on the saver's connection under its lock: the parents
        read, then one ``executemany`` per statement. Serialized before the lock. Runtime complexity: O(rows)."""
        self.verify(saver)
        made = _statements(saver, batch) if prepared is None else prepared
        with saver.cursor(transaction=False) as cursor:
            connection = saver.conn
            if connection.in_transaction:
                connection.commit()  # left open by someone else (autocommit=False): the saver's own write commits it
            cursor.execute("BEGIN IMMEDIATE")
            try:
                found = [row for parent in made.parents for row in cursor.execute(_PARENT, parent).fetchall()]
                gone = missing_parents(batch, found)
                for sql, rows in made.without(gone):
                    cursor.executemany(sql, rows)
                cursor.execute("COMMIT")
            except BaseException:
                if connection.in_transaction:
                    cursor.execute("ROLLBACK")
                raise
        return gone

    async def awrite_batch(self, saver: Any, batch: Batch, prepared: Any = None) -> set[str]:
        """``write_batch`` for ``AsyncSqliteSaver``, on its own loop, under its lock."""
        made = _statements(saver, batch) if prepared is None else prepared
        async with _immediate(self, saver) as connection:
            found = []
            for parent in made.parents:
                async with connection.execute(_PARENT, parent) as cursor:
                    found.extend(await cursor.fetchall())
            gone = missing_parents(batch, found)
            for sql, rows in made.without(gone):
                await connection.executemany(sql, rows)
        return gone


@contextlib.asynccontextmanager
async def _immediate(backend: SqliteBackend, saver: Any) -> AsyncIterator[Any]:
    """``AsyncSqliteSaver``'s connection in a ``BEGIN IMMEDIATE`` transaction, under its lock (its tables checked
    and set up first): committed at the end (where the block's statements did not), rolled back on an error."""
    await backend.averify(saver)
    await saver.setup()  # takes the saver's lock: before this function takes it
    async with saver.lock:
        connection = saver.conn
        if connection.in_transaction:
            await connection.commit()  # left open by someone else: the saver's own next write would commit it too
        await (await connection.execute("BEGIN IMMEDIATE")).close()
        try:
            yield connection
            if connection.in_transaction:
                await connection.commit()
        except BaseException:
            if connection.in_transaction:
                await connection.rollback()
            raise
