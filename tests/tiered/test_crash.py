"""``kill -9`` during writes: what a ``TieredSaver`` acknowledged (write-through) or flushed (write-back)
is readable after a restart, from a SQLite file and from PostgreSQL.

A child process runs a chat graph turn after turn on a few threads and reports, after each turn,
the checkpoint it ended at (and, with write-back, after each ``flush()``, which checkpoints are
flushed). The parent sends SIGKILL once it has read enough reports, whatever the child is doing then
(usually in the middle of the next turn's writes). A new saver over the same durable tier then reads
every reported checkpoint back, and each thread's state has every reported turn.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from langgraph.checkpoint.bounded import TieredSaver
from tests.support.durable_savers import PostgresCluster, cluster_fixture, sqlite_durable
from tests.support.paths import ROOT

TURNS_BEFORE_THE_KILL = 12

CHILD = textwrap.dedent(
    """
    import json, operator, sqlite3, sys
    from typing import Annotated, TypedDict
    from langgraph.graph import END, START, StateGraph
    from langgraph.checkpoint.bounded import InMemoryCheckpointConfig, TieredSaver, WriteBack

    durable_kind, where, write = sys.argv[1:4]
    if durable_kind == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver
        durable = SqliteSaver(sqlite3.connect(where, check_same_thread=False))
    else:
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg import Connection
        from psycopg.rows import dict_row
        durable = PostgresSaver(Connection.connect(where, autocommit=True, prepare_threshold=0, row_factory=dict_row))

    class Chat(TypedDict):
        messages: Annotated[list[str], operator.add]

    builder = StateGraph(Chat)
    builder.add_node("think", lambda state: {"messages": [f"thought on {state['messages'][-1]}"]})
    builder.add_node("reply", lambda state: {"messages": [f"reply to {state['messages'][-1]}"]})
    builder.add_edge(START, "think")
    builder.add_edge("think", "reply")
    builder.add_edge("reply", END)
    policy = WriteBack(flush_interval_seconds=float("inf")) if write == "back" else write
    saver = TieredSaver(durable, config=InMemoryCheckpointConfig(max_threads=2), write=policy)
    app = builder.compile(checkpointer=saver)
    unflushed = []
    for turn in range(10_000):
        config = {"configurable": {"thread_id": f"crash-{turn % 3}"}}
        state = app.invoke({"messages": [f"turn {turn}"]}, config)
        checkpoint_id = app.get_state(config).config["configurable"]["checkpoint_id"]
        unflushed.append([config["configurable"]["thread_id"], checkpoint_id, len(state["messages"])])
        if write == "through":
            print(json.dumps({"acknowledged": unflushed}), flush=True)
            unflushed = []
        elif turn % 3 == 2:
            saver.flush()
            print(json.dumps({"acknowledged": unflushed}), flush=True)
            unflushed = []
    """
)


def kill_mid_run(durable_kind: str, where: str, write: str) -> list[tuple[str, str, int]]:
    """Run the child until it reported ``TURNS_BEFORE_THE_KILL`` durable turns, SIGKILL it; return the reports."""
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, durable_kind, where, write], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    reported: list[tuple[str, str, int]] = []
    try:
        assert child.stdout is not None
        while len(reported) < TURNS_BEFORE_THE_KILL:
            line = child.stdout.readline()
            assert line, f"the child stopped early (exit code {child.poll()})"
            reported += [tuple(item) for item in json.loads(line)["acknowledged"]]  # type: ignore[misc]
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.wait(60)
    assert child.returncode == -signal.SIGKILL
    return reported


def check_readable(saver: TieredSaver, reported: list[tuple[str, str, int]]) -> None:
    for thread_id, checkpoint_id, messages in reported:
        located = {"configurable": {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": checkpoint_id}}
        found = saver.get_tuple(located)
        assert found is not None, f"{thread_id} lost its reported checkpoint {checkpoint_id}"
        assert len(found.checkpoint["channel_values"]["messages"]) == messages
    for thread_id in {thread_id for thread_id, _, _ in reported}:
        latest = saver.get_tuple({"configurable": {"thread_id": thread_id}})
        assert latest is not None
        reported_messages = max(messages for other, _, messages in reported if other == thread_id)
        assert len(latest.checkpoint["channel_values"]["messages"]) >= reported_messages
        # Every checkpoint the durable tier holds has its parent there too: flushed parents first.
        history = list(saver.list({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}))
        ids = {item.config["configurable"]["checkpoint_id"] for item in history}
        assert all(
            item.parent_config is None or item.parent_config["configurable"]["checkpoint_id"] in ids for item in history
        )


@pytest.mark.parametrize("write", ["through", "back"])
def test_kill_9_over_sqlite_loses_nothing_acknowledged_or_flushed(tmp_path: Path, write: str) -> None:
    path = tmp_path / "crash.sqlite"
    reported = kill_mid_run("sqlite", str(path), write)
    check_readable(TieredSaver(sqlite_durable(path)), reported)


cluster = cluster_fixture("the tiered kill -9 test over PostgreSQL")


@pytest.mark.parametrize("write", ["through", "back"])
def test_kill_9_over_postgres_loses_nothing_acknowledged_or_flushed(cluster: PostgresCluster, write: str) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg import Connection
    from psycopg.rows import dict_row

    with Connection.connect(cluster.conninfo, autocommit=True, prepare_threshold=0, row_factory=dict_row) as connection:
        durable: Any = PostgresSaver(connection)
        for thread_id in {item.config["configurable"]["thread_id"] for item in durable.list(None)}:
            durable.delete_thread(thread_id)
        reported = kill_mid_run("postgres", cluster.conninfo, write)
        check_readable(TieredSaver(durable), reported)


EXITING_CHILD = textwrap.dedent(
    """
    import sqlite3, sys
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.checkpoint.bounded import TieredSaver, WriteBack
    from tests.support.tiered import put_chain

    durable = SqliteSaver(sqlite3.connect(sys.argv[1], check_same_thread=False))
    saver = TieredSaver(durable, write=WriteBack(flush_interval_seconds=float("inf")))
    put_chain(saver, "never-closed", 4)
    print(saver.stats().dirty_bytes > 0)  # all unflushed; the program ends without close()
    """
)


def test_write_back_flushes_at_a_clean_exit_without_close(tmp_path: Path) -> None:
    """A program that ends without ``close()`` (a clean exit, not a crash) lost every unflushed write."""
    path = tmp_path / "exit.sqlite"
    child = subprocess.run(
        [sys.executable, "-c", EXITING_CHILD, str(path)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert child.returncode == 0, child.stderr
    assert child.stdout.strip() == "True"
    stored = list(sqlite_durable(path).list({"configurable": {"thread_id": "never-closed"}}))
    assert len(stored) == 4 and all(item.pending_writes for item in stored)
