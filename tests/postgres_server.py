"""A throwaway PostgreSQL server for tests: initdb in a temporary folder, a Unix socket only.

It uses the distribution's PostgreSQL binaries (``/usr/lib/postgresql/*/bin``),
run as the ``postgres`` system user when the tests run as root (PostgreSQL
refuses to run as root). No TCP port is opened.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

PORT = 54329  # the socket file's name only: listen_addresses is empty


class ServerUnavailable(RuntimeError):
    """No PostgreSQL server could be started here; the message says why."""


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


@contextlib.contextmanager
def postgres_server() -> Iterator[str]:
    """Start a server, yield a connection string, stop and delete it afterwards."""
    binaries = _binaries()
    folder = Path(tempfile.mkdtemp(prefix="pg-test-"))
    data = folder / "data"
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres", "postgres")
    run = lambda *command: subprocess.run(  # noqa: E731
        _as_server_user([str(c) for c in command]), capture_output=True, text=True, timeout=120, check=False
    )
    try:
        done = run(binaries / "initdb", "-D", data, "-U", "postgres", "--auth=trust", "--no-sync")
        if done.returncode:
            raise ServerUnavailable(f"initdb failed: {done.stderr.strip()[-500:]}")
        options = f"-c listen_addresses='' -k {folder} -p {PORT} -c fsync=off"
        done = run(binaries / "pg_ctl", "-D", data, "-o", options, "-w", "-t", "60", "start", "-l", folder / "log")
        if done.returncode:
            log = (folder / "log").read_text() if (folder / "log").exists() else ""
            raise ServerUnavailable(f"pg_ctl start failed: {done.stderr.strip()[-300:]} {log[-500:]}")
        try:
            yield f"host={folder} port={PORT} user=postgres dbname=postgres"
        finally:
            run(binaries / "pg_ctl", "-D", data, "-m", "immediate", "stop")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
