"""A throwaway PostgreSQL server for tests: initdb in a temporary folder, a Unix socket only.

It uses the distribution's PostgreSQL binaries (``/usr/lib/postgresql/*/bin``),
run as the ``postgres`` system user when the tests run as root (PostgreSQL
refuses to run as root). No TCP port is opened.

Where no server can be started, the tests that need one are skipped with a
loud message, unless ``BOUNDED_TESTS_REQUIRE_POSTGRES=1`` (CI sets it once it
has installed PostgreSQL): then they fail, so that a broken installation is
never a silent skip.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import pytest

__all__ = ["PORT", "PostgresCluster", "ServerUnavailable", "running_cluster", "set_up", "unavailable"]

PORT = 54329  # the socket file's name only: listen_addresses is empty
REQUIRE_VARIABLE = "BOUNDED_TESTS_REQUIRE_POSTGRES"


class ServerUnavailable(RuntimeError):
    """No PostgreSQL server could be started here; the message says why."""


def unavailable(what: str, error: ServerUnavailable) -> NoReturn:
    """Skip the test, loudly, or fail it where a server is required (``BOUNDED_TESTS_REQUIRE_POSTGRES=1``)."""
    message = f"NO POSTGRESQL SERVER COULD BE STARTED, {what} did not run: {error}"
    if os.environ.get(REQUIRE_VARIABLE) == "1":
        pytest.fail(f"{message} ({REQUIRE_VARIABLE}=1)")
    pytest.skip(message)


def _binaries() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        raise ServerUnavailable("no PostgreSQL binaries under /usr/lib/postgresql (apt-get install postgresql)")
    return Path(found[-1]).parent


def _as_server_user(command: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return command
    try:
        pwd.getpwnam("postgres")
    except KeyError as error:
        raise ServerUnavailable("running as root and there is no 'postgres' user to run the server") from error
    runuser = shutil.which("runuser")
    if runuser is None:
        raise ServerUnavailable("running as root and runuser is missing")
    return [runuser, "-u", "postgres", "--", *command]


class PostgresCluster:
    """A throwaway PostgreSQL cluster in a temporary folder that can be stopped and started again.

    Args:
        fsync: Whether the server syncs to disk (off for tests, on for benchmarks).

    Raises:
        ServerUnavailable: No binaries, no user to run them as, or ``initdb`` failed.
    """

    def __init__(self, *, fsync: bool = False) -> None:
        self.binaries = _binaries()
        self.folder = Path(tempfile.mkdtemp(prefix="pg-test-"))
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


def running_cluster(what: str, *, fsync: bool = False) -> Iterator[PostgresCluster]:
    """A running cluster, removed afterwards (use in a fixture); ``unavailable(what, ...)`` without one."""
    try:
        cluster = PostgresCluster(fsync=fsync)
    except ServerUnavailable as error:
        unavailable(what, error)
    try:
        try:
            cluster.start()
        except ServerUnavailable as error:
            unavailable(what, error)
        yield cluster
    finally:
        cluster.remove()


def set_up(conninfo: str) -> str:
    """Create LangGraph's tables in the cluster; return the connection string."""
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(conninfo) as saver:
        saver.setup()
    return conninfo
