"""Helpers of the tiered-storage tests (no tests here): a PostgreSQL cluster that can be stopped and
started again, and a SQLite saver whose failures, delays and calls a test controls.

The cluster uses the distribution's binaries as ``tests/postgres_server.py`` does (run as the
``postgres`` user when the tests run as root, a Unix socket only); a test that cannot start one is
skipped saying so loudly, never silently.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import tempfile
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver

from tests.postgres_server import PORT, ServerUnavailable, _as_server_user, _binaries

__all__ = ["ControlledSqlite", "PostgresCluster", "running_cluster", "set_up", "sqlite_durable"]

SKIP_MESSAGE = "NO POSTGRESQL SERVER COULD BE STARTED, the tiered PostgreSQL tests did not run: {error}"


class PostgresCluster:
    """A throwaway PostgreSQL cluster in a temporary folder that can be stopped and started again.

    Args:
        fsync: Whether the server syncs to disk (off for tests, on for benchmarks).
    """

    def __init__(self, *, fsync: bool = False) -> None:
        self.binaries = _binaries()
        self.folder = Path(tempfile.mkdtemp(prefix="pg-tiered-"))
        self.data = self.folder / "data"
        self.fsync = fsync
        if os.geteuid() == 0:
            shutil.chown(self.folder, "postgres", "postgres")
        done = self._run("initdb", "-D", self.data, "-U", "postgres", "--auth=trust", "--no-sync")
        if done.returncode:
            self.remove()
            raise ServerUnavailable(f"initdb failed: {done.stderr.strip()[-500:]}")

    @property
    def conninfo(self) -> str:
        """The connection string (a Unix socket in the cluster's folder)."""
        return f"host={self.folder} port={PORT} user=postgres dbname=postgres"

    def _run(self, program: str, *arguments: object) -> subprocess.CompletedProcess[str]:
        command = _as_server_user([str(self.binaries / program), *(str(a) for a in arguments)])
        return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        options = f"-c listen_addresses='' -k {self.folder} -p {PORT} -c fsync={'on' if self.fsync else 'off'}"
        done = self._run("pg_ctl", "-D", self.data, "-o", options, "-w", "-t", "60", "start", "-l", self.folder / "log")
        if done.returncode:
            log = (self.folder / "log").read_text() if (self.folder / "log").exists() else ""
            raise ServerUnavailable(f"pg_ctl start failed: {done.stderr.strip()[-300:]} {log[-500:]}")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``fast``: disconnect the clients, roll back what they had under way)."""
        self._run("pg_ctl", "-D", self.data, "-m", mode, "-w", "stop")

    def remove(self) -> None:
        """Stop the server if it runs, and delete the cluster."""
        if (self.data / "postmaster.pid").exists():
            self.stop("immediate")
        shutil.rmtree(self.folder, ignore_errors=True)


def running_cluster(*, fsync: bool = False) -> Iterator[PostgresCluster]:
    """A running cluster, removed afterwards; the test is skipped, loudly, without one (use in a fixture)."""
    try:
        cluster = PostgresCluster(fsync=fsync)
        cluster.start()
    except ServerUnavailable as error:
        pytest.skip(SKIP_MESSAGE.format(error=error))
    try:
        yield cluster
    finally:
        cluster.remove()


def set_up(conninfo: str) -> str:
    """Create LangGraph's tables in the cluster; return the connection string."""
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(conninfo) as saver:
        saver.setup()
    return conninfo


class ControlledSqlite(SqliteSaver):
    """A file-backed ``SqliteSaver`` that counts its calls, and fails or waits when a test says so.

    Attributes:
        calls: Calls by method name.
        failing: While set, every call raises ``sqlite3.OperationalError`` (as a lost disk would).
        gate: Calls of the methods in ``gated`` wait until it is set.
        gated: Method names that wait for ``gate``.
        entered: Set when a gated call starts waiting.
    """

    def __init__(self, path: Path) -> None:
        super().__init__(sqlite3.connect(path, check_same_thread=False))
        self.calls: Counter[str] = Counter()
        self.failing = False
        self.gate = threading.Event()
        self.gate.set()
        self.gated: set[str] = set()
        self.entered = threading.Event()

    def _enter(self, name: str) -> None:
        self.calls[name] += 1
        if name in self.gated:
            self.entered.set()
            assert self.gate.wait(60), f"the test never opened the gate of {name}"
        if self.failing:
            raise sqlite3.OperationalError(f"disk I/O error (simulated, in {name})")

    def get_tuple(self, config: Any) -> Any:
        self._enter("get_tuple")
        return super().get_tuple(config)

    def list(self, config: Any, **kwargs: Any) -> Any:
        self._enter("list")
        return super().list(config, **kwargs)

    def put(self, *args: Any) -> Any:
        self._enter("put")
        return super().put(*args)

    def put_writes(self, *args: Any, **kwargs: Any) -> None:
        self._enter("put_writes")
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
