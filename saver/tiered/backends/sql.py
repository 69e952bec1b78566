"""What the two SQL backends share: the statements over LangGraph's same-named tables, the drivers that run a
plan of them, and the check of a saver's tables against its module's declaration.

A plan of statements is a generator: it yields ``(sql, parameters)`` and is sent
the rows each returns; a backend's ``run_sync`` and ``run_async`` drive it on
either side of the durable saver, inside one transaction. So each removal is
written once, for both sides and both databases (``?`` placeholders; PostgreSQL's
``params`` rewrites them).

Every removal is one transaction of the durable database, so a ``kill -9`` in
the middle of a sweep leaves each thread as it was or as it should be, never a
checkpoint without the parent or the values it needs. Each removal re-checks its
condition inside its transaction: an idle thread is deleted only if it is still
idle (a write that landed since keeps it whole), and a prune deletes only the
checkpoints it named, all older than the ones a thread keeps. So sweeping is
idempotent, and several processes can sweep one database: the second finds
nothing left to do.

Finding due threads reads indexes, not payloads: retention creates one index,
``bounded_retention_checkpoint_id`` on ``checkpoints(checkpoint_id)``, and asks
for the ids in a window of time (LangGraph's uuid6 ids hold their time).

The schema: each SQL module declares ``SCHEMA`` (its tables as the installed saver creates them); ``SqlBackend``
reads the saver's tables back once per saver (``verify``) before the first of our statements, and refuses a
difference (``SchemaMismatchError``).
"""

from __future__ import annotations

import copy
import importlib.metadata
import math
import weakref
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple, TypeVar

from langgraph.checkpoint.base import WRITES_IDX_MAP

from ...engine import ThreadStorage, WriteRecord
from .base import (
    CHUNK,
    INDEX,
    INDEX_COLUMNS,
    NOTHING,
    REMOVED_INDEX,
    REMOVED_TABLE,
    Batch,
    BatchPut,
    BatchWrites,
    ConditionalPut,
    Plan,
    Removal,
    Removed,
    SchemaMismatchError,
    Skeleton,
    Table,
)
from .generic import GenericBackend

__all__ = [
    "EXACT_INT",
    "CheckpointSizes",
    "GroupRows",
    "full_checkpoint",
    "group_rows",
    "missing_parents",
    "SqlBackend",
    "Serialized",
    "SqlDialect",
    "by_checkpoint",
    "drive_async",
    "drive_sync",
    "presented",
    "scalar",
    "schema_differences",
    "sizes_plan",
    "storage_plan",
    "view",
]

T = TypeVar("T")
S = TypeVar("S")

EXACT_INT = 2**53
"""Integers past this, as filter values, go to the durable tier (SQLite compares them as floats)."""


class SqlDialect:
    """The statements both SQL savers' tables share (LangGraph's ``checkpoints`` and its writes table), written
    with ``?`` placeholders; ``sqlite.SqliteDialect`` and ``postgres.PostgresDialect`` fill in their own.

    Attributes:
        writes_table: The pending writes' table.
        has_blobs: Whether channel values live in ``checkpoint_blobs`` (PostgreSQL).
        checkpoint_bytes: A checkpoint row's bytes, as the database measures them.
        write_bytes: A write row's bytes.
        delta_flag: Whether a checkpoint's metadata counts ``DeltaChannel`` writes.
        root_parent: The root graph's checkpoint a subgraph call started from, from the metadata.
        not_by_key: A prefix keeping the planner off the primary key for a ``thread_id > ?`` bound.
        real: The type of a floating-point column of retention's own table.
    """

    writes_table: str
    has_blobs = False
    checkpoint_bytes: str
    write_bytes: str
    delta_flag: str
    root_parent: str
    not_by_key: str
    real: str

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
                nbytes += yield from self.drop_values(thread_id)
            else:
                for namespace in sorted({str(row[0]) for row in rows}):
                    freed = self.versions_of([row[1:] for row in rows if row[0] == namespace])
                    if freed:
                        nbytes += yield from self.collect_blobs(thread_id, namespace, freed)
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
                nbytes += yield from self.collect_blobs(thread_id, namespace, freed)
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

    def drop_values(self, thread_id: str) -> Plan[int]:
        """Delete every value the thread stored apart from its checkpoints (none: SQLite keeps values inline)."""
        return 0
        yield  # a plan of no statement

    def collect_blobs(self, thread_id: str, namespace: str, freed: set[tuple[str, str]]) -> Plan[int]:
        """Delete the values removed checkpoints used that no remaining checkpoint of the namespace uses (none:
        SQLite keeps values inline)."""
        return 0
        yield  # a plan of no statement

    # --- threads waiting at an interrupt (``retention.waiting``) ------------------------------------------------

    def waiting(self, thread_id: str, channel: str) -> Plan[bool]:
        """Whether the thread's newest root checkpoint holds a write to ``channel`` (``__interrupt__``): two
        lookups of primary keys."""
        rows = yield (
            self.params(
                f"SELECT 1 FROM {self.writes_table} WHERE thread_id = ? AND checkpoint_ns = '' AND channel = ? "
                "AND checkpoint_id = (SELECT max(checkpoint_id) FROM checkpoints WHERE thread_id = ? "
                "AND checkpoint_ns = '') LIMIT 1"
            ),
            (thread_id, channel, thread_id),
        )
        return bool(rows)

    def guard_removed_table(self) -> Plan[None]:
        """Keep two first deletions from both creating retention's table (SQLite: its write lock does)."""
        return
        yield  # a plan of no statement

    def table_exists(self, table: str) -> Plan[bool]:
        """Whether a table exists (a lookup of the catalog)."""
        raise NotImplementedError
        yield  # a plan

    def record_removal(self, removal: Removal, forget_before: float) -> Plan[None]:
        """Write the row of a deleted waiting thread (created with its table the first time), after deleting the
        rows older than ``forget_before`` (seconds since the epoch): the table holds the deletions of one TTL at
        most."""
        real = self.real
        yield from self.guard_removed_table()
        yield (
            f"CREATE TABLE IF NOT EXISTS {REMOVED_TABLE} (thread_id TEXT PRIMARY KEY, removed_at {real} NOT NULL, "
            f"policy_field TEXT NOT NULL, policy_value {real} NOT NULL, checkpoint_id TEXT)",
            (),
        )
        yield f"CREATE INDEX IF NOT EXISTS {REMOVED_INDEX} ON {REMOVED_TABLE} (removed_at)", ()
        yield self.params(f"DELETE FROM {REMOVED_TABLE} WHERE removed_at < ?"), (forget_before,)
        yield (
            self.params(
                f"INSERT INTO {REMOVED_TABLE} (thread_id, removed_at, policy_field, policy_value, checkpoint_id) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (thread_id) DO UPDATE SET removed_at = excluded.removed_at, "
                "policy_field = excluded.policy_field, policy_value = excluded.policy_value, "
                "checkpoint_id = excluded.checkpoint_id"
            ),
            (removal.thread_id, removal.removed_at, removal.limit, removal.limit_value, removal.checkpoint_id),
        )

    def find_removal(self, thread_id: str, remembered: bool) -> Plan[tuple[Removal | None, bool]]:
        """The row of the thread, if any, and whether the thread holds a checkpoint (asked only when there is a
        row, or ``remembered``: this process deleted it while it waited). Read outside a transaction.

        Runtime complexity: up to three lookups of a primary key (or of the catalog).
        """
        exists = yield from self.table_exists(REMOVED_TABLE)
        found = None
        if exists:
            rows = yield (
                self.params(
                    "SELECT removed_at, policy_field, policy_value, checkpoint_id "
                    f"FROM {REMOVED_TABLE} WHERE thread_id = ?"
                ),
                (thread_id,),
            )
            if rows:
                removed_at, limit, value, checkpoint_id = rows[0]
                newest = None if checkpoint_id is None else str(checkpoint_id)
                found = Removal(thread_id, float(removed_at), str(limit), float(value), newest)
        if found is None and not remembered:
            return None, False
        rows = yield self.params("SELECT 1 FROM checkpoints WHERE thread_id = ? LIMIT 1"), (thread_id,)
        return found, bool(rows)

    def forget_removal(self, thread_id: str) -> Plan[None]:
        """Delete the thread's row (a new run started it again: its own interrupts resume as any thread's)."""
        yield self.params(f"DELETE FROM {REMOVED_TABLE} WHERE thread_id = ?"), (thread_id,)

    def forget_orphans(self, thread_id: str) -> Plan[None]:
        """Delete the thread's pending writes (and, PostgreSQL, values) if it holds no checkpoint: what a refused
        resume's run wrote before its refusal (in one transaction: a new run's first checkpoint keeps them)."""
        tables = [self.writes_table, "checkpoint_blobs"] if self.has_blobs else [self.writes_table]
        for table in tables:
            yield (
                self.params(
                    f"DELETE FROM {table} WHERE thread_id = ? AND NOT EXISTS "
                    "(SELECT 1 FROM checkpoints WHERE thread_id = ?)"
                ),
                (thread_id, thread_id),
            )

    # --- the schema -----------------------------------------------------------------------------------------------

    def read_schema(self, tables: Sequence[str]) -> Plan[dict[str, Table | None]]:
        """The tables as the database holds them (None: absent)."""
        raise NotImplementedError
        yield  # a plan


# --- driving a plan -------------------------------------------------------------------------------------------------


def drive_sync(cursor: Any, plan: Plan[T]) -> T:
    try:
        sql, parameters = next(plan)
        while True:
            cursor.execute(sql, parameters)
            rows = cursor.fetchall() if cursor.description is not None else []
            sql, parameters = plan.send([tuple(row) for row in rows])
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def drive_async(cursor: Any, plan: Plan[T]) -> T:
    try:
        sql, parameters = next(plan)
        while True:
            await cursor.execute(sql, parameters)
            rows = await cursor.fetchall() if cursor.description is not None else []
            sql, parameters = plan.send([tuple(row) for row in rows])
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


# --- group commits: the rows of many threads' puts and writes ------------------------------------------------------


class GroupRows(NamedTuple):
    """A group commit's rows, by statement, each list in flush order.

    Attributes:
        puts: The checkpoints (the dialect makes their rows: ``checkpoint_rows``).
        upserts: Write rows of batches all of special channels (the saver's ``INSERT ... DO UPDATE``, as its
            ``put_writes`` chooses): ``(thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel,
            type, value)``.
        inserts: Write rows of every other batch (``INSERT ... DO NOTHING``).
    """

    puts: list[BatchPut]
    upserts: list[tuple[Any, ...]]
    inserts: list[tuple[Any, ...]]


def group_rows(items: Iterable[BatchPut | BatchWrites]) -> GroupRows:
    """Split a group commit's items by statement, keeping each statement's rows in flush order.

    Running every upsert before every insert leaves the table as the calls one by one did: for a key, the last
    upsert wins, or, with none, the first insert (an insert never overwrites). Each write row is the saver's own
    (``WRITES_IDX_MAP`` indexes are in the records already, encoded by the saver's serde). Runtime complexity:
    O(rows).
    """
    puts: list[BatchPut] = []
    upserts: list[tuple[Any, ...]] = []
    inserts: list[tuple[Any, ...]] = []
    for item in items:
        if isinstance(item, BatchPut):
            puts.append(item)
            continue
        rows = upserts if all(write.channel in WRITES_IDX_MAP for write in item.writes) else inserts
        rows.extend(
            (
                item.thread_id,
                item.namespace,
                item.checkpoint_id,
                item.task_id,
                item.task_path,
                write.idx,
                write.channel,
                write.value_type,
                write.value_data,
            )
            for write in item.writes
        )
    return GroupRows(puts, upserts, inserts)


def full_checkpoint(put: BatchPut, loads: Any) -> dict[str, Any]:
    """The checkpoint ``put`` is called with when it is replayed: the skeleton with every value decoded (the
    order ``writeback.replay`` gives it). Runtime complexity: decoding it."""
    checkpoint: dict[str, Any] = loads(put.skeleton)
    checkpoint["channel_values"] = {channel: loads(payload) for channel, payload in put.values.items()}
    return checkpoint


def missing_parents(batch: Batch, rows: Iterable[Sequence[Any]]) -> set[str]:
    """The threads of ``batch.parents`` whose checkpoint is not among ``rows`` ``(thread_id, checkpoint_ns,
    checkpoint_id)``. Runtime complexity: O(parents + rows)."""
    found = {(str(row[0]), str(row[1]), str(row[2])) for row in rows}
    return {thread for thread, (namespace, cid) in batch.parents.items() if (thread, namespace, cid) not in found}


# --- shared by the formats ------------------------------------------------------------------------------------------


def scalar(value: object) -> bool:
    """A filter value whose comparison the hot tier can make as the SQL savers do."""
    if value is None or isinstance(value, bool | str):
        return True
    if isinstance(value, int):
        return abs(value) < EXACT_INT
    return isinstance(value, float) and math.isfinite(value)


def by_checkpoint(rows: Iterable[Any], checkpoint_ids: Sequence[str]) -> dict[str, list[WriteRecord]]:
    """Write rows ``(checkpoint_id, task_id, idx, channel, type, value, task_path)`` by checkpoint."""
    found: dict[str, list[WriteRecord]] = {checkpoint_id: [] for checkpoint_id in checkpoint_ids}
    for checkpoint_id, task_id, idx, channel, kind, value, path in rows:
        found[str(checkpoint_id)].append(WriteRecord.of(task_id, int(idx), channel, (kind, bytes(value)), path or ""))
    return found


def schema_differences(expected: Table, found: Table) -> list[str]:
    """What differs between a declared table and the one found, one phrase each (empty: the same).

    Runtime complexity: O(columns).
    """
    differences = []
    for name, (kind, not_null) in expected.columns.items():
        if name not in found.columns:
            differences.append(f"column {name!r} ({kind}{' NOT NULL' if not_null else ''}) is missing")
            continue
        found_kind, found_not_null = found.columns[name]
        if found_kind.lower() != kind.lower():
            differences.append(f"column {name!r} is {found_kind}, expected {kind}")
        if found_not_null != not_null:
            differences.append(
                f"column {name!r} is {'NOT NULL' if found_not_null else 'nullable'}, expected "
                f"{'NOT NULL' if not_null else 'nullable'}"
            )
    for name, (kind, not_null) in found.columns.items():
        if name not in expected.columns:
            differences.append(f"column {name!r} ({kind}{' NOT NULL' if not_null else ''}) is unexpected")
    if tuple(found.primary_key) != tuple(expected.primary_key):
        differences.append(
            f"primary key ({', '.join(found.primary_key)}), expected ({', '.join(expected.primary_key)})"
        )
    return differences


# --- conditional puts: the saver's own put, on a view of it ---------------------------------------------------


def view(saver: S, **fields: Any) -> S:
    """A shallow copy of the saver with some attributes replaced (its lock, its connection, its serde)."""
    view = copy.copy(saver)
    vars(view).update(fields)
    return view


class Serialized:
    """The saver's serde, except that it hands back bytes already made for one object (the checkpoint).

    So that SQLite's put serializes nothing while the file's write lock is held; anything else is
    serialized by the saver's own serde, as ever.
    """

    def __init__(self, serde: Any, value: object, serialized: tuple[str, bytes]) -> None:
        self._serde = serde
        self._value = value
        self._serialized = serialized

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        if obj is self._value:
            return self._serialized
        result: tuple[str, bytes] = self._serde.dumps_typed(obj)
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._serde, name)


def presented(saver: Any, call: ConditionalPut) -> Any:
    return Serialized(saver.serde, call.checkpoint, saver.serde.dumps_typed(call.checkpoint))


class SqlBackend(GenericBackend):
    """A SQL saver family's backend: its tables read and written directly, its schema checked once per saver.

    Attributes:
        dialect: The statements of its tables.
        schema: The tables it reads and writes, as the installed saver's ``setup()`` creates them.
        distribution: The saver's package, whose version an error names.
    """

    exact = True
    tables = True
    first_write_wins = True
    batched = True
    dialect: SqlDialect
    schema: Mapping[str, Table]
    distribution: str

    def __init__(self) -> None:
        self._verified: weakref.WeakSet[Any] = weakref.WeakSet()

    @property
    def sql(self) -> SqlDialect:
        """The statements of its tables."""
        return self.dialect

    def expected(self, saver: Any) -> Mapping[str, Table]:
        """The tables this saver should hold (its version's quirks included)."""
        return self.schema

    def judge(self, saver: Any, found: Mapping[str, Table | None]) -> None:
        """Compare the tables found with the declaration: mark the saver verified, or raise, or (a table absent:
        ``setup()`` not run yet) leave it to the next use.

        Raises:
            SchemaMismatchError: A table differs (naming it, the columns, and the saver's version).
        """
        expected = self.expected(saver)
        if any(found.get(table) is None for table in expected):
            return
        for table, declared in expected.items():
            present = found[table]
            assert present is not None
            differences = schema_differences(declared, present)
            if differences:
                raise SchemaMismatchError(type(saver).__name__, table, differences, self.version())
        self._verified.add(saver)

    def verified(self, saver: Any) -> bool:
        """Whether the saver's tables were found as declared. Runtime complexity: O(1)."""
        return saver in self._verified

    def version(self) -> str:
        """The installed saver package and its version."""
        try:
            return f"{self.distribution} {importlib.metadata.version(self.distribution)}"
        except importlib.metadata.PackageNotFoundError:
            return f"{self.distribution} (version unknown)"

    # --- a thread's size (appended: ``TieredSaver.thread_storage``) ------------------------------------------

    def storage(self, saver: Any, thread_id: str) -> ThreadStorage:
        """The bytes a thread occupies in the saver's tables (``storage_plan``), read without a transaction.

        Runtime complexity: one aggregate query per table over the thread's rows (its primary key's prefix).
        """
        return self.run_sync(saver, storage_plan(self.dialect, thread_id), transaction=False)

    async def astorage(self, saver: Any, thread_id: str) -> ThreadStorage:
        """``storage`` for an async saver, on its own loop."""
        return await self.run_async(saver, storage_plan(self.dialect, thread_id), transaction=False)


def storage_plan(dialect: SqlDialect, thread_id: str) -> Plan[ThreadStorage]:
    """Sums of a thread's rows, one aggregate statement per table, each bounded by the thread's primary-key prefix:
    checkpoints (count, namespaces, bytes), pending writes (count, bytes) and, where values live apart
    (PostgreSQL's ``checkpoint_blobs``), channel values grouped by channel.

    Bytes are the dialect's measures, the ones retention's removals report: SQLite's ``length()`` of each
    payload (a SQLite checkpoint carries its channel values inline, so they count in ``checkpoint_bytes`` and
    ``by_channel`` stays empty); PostgreSQL's ``pg_column_size()``, the bytes stored after its own compression.

    Runtime complexity: O(the thread's rows) in the database, 2 or 3 statements.
    """
    rows = yield (
        dialect.params(
            f"SELECT count(*), count(DISTINCT checkpoint_ns), coalesce(sum({dialect.checkpoint_bytes}), 0) "
            "FROM checkpoints WHERE thread_id = ?"
        ),
        (thread_id,),
    )
    checkpoints, namespaces, checkpoint_bytes = rows[0]
    rows = yield (
        dialect.params(
            f"SELECT count(*), coalesce(sum({dialect.write_bytes}), 0) FROM {dialect.writes_table} WHERE thread_id = ?"
        ),
        (thread_id,),
    )
    writes, write_bytes = rows[0]
    by_channel: dict[str, int] = {}
    values = 0
    if dialect.has_blobs:
        rows = yield (
            dialect.params(
                "SELECT channel, count(*), coalesce(sum(pg_column_size(blob)), 0) FROM checkpoint_blobs "
                "WHERE thread_id = ? GROUP BY channel ORDER BY channel"
            ),
            (thread_id,),
        )
        for channel, count, nbytes in rows:
            by_channel[str(channel)] = int(nbytes)
            values += int(count)
    return ThreadStorage(
        thread_id,
        "durable",
        namespaces=int(namespaces),
        checkpoints=int(checkpoints),
        checkpoint_bytes=int(checkpoint_bytes),
        channel_values=values,
        channel_bytes=sum(by_channel.values()),
        by_channel=by_channel,
        pending_writes=int(writes),
        pending_write_bytes=int(write_bytes),
    )


class CheckpointSizes(NamedTuple):
    """A thread's bytes checkpoint by checkpoint, for ``RetentionPolicy.max_thread_bytes`` to plan a prune with.

    Attributes:
        own: (namespace, checkpoint id) -> bytes of its row and of its pending writes.
        refs: (namespace, checkpoint id) -> the (channel, version) of each value it uses (PostgreSQL; empty for
            SQLite, whose rows carry their values).
        values: (namespace, channel, version) -> bytes of that stored value (PostgreSQL's ``checkpoint_blobs``).
    """

    own: dict[tuple[str, str], int]
    refs: dict[tuple[str, str], set[tuple[str, str]]]
    values: dict[tuple[str, str, str], int]

    def kept_bytes(self, kept: Iterable[tuple[str, str]]) -> int:
        """The bytes the thread would hold with only ``kept`` checkpoints: theirs and each value they use once.
        Runtime complexity: O(kept checkpoints x channels)."""
        total, used = 0, set[tuple[str, str, str]]()
        for key in kept:
            total += self.own.get(key, 0)
            used.update((key[0], channel, version) for channel, version in self.refs.get(key, ()))
        return total + sum(self.values.get(value, 0) for value in used)


def sizes_plan(dialect: SqlDialect, thread_id: str) -> Plan[CheckpointSizes]:
    """Each checkpoint's bytes (its row, its pending writes, and on PostgreSQL the values it uses), in the
    dialect's measures (``storage_plan``'s). Runtime complexity: O(the thread's rows), 2 or 3 statements."""
    versions = ", checkpoint -> 'channel_versions'" if dialect.has_blobs else ""
    rows = yield (
        dialect.params(
            f"SELECT checkpoint_ns, checkpoint_id, {dialect.checkpoint_bytes}{versions} FROM checkpoints "
            "WHERE thread_id = ?"
        ),
        (thread_id,),
    )
    own = {(str(row[0]), str(row[1])): int(row[2] or 0) for row in rows}
    refs = (
        {(str(row[0]), str(row[1])): {(str(c), str(v)) for c, v in (row[3] or {}).items()} for row in rows}
        if dialect.has_blobs
        else {}
    )
    rows = yield (
        dialect.params(
            f"SELECT checkpoint_ns, checkpoint_id, coalesce(sum({dialect.write_bytes}), 0) FROM "
            f"{dialect.writes_table} WHERE thread_id = ? GROUP BY checkpoint_ns, checkpoint_id"
        ),
        (thread_id,),
    )
    for namespace, checkpoint_id, nbytes in rows:
        key = (str(namespace), str(checkpoint_id))
        if key in own:  # writes of a checkpoint not stored (yet, or any more) go with no prune
            own[key] += int(nbytes)
    values: dict[tuple[str, str, str], int] = {}
    if dialect.has_blobs:
        rows = yield (
            dialect.params(
                "SELECT checkpoint_ns, channel, version, pg_column_size(blob) FROM checkpoint_blobs WHERE thread_id = ?"
            ),
            (thread_id,),
        )
        values = {(str(ns), str(channel), str(version)): int(nbytes or 0) for ns, channel, version, nbytes in rows}
    return CheckpointSizes(own, refs, values)
