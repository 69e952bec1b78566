"""Retention over a real PostgreSQL server (``PostgresSaver``, ``AsyncPostgresSaver``).

* Every graph scenario, pruned to ``keep_last`` after each invoke, answers as the stock saver
  (``test_retention_graphs``), in both write modes, sync and async, and over ``AsyncPostgresSaver``;
  every value no remaining checkpoint uses is collected.
* A thread past its TTL is gone from ``list()``, ``get_tuple()`` and the three tables after one sweep,
  and its rows and bytes are counted; retention's index is there.
* Two processes sweeping one database at once delete each thread once, with no failure.

Without PostgreSQL binaries the module is skipped, saying so loudly.
"""

from __future__ import annotations

import asyncio
import json
import math
import subprocess
import sys
import textwrap
import time

import pytest

from langgraph.checkpoint.bounded import InMemoryCheckpointConfig, RetentionPolicy, TieredSaver
from tests.support.durable_savers import PostgresCluster, clean, cluster_fixture, connect, postgres_saver
from tests.support.graphs import SCENARIOS, thread
from tests.support.paths import ROOT
from tests.tiered.test_retention_graphs import KEEP_LAST, WIDER, traces

SMALL = InMemoryCheckpointConfig(max_threads=2)
DAY = 86_400.0


cluster = cluster_fixture("the retention PostgreSQL tests")


def count(conninfo: str, table: str, thread_id: str | None = None) -> int:
    with connect(conninfo) as connection:
        if thread_id is None:
            row = connection.execute(f"SELECT count(*) AS n FROM {table}").fetchone()
        else:
            row = connection.execute(f"SELECT count(*) AS n FROM {table} WHERE thread_id = %s", (thread_id,)).fetchone()
    return int(row["n"])


def unused_values(conninfo: str) -> int:
    """Values (``checkpoint_blobs`` rows) that no checkpoint of their namespace uses.

    (That every value a kept checkpoint uses is still there, the graphs' answers show: PostgresSaver stores
    no row for some versions, a consumed ``__start__`` for one, so a count of "missing" rows proves nothing.)
    """
    with connect(conninfo) as connection:
        unused = connection.execute(
            "SELECT count(*) AS n FROM checkpoint_blobs b WHERE NOT EXISTS (SELECT 1 FROM checkpoints c, "
            "jsonb_each_text(c.checkpoint -> 'channel_versions') v WHERE c.thread_id = b.thread_id "
            "AND c.checkpoint_ns = b.checkpoint_ns AND v.key = b.channel AND v.value = b.version)"
        ).fetchone()["n"]
    return int(unused)


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("write", ["through", "back"])
@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_what_keep_last_keeps_over_postgres_answers_as_the_stock_saver(
    cluster: PostgresCluster, name: str, write: str, use_async: bool
) -> None:
    clean(cluster.conninfo)
    saver = TieredSaver(postgres_saver(cluster.conninfo), config=SMALL, write=write)  # type: ignore[arg-type]
    factory, scenario = SCENARIOS[name]
    expected, actual = await traces(factory, scenario, saver, use_async, WIDER.get(name, KEEP_LAST))
    assert actual == expected
    saver.close()
    assert unused_values(cluster.conninfo) == 0


@pytest.mark.parametrize("write", ["through", "back"])
@pytest.mark.parametrize("name", ["interrupt_and_resume", "subgraph_interrupts", "delta_channel_conversation"])
async def test_keep_last_over_async_postgres(cluster: PostgresCluster, name: str, write: str) -> None:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg import AsyncConnection
    from psycopg.rows import dict_row

    clean(cluster.conninfo)
    factory, scenario = SCENARIOS[name]
    async with await AsyncConnection.connect(
        cluster.conninfo, autocommit=True, prepare_threshold=0, row_factory=dict_row
    ) as connection:
        saver = TieredSaver(AsyncPostgresSaver(connection), config=SMALL, write=write)  # type: ignore[arg-type]
        expected, actual = await traces(factory, scenario, saver, True, WIDER.get(name, KEEP_LAST))
        assert actual == expected
        await saver.aclose()
    assert unused_values(cluster.conninfo) == 0


def test_a_thread_past_its_ttl_is_gone_from_every_table(cluster: PostgresCluster) -> None:
    from tests.tiered.test_retention import Clock, run_turns

    clean(cluster.conninfo)
    clock = Clock()
    saver = TieredSaver(
        postgres_saver(cluster.conninfo),
        config=SMALL,
        retention=RetentionPolicy(idle_ttl_seconds=DAY, sweep_interval_seconds=math.inf),
        clock=clock.monotonic,
        wall_clock=clock,
    )
    run_turns(saver, ["old"], turns=3)
    mark = time.time()
    run_turns(saver, ["fresh"], turns=1)
    clock.idle_since(mark, DAY)
    old_rows = count(cluster.conninfo, "checkpoints", "old")
    old_writes = count(cluster.conninfo, "checkpoint_writes", "old")
    assert count(cluster.conninfo, "checkpoint_blobs", "old") > 0

    report = saver.sweep()

    assert (report.deleted_threads, report.checkpoints, report.writes) == (1, old_rows, old_writes)
    assert report.nbytes > 0
    assert saver.get_tuple(thread("old")) is None and list(saver.list(thread("old"))) == []
    for table in ("checkpoints", "checkpoint_writes", "checkpoint_blobs"):
        assert count(cluster.conninfo, table, "old") == 0
    assert count(cluster.conninfo, "checkpoints", "fresh") == 4
    with connect(cluster.conninfo) as connection:
        indexes = {row["indexname"] for row in connection.execute("SELECT indexname FROM pg_indexes")}
    assert "bounded_retention_checkpoint_id" in indexes


SWEEPER = textwrap.dedent(
    """
    import json, math, sys
    from psycopg import Connection
    from psycopg.rows import dict_row
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.bounded import RetentionPolicy, TieredSaver

    conninfo, wall = sys.argv[1], float(sys.argv[2])
    connection = Connection.connect(conninfo, autocommit=True, prepare_threshold=0, row_factory=dict_row)
    saver = TieredSaver(
        PostgresSaver(connection),
        retention=RetentionPolicy(idle_ttl_seconds=3600, keep_last=2, sweep_interval_seconds=math.inf),
        wall_clock=lambda: wall,
    )
    print("ready", flush=True)
    sys.stdin.readline()
    report = saver.sweep()
    print(json.dumps({"deleted": report.deleted_threads, "failures": report.failures, "due": report.due}), flush=True)
    """
)


def test_two_processes_sweep_one_database(cluster: PostgresCluster) -> None:
    from tests.tiered.test_retention import run_turns

    clean(cluster.conninfo)
    writer = TieredSaver(postgres_saver(cluster.conninfo), config=SMALL)
    names = [f"idle-{n}" for n in range(60)]
    run_turns(writer, names, turns=1)
    wall = time.time() + 2 * 3600
    children = [
        subprocess.Popen(
            [sys.executable, "-c", SWEEPER, cluster.conninfo, str(wall)],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    for child in children:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    for child in children:
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    reports = []
    for child in children:
        out, err = child.communicate(timeout=300)
        assert child.returncode == 0, err
        reports.append(json.loads(out.strip().splitlines()[-1]))
    assert sum(report["deleted"] for report in reports) == len(names)
    assert [report["failures"] for report in reports] == [0, 0]
    for table in ("checkpoints", "checkpoint_writes", "checkpoint_blobs"):
        assert count(cluster.conninfo, table) == 0
    asyncio.run(asyncio.sleep(0))
