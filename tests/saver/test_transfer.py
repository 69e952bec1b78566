"""copy_threads: our saver to a real file-backed SqliteSaver and back; graphs resume there."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from langgraph.checkpoint.bounded import BoundedInMemorySaver, copy_threads
from tests.support.graphs import Runner, approval_graph, delta_channel_conversation, delta_graph, nested_graph


@pytest.fixture
def sqlite_saver(tmp_path: Path):
    connection = sqlite3.connect(tmp_path / "checkpoints.sqlite", check_same_thread=False)
    yield SqliteSaver(connection)
    connection.close()


def history(app, thread_id: str) -> list:
    cfg = {"configurable": {"thread_id": thread_id}}
    return [
        (s.values, s.next, s.metadata["step"], s.config["configurable"]["checkpoint_id"])
        for s in app.get_state_history(cfg)
    ]


def test_an_interrupted_thread_moves_to_sqlite_and_resumes_there(sqlite_saver) -> None:
    ours = BoundedInMemorySaver()
    app = approval_graph(ours, {})
    cfg = {"configurable": {"thread_id": "review"}}
    app.invoke({"messages": ["first"]}, cfg)
    app.invoke(Command(resume="ok"), cfg)
    app.invoke({"messages": ["second"]}, cfg)  # waits at the interrupt again
    assert copy_threads(ours, sqlite_saver, ["review"]) == ours.stats().checkpoints
    durable = approval_graph(sqlite_saver, {})
    assert history(durable, "review") == history(app, "review")  # same ids, links, values
    assert durable.get_state(cfg).next == ("ask",)
    assert durable.invoke(Command(resume="from sqlite"), cfg) == app.invoke(Command(resume="from sqlite"), cfg)


def test_subgraph_namespaces_and_writes_travel_both_ways(sqlite_saver) -> None:
    ours = BoundedInMemorySaver()
    app = nested_graph(ours, {})
    cfg = {"configurable": {"thread_id": "nested"}}
    app.invoke({"messages": ["go"]}, cfg)  # interrupted inside the subgraph
    copy_threads(ours, sqlite_saver, ["nested"])
    back = BoundedInMemorySaver()
    copy_threads(sqlite_saver, back, ["nested"])
    returned = nested_graph(back, {})
    assert history(returned, "nested") == history(app, "nested")
    state, expected = returned.get_state(cfg, subgraphs=True), app.get_state(cfg, subgraphs=True)
    assert state.values == expected.values and state.tasks[0].state.values == expected.tasks[0].state.values
    assert returned.invoke(Command(resume="inside"), cfg) == app.invoke(Command(resume="inside"), cfg)
    back.check()


def test_a_delta_channel_history_rebuilds_on_the_target(sqlite_saver) -> None:
    ours = BoundedInMemorySaver()
    runner = Runner(delta_graph(ours, {}), use_async=False, durability="sync")
    asyncio.run(delta_channel_conversation(runner))
    copy_threads(ours, sqlite_saver, ["delta"])
    assert history(delta_graph(sqlite_saver, {}), "delta") == history(runner.app, "delta")


def test_missing_threads_copy_nothing(sqlite_saver) -> None:
    assert copy_threads(BoundedInMemorySaver(), sqlite_saver, ["nobody"]) == 0


def test_a_lone_string_of_ids_is_refused_not_split(sqlite_saver) -> None:
    source = BoundedInMemorySaver()
    for thread_id in ("a", "b", "abc"):
        source.put({"configurable": {"thread_id": thread_id}}, empty_checkpoint(), {}, {})
    with pytest.raises(ValueError, match="thread_ids must be a sequence of ids, got str"):
        copy_threads(source, sqlite_saver, "abc")
    assert list(sqlite_saver.list(None)) == []
    assert copy_threads(source, sqlite_saver, ["abc"]) == 1


# --- a real PostgreSQL server ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def postgres_saver():
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg import Connection
    from psycopg.rows import dict_row

    from tests.support.postgres_server import running_cluster

    for cluster in running_cluster("the PostgresSaver transfer test"):
        with Connection.connect(
            cluster.conninfo, autocommit=True, prepare_threshold=0, row_factory=dict_row
        ) as connection:
            saver = PostgresSaver(connection)
            saver.setup()
            yield saver


def test_threads_move_to_postgres_and_back_and_resume(postgres_saver) -> None:
    ours = BoundedInMemorySaver()
    app = nested_graph(ours, {})
    cfg = {"configurable": {"thread_id": "pg-nested"}}
    app.invoke({"messages": ["go"]}, cfg)
    copy_threads(ours, postgres_saver, ["pg-nested"])
    on_postgres = nested_graph(postgres_saver, {})
    assert history(on_postgres, "pg-nested") == history(app, "pg-nested")
    back = BoundedInMemorySaver()
    copy_threads(postgres_saver, back, ["pg-nested"])
    returned = nested_graph(back, {})
    assert returned.invoke(Command(resume="inside"), cfg) == app.invoke(Command(resume="inside"), cfg)
    assert on_postgres.invoke(Command(resume="inside"), cfg) == app.get_state(cfg).values
