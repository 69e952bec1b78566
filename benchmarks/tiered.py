"""Tiered storage measured: the bounded store as a hot tier over PostgreSQL and SQLite, against each alone.

Usage: ``python benchmarks/tiered.py [--rounds 15] [--json results.json]`` (about two minutes).

Savers, each over its own data (a throwaway PostgreSQL 15 started from the distribution's binaries,
listening on 127.0.0.1 with ``fsync`` on, as the issue measured; a SQLite file in a temporary
folder):

* ``stock``: LangGraph's ``InMemorySaver``; ``ours``: ``BoundedInMemorySaver``, limits lifted;
* ``postgres``: ``PostgresSaver`` alone; ``sqlite``: ``SqliteSaver`` on a file, alone;
* ``tiered-pg-through``, ``tiered-pg-back``: ``TieredSaver(PostgresSaver)`` in each write mode
  (write-back flushing every second, as by default);
* ``tiered-pg-validate``: write-through with ``coherence="validate"``;
* ``tiered-sqlite-through``, ``tiered-sqlite-back``: ``TieredSaver(SqliteSaver)`` on a file.

Operations, each timed as a batch on every saver in turn, the order rotating round to round (the
machine is shared: a slow phase hits every saver of the round):

* a graph turn: one ``invoke`` of the benchmarks' tool-calling chat graph (three node runs, seven
  new messages; ``benchmarks/test_graph.py``) on one of 10 threads (the working set fits in memory);
* ``get_tuple`` of a thread's latest checkpoint, and ``list(limit=20)`` of it, on those threads
  (hot for the tiered savers);
* a cold read: ``get_tuple`` of a thread the tiered saver's hot tier does not hold (each read takes
  a new one of 2,000 threads made beforehand), against ``PostgresSaver.get_tuple`` of the same kind
  of thread.

Each figure is the median over rounds of the per-call time; each ratio the median of the per-round
ratios, with its quartiles.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import pwd
import shutil
import socket
import sqlite3
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver as StockSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from test_graph import build
from workload import UNBOUNDED, require_this_checkout

from langgraph.checkpoint.bounded import BoundedInMemorySaver, InMemoryCheckpointConfig, TieredSaver

require_this_checkout()

THREADS = 10  # the working set of the turn and read benchmarks
COLD_THREADS = 2_000  # threads made beforehand for the cold reads
HOT = InMemoryCheckpointConfig(max_threads=THREADS * 10, max_total_bytes=1 << 30)


class ServerUnavailable(RuntimeError):
    """No PostgreSQL server could be started here."""


@contextlib.contextmanager
def postgres(*, fsync: bool = True) -> Iterator[str]:
    """A throwaway PostgreSQL on 127.0.0.1 (a free port), ``fsync`` on; yields its connection string."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        raise ServerUnavailable("no PostgreSQL binaries under /usr/lib/postgresql")
    binaries = Path(found[-1]).parent
    folder = Path(tempfile.mkdtemp(prefix="pg-bench-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        pwd.getpwnam("postgres")
        shutil.chown(folder, "postgres", "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    def run(*command: object) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*as_user, *map(str, command)], capture_output=True, text=True, timeout=120)

    try:
        done = run(binaries / "initdb", "-D", folder / "data", "-U", "postgres", "--auth=trust")
        if done.returncode:
            raise ServerUnavailable(f"initdb failed: {done.stderr[-300:]}")
        options = f"-c listen_addresses=127.0.0.1 -k {folder} -p {port} -c fsync={'on' if fsync else 'off'}"
        done = run(binaries / "pg_ctl", "-D", folder / "data", "-o", options, "-w", "start", "-l", folder / "log")
        if done.returncode:
            raise ServerUnavailable(f"pg_ctl start failed: {done.stderr[-300:]}")
        try:
            yield f"host=127.0.0.1 port={port} user=postgres dbname=postgres"
        finally:
            run(binaries / "pg_ctl", "-D", folder / "data", "-m", "fast", "stop")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def postgres_saver(conninfo: str) -> Any:
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg import Connection
    from psycopg.rows import dict_row

    saver = PostgresSaver(Connection.connect(conninfo, autocommit=True, prepare_threshold=0, row_factory=dict_row))
    saver.setup()
    return saver


def sqlite_saver(path: Path) -> SqliteSaver:
    return SqliteSaver(sqlite3.connect(path, check_same_thread=False))


@dataclass
class Subject:
    """One saver under measurement: its graph, and for the cold reads, the threads not read yet."""

    name: str
    saver: Any
    app: Any = None
    cold: list[str] = field(default_factory=list)
    turns: int = 0

    def __post_init__(self) -> None:
        self.app = build(self.saver)

    def turn(self) -> None:
        self.turns += 1
        self.app.invoke({"messages": [{"role": "user", "content": "hi"}]}, _config(f"chat-{self.turns % THREADS}"))


def _config(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}


def subjects(conninfo: str | None, folder: Path) -> dict[str, Subject]:
    """Every saver, each with its 10 threads warmed by three turns."""
    made: dict[str, Any] = {"stock": StockSaver(), "ours": BoundedInMemorySaver(config=UNBOUNDED)}
    if conninfo is not None:
        made["postgres"] = postgres_saver(conninfo)
        made["tiered-pg-through"] = TieredSaver(postgres_saver(conninfo), config=HOT)
        made["tiered-pg-back"] = TieredSaver(postgres_saver(conninfo), config=HOT, write="back")
        made["tiered-pg-validate"] = TieredSaver(postgres_saver(conninfo), config=HOT, coherence="validate")
    made["sqlite"] = sqlite_saver(folder / "alone.sqlite")
    made["tiered-sqlite-through"] = TieredSaver(sqlite_saver(folder / "through.sqlite"), config=HOT)
    made["tiered-sqlite-back"] = TieredSaver(sqlite_saver(folder / "back.sqlite"), config=HOT, write="back")
    result = {name: Subject(name, saver) for name, saver in made.items()}
    for subject in result.values():
        for _ in range(THREADS * 3):
            subject.turn()
    return result


def prepare_cold(subjects_: dict[str, Subject], conninfo: str | None, count: int) -> None:
    """Threads of one chat turn each, written to PostgreSQL by its own saver, for the cold reads."""
    if conninfo is None:
        return
    writer = build(postgres_saver(conninfo))
    for index in range(count):
        writer.invoke({"messages": [{"role": "user", "content": "hi"}]}, _config(f"cold-{index}"))
    for name in ("postgres", "tiered-pg-through"):
        subjects_[name].cold = [f"cold-{index}" for index in range(count)]


Batch = Callable[[], float]  # runs one batch, returns seconds per call


def batch(call: Callable[[], object], size: int) -> Batch:
    def run() -> float:
        start = time.perf_counter()
        for _ in range(size):
            call()
        return (time.perf_counter() - start) / size

    return run


def operations(subject: Subject, *, turns: int, reads: int, cold: int) -> dict[str, Batch]:
    saver = subject.saver
    latest = _config("chat-3")
    found: dict[str, Batch] = {
        "graph turn": batch(subject.turn, turns),
        "get_tuple": batch(lambda: saver.get_tuple(latest), reads),
        "list(limit=20)": batch(lambda: list(saver.list(latest, limit=20)), max(1, reads // 10)),
    }
    if subject.cold:
        found["cold get_tuple"] = batch(lambda: saver.get_tuple(_config(subject.cold.pop())), cold)
    return found


def one_round(batches: dict[str, dict[str, Batch]], rotation: int) -> dict[tuple[str, str], float]:
    """Every saver's batch of every operation once, the savers' order rotated by ``rotation``."""
    names = list(batches)
    order = names[rotation % len(names) :] + names[: rotation % len(names)]
    timings: dict[tuple[str, str], float] = {}
    for operation in ("graph turn", "get_tuple", "list(limit=20)", "cold get_tuple"):
        for name in order:
            if operation in batches[name]:
                timings[(name, operation)] = batches[name][operation]()
    return timings


RATIOS = [  # (what, numerator, denominator, operation, target)
    ("hot get_tuple / ours", "tiered-pg-through", "ours", "get_tuple", 1.2),
    ("hot list(limit=20) / ours", "tiered-pg-through", "ours", "list(limit=20)", 1.2),
    ("write-through turn / PostgresSaver", "tiered-pg-through", "postgres", "graph turn", 1.1),
    ("write-back turn / ours", "tiered-pg-back", "ours", "graph turn", 1.15),
    ("cold get_tuple / PostgresSaver", "tiered-pg-through", "postgres", "cold get_tuple", 1.2),
    ("validate get_tuple / PostgresSaver", "tiered-pg-validate", "postgres", "get_tuple", None),
    ("hot get_tuple (SQLite tier) / ours", "tiered-sqlite-through", "ours", "get_tuple", 1.2),
    ("write-through turn / SqliteSaver", "tiered-sqlite-through", "sqlite", "graph turn", None),
    ("write-back turn (SQLite tier) / ours", "tiered-sqlite-back", "ours", "graph turn", 1.15),
]


def summarize(rounds: list[dict[tuple[str, str], float]]) -> dict[str, Any]:
    medians = {
        f"{name} | {operation}": statistics.median(r[(name, operation)] for r in rounds)
        for name, operation in rounds[0]
    }
    ratios = {}
    for what, top, bottom, operation, target in RATIOS:
        if (top, operation) not in rounds[0] or (bottom, operation) not in rounds[0]:
            continue
        values = [r[(top, operation)] / r[(bottom, operation)] for r in rounds]
        quartiles = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
        ratios[what] = {"median": statistics.median(values), "q1": quartiles[0], "q3": quartiles[2], "target": target}
    return {"medians": medians, "ratios": ratios, "rounds": len(rounds)}


def table(summary: dict[str, Any]) -> str:
    names = list(dict.fromkeys(key.split(" | ")[0] for key in summary["medians"]))
    operations_ = ["graph turn", "get_tuple", "list(limit=20)", "cold get_tuple"]
    lines = ["| saver | " + " | ".join(operations_) + " |", "| --- |" + " --- |" * len(operations_)]
    for name in names:
        cells = []
        for operation in operations_:
            value = summary["medians"].get(f"{name} | {operation}")
            cells.append("" if value is None else f"{value * 1000:.3f} ms")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", "| ratio | median (quartiles) | target |", "| --- | --- | --- |"]
    for what, ratio in summary["ratios"].items():
        target = ratio["target"]
        verdict = "" if target is None else f"≤ {target}: {'met' if ratio['median'] <= target else '**missed**'}"
        lines.append(f"| {what} | {ratio['median']:.2f} ({ratio['q1']:.2f}-{ratio['q3']:.2f}) | {verdict} |")
    return "\n".join(lines)


def measure(conninfo: str | None, rounds: int, *, turns: int, reads: int, cold: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        made = subjects(conninfo, Path(folder))
        prepare_cold(made, conninfo, rounds * cold + cold)
        batches = {name: operations(subject, turns=turns, reads=reads, cold=cold) for name, subject in made.items()}
        one_round(batches, 0)  # warm-up, not counted
        results = [one_round(batches, rotation) for rotation in range(rounds)]
        for subject in made.values():
            if isinstance(subject.saver, TieredSaver):
                subject.saver.close()
        return summarize(results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--turns", type=int, default=10, help="graph turns per batch")
    parser.add_argument("--reads", type=int, default=200, help="get_tuple calls per batch (a tenth for list)")
    parser.add_argument("--cold", type=int, default=20, help="cold reads per batch")
    parser.add_argument("--json", type=Path, help="write the medians and ratios here")
    arguments = parser.parse_args()
    try:
        with postgres() as conninfo:
            summary = measure(
                conninfo, arguments.rounds, turns=arguments.turns, reads=arguments.reads, cold=arguments.cold
            )
    except ServerUnavailable as error:
        print(f"NO POSTGRESQL SERVER COULD BE STARTED ({error}): measuring the SQLite tier only")
        summary = measure(None, arguments.rounds, turns=arguments.turns, reads=arguments.reads, cold=arguments.cold)
    print(table(summary))
    if arguments.json:
        arguments.json.write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
