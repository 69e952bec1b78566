"""``TieredSaver`` over a real PostgreSQL server, started from the distribution's binaries.

* The graph scenarios (interrupts, subgraphs, ``Send``, time travel, a failing branch,
  ``DeltaChannel``) over ``PostgresSaver`` in both write modes, sync and async, and over
  ``AsyncPostgresSaver``: the stock saver's answers, and the durable tier alone answers the same.
* PostgreSQL stopped in the middle of a run: clear errors, nothing diverges, and everything goes on
  once it is back (write-through refuses the writes; write-back holds them up to ``max_dirty_bytes``).
* Two processes writing and reading the same threads through one PostgreSQL: with
  ``WriteThrough(processes="many")`` no read is stale; with the default (one process per thread) one is,
  which is why the default needs sticky routing.

Without PostgreSQL binaries the module is skipped, saying so loudly.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver as StockSaver
from langgraph.types import Command

from langgraph.checkpoint.bounded import CheckpointCapacityError, InMemoryCheckpointConfig, TieredSaver, WriteBack
from tests.support.durable_savers import PostgresCluster, cluster_fixture, postgres_saver
from tests.support.graphs import SCENARIOS, Runner, approval_graph, describe, thread, without_interrupt_ids
from tests.support.paths import ROOT
from tests.support.tiered import graph_view, tuples

SMALL = InMemoryCheckpointConfig(max_threads=2)


cluster = cluster_fixture("the tiered PostgreSQL tests")


def pooled_saver(conninfo: str) -> Any:
    """A ``PostgresSaver`` on a pool that checks its connections: it reconnects once the server is back."""
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool

    pool = ConnectionPool(
        conninfo,
        kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
        min_size=1,
        max_size=4,
        timeout=2.0,
        check=ConnectionPool.check_connection,
        open=True,
    )
    return PostgresSaver(pool)


def restart(cluster: PostgresCluster, durable: Any) -> None:
    """Start the server again, and have the saver's pool replace its broken connections before going on."""
    cluster.start()
    durable.conn.check()
    durable.conn.wait(60)


def run(name: str, checkpointer: Any, *, use_async: bool) -> Any:
    factory, scenario = SCENARIOS[name]
    calls: dict[str, int] = {}
    runner = Runner(factory(checkpointer, calls), use_async=use_async, durability="async", calls=calls)
    return asyncio.run(scenario(runner))


# --- graphs -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("write", ["through", "back"])
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_graphs_over_postgres_answer_as_the_stock_saver(
    cluster: PostgresCluster, name: str, write: str, use_async: bool
) -> None:
    durable = postgres_saver(cluster.conninfo)
    tiered = TieredSaver(durable, config=SMALL, write=write)
    expected = run(name, StockSaver(), use_async=use_async)
    threads_before = {item.config["configurable"]["thread_id"] for item in durable.list(None)}
    for thread_id in threads_before:
        durable.delete_thread(thread_id)  # every scenario uses its own thread ids: start each clean
    assert run(name, tiered, use_async=use_async) == expected
    tiered.flush()
    tiered.check()
    factory = SCENARIOS[name][0]
    for thread_id in sorted({item.config["configurable"]["thread_id"] for item in durable.list(None)}):
        assert graph_view(factory, tiered, thread_id) == graph_view(factory, durable, thread_id)
        assert tuples(tiered, thread_id) == tuples(durable, thread_id)


@pytest.mark.parametrize("name", ["interrupt_and_resume", "subgraph_interrupts", "delta_channel_conversation"])
def test_graphs_over_async_postgres(cluster: PostgresCluster, name: str) -> None:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg import AsyncConnection
    from psycopg.rows import dict_row

    factory, scenario = SCENARIOS[name]

    async def main() -> Any:
        async with await AsyncConnection.connect(
            cluster.conninfo, autocommit=True, prepare_threshold=0, row_factory=dict_row
        ) as connection:
            durable = AsyncPostgresSaver(connection)
            for thread_id in {item.config["configurable"]["thread_id"] async for item in durable.alist(None)}:
                await durable.adelete_thread(thread_id)  # after the listing: it holds the saver's lock
            tiered = TieredSaver(durable, config=SMALL, write="back")
            calls: dict[str, int] = {}
            runner = Runner(factory(tiered, calls), use_async=True, durability="async", calls=calls)
            trace = await scenario(runner)
            await tiered.aclose()
            return trace

    expected = run(name, StockSaver(), use_async=True)
    assert asyncio.run(main()) == expected


# --- PostgreSQL stopped mid-run -----------------------------------------------------------------------------------


def conversation_turns(app: Any, thread_id: str, turns: range) -> list[Any]:
    results = []
    for turn in turns:
        results.append(without_interrupt_ids(app.invoke({"messages": [f"turn {turn}"]}, thread(thread_id))))
        results.append(app.invoke(Command(resume=f"answer {turn}"), thread(thread_id)))
    return results


def test_write_through_while_postgres_is_down_refuses_clearly_and_goes_on_once_it_is_back(
    cluster: PostgresCluster,
) -> None:
    from psycopg import OperationalError
    from psycopg_pool import PoolTimeout

    durable = pooled_saver(cluster.conninfo)
    tiered = TieredSaver(durable, config=SMALL)
    app, stock = approval_graph(tiered, {}), approval_graph(StockSaver(), {})
    assert conversation_turns(app, "outage", range(2)) == conversation_turns(stock, "outage", range(2))
    before = tiered._store.export_thread("outage")
    state = describe(app.get_state(thread("outage")))
    cluster.stop()
    try:
        with pytest.raises((OperationalError, PoolTimeout)):
            app.invoke({"messages": ["during the outage"]}, thread("outage"))
        assert tiered._store.export_thread("outage") == before  # nothing acknowledged, nothing in memory
        assert describe(app.get_state(thread("outage"))) == state  # reads of hot threads go on
        assert tiered.stats().durable_errors >= 1
    finally:
        restart(cluster, durable)
    assert conversation_turns(app, "outage", range(2, 4)) == conversation_turns(stock, "outage", range(2, 4))
    cold = TieredSaver(postgres_saver(cluster.conninfo))
    assert describe(approval_graph(cold, {}).get_state(thread("outage"))) == describe(stock.get_state(thread("outage")))
    assert tuples(cold, "outage") == tuples(tiered, "outage")


def test_write_back_while_postgres_is_down_holds_writes_then_refuses_then_flushes(cluster: PostgresCluster) -> None:
    durable = pooled_saver(cluster.conninfo)
    tiered = TieredSaver(
        durable,
        config=SMALL,
        write=WriteBack(flush_interval_seconds=float("inf"), max_dirty_bytes=60_000),
    )
    app, stock = approval_graph(tiered, {}), approval_graph(StockSaver(), {})
    assert conversation_turns(app, "held", range(2)) == conversation_turns(stock, "held", range(2))
    tiered.flush()
    cluster.stop()
    refused = None
    try:
        turn = 2
        while refused is None and turn < 500:
            try:
                app.invoke({"messages": [f"turn {turn}"]}, thread("held"))
                app.invoke(Command(resume=f"answer {turn}"), thread("held"))
                turn += 1
            except CheckpointCapacityError as error:
                refused = error
        assert refused is not None, "writes were never refused while the durable tier was down"
        assert refused.limit == "max_dirty_bytes" and "PostgresSaver" in str(refused)
        stats = tiered.stats()
        assert stats.dirty_bytes <= 60_000 and stats.flush_failures >= 1
    finally:
        restart(cluster, durable)
    # Once it is back: the held writes are flushed, and the thread is as the stock saver's after the same turns
    # (the refused turn is run again: LangGraph resumes from the last checkpoint the saver took).
    app.invoke(None, thread("held"))
    tiered.flush()
    assert tiered.stats().dirty_bytes == 0
    cold = TieredSaver(postgres_saver(cluster.conninfo))
    assert tuples(cold, "held") == tuples(tiered, "held")
    assert describe(approval_graph(cold, {}).get_state(thread("held"))) == describe(app.get_state(thread("held")))


# --- two processes, one PostgreSQL ----------------------------------------------------------------------------------

WORKER = textwrap.dedent(
    """
    import json, operator, sys
    from typing import Annotated, TypedDict
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.graph import END, START, StateGraph
    from psycopg import Connection
    from psycopg.rows import dict_row
    from langgraph.checkpoint.bounded import TieredSaver, WriteThrough

    class Chat(TypedDict):
        messages: Annotated[list[str], operator.add]

    builder = StateGraph(Chat)
    builder.add_node("reply", lambda state: {"messages": [f"reply to {state['messages'][-1]}"]})
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    connection = Connection.connect(sys.argv[1], autocommit=True, prepare_threshold=0, row_factory=dict_row)
    saver = TieredSaver(PostgresSaver(connection), write=WriteThrough(processes=sys.argv[2]))
    app = builder.compile(checkpointer=saver)
    for line in sys.stdin:
        thread_id, text = line.split()
        config = {"configurable": {"thread_id": thread_id}}
        seen = app.get_state(config).values.get("messages", [])
        after = app.invoke({"messages": [text]}, config)["messages"]
        print(json.dumps({"seen": len(seen), "after": len(after), "validations": saver.stats().validations}))
        sys.stdout.flush()
    """
)


def alternate(conninfo: str, several: str, rounds: int) -> list[tuple[int, int, int]]:
    """Two processes take turns on three threads; each reports how many messages it saw before its turn,
    and how many there should have been."""
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, conninfo, several],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    expected = {f"{several}-{index}": 0 for index in range(3)}
    seen: list[tuple[int, int, int]] = []
    try:
        for turn in range(rounds):
            process = processes[turn % 2]
            thread_id = f"{several}-{turn % 3}"
            assert process.stdin is not None and process.stdout is not None
            process.stdin.write(f"{thread_id} message-{turn}\n")
            process.stdin.flush()
            report = json.loads(process.stdout.readline())
            seen.append((report["seen"], expected[thread_id], report["validations"]))
            expected[thread_id] += 2
            if several == "many":
                assert report["after"] == expected[thread_id]
    finally:
        for process in processes:
            if process.stdin is not None:
                process.stdin.close()
            process.wait(60)
    return seen


def test_two_processes_never_read_stale_when_several_are_declared(cluster: PostgresCluster) -> None:
    seen = alternate(cluster.conninfo, "many", rounds=24)
    assert [(got, expected) for got, expected, _ in seen] == [(expected, expected) for _, expected, _ in seen]
    assert seen[-1][2] > 0  # the check ran


def test_two_processes_can_read_stale_without_validation(cluster: PostgresCluster) -> None:
    """The default promises one process per thread at a time: break that, and a hot copy goes stale."""
    seen = alternate(cluster.conninfo, "one", rounds=24)
    assert any(got < expected for got, expected, _ in seen)
