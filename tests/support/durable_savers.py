"""Helpers of the tiered-storage tests (no tests here): a SQLite saver whose failures, delays and calls a test
controls, a saver of a kind the tier does not know, and the PostgreSQL cluster of
``tests/support/postgres_server.py`` (one that can be stopped and started again; a test that cannot start one is
skipped saying so loudly, or fails where CI requires PostgreSQL) with the connections its tests open.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver

from tests.support.postgres_server import PostgresCluster, running_cluster, set_up

__all__ = [
    "ControlledSqlite",
    "ForeignSaver",
    "PostgresCluster",
    "clean",
    "cluster_fixture",
    "connect",
    "postgres_saver",
    "running_cluster",
    "set_up",
    "sqlite_durable",
]


class ControlledSqlite(SqliteSaver):
    """A file-backed ``SqliteSaver`` that counts its calls, and fails or waits when a test says so.

    Attributes:
        calls: Calls by method name.
        failing: While set, every call raises ``sqlite3.OperationalError`` (as a lost disk would).
        gate: Calls of the methods in ``gated`` wait until it is set.
        gated: Method names that wait for ``gate``.
        entered: Set when a gated call starts waiting.
        held: Method names (reads) whose calls read first, then wait for ``release`` before returning what
            they read: a read that began before a write and lands after it.
        holding: Set when a held call has read and waits.
        release: Held calls return once it is set.
        unstorable: Thread ids whose puts and put_writes fail as a value the saver cannot store would
            (``TypeError``), while other threads' go through.
        unreachable: Thread ids whose puts and put_writes fail as a lost connection would
            (``sqlite3.OperationalError``), while other threads' go through.
        delay: Seconds every call takes first (a slow tier; 0: none).
    """

    def __init__(self, path: Path) -> None:
        super().__init__(sqlite3.connect(path, check_same_thread=False))
        self.calls: Counter[str] = Counter()
        self.failing = False
        self.gate = threading.Event()
        self.gate.set()
        self.gated: set[str] = set()
        self.entered = threading.Event()
        self.held: set[str] = set()
        self.holding = threading.Event()
        self.release = threading.Event()
        self.unstorable: set[str] = set()
        self.unreachable: set[str] = set()
        self.delay = 0.0

    def close_gate(self, *names: str) -> None:
        """From now on, calls of ``names`` wait until the test sets ``gate`` (``entered`` is set when one waits)."""
        self.gated = set(names)
        self.gate.clear()

    def _hold(self, name: str, result: Any) -> Any:
        if name in self.held:
            self.held.discard(name)  # one call is held: the reads after it go through
            self.holding.set()
            assert self.release.wait(60), f"the test never released the held {name}"
        return result

    def _enter(self, name: str) -> None:
        self.calls[name] += 1
        if self.delay:
            time.sleep(self.delay)  # a slow tier, not a synchronisation
        if name in self.gated:
            self.entered.set()
            assert self.gate.wait(60), f"the test never opened the gate of {name}"
        if self.failing:
            raise sqlite3.OperationalError(f"disk I/O error (simulated, in {name})")

    def get_tuple(self, config: Any) -> Any:
        self._enter("get_tuple")
        return self._hold("get_tuple", super().get_tuple(config))

    def list(self, config: Any, **kwargs: Any) -> Any:
        self._enter("list")
        return iter(self._hold("list", list(super().list(config, **kwargs))))

    def _refuse_unstorable(self, config: Any) -> None:
        if config["configurable"]["thread_id"] in self.unstorable:
            raise TypeError("Object of type datetime is not JSON serializable (simulated)")
        if config["configurable"]["thread_id"] in self.unreachable:
            raise sqlite3.OperationalError("unable to open database file (simulated)")

    def put(self, *args: Any) -> Any:
        self._enter("put")
        self._refuse_unstorable(args[0])
        return super().put(*args)

    def put_writes(self, *args: Any, **kwargs: Any) -> None:
        self._enter("put_writes")
        self._refuse_unstorable(args[0])
        super().put_writes(*args, **kwargs)

    def delete_thread(self, thread_id: str) -> None:
        self._enter("delete_thread")
        super().delete_thread(thread_id)

    def get_delta_channel_history(self, **kwargs: Any) -> Any:
        self._enter("get_delta_channel_history")
        return super().get_delta_channel_history(**kwargs)


def sqlite_durable(path: Path) -> SqliteSaver:
    """A plain ``SqliteSaver`` on a file."""
    return SqliteSaver(sqlite3.connect(path, check_same_thread=False))


class ForeignSaver(BaseCheckpointSaver[str]):
    """A durable saver of a kind the tiered saver has no SQL for and does not know: LangGraph's ``InMemorySaver``
    behind the ``BaseCheckpointSaver`` API alone."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = InMemorySaver()

    def get_tuple(self, config: Any) -> Any:
        return self.inner.get_tuple(config)

    def list(self, config: Any, **kwargs: Any) -> Any:
        return self.inner.list(config, **kwargs)

    def put(self, *args: Any) -> Any:
        return self.inner.put(*args)

    def put_writes(self, *args: Any, **kwargs: Any) -> None:
        self.inner.put_writes(*args, **kwargs)

    def delete_thread(self, thread_id: str) -> None:
        self.inner.delete_thread(thread_id)

    def get_next_version(self, current: Any, channel: None) -> Any:
        return self.inner.get_next_version(current, channel)


# --- PostgreSQL -------------------------------------------------------------------------------------------------------


def cluster_fixture(what: str, name: str = "cluster") -> Any:
    """A module-scoped fixture (named ``name``): a running cluster with LangGraph's tables for the tests of
    ``what``, removed after the module; without a server, the tests are skipped (or fail where CI requires
    PostgreSQL) saying so. Assign it in a test module: ``cluster = cluster_fixture("the ... tests")``."""

    @pytest.fixture(scope="module", name=name)
    def fixture() -> Iterator[PostgresCluster]:
        for running in running_cluster(what):
            set_up(running.conninfo)
            yield running

    return fixture


def connect(conninfo: str) -> Any:
    """A ``psycopg`` connection set up as ``PostgresSaver`` wants it (autocommit, dict rows, no prepared statements)."""
    from psycopg import Connection
    from psycopg.rows import dict_row

    return Connection.connect(conninfo, autocommit=True, prepare_threshold=0, row_factory=dict_row)


def postgres_saver(conninfo: str) -> Any:
    """A ``PostgresSaver`` on a connection of its own."""
    from langgraph.checkpoint.postgres import PostgresSaver

    return PostgresSaver(connect(conninfo))


def clean(conninfo: str) -> None:
    """Empty LangGraph's tables: what one test stored does not reach the next."""
    with connect(conninfo) as connection:
        for table in ("checkpoints", "checkpoint_writes", "checkpoint_blobs"):
            connection.execute(f"DELETE FROM {table}")
