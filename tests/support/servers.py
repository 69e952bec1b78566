"""HTTP servers the serving tests start on loopback: started once, polled until ready, always stopped.

A server that does not come up fails the test with its log (it is never skipped); the network is
never reached past 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

START_TIMEOUT = 90.0  # seconds; `langgraph dev` is ready in about 2 s here, but CI machines are shared
STOP_TIMEOUT = 20.0  # seconds of graceful shutdown (the saver's last autosave runs then) before SIGKILL

# Nothing the servers start may reach beyond loopback: LangGraph's CLI analytics, its version check,
# LangSmith tracing and the metadata loop are all switched off, and any LangSmith key is dropped.
QUIET = {
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    "LANGGRAPH_NO_VERSION_CHECK": "true",
    "LANGSMITH_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
    "LANGSMITH_TRACING_V2": "false",
    "DO_NOT_TRACK": "1",
}
DROPPED_PREFIXES = ("LANGSMITH_", "LANGCHAIN_", "LANGGRAPH_", "BOUNDED_SAVER_", "LSD_", "LANGGRAPH_CLOUD_")


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the server binds it right after). Runtime complexity: O(1)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def server_environment(extra: Mapping[str, str]) -> dict[str, str]:
    """This process's environment without LangSmith/LangGraph/saver settings, quiet, plus ``extra``."""
    kept = {name: value for name, value in os.environ.items() if not name.startswith(DROPPED_PREFIXES)}
    return {**kept, **QUIET, **extra}


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The samples ``url`` serves in Prometheus text, by name and sorted labels."""
    text = httpx.get(url, timeout=10.0).text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def venv_bin() -> Path:
    """The folder of this interpreter's console scripts (the project venv's ``bin``)."""
    return Path(sys.executable).parent


class ServerProcess:
    """One server process in its own session (so that its whole process group can be stopped).

    Args:
        name: For messages.
        command: The command line.
        cwd: Its working folder; its log is written there as ``<name>.log``.
        env: Its whole environment.
        ready_url: Polled until it answers 200.
    """

    def __init__(self, name: str, command: Sequence[str], *, cwd: Path, env: Mapping[str, str], ready_url: str):
        self.name = name
        self.command = [str(part) for part in command]
        self.cwd = cwd
        self.env = dict(env)
        self.ready_url = ready_url
        self.log_path = cwd / f"{name}.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the process; it is ready once ``wait_ready`` returns."""
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.command,
                cwd=self.cwd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def wait_ready(self) -> None:
        """Poll ``ready_url`` until 200; fail the test with the log if the server exits or the deadline passes."""
        assert self.process is not None
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self.fail(f"exited with code {self.process.returncode} before it was ready")
            try:
                if httpx.get(self.ready_url, timeout=2.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)  # a polling interval, not a synchronization: the deadline bounds the wait
        self.stop()
        self.fail(f"was not ready at {self.ready_url} within {START_TIMEOUT:.0f} s")

    def wait_exit(self, timeout: float = START_TIMEOUT) -> int:
        """Wait for the process to exit by itself; return its exit code (fails the test at the deadline)."""
        assert self.process is not None
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            self.fail(f"did not exit within {timeout:.0f} s")
            raise  # unreachable: fail() raises

    def stop(self) -> None:
        """SIGTERM to the whole process group, SIGKILL after ``STOP_TIMEOUT``. Safe to call twice."""
        if self.process is None or self.process.poll() is not None:
            return  # reaped: its pid, and so its group id, may belong to someone else by now
        self._signal_group(signal.SIGTERM)
        try:
            self.process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self._signal_group(signal.SIGKILL)  # not reaped yet, so the group is still ours
            self.process.wait(timeout=STOP_TIMEOUT)

    def _signal_group(self, signum: int) -> None:
        assert self.process is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signum)

    def log(self) -> str:
        """Everything the server printed so far."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def fail(self, why: str) -> None:
        """Fail the current test with the server's log."""
        pytest.fail(f"{self.name} {why}; its log ({self.log_path}):\n{self.log()[-20_000:]}", pytrace=False)
