"""The durable savers the tiered saver knows, one module per family, behind one small interface (``Backend``).

A newcomer finds each durable saver family in one file:

* ``sqlite``: ``SqliteSaver`` and ``AsyncSqliteSaver`` (their connection, lock, SQL, format and tables);
* ``postgres``: ``PostgresSaver`` and ``AsyncPostgresSaver`` (one connection, one in pipeline mode, or a pool);
* ``generic``: any other ``BaseCheckpointSaver``, read and written through its public API, and
  ``InMemorySaver``, whose dicts it reads;
* ``sql``: what the two SQL families share (the statements over LangGraph's same-named tables, the drivers
  that run a plan of them, the check of a saver's tables against its module's declaration).

``base`` holds the interface and the values it passes (``Plan``, ``Removed``, ``Skeleton``, ``Newest``,
``Removal``, ``Table``: import them from there); this module picks a saver's backend (``backend_for(saver)``)
and runs a plan on it (``run_sync``, ``run_async``). Nothing outside ``backends/``
writes SQL or touches a durable saver's connection (``tests/contract/test_architecture.py`` fails otherwise).

**Pinned schema.** Each SQL module declares the tables it reads and writes (``SCHEMA``: table, columns, primary
key) as the installed LangGraph saver's ``setup()`` creates them (``tests/tiered/test_backend_schema.py``
compares them). Before the tiered saver's own SQL first runs against a saver, its tables are read back and
compared (at ``TieredSaver``'s construction for a sync saver whose tables exist, else at the first use:
``verify``); a difference raises ``SchemaMismatchError`` naming the table, the columns, and the installed
saver's version, and nothing of ours runs against those tables.
"""

from __future__ import annotations

import functools
from typing import Any, TypeVar

from langgraph.checkpoint.base import BaseCheckpointSaver

from .base import Backend, Kind, Plan, SchemaMismatchError, kind_of
from .generic import GenericBackend, MemoryBackend
from .postgres import PostgresBackend
from .sql import SqlDialect
from .sqlite import SqliteBackend

__all__ = [
    "SchemaMismatchError",
    "backend_for",
    "backend_of",
    "dialect_of",
    "format_of",
    "kind_of",
    "run_async",
    "run_sync",
]

T = TypeVar("T")


# --- which backend --------------------------------------------------------------------------------------------------


@functools.cache
def _backends() -> dict[Kind, Backend]:
    sqlite, postgres = SqliteBackend(), PostgresBackend()
    backends: dict[Kind, Backend] = {
        "sqlite": sqlite,
        "async_sqlite": sqlite,
        "postgres": postgres,
        "async_postgres": postgres,
        "memory": MemoryBackend(),
        "other": GenericBackend(),
    }
    return backends


def backend_of(kind: Kind) -> Backend:
    """The backend of a saver kind. Runtime complexity: O(1)."""
    return _backends()[kind]


def backend_for(saver: BaseCheckpointSaver[Any]) -> Backend:
    """The backend of a durable saver. Runtime complexity: O(1)."""
    return backend_of(kind_of(saver))


format_of = backend_for
"""The backend as the hot tier uses it: the saver's format (metadata, filters, digests)."""


def dialect_of(kind: Kind) -> SqlDialect | None:
    """The SQL statements of a durable saver's kind, or None for a saver read through its API."""
    found = backend_of(kind).sql
    assert found is None or isinstance(found, SqlDialect)
    return found


def run_sync(saver: Any, kind: Kind, plan: Plan[T], *, transaction: bool = True) -> T:
    """Run a plan on a sync SQLite or PostgreSQL saver, in one transaction (or, for reads, without one).

    Raises:
        SchemaMismatchError: The saver's tables are not the declared ones (checked at the first use).
        Exception: The database's failure; the transaction was rolled back.

    Runtime complexity: the statements'.
    """
    return backend_of(kind).run_sync(saver, plan, transaction=transaction)


async def run_async(saver: Any, kind: Kind, plan: Plan[T], *, transaction: bool = True) -> T:
    """``run_sync`` for ``AsyncSqliteSaver`` and ``AsyncPostgresSaver``, on the saver's own loop."""
    return await backend_of(kind).run_async(saver, plan, transaction=transaction)
