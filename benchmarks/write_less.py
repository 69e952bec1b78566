"""Write-back's ``persist="latest"`` measured: durable rows and bytes a turn, with and without it.

Usage: ``python benchmarks/write_less.py [--conversations 20] [--turns 5]`` (a few seconds; PostgreSQL from a
throwaway cluster, ``tests/support/postgres_server.py``, skipped with a word when none can start).

Each conversation is the chat graph of issue 34 (agent, tool and final nodes: ``tests.support.graphs
.chat_graph``), ``--turns`` turns on a thread of its own, through a ``TieredSaver`` writing back with
``WriteBack(flush_interval_seconds=math.inf, persist=...)`` over ``SqliteSaver`` on a file and over
``PostgresSaver``. Two paces of flushing: a flush after every turn (each turn's newest checkpoint is written:
the least ``"latest"`` saves), and one flush at the end (the most). Reported per durable saver and pace:
rows and bytes a turn of each table (bytes: the stored checkpoint, metadata, value and write columns).
"""

from __future__ import annotations

import argparse
import math
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langgraph.checkpoint.bounded import TieredSaver, WriteBack
from tests.support.graphs import chat_graph, thread

SQLITE_TABLES = {
    "checkpoints": "length(checkpoint) + length(metadata)",
    "writes": "length(value)",
}
POSTGRES_TABLES = {
    "checkpoints": "pg_column_size(checkpoint) + pg_column_size(metadata)",
    "checkpoint_blobs": "coalesce(length(blob), 0)",
    "checkpoint_writes": "length(blob)",
}


def converse(durable: Any, persist: str, conversations: int, turns: int, *, every_turn: bool) -> None:
    tiered = TieredSaver(durable, write=WriteBack(flush_interval_seconds=math.inf, persist=persist))  # type: ignore[arg-type]
    app = chat_graph(tiered, {})
    for turn in range(turns):
        for index in range(conversations):
            app.invoke({"messages": [f"user {turn}"]}, thread(f"chat-{index}"))
        if every_turn:
            tiered.flush()
    tiered.close()


def counted(execute: Any, tables: dict[str, str]) -> dict[str, tuple[int, int]]:
    found = {}
    for table, size in tables.items():
        rows, nbytes = execute(f"SELECT count(*), coalesce(sum({size}), 0) FROM {table}")
        found[table] = (int(rows), int(nbytes))
    return found


def sqlite_run(folder: Path, persist: str, conversations: int, turns: int, every_turn: bool) -> dict[str, Any]:
    from langgraph.checkpoint.sqlite import SqliteSaver

    path = folder / f"{persist}-{every_turn}.sqlite"
    converse(
        SqliteSaver(sqlite3.connect(path, check_same_thread=False)),
        persist,
        conversations,
        turns,
        every_turn=every_turn,
    )
    connection = sqlite3.connect(path)
    return counted(lambda sql: connection.execute(sql).fetchone(), SQLITE_TABLES)


def postgres_run(conninfo: str, persist: str, conversations: int, turns: int, every_turn: bool) -> dict[str, Any]:
    from tests.support.durable_savers import clean, connect, postgres_saver

    clean(conninfo)
    converse(postgres_saver(conninfo), persist, conversations, turns, every_turn=every_turn)
    with connect(conninfo) as connection:
        return counted(lambda sql: tuple(connection.execute(sql).fetchone().values()), POSTGRES_TABLES)


def report(name: str, runs: dict[tuple[str, bool], dict[str, tuple[int, int]]], turns: int) -> None:
    print(f"\n{name}: rows and bytes a turn ({turns} turns)")
    print(
        "| pace | persist | "
        + " | ".join(f"{table} rows, bytes" for table in next(iter(runs.values())))
        + " | total rows, bytes |"
    )
    print("| --- " * (3 + len(next(iter(runs.values())))) + "|")
    for (persist, every_turn), tables in runs.items():
        cells = [f"{rows / turns:.1f}, {nbytes / turns:,.0f}" for rows, nbytes in tables.values()]
        rows = sum(rows for rows, _ in tables.values()) / turns
        nbytes = sum(nbytes for _, nbytes in tables.values()) / turns
        pace = "flush every turn" if every_turn else "one flush at the end"
        print(f"| {pace} | {persist} | " + " | ".join(cells) + f" | {rows:.1f}, {nbytes:,.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=20)
    parser.add_argument("--turns", type=int, default=5)
    options = parser.parse_args()
    total = options.conversations * options.turns
    plan = [(persist, every) for every in (True, False) for persist in ("all", "latest")]
    with tempfile.TemporaryDirectory() as folder:
        runs = {key: sqlite_run(Path(folder), *key[:1], options.conversations, options.turns, key[1]) for key in plan}
    report("SqliteSaver", runs, total)
    from tests.support.postgres_server import PostgresCluster, ServerUnavailable, set_up

    try:
        cluster = PostgresCluster(fsync=True)
        cluster.start()
    except ServerUnavailable as error:
        print(f"\nPostgresSaver: skipped ({error})")
        return
    try:
        set_up(cluster.conninfo)
        runs = {
            key: postgres_run(cluster.conninfo, key[0], options.conversations, options.turns, key[1]) for key in plan
        }
        report("PostgresSaver", runs, total)
    finally:
        cluster.remove()


if __name__ == "__main__":
    main()
