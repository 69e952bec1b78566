"""The process-wide saver behind fastapi-langgraph-server, against that server's own saver, over HTTP.

fastapi-langgraph-server needs Python 3.12+, so both apps run under uvicorn from the venv that
``make test`` builds for it (``make install-server``: ``.venv-fastapi-server``; ``FASTAPI_SERVER_PYTHON``
overrides): ours is ``examples/serving/fastapi_app.py`` with ``BOUNDED_SAVER_*`` limits, the other the same graph on the
package's ``InMemorySaver`` with the same limits. The same calls must get the same answers, but for
ids and times.
"""

from __future__ import annotations

import json
import os
import re
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.paths import ROOT
from tests.support.servers import ServerProcess, free_port, scrape, server_environment

EXAMPLE = ROOT / "examples" / "serving"
SERVER_PYTHON = Path(os.environ.get("FASTAPI_SERVER_PYTHON", ROOT / ".venv-fastapi-server" / "bin" / "python"))
MAX_THREADS = 4
MAX_CHECKPOINT_BYTES = 65_536
LIMITS = {"max_threads": MAX_THREADS, "max_checkpoint_bytes": MAX_CHECKPOINT_BYTES}

STOCK_APP = textwrap.dedent(
    f"""
    from fastapi_langgraph_server import (
        AssistantConfig, InMemoryCheckpointConfig, InMemorySaver, StandaloneAppConfig, create_app,
    )
    from graph import build_graph

    assistant = AssistantConfig(
        assistant_id="agent", graph_id="agent", name="Review", checkpointed_graph_factory=build_graph
    )
    saver = InMemorySaver(config=InMemoryCheckpointConfig(**{LIMITS!r}))
    app = create_app(StandaloneAppConfig(assistants={{"agent": assistant}}, checkpointer=saver))
    """
)


def uvicorn(name: str, app: str, app_dir: Path, folder: Path, env: dict[str, str]) -> tuple[ServerProcess, str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [SERVER_PYTHON, "-m", "uvicorn", app, "--app-dir", app_dir, "--host", "127.0.0.1", "--port", port]
    return ServerProcess(name, command, cwd=folder, env=env, ready_url=f"{url}/health"), url


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Both apps, started together; their base URLs by name."""
    if not SERVER_PYTHON.exists():
        pytest.fail(f"{SERVER_PYTHON} is missing: `make install-server` (in `make test`) builds this test's 3.12 venv")
    folder = tmp_path_factory.mktemp("fastapi-servers")
    (folder / "stock_app.py").write_text(STOCK_APP)
    ours_env = {f"BOUNDED_SAVER_{name.upper()}": str(limit) for name, limit in LIMITS.items()}
    started = {
        "ours": uvicorn("fastapi-ours", "fastapi_app:app", EXAMPLE, folder, server_environment(ours_env)),
        "stock": uvicorn(
            "fastapi-stock", "stock_app:app", folder, folder, server_environment({"PYTHONPATH": str(EXAMPLE)})
        ),
    }
    try:
        for process, _ in started.values():
            process.start()
        for process, _ in started.values():
            process.wait_ready()
        yield {name: url for name, (_, url) in started.items()}
    finally:
        for process, _ in started.values():
            process.stop()


class Normalizer:
    """Replaces ids by their order of first appearance, and times by a placeholder."""

    PATTERNS = (
        ("id", re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")),
        ("hex", re.compile(r"\b[0-9a-f]{32}\b")),
        ("time", re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?")),
    )

    def __init__(self) -> None:
        self.seen: dict[str, str] = {}

    def __call__(self, text: str) -> str:
        for kind, pattern in self.PATTERNS:
            text = pattern.sub(lambda match, kind=kind: self._label(kind, match.group()), text)
        return text

    def _label(self, kind: str, found: str) -> str:
        if kind == "time":
            return "<time>"
        return self.seen.setdefault(found, f"<{kind} {len(self.seen)}>")


class Session:
    """Calls one server and keeps a normalized transcript of every answer."""

    def __init__(self, url: str) -> None:
        self.http = httpx.Client(base_url=url, timeout=60.0)
        self.normalize = Normalizer()
        self.transcript: list[tuple[str, str, int, str]] = []

    def call(self, method: str, path: str, body: Any = None) -> Any:
        response = self.http.request(method, path, json=body)
        is_json = response.headers.get("content-type", "").startswith("application/json")
        text = json.dumps(response.json(), sort_keys=True) if is_json else response.text
        self.transcript.append((method, path, response.status_code, self.normalize(text)))
        return response.json() if is_json else response.text


def conversation(url: str) -> list[tuple[str, str, int, str]]:
    """Every call the server offers, in a plausible order; its transcript."""
    session = Session(url)
    call = session.call
    call("GET", "/health")
    call("POST", "/threads", {"thread_id": "t1", "metadata": {"user": "u1"}})
    call("POST", "/threads", {"thread_id": "t1", "if_exists": "raise"})
    call("GET", "/threads/t1")
    call("POST", "/threads/t1/runs", {"assistant_id": "agent", "input": {"messages": ["hello"]}})
    call("GET", "/threads/t1/state")
    history = call("POST", "/threads/t1/history", {"limit": 10})
    call("POST", "/threads/t1/history", {"metadata": {"source": "input"}})
    call("POST", "/threads/t1/history", {"limit": 1, "before": history[0]["checkpoint"]["checkpoint_id"]})
    oldest = history[-1]["checkpoint"]
    call("POST", "/threads/t1/state/checkpoint", {"checkpoint": oldest})
    call("POST", "/threads/t1/state", {"values": {"messages": ["approved by hand"]}, "as_node": "review"})
    call("GET", "/threads/t1/state")
    call("GET", "/threads/t1")
    stream = {"assistant_id": "agent", "input": {"messages": ["again"]}, "stream_mode": ["values", "updates"]}
    call("POST", "/threads/t1/runs/stream", stream)
    call("POST", "/runs/stream", {"assistant_id": "agent", "input": {"messages": ["stateless"]}})
    for index in range(2 * MAX_THREADS):  # t1 and the first of these are evicted
        call("POST", f"/threads/e{index}/runs", {"assistant_id": "agent", "input": {"messages": [f"user {index}"]}})
    call("GET", "/threads/e0")  # the server's own thread record outlives the saver's thread
    call("GET", "/threads/e0/state")
    call("POST", "/threads/e0/history", {"limit": 10})
    call("POST", "/threads/e0/runs", {"assistant_id": "agent", "input": {"messages": ["back again"]}})
    call("GET", "/threads/e0/state")
    call("DELETE", "/threads/e7")
    call("GET", "/threads/e7")
    call("GET", "/threads/e7/state")
    return session.transcript


def test_the_api_answers_as_with_the_server_s_own_saver(servers: dict[str, str]) -> None:
    ours, stock = conversation(servers["ours"]), conversation(servers["stock"])
    assert [entry[:3] for entry in ours] == [entry[:3] for entry in stock]  # same calls, same statuses
    for our_entry, stock_entry in zip(ours, stock, strict=True):
        assert our_entry == stock_entry
    statuses = {(method, path): status for method, path, status, _ in ours}
    assert statuses[("POST", "/threads/t1/runs")] == 200 and statuses[("GET", "/threads/e7")] == 404


def test_limits_hold_and_show_in_the_metrics(servers: dict[str, str]) -> None:
    for index in range(2 * MAX_THREADS):
        response = httpx.post(
            f"{servers['ours']}/threads/m{index}/runs",
            json={"assistant_id": "agent", "input": {"messages": [f"user {index}"]}},
            timeout=60.0,
        )
        assert response.status_code == 200
    metrics = scrape(f"{servers['ours']}/metrics")
    assert metrics[("langgraph_checkpoint_bounded_max_threads", ())] == MAX_THREADS
    assert metrics[("langgraph_checkpoint_bounded_threads", ())] <= MAX_THREADS
    assert metrics[("langgraph_checkpoint_bounded_evictions_total", (("reason", "max_threads"),))] >= MAX_THREADS


def test_an_oversize_run_is_refused_but_with_a_different_status(servers: dict[str, str]) -> None:
    """The server maps its own CheckpointCapacityError to 507; ours is another class, so it answers 500.

    The run changes nothing either way, and the rejection is counted.
    """
    body = {"assistant_id": "agent", "input": {"messages": ["x" * (2 * MAX_CHECKPOINT_BYTES)]}}
    rejected_before = scrape(f"{servers['ours']}/metrics").get(
        ("langgraph_checkpoint_bounded_rejections_total", (("limit", "max_checkpoint_bytes"),)), 0.0
    )
    statuses = {
        name: httpx.post(f"{url}/threads/big/runs", json=body, timeout=60.0).status_code
        for name, url in servers.items()
    }
    assert statuses == {"ours": 500, "stock": 507}
    for url in servers.values():
        assert httpx.get(f"{url}/threads/big/state", timeout=10.0).json()["values"] == {}
    rejected = scrape(f"{servers['ours']}/metrics")[
        ("langgraph_checkpoint_bounded_rejections_total", (("limit", "max_checkpoint_bytes"),))
    ]
    assert rejected == rejected_before + 1
