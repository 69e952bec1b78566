"""The saver behind LangGraph's Agent Server: `langgraph dev` (langgraph-api, in-memory runtime), for real.

One server per module, on a free loopback port, started from ``examples/serving`` (its
``langgraph.json`` names ``langgraph.checkpoint.bounded.serving.checkpointer``) with small limits from
``BOUNDED_SAVER_*`` variables, and driven with langgraph-sdk.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

from langgraph.checkpoint.bounded import BoundedInMemorySaver
from tests.support.paths import ROOT
from tests.support.servers import ServerProcess, free_port, scrape, server_environment, venv_bin

EXAMPLE = ROOT / "examples" / "serving"
MAX_THREADS = 4
LIMITS = {
    "BOUNDED_SAVER_MAX_THREADS": str(MAX_THREADS),
    "BOUNDED_SAVER_MAX_CHECKPOINTS_PER_THREAD": "1_000",
    "BOUNDED_SAVER_IDLE_TTL_SECONDS": "3600",
    "BOUNDED_SAVER_AUTOSAVE_INTERVAL_SECONDS": "3600",  # so the restart test sees the save made when it stops
}
RUN_TIMEOUT = 60.0  # seconds for one SDK call


class AgentServer:
    """`langgraph dev` in a copy of ``examples/serving``, restartable (its snapshot survives)."""

    def __init__(self, folder: Path, extra_env: dict[str, str]) -> None:
        self.folder = folder
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.snapshot = folder / "state.snapshot"
        command = [
            venv_bin() / "langgraph",
            "dev",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--no-browser",
            "--no-reload",
            "--n-jobs-per-worker",
            str(MAX_THREADS),  # runs of several threads execute at once, as in production
            "--config",
            "langgraph.json",
        ]
        env = server_environment({**LIMITS, "BOUNDED_SAVER_AUTOSAVE_PATH": str(self.snapshot), **extra_env})
        self.process = ServerProcess("langgraph-dev", command, cwd=folder, env=env, ready_url=f"{self.url}/ok")

    def start(self) -> None:
        self.process.start()
        self.process.wait_ready()

    def restart(self) -> None:
        self.process.stop()
        self.start()

    def client(self) -> LangGraphClient:
        return get_client(url=self.url, timeout=RUN_TIMEOUT)

    def metrics(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        """The samples of /metrics, by name and labels."""
        return scrape(f"{self.url}/metrics")


def example_copy(folder: Path) -> Path:
    """The serving example's files, where the server may write its own state (.langgraph_api/)."""
    folder.mkdir()
    for name in ("langgraph.json", "graph.py"):
        shutil.copy(EXAMPLE / name, folder / name)
    return folder


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentServer]:
    agent_server = AgentServer(example_copy(tmp_path_factory.mktemp("langgraph-dev") / "app"), {})
    try:
        agent_server.start()
        yield agent_server
    finally:
        agent_server.process.stop()


def sample(metrics: dict, name: str, **labels: str) -> float:
    return metrics[(name, tuple(sorted(labels.items())))]


async def run_to_interrupt(client: LangGraphClient, thread_id: str, text: str) -> dict[str, Any]:
    result = await client.runs.wait(thread_id, "agent", input={"messages": [text]})
    assert isinstance(result, dict)
    return result


async def test_a_run_stops_at_its_interrupt_resumes_and_keeps_state_and_history(server: AgentServer) -> None:
    client = server.client()
    thread_id = (await client.threads.create())["thread_id"]

    stopped = await run_to_interrupt(client, thread_id, "hello")
    assert stopped["messages"] == ["hello", "draft of hello"]
    assert stopped["__interrupt__"][0]["value"] == {"question": "approve the draft?"}
    state = await client.threads.get_state(thread_id)
    assert state["next"] == ["review"]
    assert state["tasks"][0]["interrupts"][0]["value"] == {"question": "approve the draft?"}

    done = await client.runs.wait(thread_id, "agent", command={"resume": "yes"})
    assert done == {"messages": ["hello", "draft of hello", "review: yes"], "approved": True}
    state = await client.threads.get_state(thread_id)
    assert state["next"] == [] and state["values"]["approved"] is True

    history = await client.threads.get_history(thread_id, limit=10)
    assert [entry["metadata"]["source"] for entry in history] == ["loop", "loop", "loop", "input"]
    # The server's adapter enriched the metadata before aput; the saver stored and returns it.
    newest = history[0]["metadata"]
    assert newest["thread_id"] == thread_id and newest["graph_id"] == "agent"
    assert newest["assistant_id"] and newest["run_id"]
    inputs = await client.threads.get_history(thread_id, metadata={"source": "input"})
    assert [entry["checkpoint"]["checkpoint_id"] for entry in inputs] == [history[3]["checkpoint"]["checkpoint_id"]]
    first_run = await client.threads.get_history(thread_id, metadata={"run_id": history[3]["metadata"]["run_id"]})
    assert [entry["checkpoint"]["checkpoint_id"] for entry in first_run] == [
        entry["checkpoint"]["checkpoint_id"]
        for entry in history[1:]  # the resume wrote only the newest
    ]
    # The in-memory runtime hands `before` to alist as it came: the Checkpoint object the SDK sends has
    # no "configurable" key, which the stock saver meets with a KeyError (a server error), this one with a
    # ValueError (a 400). A config-shaped object passes the API's schema and works with either saver.
    newest_id = history[0]["checkpoint"]["checkpoint_id"]
    before: Any = {"configurable": {"checkpoint_id": newest_id}}
    older = await client.threads.get_history(thread_id, limit=1, before=before)
    assert [entry["checkpoint"]["checkpoint_id"] for entry in older] == [history[1]["checkpoint"]["checkpoint_id"]]
    with pytest.raises(httpx.HTTPStatusError) as refused:
        await client.threads.get_history(thread_id, limit=1, before=history[0]["checkpoint"])
    assert refused.value.response.status_code == 400


async def test_copy_update_state_and_delete(server: AgentServer) -> None:
    client = server.client()
    thread_id = (await client.threads.create())["thread_id"]
    await run_to_interrupt(client, thread_id, "original")

    copy_id = (await client.threads.copy(thread_id))["thread_id"]
    copied = await client.threads.get_state(copy_id)
    assert copied["values"] == {"messages": ["original", "draft of original"]}
    assert copied["next"] == ["review"]

    await client.threads.update_state(copy_id, {"messages": ["edited"]}, as_node="draft")
    edited = await client.threads.get_state(copy_id)
    assert edited["values"]["messages"] == ["original", "draft of original", "edited"]
    assert edited["metadata"]["source"] == "update" and edited["next"] == ["review"]
    assert (await client.threads.get_state(thread_id))["values"]["messages"] == ["original", "draft of original"]

    await client.threads.delete(thread_id)
    with pytest.raises(httpx.HTTPStatusError) as missing:
        await client.threads.get_state(thread_id)
    assert missing.value.response.status_code == 404
    resumed = await client.runs.wait(copy_id, "agent", command={"resume": "no"})
    assert resumed["messages"][-1] == "review: no" and resumed["approved"] is False


async def test_twice_max_threads_concurrent_threads_evict_and_the_metrics_say_so(server: AgentServer) -> None:
    client = server.client()
    before = server.metrics()
    evicted_before = sample(before, "langgraph_checkpoint_bounded_evictions_total", reason="max_threads")

    async def one(index: int) -> tuple[str, dict[str, Any]]:
        thread_id = (await client.threads.create())["thread_id"]
        return thread_id, await client.runs.wait(thread_id, "agent", input={"messages": [f"user {index}"]})

    outcomes = await asyncio.gather(*(one(index) for index in range(2 * MAX_THREADS)))
    for thread_id, result in outcomes:
        # A run reaches its interrupt, or, if its thread was evicted while it ran, fails loudly.
        assert "__interrupt__" in result or "ThreadEvictedError" in str(result), (thread_id, result)

    metrics = server.metrics()
    assert sample(metrics, "langgraph_checkpoint_bounded_max_threads") == MAX_THREADS
    assert sample(metrics, "langgraph_checkpoint_bounded_threads") <= MAX_THREADS
    evicted = sample(metrics, "langgraph_checkpoint_bounded_evictions_total", reason="max_threads")
    assert evicted - evicted_before >= MAX_THREADS  # 2 x max new threads: at least max of them evicted
    assert sample(metrics, "langgraph_checkpoint_bounded_checkpoints") > 0

    # The server keeps its own thread records: it still lists the threads the saver evicted...
    listed = {thread["thread_id"] for thread in await client.threads.search(limit=1_000)}
    assert {thread_id for thread_id, _ in outcomes} <= listed
    # ...whose state is gone (the saver holds at most max of the 2 x max), and whose next run starts afresh.
    states = [await client.threads.get_state(thread_id) for thread_id, _ in outcomes]
    gone = [thread_id for (thread_id, _), state in zip(outcomes, states, strict=True) if state["values"] == {}]
    assert len(gone) >= MAX_THREADS
    record = await client.threads.get(gone[0])  # the server's record still shows the interrupt it saw last...
    assert record["status"] == "interrupted" and record["interrupts"]
    held = {thread_id for (thread_id, _), state in zip(outcomes, states, strict=True) if state["values"]}
    before_resume = server.metrics()
    # ...which cannot be resumed: no checkpoint holds it. The saver refuses the resume LangGraph starts
    # afresh, so it stores nothing and evicts no thread that waits; the run itself ends in LangGraph's own
    # TypeError (its __start__ node fails on the server's command first), and the refusal is in the log.
    with pytest.raises(Exception, match="TypeError"):
        await client.runs.wait(gone[0], "agent", command={"resume": "yes"})
    assert (await client.threads.get_state(gone[0]))["values"] == {}
    after_resume = server.metrics()
    for name, labels in (
        ("langgraph_checkpoint_bounded_evictions_total", {"reason": "max_threads"}),
        ("langgraph_checkpoint_bounded_threads", {}),
    ):
        assert sample(after_resume, name, **labels) == sample(before_resume, name, **labels), name
    for thread_id in held:  # every thread that waited still waits
        assert (await client.threads.get_state(thread_id))["tasks"][0]["interrupts"], thread_id
    assert f"cannot resume thread '{gone[0]}'" in server.process.log()
    again = await run_to_interrupt(client, gone[0], "back again")
    assert again["messages"] == ["back again", "draft of back again"]


async def test_the_store_survives_a_server_restart_through_its_autosave_file(server: AgentServer) -> None:
    client = server.client()
    thread_id = (await client.threads.create())["thread_id"]
    await run_to_interrupt(client, thread_id, "before the restart")

    server.restart()  # the last exit of the factory saves the snapshot; the next start loads it
    restored = BoundedInMemorySaver.load(server.snapshot)
    assert thread_id in restored.store.thread_ids() and restored.stats().threads <= MAX_THREADS

    client = server.client()
    state = await client.threads.get_state(thread_id)
    assert state["values"]["messages"] == ["before the restart", "draft of before the restart"]
    assert state["next"] == ["review"]
    done = await client.runs.wait(thread_id, "agent", command={"resume": "yes"})
    assert done["approved"] is True
    assert "restored" in server.process.log()


async def test_with_a_quarantine_a_resume_of_an_evicted_thread_ends_with_the_saver_s_error(
    tmp_path: Path,
) -> None:
    """``BOUNDED_SAVER_DROPPED_THREAD_QUARANTINE_SECONDS``: the run is refused at its first read, before
    LangGraph's own start fails, so it ends with the saver's error; and the start-up line says so."""
    quarantined = AgentServer(
        example_copy(tmp_path / "app"), {"BOUNDED_SAVER_DROPPED_THREAD_QUARANTINE_SECONDS": "600"}
    )
    try:
        quarantined.start()
        client = quarantined.client()
        waiting = [(await client.threads.create())["thread_id"] for _ in range(MAX_THREADS + 1)]
        for index, thread_id in enumerate(waiting):  # one at a time: the first is the one evicted
            await run_to_interrupt(client, thread_id, f"user {index}")
        evicted, held = waiting[0], waiting[1:]
        assert (await client.threads.get_state(evicted))["values"] == {}
        before = quarantined.metrics()
        # The client sees the error's type; the server shows messages of a few builtin types only, and logs it.
        with pytest.raises(Exception, match="ThreadQuarantinedError"):
            await client.runs.wait(evicted, "agent", command={"resume": "yes"})
        refusals = [line for line in quarantined.process.log().splitlines() if f"thread '{evicted}'" in line]
        assert refusals and "ThreadQuarantinedError" in refusals[0], quarantined.process.log()[-5_000:]
        assert "max_threads=4" in refusals[0] and " UTC" in refusals[0] and "was not applied" in refusals[0]
        after = quarantined.metrics()
        evictions = "langgraph_checkpoint_bounded_evictions_total"
        assert sample(after, evictions, reason="max_threads") == sample(before, evictions, reason="max_threads")
        assert (await client.threads.get_state(evicted))["values"] == {}
        for thread_id in held:
            assert (await client.threads.get_state(thread_id))["tasks"][0]["interrupts"], thread_id
        log = quarantined.process.log()
        assert "memory-only saver" in log and "max_threads=4" in log
        assert "dropped_thread_quarantine_seconds=600" in log
    finally:
        quarantined.process.stop()


def test_a_bad_variable_stops_the_server_at_start_up_naming_it(tmp_path: Path) -> None:
    bad = AgentServer(example_copy(tmp_path / "app"), {"BOUNDED_SAVER_MAX_THREADS": "lots"})
    try:
        bad.process.start()
        code = bad.process.wait_exit()
    finally:
        bad.process.stop()
    log = bad.process.log()
    assert code != 0
    assert "BOUNDED_SAVER_MAX_THREADS is 'lots': expected a whole number" in log, log[-5_000:]


LOADER = textwrap.dedent(
    """
    import sys
    from langgraph_api._checkpointer._adapter import _load_checkpointer
    from langgraph.checkpoint.bounded import serving
    for path in sys.argv[1:]:
        try:
            found = _load_checkpointer(path)
        except Exception as error:
            print(path, "fails:", type(error).__name__)
        else:
            print(path, "loads the factory" if found is serving.checkpointer else f"loads {found!r}")
    """
)


def test_which_langgraph_json_path_forms_load_the_factory(tmp_path: Path) -> None:
    """Asks langgraph-api's own loader (the function `langgraph dev` calls) about each path form."""
    (tmp_path / "my_checkpointer.py").write_text("from langgraph.checkpoint.bounded.serving import checkpointer\n")
    forms = [
        "langgraph.checkpoint.bounded.serving.checkpointer",  # dotted: imported as a module, then the attribute
        "./my_checkpointer.py:checkpointer",  # a file of your own that re-exports it
        f"{ROOT / 'saver' / 'serving.py'}:checkpointer",  # the module's file: run under another name
        "langgraph.checkpoint.bounded.serving:checkpointer",  # as langgraph-cli's schema suggests: fails
    ]
    # Importing langgraph_api reads the settings `langgraph dev` would set; these are its in-memory ones.
    env = server_environment({"REDIS_URI": "fake", "DATABASE_URI": ":memory:", "MIGRATIONS_PATH": "__inmem"})
    done = subprocess.run(
        [venv_bin() / "python", "-c", LOADER, *forms],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "langgraph.checkpoint.bounded.serving.checkpointer loads the factory",
        "./my_checkpointer.py:checkpointer loads the factory",
        f"{ROOT / 'saver' / 'serving.py'}:checkpointer loads the factory",
        "langgraph.checkpoint.bounded.serving:checkpointer fails: ValueError",
    ]


async def test_the_storage_route_answers_from_the_saver_not_501(server: AgentServer) -> None:
    # The Agent Server's own GET /threads/{id}/storage answers 501 for any custom checkpointer; the example's
    # langgraph.json names serving.storage_app under "http", whose route the server puts before its own.
    client = server.client()
    thread_id = (await client.threads.create())["thread_id"]
    await run_to_interrupt(client, thread_id, "hello")
    async with httpx.AsyncClient(base_url=server.url, timeout=RUN_TIMEOUT) as http:
        answer = await http.get(f"/threads/{thread_id}/storage")
        assert answer.status_code == 200, answer.text
        report = answer.json()
        unknown = (await http.get("/threads/00000000-0000-0000-0000-000000000000/storage")).json()
    assert report["thread_id"] == thread_id and report["tier"] == "memory" and not report["estimated"]
    assert report["total_bytes"] == sum(
        report[part]["bytes"] for part in ("checkpoints", "channel_values", "pending_writes")
    )
    assert report["checkpoints"]["count"] >= 2 and report["pending_writes"]["count"] >= 1  # the interrupt's
    assert report["channel_values"]["by_channel"]["messages"] > 0
    assert unknown["total_bytes"] == 0 and unknown["checkpoints"] == {"count": 0, "bytes": 0}
