"""``PostgresSaver`` and ``AsyncPostgresSaver`` (one connection, one in pipeline mode, or a pool): their
connections, their SQL, their format, and their tables.

* **format**: metadata as ``jsonb`` (no ``writes`` key, no NaN, no NUL character, integral floats in exponent form
  read back as ints); ``list(filter=...)`` is ``jsonb`` containment (a nested dict matches partially, ``None``
  needs the key); ``checkpoint_writes`` read directly, and the coherence check's digest computed by the server.
* **transactions**: ``BEGIN``, the statements, ``COMMIT``, on a connection of the saver's own (one of its pool,
  or its one connection under its lock, its pipeline synced first). A checkpoint's values live in
  ``checkpoint_blobs``, keyed by version: a version that a removed checkpoint used and no remaining one uses goes
  too (as ``PostgresSaver.prune`` does), so a put under way, whose new values are not yet referenced, keeps them.
* **conditional puts** (``conditional``): ``BEGIN ISOLATION LEVEL READ COMMITTED``, ``pg_advisory_xact_lock`` of
  the (thread, namespace) key, the newest id (pipelined into one round trip), the saver's own put on a view of it
  holding that connection, ``COMMIT``.
* **tables**: ``SCHEMA``, as ``PostgresSaver.setup()``'s migrations leave them (``checkpoints``,
  ``checkpoint_blobs``, ``checkpoint_writes``), checked once per saver from ``information_schema`` before our own
  SQL first runs.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Generator, Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple, TypeVar, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointMetadata, get_serializable_checkpoint_metadata

from ...engine import InvalidArgumentError, WriteRecord
from .base import (
    INDEX,
    INDEX_COLUMNS,
    REMOVED_TABLE,
    Batch,
    BatchPut,
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
from .sql import (
    SqlBackend,
    SqlDialect,
    by_checkpoint,
    drive_async,
    drive_sync,
    group_rows,
    missing_parents,
    scalar,
    view,
)

__all__ = ["SCHEMA", "PostgresBackend", "PostgresDialect"]

T = TypeVar("T")

SCHEMA: Mapping[str, Table] = declared_tables(
    """
    checkpoints (thread_id text NOT NULL, checkpoint_ns text NOT NULL, checkpoint_id text NOT NULL,
        parent_checkpoint_id text, type text, checkpoint jsonb NOT NULL, metadata jsonb NOT NULL,
        PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id))
    checkpoint_blobs (thread_id text NOT NULL, checkpoint_ns text NOT NULL, channel text NOT NULL,
        version text NOT NULL, type text NOT NULL, blob bytea,
        PRIMARY KEY (thread_id, checkpoint_ns, channel, version))
    checkpoint_writes (thread_id text NOT NULL, checkpoint_ns text NOT NULL, checkpoint_id text NOT NULL,
        task_id text NOT NULL, idx integer NOT NULL, channel text NOT NULL, type text, blob bytea NOT NULL,
        task_path text NOT NULL, PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx))
    """
)
"""The tables ``PostgresSaver.setup()`` leaves once every migration ran (langgraph-checkpoint-postgres 3.x, which
the tests run): column -> (``information_schema`` data type, NOT NULL), and the primary key."""

_NEWEST_ID = (
    "SELECT checkpoint_id FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = %s "
    "ORDER BY checkpoint_id DESC LIMIT 1"
)
_BEGIN = "BEGIN ISOLATION LEVEL READ COMMITTED"
_LOCK = "SELECT pg_advisory_xact_lock(%s)"


class PostgresDialect(SqlDialect):
    """The statements of ``PostgresSaver``'s tables: values in ``checkpoint_blobs``, JSONB metadata."""

    writes_table = "checkpoint_writes"
    has_blobs = True
    checkpoint_bytes = "pg_column_size(checkpoint) + pg_column_size(metadata)"
    write_bytes = "pg_column_size(blob)"
    delta_flag = (
        "(metadata -> 'counters_since_delta_snapshot' IS NOT NULL OR metadata -> 'delta_writes_versioned' IS NOT NULL)"
    )
    root_parent = "metadata -> 'parents' ->> ''"
    not_by_key = ""  # PostgreSQL's planner has statistics (and no unary + on text)
    real = "DOUBLE PRECISION"

    def params(self, sql: str) -> str:
        return sql.replace("?", "%s")  # psycopg's placeholders

    def create_index(self) -> Plan[None]:
        # Concurrently: writers do not wait for the build. Two processes building it at once may deadlock, and
        # one fails (the sweep logs it and goes on; the index is there at its next pass). A crash mid-build
        # leaves an invalid index, which IF NOT EXISTS keeps: the queries stay right, and slower (DROP INDEX
        # it to have it built again).
        yield f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {INDEX} ON checkpoints {INDEX_COLUMNS}", ()

    def lock(self, thread_id: str) -> Plan[None]:
        # a transaction-scoped advisory lock: two sweepers of one thread take turns (no deadlock between them)
        yield "SELECT pg_advisory_xact_lock(hashtext(%s))", (f"bounded-retention:{thread_id}",)

    def deleted_columns(self) -> str:
        return f"{self.checkpoint_bytes}, checkpoint -> 'channel_versions'"

    def versions_of(self, rows: list[Any]) -> set[tuple[str, str]]:
        return {(str(channel), str(version)) for row in rows for channel, version in (row[1] or {}).items()}

    def drop_values(self, thread_id: str) -> Plan[int]:
        blobs = yield (
            self.params("DELETE FROM checkpoint_blobs WHERE thread_id = ? RETURNING pg_column_size(blob)"),
            (thread_id,),
        )
        return sum(int(row[0] or 0) for row in blobs)

    def collect_blobs(self, thread_id: str, namespace: str, freed: set[tuple[str, str]]) -> Plan[int]:
        """Delete the values removed checkpoints used that no remaining checkpoint of the namespace uses."""
        rows = yield (
            self.params(
                "SELECT DISTINCT v.key, v.value FROM checkpoints, "
                "jsonb_each_text(checkpoint -> 'channel_versions') AS v WHERE thread_id = ? AND checkpoint_ns = ?"
            ),
            (thread_id, namespace),
        )
        garbage = sorted(freed - {(str(channel), str(version)) for channel, version in rows})
        if not garbage:
            return 0
        rows = yield (  # one statement for them all: a round trip each made a prune of a long thread slow
            self.params(
                "DELETE FROM checkpoint_blobs WHERE thread_id = ? AND checkpoint_ns = ? AND (channel, version) IN "
                "(SELECT * FROM unnest(?::text[], ?::text[])) RETURNING pg_column_size(blob)"
            ),
            (thread_id, namespace, [channel for channel, _ in garbage], [version for _, version in garbage]),
        )
        return sum(int(row[0] or 0) for row in rows)

    def guard_removed_table(self) -> Plan[None]:
        # two first deletions at once must not both create the table
        yield "SELECT pg_advisory_xact_lock(hashtext(%s))", (f"bounded-retention:{REMOVED_TABLE}",)

    def table_exists(self, table: str) -> Plan[bool]:
        rows = yield "SELECT to_regclass(%s) IS NOT NULL", (table,)
        return bool(rows and rows[0][0])

    def read_schema(self, tables: Sequence[str]) -> Plan[dict[str, Table | None]]:
        """The tables of the connection's current schema, from ``information_schema``: columns (type, NOT NULL)
        and the primary key constraint's columns in order."""
        rows = yield (
            "SELECT table_name, column_name, data_type, is_nullable FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND table_name = ANY(%s) ORDER BY table_name, ordinal_position",
            (list(tables),),
        )
        keys = yield (
            "SELECT k.table_name, k.column_name FROM information_schema.table_constraints c "
            "JOIN information_schema.key_column_usage k ON k.constraint_schema = c.constraint_schema "
            "AND k.constraint_name = c.constraint_name AND k.table_name = c.table_name "
            "WHERE c.constraint_type = 'PRIMARY KEY' AND c.table_schema = current_schema() "
            "AND c.table_name = ANY(%s) ORDER BY k.table_name, k.ordinal_position",
            (list(tables),),
        )
        found: dict[str, Table | None] = {}
        for table in tables:
            columns = {str(name): (str(kind), nullable == "NO") for t, name, kind, nullable in rows if t == table}
            key = tuple(str(name) for t, name in keys if t == table)
            found[table] = Table(columns, key) if columns else None
        return found


@contextlib.contextmanager
def _tuple_cursor(saver: Any) -> Iterator[Any]:
    """A cursor on a connection of the saver's own: one of its pool, or its one connection under its lock.

    Rows come back as tuples (the dialect reads them by position; the saver's own rows are dicts)."""
    from psycopg.rows import tuple_row
    from psycopg_pool import ConnectionPool

    if saver.pipe is not None:
        saver.pipe.sync()
    if isinstance(saver.conn, ConnectionPool):
        with saver.conn.connection() as connection, connection.cursor(row_factory=tuple_row) as cursor:
            yield cursor
    else:
        with saver.lock, saver.conn.cursor(row_factory=tuple_row) as cursor:
            yield cursor


@contextlib.asynccontextmanager
async def _atuple_cursor(saver: Any) -> AsyncIterator[Any]:
    from psycopg.rows import tuple_row
    from psycopg_pool import AsyncConnectionPool

    if saver.pipe is not None:
        await saver.pipe.sync()
    if isinstance(saver.conn, AsyncConnectionPool):
        async with saver.conn.connection() as connection, connection.cursor(row_factory=tuple_row) as cursor:
            yield cursor
    else:
        async with saver.lock, saver.conn.cursor(row_factory=tuple_row) as cursor:
            yield cursor


def _not_idle(saver: Any) -> RuntimeError:
    return RuntimeError(
        f"{type(saver).__name__}'s connection is inside a transaction already: a conditional put needs a "
        f"connection in autocommit mode (autocommit=True, as LangGraph's Postgres savers require)"
    )


@contextlib.contextmanager
def _put_cursor(saver: Any) -> Iterator[Any]:
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool

    if isinstance(saver.conn, ConnectionPool):
        # A connection of the pool for this call alone: the saver's lock, which a plain put takes even with
        # a pool, is not needed, so a wait for another process's conditional put holds up no other call here.
        with saver.conn.connection() as connection, connection.cursor(binary=True, row_factory=dict_row) as cursor:
            yield cursor
    else:
        with saver._cursor() as cursor:  # the saver's lock: its one connection is shared
            yield cursor


@contextlib.asynccontextmanager
async def _aput_cursor(saver: Any) -> AsyncIterator[Any]:
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    if isinstance(saver.conn, AsyncConnectionPool):
        async with (
            saver.conn.connection() as connection,
            connection.cursor(binary=True, row_factory=dict_row) as cursor,
        ):
            yield cursor
    else:
        async with saver._cursor() as cursor:
            yield cursor


_NUL = "\\u0000"


def _jsonb_value(value: Any) -> Any:
    """A JSON value as ``jsonb`` reads it back: a float written in exponent form whose value is whole comes back
    as an integer (``numeric`` keeps no exponent)."""
    if isinstance(value, float):
        if value.is_integer() and "e" in repr(value):
            return int(value)
        return value
    if isinstance(value, dict):
        return {key: _jsonb_value(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_jsonb_value(item) for item in value]
    return value


def _jsonb_equal(stored: Any, wanted: Any) -> bool:
    """Scalar ``jsonb`` equality: numbers by value, but a boolean is no number."""
    if isinstance(wanted, bool) or isinstance(stored, bool):
        return type(stored) is type(wanted) and stored == wanted
    if wanted is None:
        return stored is None
    if isinstance(wanted, str):
        return isinstance(stored, str) and stored == wanted
    return isinstance(stored, int | float) and stored == wanted


_POSTGRES_NEWEST = """
SELECT c.checkpoint_id, (
    SELECT md5(string_agg(
        w.task_id || chr(31) || w.idx::text || chr(31) || w.channel || chr(31) || coalesce(w.type, '')
            || chr(31) || md5(w.blob),
        chr(30) ORDER BY w.task_id COLLATE "C", w.idx))
    FROM checkpoint_writes w
    WHERE w.thread_id = c.thread_id AND w.checkpoint_ns = c.checkpoint_ns AND w.checkpoint_id = c.checkpoint_id
) AS digest
FROM checkpoints c WHERE c.thread_id = %s AND c.checkpoint_ns = %s ORDER BY c.checkpoint_id DESC LIMIT 1
"""
_POSTGRES_WRITES = (
    "SELECT checkpoint_id, task_id, idx, channel, type, blob, task_path FROM checkpoint_writes "
    "WHERE thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = ANY(%s)"
)


def _postgres_rows(rows: Iterable[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
    return [
        (row["checkpoint_id"], row["task_id"], row["idx"], row["channel"], row["type"], row["blob"], row["task_path"])
        for row in rows
    ]


_PARENTS = (
    "SELECT thread_id, checkpoint_ns, checkpoint_id FROM checkpoints WHERE (thread_id, checkpoint_ns, checkpoint_id) "
    "IN (SELECT * FROM unnest(%s::text[], %s::text[], %s::text[])) FOR KEY SHARE OF checkpoints"
)
"""The parents a group commit continues, read in its own transaction and locked until its ``COMMIT`` (``FOR KEY
SHARE``: at READ COMMITTED a plain read lets another process's ``delete_thread`` commit between it and ours, leaving
our children under a deleted parent; locked, a deletion under way makes us wait and, committed, the row is not
found; one not yet begun waits for our ``COMMIT``)."""
_CONTAINERS = frozenset([*range(0x80, 0xA0), 0xDC, 0xDD, 0xDE, 0xDF])
"""First bytes of a msgpack map or array: a value that decodes to a dict or list, never one ``put`` keeps inline."""


def _blob_as_is(payload: tuple[str, bytes]) -> bool:
    """Whether a serialized value is one ``PostgresSaver.put`` moves to ``checkpoint_blobs`` as it is, known without
    decoding it: bytes, or (the default serde) a msgpack map or array. Runtime complexity: O(1)."""
    kind, data = payload
    return kind in ("bytes", "bytearray") or (kind == "msgpack" and bool(data) and data[0] in _CONTAINERS)


class _Rows(NamedTuple):
    """A group commit's statements and rows for ``PostgresSaver``'s tables, in flush order (``sql.GroupRows``)."""

    parents: tuple[list[str], list[str], list[str]]
    steps: list[tuple[str, list[tuple[Any, ...]]]]

    def without(self, gone: set[str]) -> list[tuple[str, list[tuple[Any, ...]]]]:
        if not gone:
            return self.steps
        return [(sql, [row for row in rows if row[0] not in gone]) for sql, rows in self.steps]


def _put_rows(put: BatchPut, loads: Any, blobs: list[tuple[Any, ...]]) -> tuple[Any, ...]:
    """``PostgresSaver.put``'s rows for a checkpoint: its blob rows (appended to ``blobs``: the new versions of the
    values it does not keep inline, the bytes the hot tier encoded, not serialized again) and its checkpoints row
    (the checkpoint without those values, primitives and a delta snapshot's marker inline; the metadata merged, as
    ``jsonb``). A flushed value is decoded only to tell whether ``put`` keeps it inline; a write-through's
    (``given``) is not decoded at all. Runtime complexity: O(channels), plus decoding the skeleton, the metadata
    and each flushed value that may be a primitive."""
    from langgraph.checkpoint.serde.types import _DeltaSnapshot
    from psycopg.types.json import Jsonb

    if put.given is not None:
        copy = dict(put.given[1])
        values: Any = copy["channel_values"]
        metadata = put.given[2]
    else:
        copy, values, metadata = loads(put.skeleton), put.values, loads(put.metadata)
    inline: dict[str, Any] = {}
    moved: set[str] = set()
    for channel, held in values.items():
        if put.given is None and _blob_as_is(held):
            moved.add(channel)
            continue
        value = held if put.given is not None else loads(held)
        if isinstance(value, _DeltaSnapshot):
            moved.add(channel)
            inline[channel] = True
        elif value is None or isinstance(value, (str, int, float, bool)):
            inline[channel] = value
        else:
            moved.add(channel)
    copy["channel_values"] = inline
    for channel, version in put.new_versions.items():
        if channel in moved:
            blobs.append((put.thread_id, put.namespace, channel, version, *put.values[channel]))
    merged = get_serializable_checkpoint_metadata(put.config(), metadata)
    return (put.thread_id, put.namespace, put.checkpoint_id, put.parent_id, Jsonb(copy), Jsonb(merged))


def _rows(saver: Any, batch: Batch) -> _Rows:
    """The batch's statements (the saver's own SQL) and rows, made before a connection is taken."""
    rows = group_rows(batch.items)
    blobs: list[tuple[Any, ...]] = []
    checkpoints = [_put_rows(put, batch.loads, blobs) for put in rows.puts]
    steps = [
        (saver.UPSERT_CHECKPOINT_BLOBS_SQL, blobs),
        (saver.UPSERT_CHECKPOINTS_SQL, checkpoints),
        (saver.UPSERT_CHECKPOINT_WRITES_SQL, rows.upserts),
        (saver.INSERT_CHECKPOINT_WRITES_SQL, rows.inserts),
    ]
    parents: tuple[list[str], list[str], list[str]] = ([], [], [])
    for thread, (namespace, checkpoint_id) in batch.parents.items():
        parents[0].append(thread)
        parents[1].append(namespace)
        parents[2].append(checkpoint_id)
    return _Rows(parents, [(sql, found) for sql, found in steps if found])


def _found(rows: Iterable[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
    return [(row["thread_id"], row["checkpoint_ns"], row["checkpoint_id"]) for row in rows]


class PostgresBackend(SqlBackend):
    """``PostgresSaver`` and ``AsyncPostgresSaver`` (the sync methods for the first, the ``a``-prefixed for the
    other): metadata as ``jsonb`` (no ``writes`` key); filters by containment; tables read directly."""

    kind: Kind = "postgres"
    dialect = PostgresDialect()
    schema = SCHEMA
    distribution = "langgraph-checkpoint-postgres"

    def normalize_metadata(self, config: RunnableConfig, metadata: CheckpointMetadata) -> CheckpointMetadata:
        if not isinstance(metadata, Mapping):
            return metadata  # not metadata at all: refused by the encoding, naming it
        merged = get_serializable_checkpoint_metadata(config, metadata)
        try:
            text = json.dumps(merged, allow_nan=False)
        except (TypeError, ValueError) as error:
            raise InvalidArgumentError(
                f"metadata cannot be stored by the durable tier's PostgreSQL saver, as jsonb: {error}"
            ) from None
        if _NUL in text:
            raise InvalidArgumentError(
                "metadata cannot be stored by the durable tier's PostgresSaver: jsonb holds no \\u0000"
            )
        normalized: CheckpointMetadata = _jsonb_value(json.loads(text))
        return normalized

    def hot_filter(self, filter: Mapping[Any, Any]) -> MetadataFilter | None:
        """``metadata @> filter`` for top-level scalar values: the key is present and its value equal, a boolean
        being no number; a dict or list value (matched partially), a non-string key, or a value jsonb refuses go
        to the durable tier."""
        for key, value in filter.items():
            if not isinstance(key, str) or not scalar(value) or "\x00" in key:
                return None
            if isinstance(value, str) and "\x00" in value:
                return None
        items = list(filter.items())
        return lambda metadata: all(key in metadata and _jsonb_equal(metadata[key], value) for key, value in items)

    def writes_digest(self, writes: Sequence[WriteRecord]) -> str | None:
        return exact_digest((w.task_id, w.idx, w.channel, w.value_type, w.value_data) for w in writes)

    def newest(self, saver: Any, thread_id: str, namespace: str) -> Newest | None:
        self.verify(saver)
        with saver._cursor() as cursor:
            cursor.execute(_POSTGRES_NEWEST, (thread_id, namespace))
            row = cursor.fetchone()
        return Newest(None, None) if row is None else Newest(str(row["checkpoint_id"]), row["digest"])

    async def anewest(self, saver: Any, thread_id: str, namespace: str) -> Newest | None:
        await self.averify(saver)
        async with saver._cursor() as cursor:
            await cursor.execute(_POSTGRES_NEWEST, (thread_id, namespace))
            row = await cursor.fetchone()
        return Newest(None, None) if row is None else Newest(str(row["checkpoint_id"]), row["digest"])

    def exact_writes(
        self, saver: Any, thread_id: str, namespace: str, checkpoint_ids: Sequence[str]
    ) -> dict[str, list[WriteRecord]] | None:
        self.verify(saver)
        with saver._cursor() as cursor:
            cursor.execute(_POSTGRES_WRITES, (thread_id, namespace, list(checkpoint_ids)))
            rows = cursor.fetchall()
        return by_checkpoint(_postgres_rows(rows), checkpoint_ids)

    async def aexact_writes(
        self, saver: Any, thread_id: str, namespace: str, checkpoint_ids: Sequence[str]
    ) -> dict[str, list[WriteRecord]] | None:
        await self.averify(saver)
        async with saver._cursor() as cursor:
            await cursor.execute(_POSTGRES_WRITES, (thread_id, namespace, list(checkpoint_ids)))
            rows = await cursor.fetchall()
        return by_checkpoint(_postgres_rows(rows), checkpoint_ids)

    def reader(self, saver: Any) -> Any:
        """Over a ``psycopg_pool`` pool (and no pipeline of the saver's), a view of the saver without its
        per-instance lock: each of its reads takes a connection of the pool, as our writes do. The saver takes
        that lock even with a pool; a read queued there waited behind every read before it, each waiting for a
        connection that writes, which never take the lock, kept busy: under many conversations at once their
        first turns' reads ran one at a time (write-through at C=200: p99 of 6-7 s). Otherwise the saver itself.
        Runtime complexity: O(1) (a shallow copy)."""
        from psycopg_pool import AsyncConnectionPool, ConnectionPool

        if getattr(saver, "pipe", None) is None and isinstance(saver.conn, ConnectionPool | AsyncConnectionPool):
            return view(saver, lock=contextlib.nullcontext())  # nullcontext: both `with` and `async with`
        return saver

    # --- the schema, once per saver -------------------------------------------------------------------------------

    def verify_now(self, saver: Any) -> None:
        if self.verified(saver) or kind_of(saver) != "postgres":
            return  # an async saver's connection is its loop's: checked at the first use
        self.verify(saver)

    def verify(self, saver: Any) -> None:
        """Check the tables before our first statement on them. Runtime complexity: O(1) once checked; else two
        reads of ``information_schema``."""
        if self.verified(saver):
            return
        with _tuple_cursor(saver) as cursor:
            found = drive_sync(cursor, self.sql.read_schema(list(self.schema)))
        self.judge(saver, found)

    async def averify(self, saver: Any) -> None:
        """``verify`` for ``AsyncPostgresSaver``, on its own loop."""
        if self.verified(saver):
            return
        async with _atuple_cursor(saver) as cursor:
            found = await drive_async(cursor, self.sql.read_schema(list(self.schema)))
        self.judge(saver, found)

    # --- a plan in one transaction --------------------------------------------------------------------------------

    def run_sync(self, saver: Any, plan: Plan[T], *, transaction: bool = True) -> T:
        self.verify(saver)
        with _tuple_cursor(saver) as cursor:
            if not transaction:
                return drive_sync(cursor, plan)
            with cursor.connection.transaction():  # BEGIN ... COMMIT, or ROLLBACK on an error
                return drive_sync(cursor, plan)

    async def run_async(self, saver: Any, plan: Plan[T], *, transaction: bool = True) -> T:
        await self.averify(saver)
        async with _atuple_cursor(saver) as cursor:
            if not transaction:
                return await drive_async(cursor, plan)
            async with cursor.connection.transaction():
                return await drive_async(cursor, plan)

    # --- conditional puts -----------------------------------------------------------------------------------------

    def conditional_problem(self, saver: Any) -> str | None:
        if getattr(saver.conn, "autocommit", True) is False:
            return (
                f"{type(saver).__name__}'s connection is not in autocommit mode (LangGraph's Postgres savers need "
                f"autocommit=True): a conditional put would run inside a transaction it cannot end, and hold its lock"
            )
        return None

    def put_if_newest(self, saver: Any, call: ConditionalPut) -> RunnableConfig:
        from psycopg import Error
        from psycopg.pq import TransactionStatus

        self.verify(saver)
        with _put_cursor(saver) as cursor:
            connection = cursor.connection
            if saver.pipe is not None:
                saver.pipe.sync()  # as PostgresSaver.prune: the transaction must not take in statements queued before
            if connection.info.transaction_status != TransactionStatus.IDLE:
                raise _not_idle(saver)
            try:
                # One round trip: BEGIN, the lock, the read. The SELECT takes its snapshot when it starts, after
                # the lock was granted. Statements, not connection.transaction(): that costs a round trip of its own.
                with connection.pipeline() if saver.supports_pipeline else contextlib.nullcontext():
                    cursor.execute(_BEGIN)
                    cursor.execute(_LOCK, (call.lock_key,))
                    cursor.execute(_NEWEST_ID, (call.thread_id, call.namespace))
                row = cursor.fetchone()  # the last statement's result
                found = None if row is None else str(row["checkpoint_id"])
                if found != call.expected:
                    # Nothing was written: COMMIT ends the transaction as well as ROLLBACK, and spares psycopg's
                    # rollback() bookkeeping, which deallocates every statement the connection prepared.
                    connection.commit()
                    call.check(found)  # raises CheckpointConflictError
                stored: RunnableConfig = view(saver, lock=contextlib.nullcontext(), conn=connection).put(
                    call.config, call.checkpoint, call.metadata, call.new_versions
                )
                connection.commit()
            except BaseException:
                if not connection.closed and connection.info.transaction_status != TransactionStatus.IDLE:
                    with contextlib.suppress(Error):  # a broken connection: the end of its session releases the lock
                        connection.rollback()
                raise
        return stored

    async def aput_if_newest(self, saver: Any, call: ConditionalPut) -> RunnableConfig:
        from psycopg import Error
        from psycopg.pq import TransactionStatus

        await self.averify(saver)
        async with _aput_cursor(saver) as cursor:
            connection = cursor.connection
            if saver.pipe is not None:
                await saver.pipe.sync()
            if connection.info.transaction_status != TransactionStatus.IDLE:
                raise _not_idle(saver)
            try:
                async with connection.pipeline() if saver.supports_pipeline else contextlib.nullcontext():
                    await cursor.execute(_BEGIN)
                    await cursor.execute(_LOCK, (call.lock_key,))
                    await cursor.execute(_NEWEST_ID, (call.thread_id, call.namespace))
                row = await cursor.fetchone()
                found = None if row is None else str(row["checkpoint_id"])
                if found != call.expected:
                    await connection.commit()  # as put_if_newest
                    call.check(found)
                stored: RunnableConfig = await view(saver, lock=contextlib.nullcontext(), conn=connection).aput(
                    call.config, call.checkpoint, call.metadata, call.new_versions
                )
                await connection.commit()
            except BaseException:
                if not connection.closed and connection.info.transaction_status != TransactionStatus.IDLE:
                    with contextlib.suppress(Error):
                        await connection.rollback()
                raise
        return stored

    # --- group commits --------------------------------------------------------------------------------------------

    def prepare(self, saver: Any, batch: Batch) -> Any:
        """The batch's statements and rows, made off any connection (no I/O: a worker thread may make them).
        Runtime complexity: O(rows), plus decoding what the rows need."""
        return _rows(saver, batch)

    def write_batch(self, saver: Any, batch: Batch, prepared: Any = None) -> set[str]:
        """The batch in one transaction on a connection of the saver's own (one of its pool, or its one
        connection under its lock): ``BEGIN`` and the parents' read (one round trip), then every row, one
        ``executemany`` per statement, and ``COMMIT`` (pipelined into one more; with no parent to read, the whole
        transaction is one round trip). Runtime complexity: O(rows)."""
        self.verify(saver)
        made = _rows(saver, batch) if prepared is None else prepared
        implicit = _implicit(saver, made)
        with _put_cursor(saver) as cursor, _in_pipeline(saver, cursor.connection, implicit):
            plan, answer = _batch_plan(batch, made, implicit), None
            while not isinstance(step := _next(plan, answer), set):
                kind, sql, parameters = step
                (cursor.executemany if kind == "many" else cursor.execute)(sql, parameters)
                answer = cursor.fetchall() if kind == "fetch" else None
        return step

    async def awrite_batch(self, saver: Any, batch: Batch, prepared: Any = None) -> set[str]:
        """``write_batch`` for ``AsyncPostgresSaver``, on its own loop."""
        await self.averify(saver)
        made = _rows(saver, batch) if prepared is None else prepared
        implicit = _implicit(saver, made)
        async with _aput_cursor(saver) as cursor, _ain_pipeline(saver, cursor.connection, implicit):
            plan, answer = _batch_plan(batch, made, implicit), None
            while not isinstance(step := _next(plan, answer), set):
                kind, sql, parameters = step
                await (cursor.executemany if kind == "many" else cursor.execute)(sql, parameters)
                answer = await cursor.fetchall() if kind == "fetch" else None
        return step


BatchStep = tuple[str, str, Any]
"""A group commit's statement: ``("execute" | "fetch" | "many", sql, parameters or rows)``."""


def _implicit(saver: Any, made: _Rows) -> bool:
    """Whether a group commit runs as the pipeline's implicit transaction, with no ``BEGIN`` or ``COMMIT``: in
    pipeline mode with no parent to read (a write-through's put or put_writes, a flush of new threads). The
    statements between the pipeline's two ``Sync`` messages (``_in_pipeline`` sends one before and one after
    them) are one transaction of the server's, committed at the second, rolled back whole if any of them fails
    (PostgreSQL's protocol: pipelining); an error on our side (a value psycopg cannot send, a cancellation) has
    ``_in_pipeline`` send a failing statement before that ``Sync``, so nothing sent is committed. Two statements
    fewer a write, each costing the client as much as a row's. A parents' read fetches mid-transaction, which
    syncs: that, and a connection out of pipeline mode (each statement its own transaction), keep ``BEGIN`` and
    ``COMMIT``. Runtime complexity: O(1)."""
    return bool(saver.supports_pipeline) and not made.parents[0]


def _batch_plan(batch: Batch, made: _Rows, implicit: bool) -> Generator[BatchStep, Any, set[str]]:
    """A group commit's statements, once for both sides: ``BEGIN``, the parents' read (sent its rows), each
    statement's rows but those of threads whose parent is gone, ``COMMIT``; it returns those threads. No
    ``BEGIN`` and ``COMMIT`` in the pipeline's ``implicit`` transaction (``_implicit``)."""
    if not implicit:
        yield "execute", "BEGIN", None
    gone: set[str] = set()
    if made.parents[0]:
        gone = missing_parents(batch, _found((yield "fetch", _PARENTS, made.parents)))
    for sql, rows in made.without(gone):
        yield "many", sql, rows
    if not implicit:
        yield "execute", "COMMIT", None
    return gone


def _next(plan: Generator[BatchStep, Any, set[str]], answer: Any) -> BatchStep | set[str]:
    try:
        return plan.send(answer)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


def _transaction_problem(saver: Any, connection: Any) -> RuntimeError | None:
    from psycopg.pq import TransactionStatus

    return None if connection.info.transaction_status == TransactionStatus.IDLE else _not_idle(saver)


def _failed_mid_transaction(connection: Any) -> bool:
    """Whether a failed group commit left its transaction open (to roll back; a broken connection ends it)."""
    from psycopg.pq import TransactionStatus

    return not connection.closed and connection.info.transaction_status != TransactionStatus.IDLE


_ABANDON = "DO $$ BEGIN RAISE EXCEPTION 'group commit abandoned on the client side' USING ERRCODE = '25P02'; END $$"
"""A statement that fails on the server: sent into an implicit transaction that failed on our side, so that the
``Sync`` ending it rolls it back instead of committing the statements sent before the failure."""


@contextlib.contextmanager
def _in_pipeline(saver: Any, connection: Any, implicit: bool = False) -> Iterator[None]:
    """The connection in pipeline mode where it can be (statements, not ``connection.transaction()``, which syncs
    the pipeline at each end), after what the saver's own pipeline queued; if the block fails, its transaction
    is rolled back: an explicit one by ``ROLLBACK``, the pipeline's ``implicit`` one by a failing statement
    before its ``Sync`` (``_ABANDON``)."""
    from psycopg import Error

    if saver.pipe is not None:
        saver.pipe.sync()  # statements queued before must not land in this transaction
    problem = _transaction_problem(saver, connection)
    if problem is not None:
        raise problem
    try:
        with connection.pipeline() if saver.supports_pipeline else contextlib.nullcontext() as pipeline:
            try:
                yield
            except BaseException:
                if implicit and not connection.closed:
                    with contextlib.suppress(Error):
                        connection.cursor().execute(_ABANDON)
                        cast(Any, pipeline).sync()  # implicit: in pipeline mode; the failure consumed here
                raise
    except BaseException:
        if _failed_mid_transaction(connection):
            with contextlib.suppress(Error):
                connection.rollback()
        raise


@contextlib.asynccontextmanager
async def _ain_pipeline(saver: Any, connection: Any, implicit: bool = False) -> AsyncIterator[None]:
    """``_in_pipeline`` for an async connection."""
    from psycopg import Error

    if saver.pipe is not None:
        await saver.pipe.sync()
    problem = _transaction_problem(saver, connection)
    if problem is not None:
        raise problem
    try:
        async with connection.pipeline() if saver.supports_pipeline else contextlib.AsyncExitStack() as pipeline:
            try:
                yield
            except BaseException:
                if implicit and not connection.closed:
                    with contextlib.suppress(Error):
                        await connection.cursor().execute(_ABANDON)
                        await cast(Any, pipeline).sync()  # implicit: in pipeline mode
                raise
    except BaseException:
        if _failed_mid_transaction(connection):
            with contextlib.suppress(Error):
                await connection.rollback()
        raise
