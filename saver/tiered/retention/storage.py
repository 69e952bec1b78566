"""What retention asks of the durable tier: which threads are due, and removing checkpoints in one transaction.

Every removal is one transaction of the durable database, so a ``kill -9`` in
the middle of a sweep leaves each thread as it was or as it should be, never a
checkpoint without the parent or the values it needs:

* ``SqliteSaver`` and ``AsyncSqliteSaver``: ``BEGIN IMMEDIATE`` (the file's
  write lock: no other writer commits between the check and the delete), then
  the statements, then ``COMMIT``;
* ``PostgresSaver`` and ``AsyncPostgresSaver``: ``BEGIN``, the statements,
  ``COMMIT``. A checkpoint's values live in ``checkpoint_blobs``, keyed by
  version: a version that a removed checkpoint used and no remaining one uses
  goes too (as ``PostgresSaver.prune`` does), so a put under way, whose new
  values are not yet referenced, keeps them.

Each removal re-checks its condition inside its transaction: an idle thread is
deleted only if it is still idle (a write that landed since keeps it whole),
and a prune deletes only the checkpoints it named, all older than the ones a
thread keeps. So sweeping is idempotent, and several processes can sweep one
database: the second finds nothing left to do.

Finding due threads reads indexes, not payloads: retention creates one index,
``bounded_retention_checkpoint_id`` on ``checkpoints(checkpoint_id)``, and asks
for the ids in a window of time (LangGraph's uuid6 ids hold their time:
``retention.ids``): the threads with a checkpoint in the window and none after
the cutoff are idle; the namespaces with a checkpoint in the window and more
than ``keep_last`` checkpoints are long. The window starts where the last pass
ended (less an overlap, and lower where this process put an older id since:
``sweep``), so a pass reads what was written since, not the whole table.

A durable saver of another kind is read through its API (``list(None)``, every
checkpoint, once per pass) and its idle threads deleted with ``delete_thread``;
``keep_last`` and ``keep_latest`` over it rewrite the thread (``durable``'s
emulation, which a crash can interrupt), so they are refused by the policy
unless the saver is ``InMemorySaver`` (in-process: a crash loses it whole anyway).

A plan of statements is a generator: it yields ``(sql, parameters)`` and is sent
the rows each returns; ``run_sync`` and ``run_async`` drive it on either side
of the durable saver, inside the transaction. So each removal is written once
for both sides.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Generator, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any, NamedTuple, TypeVar

from ..durable_format import Kind

__all__ = [
    "CHUNK",
    "INDEX",
    "NOTHING",
    "Plan",
    "PostgresDialect",
    "Removed",
    "Skeleton",
    "SqlDialect",
    "dialect_of",
    "run_async",
    "run_sync",
]

T = TypeVar("T")

INDEX = "bounded_retention_checkpoint_id"
"""The index retention creates on ``checkpoints``, with its columns: ids (times) first, so that a window's page
of due threads reads the index alone."""
INDEX_COLUMNS = "(checkpoint_id, thread_id, checkpoint_ns)"

CHUNK = 500
"""Checkpoint ids per ``IN`` list (SQLite allows 32,766 parameters; this keeps statements small)."""

Plan = Generator[tuple[str, Sequence[Any]], list[Any], T]
"""Statements to run in one transaction: yields ``(sql, parameters)``, is sent each one's rows, returns a value."""


class Removed(NamedTuple):
    """What a removal took from the durable tier.

    Attributes:
        checkpoints: Checkpoints removed.
        writes: Pending writes removed (with their checkpoints).
        nbytes: Bytes of the rows removed, as the database measures them (SQLite: the length of each payload;
            PostgreSQL: ``pg_column_size``, after its compression).
        whole: The thread went whole (an idle thread deleted).
        planned: The checkpoint ids a prune planned away, by namespace (empty for a deletion): the hot tier
            removes the same (``removal.prune_memory``).
    """

    checkpoints: int
    writes: int
    nbytes: int
    whole: bool
    planned: Mapping[str, Sequence[str]] = MappingProxyType({})


NOTHING = Removed(0, 0, 0, False)


class Skeleton(NamedTuple):
    """One checkpoint of a thread, as retention plans with it: no payload.

    Attributes:
        namespace: Its ``checkpoint_ns``.
        checkpoint_id: Its id.
        delta: Its metadata counts ``DeltaChannel`` writes (older checkpoints rebuild its values).
        root: The root graph's checkpoint a subgraph call started from (``metadata["parents"][""]``), or None.
    """

    namespace: str
    checkpoint_id: str
    delta: bool
    root: str | None


class SqlDialect:
    """The statements of one SQL durable saver's tables (SQLite's; ``PostgresDialect`` overrides)."""

    writes_table = "writes"
    has_blobs = False
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

    def params(self, sql: str) -> str:
        """The statement with this dialect's placeholders (written with ``?``)."""
        return sql

    def in_list(self, column: str, count: int) -> str:
        """``column IN (...)`` for ``count`` values."""
        return f"{column} IN ({', '.join('?' * count)})"

    def create_index(self) -> Plan[None]:
        """Create the index retention finds due threads with: checkpoint ids (times) first, their threads and
        namespaces beside, so a window's page reads the index alone (run outside a transaction)."""
        yield f"CREATE INDEX IF NOT EXISTS {INDEX} ON checkpoints {INDEX_COLUMNS}", ()

    # --- finding due threads (reads of the index, no payload) -----------------------------------------------

    def idle_threads(self) -> str:
        """Threads after ``after`` with a checkpoint in [since, cutoff) and none at or after the cutoff, in
        order (params: since, cutoff, after, cutoff, limit)."""
        return self.params(
            "SELECT DISTINCT c.thread_id FROM checkpoints c WHERE c.checkpoint_id >= ? AND c.checkpoint_id < ? "
            f"AND {self.not_by_key}c.thread_id > ? AND NOT EXISTS (SELECT 1 FROM checkpoints n "
            "WHERE n.thread_id = c.thread_id AND n.checkpoint_id >= ?) ORDER BY c.thread_id LIMIT ?"
        )

    def long_threads(self) -> str:
        """Threads after ``after`` with a namespace written in [since, upto) that holds more than ``keep_last``
        checkpoints, in order (params: since, upto, after, keep_last, limit)."""
        return self.params(
            "SELECT DISTINCT w.thread_id FROM (SELECT DISTINCT thread_id, checkpoint_ns FROM checkpoints "
            f"WHERE checkpoint_id >= ? AND checkpoint_id < ? AND {self.not_by_key}thread_id > ?) w "
            "WHERE (SELECT count(*) FROM checkpoints c WHERE c.thread_id = w.thread_id "
            "AND c.checkpoint_ns = w.checkpoint_ns) > ? ORDER BY w.thread_id LIMIT ?"
        )

    def skeleton(self, thread_id: str) -> Plan[list[Skeleton]]:
        """A thread's checkpoints, oldest first, without their payloads."""
        rows = yield (
            self.params(
                f"SELECT checkpoint_ns, checkpoint_id, {self.delta_flag}, {self.root_parent} FROM checkpoints "
                "WHERE thread_id = ? ORDER BY checkpoint_id"
            ),
            (thread_id,),
        )
        return [
            Skeleton(str(ns), str(cid), bool(delta), None if root is None else str(root))
            for ns, cid, delta, root in rows
        ]

    # --- removals (plans, each run in one transaction) ----------------------------------------------------

    def lock(self, thread_id: str) -> Plan[None]:
        """Keep other sweepers out of the thread until the transaction ends (SQLite: ``BEGIN IMMEDIATE``
        already holds the database's write lock)."""
        return
        yield  # a plan of no statement

    def delete_idle(self, thread_id: str, cutoff: str) -> Plan[Removed]:
        """Delete a thread whose newest checkpoint is older than ``cutoff``: its checkpoints and writes older
        than the cutoff, and, when no checkpoint is left, every value it stored (PostgreSQL).

        A checkpoint another process committed since (at or after the cutoff) is neither deleted nor left
        without the values it uses.
        """
        rows = yield self.params("SELECT max(checkpoint_id) FROM checkpoints WHERE thread_id = ?"), (thread_id,)
        newest = rows[0][0]
        if newest is None or str(newest) >= cutoff:
            return NOTHING  # written since it was found idle, or gone already
        rows = yield (
            self.params(
                f"DELETE FROM {self.writes_table} WHERE thread_id = ? AND checkpoint_id < ? "
                f"RETURNING {self.write_bytes}"
            ),
            (thread_id, cutoff),
        )
        writes, nbytes = len(rows), sum(int(row[0] or 0) for row in rows)
        rows = yield (
            self.params(
                f"DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_id < ? RETURNING checkpoint_ns, "
                f"{self.deleted_columns()}"
            ),
            (thread_id, cutoff),
        )
        checkpoints = len(rows)
        nbytes += sum(int(row[1] or 0) for row in rows)
        left = yield self.params("SELECT DISTINCT checkpoint_ns FROM checkpoints WHERE thread_id = ?"), (thread_id,)
        if left:  # another process wrote meanwhile: its checkpoints stay, with no parent where it went
            yield (
                self.params(
                    "UPDATE checkpoints SET parent_checkpoint_id = NULL WHERE thread_id = ? "
                    "AND parent_checkpoint_id < ?"
                ),
                (thread_id, cutoff),
            )
        if self.has_blobs:
            if not left:
                blobs = yield (
                    self.params("DELETE FROM checkpoint_blobs WHERE thread_id = ? RETURNING pg_column_size(blob)"),
                    (thread_id,),
                )
                nbytes += sum(int(row[0] or 0) for row in blobs)
            else:
                for namespace in sorted({str(row[0]) for row in rows}):
                    freed = self.versions_of([row[1:] for row in rows if row[0] == namespace])
                    if freed:
                        nbytes += yield from self._collect_blobs(thread_id, namespace, freed)
        return Removed(checkpoints, writes, nbytes, not left)

    def remove(
        self, thread_id: str, removals: dict[str, list[str]], *, idle_before: str | None = None
    ) -> Plan[Removed]:
        """Remove the named checkpoints (by namespace) and their pending writes, the thread's writes an earlier
        removal left without their checkpoint (``orphaned_writes``, counted in ``writes``), and, for
        PostgreSQL, the values no remaining checkpoint of the namespace uses. A remaining checkpoint whose
        parent went is left with no parent (as ``PostgresSaver.prune`` leaves it), never with a parent that
        is not there.

        With ``idle_before``, first check that the thread is still idle (no checkpoint at or after it); if it
        is not, nothing is removed. ``whole`` is whether the thread has no checkpoint left.
        """
        if idle_before is not None:
            rows = yield self.params("SELECT max(checkpoint_id) FROM checkpoints WHERE thread_id = ?"), (thread_id,)
            newest = rows[0][0]
            if newest is None or str(newest) >= idle_before:
                return NOTHING  # written since it was found idle, or gone already
        checkpoints = writes = nbytes = 0
        for namespace, ids in removals.items():
            freed: set[tuple[str, str]] = set()
            for start in range(0, len(ids), CHUNK):
                chunk = ids[start : start + CHUNK]
                where = f"thread_id = ? AND checkpoint_ns = ? AND {self.in_list('checkpoint_id', len(chunk))}"
                parameters = (thread_id, namespace, *chunk)
                rows = yield (
                    self.params(f"DELETE FROM {self.writes_table} WHERE {where} RETURNING {self.write_bytes}"),
                    (parameters),
                )
                writes += len(rows)
                nbytes += sum(int(row[0] or 0) for row in rows)
                rows = yield (
                    self.params(f"DELETE FROM checkpoints WHERE {where} RETURNING {self.deleted_columns()}"),
                    (parameters),
                )
                checkpoints += len(rows)
                nbytes += sum(int(row[0] or 0) for row in rows)
                freed.update(self.versions_of(rows))
                parents = f"thread_id = ? AND checkpoint_ns = ? AND {self.in_list('parent_checkpoint_id', len(chunk))}"
                yield self.params(f"UPDATE checkpoints SET parent_checkpoint_id = NULL WHERE {parents}"), parameters
            if freed:
                nbytes += yield from self._collect_blobs(thread_id, namespace, freed)
        rows = yield self.params(self.orphaned_writes()), (thread_id,)
        writes += len(rows)
        nbytes += sum(int(row[0] or 0) for row in rows)
        rows = yield self.params("SELECT 1 FROM checkpoints WHERE thread_id = ? LIMIT 1"), (thread_id,)
        return Removed(checkpoints, writes, nbytes, not rows, removals)

    def orphaned_writes(self) -> str:
        """Delete the thread's write rows left without their checkpoint (params: thread_id): those of a
        (namespace, id) with no checkpoint row whose id sorts below the namespace's newest checkpoint.

        Such a row is a write that reached the table after a prune removed its checkpoint (LangGraph's
        ``durability="async"`` puts a step's writes from background tasks; another process's late flush);
        an earlier prune, which deletes writes by the ids it planned, left it. A write for a checkpoint not
        stored yet, made before its put (as LangGraph may), is above every stored id of its namespace: it
        stays, and so does every write of a namespace with no checkpoint. Runtime complexity: O(the
        thread's write rows), each an index probe.
        """
        table = self.writes_table
        return (
            f"DELETE FROM {table} WHERE {table}.thread_id = ? AND NOT EXISTS (SELECT 1 FROM checkpoints c "
            f"WHERE c.thread_id = {table}.thread_id AND c.checkpoint_ns = {table}.checkpoint_ns "
            f"AND c.checkpoint_id = {table}.checkpoint_id) AND {table}.checkpoint_id < (SELECT max(n.checkpoint_id) "
            f"FROM checkpoints n WHERE n.thread_id = {table}.thread_id AND n.checkpoint_ns = {table}.checkpoint_ns) "
            f"RETURNING {self.write_bytes}"
        )

    def deleted_columns(self) -> str:
        """What a deleted checkpoint row returns: its bytes (and, for PostgreSQL, the versions it used)."""
        return self.checkpoint_bytes

    def versions_of(self, rows: list[Any]) -> set[tuple[str, str]]:
        """The (channel, version) pairs deleted checkpoint rows used (none: SQLite keeps values inline)."""
        return set()

    def _collect_blobs(self, thread_id: str, namespace: str, freed: set[tuple[str, str]]) -> Plan[int]:
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


_DIALECTS: dict[Kind, SqlDialect] = {
    "sqlite": SqlDialect(),
    "async_sqlite": SqlDialect(),
    "postgres": PostgresDialect(),
    "async_postgres": PostgresDialect(),
}


def dialect_of(kind: Kind) -> SqlDialect | None:
    """The SQL dialect of a durable saver's kind, or None for a saver read through its API."""
    return _DIALECTS.get(kind)


# --- driving a plan in one transaction -------------------------------------------------------------------------


def _drive_sync(cursor: Any, plan: Plan[T]) -> T:
    try:
        sql, parameters = next(plan)
        while True:
            cursor.execute(sql, parameters)
            rows = cursor.fetchall() if cursor.description is not None else []
            sql, parameters = plan.send([tuple(row) for row in rows])
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def _drive_async(cursor: Any, plan: Plan[T]) -> T:
    try:
        sql, parameters = next(plan)
        while True:
            await cursor.execute(sql, parameters)
            rows = await cursor.fetchall() if cursor.description is not None else []
            sql, parameters = plan.send([tuple(row) for row in rows])
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


def run_sync(saver: Any, kind: Kind, plan: Plan[T], *, transaction: bool = True) -> T:
    """Run a plan on a sync SQLite or PostgreSQL saver, in one transaction (or, for reads, without one).

    Raises:
        Exception: The database's failure; the transaction was rolled back.

    Runtime complexity: the statements'.
    """
    if kind == "sqlite":
        with saver.cursor(transaction=False) as cursor:
            connection = saver.conn
            if not transaction:
                return _drive_sync(cursor, plan)
            if connection.in_transaction:  # autocommit=False (Python 3.12): the connection keeps one open
                try:
                    result = _drive_sync(cursor, plan)
                except BaseException:
                    connection.rollback()
                    raise
                connection.commit()
                return result
            # Statements, not connection.commit(), which does nothing under autocommit=True (Python 3.12): the
            # transaction would stay open, and the database locked.
            cursor.execute("BEGIN IMMEDIATE")
            try:
                result = _drive_sync(cursor, plan)
            except BaseException:
                if connection.in_transaction:  # SQLite may have rolled it back itself (a full disk)
                    cursor.execute("ROLLBACK")
                raise
            cursor.execute("COMMIT")
            return result
    with _postgres_cursor(saver) as cursor:
        if not transaction:
            return _drive_sync(cursor, plan)
        with cursor.connection.transaction():  # BEGIN ... COMMIT, or ROLLBACK on an error
            return _drive_sync(cursor, plan)


async def run_async(saver: Any, kind: Kind, plan: Plan[T], *, transaction: bool = True) -> T:
    """``run_sync`` for ``AsyncSqliteSaver`` and ``AsyncPostgresSaver``, on the saver's own loop."""
    if kind == "async_sqlite":
        await saver.setup()
        async with saver.lock:
            connection = saver.conn
            cursor = await connection.cursor()
            try:
                if not transaction:
                    return await _drive_async(cursor, plan)
                if connection.in_transaction:  # as in run_sync
                    try:
                        result = await _drive_async(cursor, plan)
                    except BaseException:
                        await connection.rollback()
                        raise
                    await connection.commit()
                    return result
                await cursor.execute("BEGIN IMMEDIATE")  # statements, as in run_sync
                try:
                    result = await _drive_async(cursor, plan)
                except BaseException:
                    if connection.in_transaction:
                        await cursor.execute("ROLLBACK")
                    raise
                await cursor.execute("COMMIT")
                return result
            finally:
                await cursor.close()
    async with _async_postgres_cursor(saver) as cursor:
        if not transaction:
            return await _drive_async(cursor, plan)
        async with cursor.connection.transaction():
            return await _drive_async(cursor, plan)


@contextlib.contextmanager
def _postgres_cursor(saver: Any) -> Iterator[Any]:
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
async def _async_postgres_cursor(saver: Any) -> AsyncIterator[Any]:
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
