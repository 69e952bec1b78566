"""Conditional puts measured: ``put_if_newest`` against the saver's own ``put``, over SQLite and PostgreSQL.

Usage: ``python benchmarks/conditional.py [--rounds 21] [--calls 200] [--json results.json]`` (about a
minute with the defaults).

Each database holds two threads, one per subject, in the same file or database:

* ``put``: ``saver.put`` of a child of the thread's previous checkpoint;
* ``put_if_newest``: the same checkpoint through ``put_if_newest(expected=<previous id>)`` (the check
  always passes: this is the price of the guard, not of a conflict).

The checkpoint is a chat step's: six messages (a new blob each step, PostgreSQL splitting it from the
checkpoint), a counter and a route. Databases: a SQLite file in a temporary folder (``SqliteSaver``,
its default WAL mode, ``synchronous`` at SQLite's default); a throwaway PostgreSQL 15 on 127.0.0.1
(``fsync`` on; ``tiered.postgres``), ``PostgresSaver`` on one connection (``autocommit``,
``prepare_threshold=0``, as LangGraph documents).

Rounds interleave the subjects, the order alternating round to round (the machine is shared: a slow
phase hits both). Each figure is the median over rounds of a batch's time per call; the ratio is the
median of the per-round ratios, with its quartiles. Round trips (PostgreSQL: the ``Sync`` and ``Query``
messages libpq sends, read from its protocol trace) and statements (SQLite: its statement trace) are counted on one
call of each.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.sqlite import SqliteSaver
from tiered import ServerUnavailable, postgres, postgres_saver
from workload import require_this_checkout

from langgraph.checkpoint.bounded.tiered.conditional import put_if_newest

require_this_checkout()

SUBJECTS = ("put", "put_if_newest")


class Chain:
    """One thread, one checkpoint after another, each a child of the last, stored by ``put`` or guarded."""

    def __init__(self, saver: Any, thread_id: str, guarded: bool) -> None:
        self.saver = saver
        self.thread_id = thread_id
        self.guarded = guarded
        self.parent: str | None = None
        self.version: str | None = None
        self.step = 0

    def put(self) -> None:
        self.step += 1
        checkpoint = empty_checkpoint()
        checkpoint["id"] = str(uuid6())
        messages = [HumanMessage(content=f"question {n} " * 8, id=f"h{n}") for n in range(3)]
        messages += [AIMessage(content=f"answer {n} " * 12, id=f"a{n}") for n in range(3)]
        version = self.version = self.saver.get_next_version(self.version, None)
        checkpoint["channel_values"] = {"messages": messages, "count": self.step, "route": "agent"}
        checkpoint["channel_versions"] = {"messages": version, "count": version, "route": "1"}
        located: dict[str, Any] = {"thread_id": self.thread_id, "checkpoint_ns": ""}
        if self.parent is not None:
            located["checkpoint_id"] = self.parent
        config: Any = {"configurable": located}
        metadata: Any = {"source": "loop", "step": self.step, "parents": {}}
        versions = {"messages": version, "count": version}
        if self.guarded:
            stored = put_if_newest(self.saver, config, checkpoint, metadata, versions, expected=self.parent)
        else:
            stored = self.saver.put(config, checkpoint, metadata, versions)
        self.parent = stored["configurable"]["checkpoint_id"]


def batch(call: Callable[[], None], calls: int) -> float:
    """Seconds per call over ``calls`` calls."""
    started = time.perf_counter()
    for _ in range(calls):
        call()
    return (time.perf_counter() - started) / calls


def postgres_round_trips(saver: Any, call: Callable[[], None]) -> int:
    """How many times libpq waited for the server during one call: each ``Sync`` of the extended protocol and
    each simple ``Query`` (``COMMIT``) it sent, read from its protocol trace."""
    with tempfile.NamedTemporaryFile("r", suffix=".trace") as trace:
        descriptor = os.open(trace.name, os.O_WRONLY)
        try:
            saver.conn.pgconn.trace(descriptor)
            call()
            saver.conn.pgconn.untrace()
        finally:
            os.close(descriptor)
        sent = [line.split("\t")[1:4] for line in Path(trace.name).read_text().splitlines()]
        return sum(1 for fields in sent if fields[:1] == ["F"] and fields[2:3] in (["Sync"], ["Query"]))


def sqlite_statements(saver: Any, call: Callable[[], None]) -> list[str]:
    """The statements SQLite ran during one call (``BEGIN``/``COMMIT`` included)."""
    seen: list[str] = []
    saver.conn.set_trace_callback(lambda statement: seen.append(statement.split("(")[0].split(" FROM")[0].strip()))
    try:
        call()
    finally:
        saver.conn.set_trace_callback(None)
    return seen


def measure(saver: Any, *, rounds: int, calls: int, database: str) -> dict[str, Any]:
    """Both subjects on one saver, interleaved; per-call medians, the ratio, and what one call sends."""
    tag = f"{os.getpid()}-{time.monotonic_ns()}"
    chains = {name: Chain(saver, f"{name}-{tag}", name == "put_if_newest") for name in SUBJECTS}
    for chain in chains.values():
        batch(chain.put, calls)  # warm: connections, prepared statements, caches, the first checkpoint
    per_round: list[dict[str, float]] = []
    for number in range(rounds):
        order = SUBJECTS if number % 2 == 0 else SUBJECTS[::-1]
        per_round.append({name: batch(chains[name].put, calls) for name in order})
    ratios = [r["put_if_newest"] / r["put"] for r in per_round]
    quartiles = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    result: dict[str, Any] = {
        "database": database,
        "put": statistics.median(r["put"] for r in per_round),
        "put_if_newest": statistics.median(r["put_if_newest"] for r in per_round),
        "ratio": statistics.median(ratios),
        "q1": quartiles[0],
        "q3": quartiles[2],
    }
    if database == "postgres":
        result["round trips"] = {name: postgres_round_trips(saver, chains[name].put) for name in SUBJECTS}
    else:
        result["statements"] = {name: sqlite_statements(saver, chains[name].put) for name in SUBJECTS}
    return result


@contextlib.contextmanager
def databases(skip_postgres: bool) -> Iterator[list[tuple[str, Any]]]:
    with tempfile.TemporaryDirectory(prefix="conditional-bench-") as folder, contextlib.ExitStack() as stack:
        connection = sqlite3.connect(Path(folder) / "durable.sqlite", check_same_thread=False)
        stack.callback(connection.close)
        found: list[tuple[str, Any]] = [("sqlite", SqliteSaver(connection))]
        if not skip_postgres:
            try:
                conninfo = stack.enter_context(postgres(fsync=True))
            except ServerUnavailable as error:
                print(f"PostgreSQL not measured: {error}")
            else:
                saver = postgres_saver(conninfo)
                stack.callback(saver.conn.close)
                found.append(("postgres", saver))
        yield found


def report(results: list[dict[str, Any]]) -> str:
    lines = [
        "| database | put | put_if_newest | ratio, median (quartiles) | added per call |",
        "| --- | --- | --- | --- | --- |",
    ]
    for found in results:
        lines.append(
            f"| {found['database']} | {found['put'] * 1e3:.3f} ms | {found['put_if_newest'] * 1e3:.3f} ms | "
            f"{found['ratio']:.2f} ({found['q1']:.2f}-{found['q3']:.2f}) | "
            f"{(found['put_if_newest'] - found['put']) * 1e3:.3f} ms |"
        )
    for found in results:
        if "round trips" in found:
            trips = found["round trips"]
            lines.append(
                f"\n{found['database']}: round trips per call: put {trips['put']}, "
                f"put_if_newest {trips['put_if_newest']}"
            )
        if "statements" in found:
            for name, statements in found["statements"].items():
                lines.append(
                    f"\n{found['database']}: {name} runs {len(statements)} statements: {', '.join(statements)}"
                )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=21, help="interleaved rounds (default 21)")
    parser.add_argument("--calls", type=int, default=200, help="puts per subject per round (default 200)")
    parser.add_argument("--sqlite-only", action="store_true", help="do not start PostgreSQL")
    parser.add_argument("--json", type=Path, help="also write the results here")
    arguments = parser.parse_args()
    with databases(arguments.sqlite_only) as found:
        results = [
            measure(saver, rounds=arguments.rounds, calls=arguments.calls, database=name) for name, saver in found
        ]
    print(report(results))
    if arguments.json is not None:
        arguments.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
