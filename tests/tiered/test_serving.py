"""The tiered saver behind a server: ``BOUNDED_SAVER_DURABLE`` and its companions, metrics, and a real
``langgraph dev`` that is restarted and finds its threads in the durable tier.

The end-to-end test runs the Agent Server from a copy of ``examples/serving`` with
``langgraph.tiered.json`` (the recipe as it ships: a SQLite file beside the graph, write-back), a hot
tier of two threads, and drives it with langgraph-sdk: interrupted threads evicted from memory are
resumed, the server is stopped (its last flush) and started again, and every thread is there.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from langgraph.checkpoint.bounded import (
    InMemoryCheckpointConfig,
    RetentionPolicy,
    RetentionStats,
    TieredSaver,
    TieredStats,
    WriteBack,
    WriteThrough,
)
from langgraph.checkpoint.bounded import serving as serving_module
from langgraph.checkpoint.bounded.metrics import (
    RETENTION_PREFIX,
    RETENTION_STATS_NOT_EXPORTED,
    TIERED_PREFIX,
    TIERED_STATS_NOT_EXPORTED,
    register_metrics,
)
from langgraph.checkpoint.bounded.serving import (
    EMBEDDED_SQLITE_FILE,
    ServingConfigError,
    TieredSettings,
    config_from_env,
    open_durable,
    reset_shared_saver,
    shared_saver,
    tiered_from_env,
)
from tests.serving.test_langgraph_dev import EXAMPLE, LIMITS, AgentServer, run_to_interrupt
from tests.support.durable_savers import sqlite_durable
from tests.support.servers import ServerProcess, server_environment

# --- the variables ---------------------------------------------------------------------------------------------


def test_the_durable_tier_is_read_from_its_variables() -> None:
    assert tiered_from_env({}) is None
    assert tiered_from_env({"BOUNDED_SAVER_DURABLE": "sqlite:///state/threads.db"}) == TieredSettings(
        "sqlite:///state/threads.db"
    )
    assert tiered_from_env(
        {
            "BOUNDED_SAVER_DURABLE": "postgresql://app@db:5432/threads",
            "BOUNDED_SAVER_WRITE": "back",
            "BOUNDED_SAVER_FLUSH_INTERVAL_SECONDS": "0.5",
            "BOUNDED_SAVER_MAX_DIRTY_BYTES": "8_388_608",
        }
    ) == TieredSettings("postgresql://app@db:5432/threads", "back", None, 0.5, 8_388_608)
    assert tiered_from_env({"BOUNDED_SAVER_DURABLE": "sqlite"}) == TieredSettings("sqlite")
    assert TieredSettings("sqlite").write_policy() == WriteThrough()
    assert TieredSettings("sqlite", processes="many").write_policy() == WriteThrough(processes="many")
    assert TieredSettings("sqlite", "back", None, 0.5, 8_388_608).write_policy() == WriteBack(0.5, 8_388_608)
    # The memory-only variables read as before, next to these.
    assert config_from_env({"BOUNDED_SAVER_DURABLE": "sqlite", "BOUNDED_SAVER_MAX_THREADS": "7"}).max_threads == 7


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        ({"BOUNDED_SAVER_DURABLE": "mysql://x"}, "BOUNDED_SAVER_DURABLE is 'mysql://x': expected sqlite:///"),
        ({"BOUNDED_SAVER_DURABLE": "sqlite", "BOUNDED_SAVER_WRITE": "later"}, "expected one of through, back"),
        ({"BOUNDED_SAVER_WRITE": "back"}, "BOUNDED_SAVER_WRITE: set BOUNDED_SAVER_DURABLE too"),
        ({"BOUNDED_SAVER_DURABLE": "sqlite", "BOUNDED_SAVER_MAX_DIRTY_BYTES": "lots"}, "a whole number of bytes"),
        ({"BOUNDED_SAVER_DURABLE": "sqlite", "BOUNDED_SAVER_PROCESSES": "two"}, "expected one of one, many"),
    ],
)
def test_a_bad_durable_variable_names_itself(variables: dict[str, str], message: str) -> None:
    with pytest.raises(ServingConfigError, match=message):
        tiered_from_env(variables)


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        (
            {"BOUNDED_SAVER_FLUSH_INTERVAL_SECONDS": "0.5"},
            "BOUNDED_SAVER_FLUSH_INTERVAL_SECONDS and BOUNDED_SAVER_WRITE=through: a write-back setting means nothing",
        ),
        (
            {"BOUNDED_SAVER_WRITE": "through", "BOUNDED_SAVER_MAX_DIRTY_SECONDS": "2"},
            "BOUNDED_SAVER_MAX_DIRTY_SECONDS and BOUNDED_SAVER_WRITE=through",
        ),
        (
            {"BOUNDED_SAVER_WRITE": "back", "BOUNDED_SAVER_PROCESSES": "many"},
            "BOUNDED_SAVER_PROCESSES and BOUNDED_SAVER_WRITE=back",
        ),
        (
            {"BOUNDED_SAVER_WRITE": "back", "BOUNDED_SAVER_MAX_DIRTY_BYTES": "0"},
            "BOUNDED_SAVER_MAX_DIRTY_BYTES: max_dirty_bytes must be a positive number",
        ),
    ],
)
def test_a_write_setting_that_means_nothing_names_both_variables(variables: dict[str, str], message: str) -> None:
    """Write-back's settings with write-through were read and ignored; several processes with write-back were
    refused only by TieredSaver, naming its arguments rather than the variables."""
    settings = tiered_from_env({"BOUNDED_SAVER_DURABLE": "sqlite", **variables})
    assert settings is not None
    with pytest.raises(ServingConfigError, match=re.escape(message)):
        settings.write_policy()


def test_several_processes_over_sqlite_read_fresh_and_put_conditionally(
    environment: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    environment.setenv("BOUNDED_SAVER_DURABLE", f"sqlite:///{tmp_path}/threads.db")
    environment.setenv("BOUNDED_SAVER_PROCESSES", "many")
    saver = shared_saver()
    assert isinstance(saver, TieredSaver) and saver.write == WriteThrough(processes="many")
    assert saver.processes == "many"


def test_a_durable_tier_excludes_snapshots_and_the_eviction_hook(
    environment: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    environment.setenv("BOUNDED_SAVER_DURABLE", f"sqlite:///{tmp_path}/threads.db")
    environment.setenv("BOUNDED_SAVER_AUTOSAVE_PATH", str(tmp_path / "state.snapshot"))
    with pytest.raises(ServingConfigError, match="BOUNDED_SAVER_AUTOSAVE_PATH and BOUNDED_SAVER_DURABLE"):
        shared_saver()


def test_a_sqlite_file_in_a_missing_folder_stops_the_start(tmp_path: Path) -> None:
    with pytest.raises(ServingConfigError, match=r"BOUNDED_SAVER_DURABLE: the folder of .* does not exist"):
        open_durable(f"sqlite:///{tmp_path}/missing/threads.db")


@pytest.mark.parametrize(
    ("url", "missing", "named"),
    [
        ("sqlite", "langgraph.checkpoint.sqlite", "SQLite"),
        ("postgresql://app@localhost/threads", "langgraph.checkpoint.postgres", "PostgreSQL"),
    ],
)
def test_a_durable_tier_without_its_extra_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, url: str, missing: str, named: str
) -> None:
    monkeypatch.setitem(sys.modules, missing, None)  # as if the [tiered] extra were not installed
    with pytest.raises(ServingConfigError, match=rf"BOUNDED_SAVER_DURABLE names {named}, which needs .*\[tiered\]"):
        open_durable(url)


def test_an_unreachable_postgres_stops_the_start_without_showing_its_password(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(serving_module, "POSTGRES_CONNECT_SECONDS", 0.5)
    url = f"postgresql://app:hunter2@/threads?host={tmp_path}"
    with pytest.raises(ServingConfigError) as refused:
        open_durable(url)
    assert "BOUNDED_SAVER_DURABLE: cannot reach" in str(refused.value) and "hunter2" not in str(refused.value)


def test_the_shared_saver_is_tiered_over_the_named_file(environment: pytest.MonkeyPatch, tmp_path: Path) -> None:
    environment.chdir(tmp_path)
    environment.setenv("BOUNDED_SAVER_DURABLE", "sqlite")
    environment.setenv("BOUNDED_SAVER_WRITE", "back")
    environment.setenv("BOUNDED_SAVER_MAX_THREADS", "3")
    saver = shared_saver()
    assert isinstance(saver, TieredSaver) and saver.write == WriteBack() and saver.config.max_threads == 3
    saver.put(
        {"configurable": {"thread_id": "t", "checkpoint_ns": ""}},
        {"v": 4, "id": "1", "ts": "", "channel_values": {}, "channel_versions": {}, "versions_seen": {}},
        {},
        {},
    )
    reset_shared_saver()  # closes it: the last flush
    assert (tmp_path / EMBEDDED_SQLITE_FILE).exists()
    assert sqlite_durable(tmp_path / EMBEDDED_SQLITE_FILE).get_tuple({"configurable": {"thread_id": "t"}})


def test_the_retention_variables_give_the_shared_saver_its_policy(
    environment: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    environment.chdir(tmp_path)
    environment.setenv("BOUNDED_SAVER_DURABLE", "sqlite")
    environment.setenv("BOUNDED_SAVER_RETENTION_TTL_SECONDS", "2592000")
    environment.setenv("BOUNDED_SAVER_RETENTION_STRATEGY", "keep_latest")
    environment.setenv("BOUNDED_SAVER_RETENTION_KEEP_LAST", "50")
    environment.setenv("BOUNDED_SAVER_RETENTION_SWEEP_INTERVAL_SECONDS", "600")
    saver = shared_saver()
    assert isinstance(saver, TieredSaver)
    # what langgraph.json's {"checkpointer": {"ttl": {"strategy": "keep_latest", "default_ttl": 43200,
    # "sweep_interval_minutes": 10}}} says, in seconds, with keep_last
    assert saver.retention == RetentionPolicy.from_agent_server_ttl(
        {"strategy": "keep_latest", "default_ttl": 43200, "sweep_interval_minutes": 10}, keep_last=50
    )


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        ({"BOUNDED_SAVER_RETENTION_TTL_SECONDS": "0"}, "BOUNDED_SAVER_RETENTION_TTL_SECONDS: idle_ttl_seconds must"),
        ({"BOUNDED_SAVER_RETENTION_TTL_SECONDS": "soon"}, "BOUNDED_SAVER_RETENTION_TTL_SECONDS is 'soon'"),
        ({"BOUNDED_SAVER_RETENTION_KEEP_LAST": "0"}, "BOUNDED_SAVER_RETENTION_KEEP_LAST: keep_last must"),
        ({"BOUNDED_SAVER_RETENTION_KEEP_LAST": "2.5"}, "BOUNDED_SAVER_RETENTION_KEEP_LAST is '2.5'"),
        ({"BOUNDED_SAVER_RETENTION_STRATEGY": "keep_all"}, "expected one of delete, keep_latest"),
        (
            {"BOUNDED_SAVER_RETENTION_KEEP_LAST": "5", "BOUNDED_SAVER_RETENTION_SWEEP_INTERVAL_SECONDS": "0"},
            "BOUNDED_SAVER_RETENTION_SWEEP_INTERVAL_SECONDS: sweep_interval_seconds must",
        ),
    ],
)
def test_a_bad_retention_variable_names_itself(
    environment: pytest.MonkeyPatch, tmp_path: Path, variables: dict[str, str], message: str
) -> None:
    environment.chdir(tmp_path)
    environment.setenv("BOUNDED_SAVER_DURABLE", "sqlite")
    for name, value in variables.items():
        environment.setenv(name, value)
    with pytest.raises(ServingConfigError, match=message):
        shared_saver()


def test_every_tiered_counter_is_a_metric(tmp_path: Path) -> None:
    from dataclasses import fields

    saver = TieredSaver(sqlite_durable(tmp_path / "m.db"), config=InMemoryCheckpointConfig(max_threads=2))
    registry = CollectorRegistry()
    register_metrics(saver, registry)
    text = generate_latest(registry).decode()
    missing = [
        field.name
        for field in fields(TieredStats)
        if field.name not in TIERED_STATS_NOT_EXPORTED and f"{TIERED_PREFIX}{field.name}" not in text
    ]
    assert missing == []
    missing_retention = [
        field.name
        for field in fields(RetentionStats)
        if field.name not in RETENTION_STATS_NOT_EXPORTED and f"{RETENTION_PREFIX}{field.name}" not in text
    ]
    assert missing_retention == []
    assert (
        'langgraph_checkpoint_bounded_tiered_info{coherence="sticky",durable="SqliteSaver",write="through"} 1.0' in text
    )
    assert "langgraph_checkpoint_bounded_threads 0.0" in text  # the hot tier's own metrics too


# --- langgraph dev, restarted ----------------------------------------------------------------------------------------


class TieredAgentServer(AgentServer):
    """``langgraph dev`` on ``langgraph.tiered.json``: a SQLite file beside the graph, a hot tier of two threads."""

    def __init__(self, folder: Path) -> None:
        super().__init__(folder, {"BOUNDED_SAVER_MAX_THREADS": "2"})
        env = server_environment({**LIMITS, "BOUNDED_SAVER_MAX_THREADS": "2"})
        command = [part if part != "langgraph.json" else "langgraph.tiered.json" for part in self.process.command]
        ready = self.process.ready_url
        self.process = ServerProcess("langgraph-dev-tiered", command, cwd=folder, env=env, ready_url=ready)
        self.database = folder / "checkpoints.sqlite"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TieredAgentServer]:
    import shutil

    folder = tmp_path_factory.mktemp("langgraph-dev-tiered") / "app"
    folder.mkdir()
    for name in ("langgraph.tiered.json", "graph.py"):
        shutil.copy(EXAMPLE / name, folder / name)
    agent_server = TieredAgentServer(folder)
    try:
        agent_server.start()
        yield agent_server
    finally:
        agent_server.process.stop()


async def test_langgraph_dev_over_sqlite_resumes_evicted_threads_and_finds_them_after_a_restart(
    server: TieredAgentServer,
) -> None:
    client = server.client()
    threads = [(await client.threads.create())["thread_id"] for _ in range(4)]
    for index, thread_id in enumerate(threads):  # four interrupted threads, two hot: the first ones leave memory
        stopped = await run_to_interrupt(client, thread_id, f"user {index}")
        assert stopped["messages"] == [f"user {index}", f"draft of user {index}"]
    done = await client.runs.wait(threads[0], "agent", command={"resume": "yes"})  # evicted, not lost
    assert done == {"messages": ["user 0", "draft of user 0", "review: yes"], "approved": True}
    metrics = server.metrics()
    assert metrics[("langgraph_checkpoint_bounded_threads", ())] <= 2
    assert metrics[("langgraph_checkpoint_bounded_tiered_admissions_total", ())] >= 1

    server.restart()  # the factory's last exit flushes; the new process starts with an empty hot tier
    client = server.client()
    assert await _states(client, threads[:1]) == [["user 0", "draft of user 0", "review: yes"]]
    for index, thread_id in enumerate(threads[1:], start=1):
        state = await client.threads.get_state(thread_id)
        assert state["values"]["messages"] == [f"user {index}", f"draft of user {index}"]
        assert state["next"] == ["review"]
        resumed = await client.runs.wait(thread_id, "agent", command={"resume": "no"})
        assert resumed["messages"][-1] == "review: no" and resumed["approved"] is False
    history = await client.threads.get_history(threads[0], limit=10)
    assert [entry["metadata"]["source"] for entry in history] == ["loop", "loop", "loop", "input"]
    await _storage_reports_both_tiers(server, threads[0])
    await asyncio.to_thread(server.process.stop)  # flushes
    with sqlite3.connect(server.database) as connection:
        stored = {row[0] for row in connection.execute("SELECT DISTINCT thread_id FROM checkpoints")}
    assert set(threads) <= stored


async def _states(client: Any, threads: list[str]) -> list[Any]:
    return [(await client.threads.get_state(thread_id))["values"]["messages"] for thread_id in threads]


async def _storage_reports_both_tiers(server: TieredAgentServer, thread_id: str) -> None:
    """GET /threads/{id}/storage (serving.storage_app, named in langgraph.tiered.json) reports both tiers."""
    import httpx

    async with httpx.AsyncClient(base_url=server.url, timeout=60.0) as http:
        answer = await http.get(f"/threads/{thread_id}/storage")
    assert answer.status_code == 200, answer.text
    report = answer.json()
    assert report["tier"] == "tiered" and report["durable"]["tier"] == "durable" and report["hot"]["tier"] == "hot"
    assert report["total_bytes"] == report["durable"]["total_bytes"] > 0
    assert report["durable"]["checkpoints"]["count"] == 4 and not report["durable"]["estimated"]
