"""The tables each SQL backend declares are the ones the installed LangGraph saver creates, and a durable saver
whose tables differ is refused before any SQL of ours runs on them (issue 33, deliverable 2).

* The declaration (``backends/sqlite.py``'s and ``backends/postgres.py``'s ``SCHEMA``) against the installed
  saver's ``setup()`` on a fresh database, read back with ``PRAGMA table_info`` or ``information_schema``: a
  LangGraph release that changes a table fails here, not in a user's data.
* ``TieredSaver`` over a sync saver whose tables differ: refused at construction, naming the table, the column
  and the installed saver's version. Over tables not created yet, or an async saver: refused at the first use
  of our own SQL (a conditional put, a retention pass), with nothing written.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator, Mapping
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from langgraph.checkpoint.bounded import RetentionPolicy, SchemaMismatchError, TieredSaver, WriteThrough
from langgraph.checkpoint.bounded.tiered.backends import postgres as postgres_backend
from langgraph.checkpoint.bounded.tiered.backends import sqlite as sqlite_backend
from langgraph.checkpoint.bounded.tiered.backends.base import Table, declared_tables
from langgraph.checkpoint.bounded.tiered.backends.sql import drive_sync, schema_differences
from tests.support.durable_savers import PostgresCluster, running_cluster
from tests.support.tiered import put_chain

SQLITE_VERSION = f"langgraph-checkpoint-sqlite {version('langgraph-checkpoint-sqlite')}"
POSTGRES_VERSION = f"langgraph-checkpoint-postgres {version('langgraph-checkpoint-postgres')}"

# LangGraph's SQLite tables without ``checkpoints.type``: a release that dropped or renamed a column.
CHECKPOINTS_WITHOUT_TYPE = """
CREATE TABLE checkpoints (thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL DEFAULT '',
    checkpoint_id TEXT NOT NULL, parent_checkpoint_id TEXT, checkpoint BLOB, metadata BLOB,
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id));
"""
# ...and with an extra NOT NULL column: a release whose puts write a column our statements know nothing of.
CHECKPOINTS_WITH_A_NEW_COLUMN = """
CREATE TABLE checkpoints (thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL DEFAULT '',
    checkpoint_id TEXT NOT NULL, parent_checkpoint_id TEXT, type TEXT, checkpoint BLOB, metadata BLOB,
    run_id TEXT NOT NULL, PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id));
"""


def sqlite_tables(path: Path) -> dict[str, Table | None]:
    with sqlite3.connect(path) as connection:
        cursor = connection.cursor()
        return drive_sync(cursor, sqlite_backend.SqliteDialect().read_schema(list(sqlite_backend.SCHEMA)))


def set_up_sqlite(path: Path, *, checkpoints: str | None = None) -> None:
    """LangGraph's tables as the installed saver makes them, ``checkpoints`` made first as given (if given)."""
    connection = sqlite3.connect(path, check_same_thread=False)
    if checkpoints is not None:
        connection.executescript(checkpoints)
    SqliteSaver(connection).setup()
    connection.close()


def assert_as_declared(schema: Mapping[str, Table], found: Mapping[str, Table | None], release: str) -> None:
    """Every table a backend declares was created by ``release``'s ``setup()``, exactly as declared."""
    for table, declared in schema.items():
        present = found[table]
        assert present is not None, f"{release}'s setup() created no table {table!r}"
        assert schema_differences(declared, present) == [], (table, release)


def count_rows(path: Path, table: str) -> int:
    with sqlite3.connect(path) as connection:
        return int(connection.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


# --- the declarations ----------------------------------------------------------------------------------------------


def test_sqlite_declares_the_tables_the_installed_saver_creates(tmp_path: Path) -> None:
    path = tmp_path / "fresh.db"
    set_up_sqlite(path)
    assert_as_declared(sqlite_backend.SCHEMA, sqlite_tables(path), SQLITE_VERSION)


@pytest.mark.parametrize(
    ("mutate", "difference"),
    [
        (lambda columns: columns.pop("type"), "column 'type' (TEXT) is unexpected"),
        (lambda columns: columns.update(type=("BLOB", False)), "column 'type' is TEXT, expected BLOB"),
        (lambda columns: columns.update(type=("TEXT", True)), "column 'type' is nullable, expected NOT NULL"),
        (lambda columns: columns.update(run_id=("TEXT", True)), "column 'run_id' (TEXT NOT NULL) is missing"),
    ],
)
def test_a_changed_declaration_is_found_different(tmp_path: Path, mutate: Any, difference: str) -> None:
    """What the comparison above would say if a LangGraph release changed ``checkpoints`` (here the declaration
    changes instead): every kind of difference is named."""
    path = tmp_path / "fresh.db"
    set_up_sqlite(path)
    declared = sqlite_backend.SCHEMA["checkpoints"]
    columns = dict(declared.columns)
    mutate(columns)
    present = sqlite_tables(path)["checkpoints"]
    assert present is not None
    assert difference in schema_differences(Table(columns, declared.primary_key), present)


def test_a_changed_primary_key_is_found_different(tmp_path: Path) -> None:
    path = tmp_path / "fresh.db"
    set_up_sqlite(path)
    declared = sqlite_backend.SCHEMA["writes"]
    present = sqlite_tables(path)["writes"]
    assert present is not None
    changed = Table(declared.columns, declared.primary_key[:-1])
    assert schema_differences(changed, present) == [
        "primary key (thread_id, checkpoint_ns, checkpoint_id, task_id, idx), expected "
        "(thread_id, checkpoint_ns, checkpoint_id, task_id)"
    ]


# --- SQLite: refused --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("checkpoints", "difference"),
    [
        (CHECKPOINTS_WITHOUT_TYPE, "column 'type' (TEXT) is missing"),
        (CHECKPOINTS_WITH_A_NEW_COLUMN, "column 'run_id' (TEXT NOT NULL) is unexpected"),
    ],
)
def test_a_sqlite_saver_whose_table_differs_is_refused_at_construction(
    tmp_path: Path, checkpoints: str, difference: str
) -> None:
    path = tmp_path / "changed.db"
    set_up_sqlite(path, checkpoints=checkpoints)
    durable = SqliteSaver(sqlite3.connect(path, check_same_thread=False))
    with pytest.raises(SchemaMismatchError) as refused:
        TieredSaver(durable, retention=RetentionPolicy(idle_ttl_seconds=3600))
    message = str(refused.value)
    assert "SqliteSaver's table 'checkpoints'" in message and difference in message and SQLITE_VERSION in message
    assert refused.value.table == "checkpoints" and isinstance(refused.value, ValueError)
    with sqlite3.connect(path) as connection:  # retention's index was not made: none of our SQL ran
        names = {str(row[0]) for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert not any(name.startswith("bounded_retention") for name in names)


def test_a_sqlite_saver_with_the_installed_tables_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "fresh.db"
    set_up_sqlite(path)
    saver = TieredSaver(
        SqliteSaver(sqlite3.connect(path, check_same_thread=False)), write=WriteThrough(processes="many")
    )
    put_chain(saver, "t", 2)
    assert count_rows(path, "checkpoints") == 2


WRITES_BEFORE_TASK_PATH = """
CREATE TABLE checkpoints (thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL DEFAULT '',
    checkpoint_id TEXT NOT NULL, parent_checkpoint_id TEXT, type TEXT, checkpoint BLOB, metadata BLOB,
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id));
CREATE TABLE writes (thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL DEFAULT '', checkpoint_id TEXT NOT NULL,
    task_id TEXT NOT NULL, idx INTEGER NOT NULL, channel TEXT NOT NULL, type TEXT, value BLOB,
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx));
"""


def test_a_sqlite_database_older_than_task_path_is_accepted_once_setup_migrates_it(tmp_path: Path) -> None:
    """``SqliteSaver.setup()`` adds ``writes.task_path`` to an older database: not a mismatch at construction
    (before the saver's set-up), checked at the first use, after it."""
    path = tmp_path / "older.db"
    with sqlite3.connect(path) as connection:
        connection.executescript(WRITES_BEFORE_TASK_PATH)
    saver = TieredSaver(
        SqliteSaver(sqlite3.connect(path, check_same_thread=False)), write=WriteThrough(processes="many")
    )
    put_chain(saver, "t", 1)
    assert count_rows(path, "checkpoints") == 1
    written = sqlite_tables(path)["writes"]
    assert written is not None and "task_path" in written.columns


def test_tables_made_after_construction_are_checked_at_the_first_conditional_put(tmp_path: Path) -> None:
    """No tables at construction (``setup()`` not called yet): the check waits for our first SQL."""
    path = tmp_path / "later.db"
    durable = SqliteSaver(sqlite3.connect(path, check_same_thread=False))
    saver = TieredSaver(durable, write=WriteThrough(processes="many"))  # nothing to check yet: accepted
    set_up_sqlite(path, checkpoints=CHECKPOINTS_WITHOUT_TYPE)
    with pytest.raises(SchemaMismatchError, match="column 'type' \\(TEXT\\) is missing"):
        put_chain(saver, "t", 1)
    assert count_rows(path, "checkpoints") == 0  # refused before the put


def test_tables_made_after_construction_are_checked_at_the_first_retention_pass(tmp_path: Path) -> None:
    path = tmp_path / "later.db"
    durable = SqliteSaver(sqlite3.connect(path, check_same_thread=False))
    saver = TieredSaver(durable, retention=RetentionPolicy(idle_ttl_seconds=3600))
    set_up_sqlite(path, checkpoints=CHECKPOINTS_WITH_A_NEW_COLUMN)
    with pytest.raises(SchemaMismatchError, match="'run_id' \\(TEXT NOT NULL\\) is unexpected"):
        saver.sweep()


def test_an_async_sqlite_saver_is_checked_at_its_first_conditional_put(tmp_path: Path) -> None:
    """An async saver's connection belongs to its loop: the check runs there, before the first put's SQL."""
    path = tmp_path / "changed.db"
    set_up_sqlite(path, checkpoints=CHECKPOINTS_WITHOUT_TYPE)

    async def scenario() -> None:
        async with AsyncSqliteSaver.from_conn_string(str(path)) as durable:
            saver = TieredSaver(durable, write=WriteThrough(processes="many"))  # accepted: checked at the first use
            with pytest.raises(SchemaMismatchError, match=f"table 'checkpoints'.*{SQLITE_VERSION}"):
                await asyncio.to_thread(put_chain, saver, "t", 1)

    asyncio.run(scenario())
    assert count_rows(path, "checkpoints") == 0


# --- PostgreSQL ----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster() -> Iterator[PostgresCluster]:
    yield from running_cluster("the backend schema PostgreSQL tests")


def in_schema(cluster: PostgresCluster, name: str) -> str:
    """A connection string whose tables are made in a fresh schema of their own (a fresh database for LangGraph)."""
    from psycopg import Connection

    with Connection.connect(cluster.conninfo, autocommit=True) as connection:
        connection.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
        connection.execute(f"CREATE SCHEMA {name}")
    return f"{cluster.conninfo} options='-c search_path={name}'"


def connect(conninfo: str) -> Any:
    from psycopg import Connection
    from psycopg.rows import dict_row

    return Connection.connect(conninfo, autocommit=True, prepare_threshold=0, row_factory=dict_row)


def set_up_postgres(conninfo: str, *after: str) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    with connect(conninfo) as connection:
        PostgresSaver(connection).setup()
        for statement in after:
            connection.execute(statement)


def postgres_tables(conninfo: str) -> dict[str, Table | None]:
    from psycopg import Connection

    with Connection.connect(conninfo, autocommit=True) as connection, connection.cursor() as cursor:
        dialect = postgres_backend.PostgresDialect()
        return drive_sync(cursor, dialect.read_schema(list(postgres_backend.SCHEMA)))


def test_postgres_declares_the_tables_the_installed_saver_creates(cluster: PostgresCluster) -> None:
    conninfo = in_schema(cluster, "fresh")
    assert all(table is None for table in postgres_tables(conninfo).values())  # a fresh schema: nothing yet
    set_up_postgres(conninfo)
    assert_as_declared(postgres_backend.SCHEMA, postgres_tables(conninfo), POSTGRES_VERSION)


def test_a_changed_postgres_declaration_is_found_different(cluster: PostgresCluster) -> None:
    conninfo = in_schema(cluster, "declared")
    set_up_postgres(conninfo)
    declared = postgres_backend.SCHEMA["checkpoint_writes"]
    present = postgres_tables(conninfo)["checkpoint_writes"]
    assert present is not None
    changed = Table({**declared.columns, "blob": ("bytea", False)}, declared.primary_key)
    assert schema_differences(changed, present) == ["column 'blob' is NOT NULL, expected nullable"]


def test_a_postgres_saver_whose_table_differs_is_refused_at_construction(cluster: PostgresCluster) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    conninfo = in_schema(cluster, "changed")
    set_up_postgres(conninfo, "ALTER TABLE checkpoint_writes DROP COLUMN task_path")
    with connect(conninfo) as connection, pytest.raises(SchemaMismatchError) as refused:
        TieredSaver(PostgresSaver(connection), write=WriteThrough(processes="many"))
    message = str(refused.value)
    assert "PostgresSaver's table 'checkpoint_writes'" in message and POSTGRES_VERSION in message
    assert "column 'task_path' (text NOT NULL) is missing" in message


def test_a_postgres_saver_with_the_installed_tables_is_accepted(cluster: PostgresCluster) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    conninfo = in_schema(cluster, "accepted")
    set_up_postgres(conninfo)
    with connect(conninfo) as connection:
        saver = TieredSaver(PostgresSaver(connection), write=WriteThrough(processes="many"))
        put_chain(saver, "t", 2)
        assert connection.execute("SELECT count(*) AS n FROM checkpoints").fetchone()["n"] == 2


def test_an_async_postgres_saver_is_checked_at_its_first_conditional_put(cluster: PostgresCluster) -> None:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    conninfo = in_schema(cluster, "changed_async")
    set_up_postgres(conninfo, "ALTER TABLE checkpoints ADD COLUMN run_id TEXT NOT NULL DEFAULT ''")

    async def scenario() -> None:
        async with AsyncPostgresSaver.from_conn_string(conninfo) as durable:
            saver = TieredSaver(durable, write=WriteThrough(processes="many"))  # accepted: checked at the first use
            with pytest.raises(SchemaMismatchError, match="'run_id' \\(text NOT NULL\\) is unexpected"):
                await asyncio.to_thread(put_chain, saver, "t", 1)

    asyncio.run(scenario())
    with connect(conninfo) as connection:
        assert connection.execute("SELECT count(*) AS n FROM checkpoints").fetchone()["n"] == 0


def test_a_declaration_reads_as_the_saver_creates_its_tables() -> None:
    """``declared_tables``: columns in order, NOT NULL as declared, the primary key; a malformed declaration is
    refused naming the table (a typo must not pass as a column no saver has)."""
    tables = declared_tables("t (a TEXT NOT NULL, b BLOB, PRIMARY KEY (a, b)) u (c integer NOT NULL, PRIMARY KEY (c))")
    assert list(tables) == ["t", "u"]
    assert list(tables["t"].columns.items()) == [("a", ("TEXT", True)), ("b", ("BLOB", False))]
    assert tables["t"].primary_key == ("a", "b") and tables["u"].primary_key == ("c",)
    with pytest.raises(ValueError, match="table t: no PRIMARY KEY"):
        declared_tables("t (a TEXT)")
    with pytest.raises(ValueError, match="table t: column declaration 'a TEXT NULL NOT'"):
        declared_tables("t (a TEXT NULL NOT, PRIMARY KEY (a))")
