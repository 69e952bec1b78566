"""Tiered storage measured: the bounded store as a hot tier over PostgreSQL and SQLite, against each alone.

Usage: ``python benchmarks/tiered.py [--rounds 15] [--apart-rounds 7] [--apart-only] [--json results.json]``
(about fifteen minutes with the defaults; ``--apart-only`` measures write-back alone, about three).

Savers, each over its own data (a throwaway PostgreSQL 15 started from the distribution's binaries,
listening on 127.0.0.1 with ``fsync`` on, as the issue measured; a SQLite file in a temporary
folder):

* ``stock``: LangGraph's ``InMemorySaver``; ``ours``: ``BoundedInMemorySaver``, limits lifted;
* ``postgres``: ``PostgresSaver`` alone; ``sqlite``: ``SqliteSaver`` on a file, alone;
* ``tiered-pg-through``, ``tiered-pg-back``: ``TieredSaver(PostgresSaver)`` in each write mode
  (write-back flushing every second, as by default);
* ``tiered-pg-validate``: write-through with several processes (``WriteThrough(processes="many")``: validated
  reads and conditional puts; before issue 33, ``coherence="validate"`` alone);
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

Write-back flushes in a background thread of its process, whose work competes with whatever else that
process runs: measured beside the other savers, it would slow their batches and flatter its own. So
the write-back savers are measured apart, each round in fresh processes taking turns (``ours``,
``tiered-pg-back``, ``tiered-sqlite-back``), each running graph turns for ``--seconds`` (long enough
for its periodic flushes to happen inside the window), with hot reads after each turn, its flusher
running. A turn's median, mean and 95th percentile are reported: the median hides the few turns that
wait for a flush once ``max_dirty_bytes`` is reached (backpressure), the mean does not, and the
counters printed at the end say how many waited and for how long in all.
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
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver as StockSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from test_graph import build
from workload import UNBOUNDED, Batch, require_this_checkout, timed_batch

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


def postgres_saver(conninfo: str, serde: Any = None) -> Any:
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg import Connection
    from psycopg.rows import dict_row

    connection = Connection.connect(conninfo, autocommit=True, prepare_threshold=0, row_factory=dict_row)
    saver = PostgresSaver(connection, serde=serde)
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
        self.app.invoke({"messages": [{"role": "user", "content": "hi"}]}, self.thread(self.turns % THREADS))

    def thread(self, index: int) -> dict[str, Any]:
        """The config of one of its threads: named after the saver, since the savers share a database, and
        after this process, since every write-back process of a run shares it too (threads continued from
        an earlier process's would grow round after round: those savers would be timed on longer
        conversations than ours, which starts empty in each process)."""
        return _config(f"{self.name}-{PROCESS_TAG}-chat-{index}")


PROCESS_TAG = f"{os.getpid()}-{time.monotonic_ns() % 10**9}"
"""This process's part of its subjects' thread ids."""


def _config(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}


IN_PROCESS = ["stock", "ours", "postgres", "tiered-pg-through", "tiered-pg-validate", "sqlite", "tiered-sqlite-through"]
APART = ["ours", "tiered-pg-back", "tiered-sqlite-back"]


def make_saver(name: str, conninfo: str | None, folder: Path) -> Any:
    """The saver a benchmark name stands for (None: it needs PostgreSQL and there is none)."""
    if name == "stock":
        return StockSaver()
    if name == "ours":
        return BoundedInMemorySaver(config=UNBOUNDED)
    if name.startswith("sqlite") or name.startswith("tiered-sqlite"):
        durable = sqlite_saver(folder / f"{name}.sqlite")
        return durable if name == "sqlite" else TieredSaver(durable, config=HOT, write=_mode(name))
    if conninfo is None:
        return None
    if name == "postgres":
        return postgres_saver(conninfo)
    return TieredSaver(postgres_saver(conninfo), config=HOT, write=_mode(name))


def _mode(name: str) -> Any:
    from langgraph.checkpoint.bounded import WriteThrough

    if name.endswith("validate"):
        return WriteThrough(processes="many")
    return "back" if name.endswith("-back") else "through"


def subjects(conninfo: str | None, folder: Path, names: list[str]) -> dict[str, Subject]:
    """The named savers (those it can make), each with its 10 threads warmed by three turns."""
    result = {}
    for name in names:
        saver = make_saver(name, conninfo, folder)
        if saver is not None:
            result[name] = Subject(name, saver)
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


def operations(subject: Subject, *, turns: int, reads: int, cold: int) -> dict[str, Batch]:
    saver = subject.saver
    latest = subject.thread(3)
    found: dict[str, Batch] = {
        "graph turn": timed_batch(subject.turn, turns),
        "get_tuple": timed_batch(lambda: saver.get_tuple(latest), reads),
        "list(limit=20)": timed_batch(lambda: list(saver.list(latest, limit=20)), max(1, reads // 10)),
    }
    if subject.cold:
        found["cold get_tuple"] = timed_batch(lambda: saver.get_tuple(_config(subject.cold.pop())), cold)
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
    ("cold get_tuple / PostgresSaver", "tiered-pg-through", "postgres", "cold get_tuple", 1.2),
    ("validate get_tuple / PostgresSaver", "tiered-pg-validate", "postgres", "get_tuple", None),
    ("hot get_tuple (SQLite tier) / ours", "tiered-sqlite-through", "ours", "get_tuple", 1.2),
    ("write-through turn / SqliteSaver", "tiered-sqlite-through", "sqlite", "graph turn", None),
]
APART_RATIOS = [  # measured in processes of their own
    ("write-back turn / ours", "tiered-pg-back", "ours", "graph turn", 1.15),
    ("write-back turn (SQLite tier) / ours", "tiered-sqlite-back", "ours", "graph turn", 1.15),
    ("write-back mean turn / ours", "tiered-pg-back", "ours", "mean turn", None),
    ("write-back mean turn (SQLite tier) / ours", "tiered-sqlite-back", "ours", "mean turn", None),
    ("write-back p95 turn / ours", "tiered-pg-back", "ours", "p95 turn", None),
    ("write-back p95 turn (SQLite tier) / ours", "tiered-sqlite-back", "ours", "p95 turn", None),
    ("write-back CPU per turn, flushes included / ours", "tiered-pg-back", "ours", "CPU per turn", None),
    ("write-back CPU per turn (SQLite tier) / ours", "tiered-sqlite-back", "ours", "CPU per turn", None),
    ("write-back hot get_tuple / ours", "tiered-pg-back", "ours", "get_tuple", 1.2),
    ("write-back hot get_tuple (SQLite tier) / ours", "tiered-sqlite-back", "ours", "get_tuple", 1.2),
]


def summarize(rounds: list[dict[tuple[str, str], float]], ratios: list[tuple[Any, ...]] = RATIOS) -> dict[str, Any]:
    medians = {
        f"{name} | {operation}": statistics.median(r[(name, operation)] for r in rounds)
        for name, operation in rounds[0]
    }
    found = {}
    for what, top, bottom, operation, target in ratios:
        if (top, operation) not in rounds[0] or (bottom, operation) not in rounds[0]:
            continue
        values = [r[(top, operation)] / r[(bottom, operation)] for r in rounds]
        quartiles = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
        found[what] = {"median": statistics.median(values), "q1": quartiles[0], "q3": quartiles[2], "target": target}
    return {"medians": medians, "ratios": found, "rounds": len(rounds)}


def table(summary: dict[str, Any]) -> str:
    names = list(dict.fromkeys(key.split(" | ")[0] for key in summary["medians"]))
    operations_ = [
        "graph turn",
        "mean turn",
        "p95 turn",
        "get_tuple",
        "list(limit=20)",
        "cold get_tuple",
        "CPU per turn",
    ]
    operations_ = [operation for operation in operations_ if any(key.endswith(operation) for key in summary["medians"])]
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
    """The savers that flush nothing in the background, interleaved in this process."""
    with tempfile.TemporaryDirectory() as folder:
        made = subjects(conninfo, Path(folder), IN_PROCESS)
        prepare_cold(made, conninfo, rounds * cold + cold)
        batches = {name: operations(subject, turns=turns, reads=reads, cold=cold) for name, subject in made.items()}
        one_round(batches, 0)  # warm-up, not counted
        results = [one_round(batches, rotation) for rotation in range(rounds)]
        counters = {
            name: _counters(subject.saver) for name, subject in made.items() if isinstance(subject.saver, TieredSaver)
        }
        return {**summarize(results), "counters": counters}


def _counters(saver: TieredSaver) -> dict[str, Any]:
    saver.close()
    stats = saver.stats()
    return {
        "hits": stats.hits,
        "misses": stats.misses,
        "admissions": stats.admissions,
        "flushes": stats.flushes,
        "flushed_writes": stats.flushed_writes,
        "flush_ms_each": round(stats.flush_seconds / max(stats.flushes, 1) * 1000, 3),
        "backpressure_waits": stats.backpressure_waits,
        "backpressure_ms": round(stats.backpressure_seconds * 1000, 1),
        "validation_ms_each": round(stats.validation_seconds / max(stats.validations, 1) * 1000, 3),
        "hot_threads": stats.hot.threads,
    }


def worker(name: str, conninfo: str | None, seconds: float, reads: int, pause: float) -> dict[str, Any]:
    """One saver alone in this process, its flusher running: graph turns for ``seconds``, ``pause`` seconds
    apart (the time a model would take: not counted), and after each turn a few hot reads, so that reads
    sample the whole run, flushes included. Medians of each."""
    with tempfile.TemporaryDirectory() as folder:
        subject = subjects(conninfo, Path(folder), [name])[name]
        saver, latest = subject.saver, subject.thread(3)
        turns: list[float] = []
        gets: list[float] = []
        lists: list[float] = []
        start, cpu = time.perf_counter(), time.process_time()
        while time.perf_counter() - start < seconds:
            began = time.perf_counter()
            subject.turn()
            turns.append(time.perf_counter() - began)
            for _ in range(READS_PER_TURN):
                began = time.perf_counter()
                saver.get_tuple(latest)
                gets.append(time.perf_counter() - began)
            began = time.perf_counter()
            list(saver.list(latest, limit=20))
            lists.append(time.perf_counter() - began)
            if pause:
                time.sleep(pause)
        counters = _counters(saver) if isinstance(saver, TieredSaver) else {}  # closing flushes the rest
        return {
            "graph turn": statistics.median(turns),
            "mean turn": statistics.fmean(turns),  # the median hides turns that waited for a flush
            "p95 turn": statistics.quantiles(turns, n=20)[-1] if len(turns) > 1 else turns[0],
            "CPU per turn": (time.process_time() - cpu) / len(turns),
            "get_tuple": statistics.median(gets),
            "list(limit=20)": statistics.median(lists),
            "turns": len(turns),
            "counters": counters,
        }


APART_OPERATIONS = ("graph turn", "mean turn", "p95 turn", "CPU per turn", "get_tuple", "list(limit=20)")
"""What a write-back worker reports, per process."""

READS_PER_TURN = 5
"""Hot ``get_tuple`` calls a write-back worker times after each turn."""


def measure_apart(conninfo: str | None, rounds: int, *, seconds: float, reads: int, pause: float) -> dict[str, Any]:
    """The write-back savers and ours, each round in fresh processes of their own, the order rotating; the
    turns ``pause`` seconds apart."""
    names = [name for name in APART if conninfo is not None or "-pg-" not in name]
    results: list[dict[tuple[str, str], float]] = []
    counters: dict[str, Any] = {}
    for rotation in range(rounds):
        timings: dict[tuple[str, str], float] = {}
        for name in names[rotation % len(names) :] + names[: rotation % len(names)]:
            command = [sys.executable, str(Path(__file__).resolve()), "--worker", name, "--seconds", str(seconds)]
            command += ["--reads", str(reads), "--pause", str(pause)] + (["--conninfo", conninfo] if conninfo else [])
            done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=True)
            report = json.loads(done.stdout.strip().splitlines()[-1])
            for operation in APART_OPERATIONS:
                timings[(name, operation)] = report[operation]
            counters[name] = {**report["counters"], "turns": report["turns"]}
        results.append(timings)
    return {**summarize(results, APART_RATIOS), "counters": counters}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--turns", type=int, default=10, help="graph turns per batch")
    parser.add_argument("--reads", type=int, default=200, help="get_tuple calls per batch (a tenth for list)")
    parser.add_argument("--cold", type=int, default=20, help="cold reads per batch")
    parser.add_argument("--apart-only", action="store_true", help="measure only the write-back processes")
    parser.add_argument("--apart-rounds", type=int, default=7, help="rounds of the write-back processes")
    parser.add_argument("--seconds", type=float, default=3.0, help="seconds of turns per write-back process")
    parser.add_argument(
        "--pauses", type=float, nargs="*", default=[0.02, 0.0], help="seconds between write-back turns, one run each"
    )
    parser.add_argument("--pause", type=float, default=0.0, help=argparse.SUPPRESS)
    parser.add_argument("--json", type=Path, help="write the medians and ratios here")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--conninfo", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.worker:
        found = worker(arguments.worker, arguments.conninfo, arguments.seconds, arguments.reads, arguments.pause)
        print(json.dumps(found))
        return
    options = {"seconds": arguments.seconds, "reads": arguments.reads}
    in_process = {
        "rounds": arguments.rounds,
        "turns": arguments.turns,
        "reads": arguments.reads,
        "cold": arguments.cold,
    }
    try:
        with postgres() as conninfo:
            summary = None if arguments.apart_only else measure(conninfo, **in_process)
            apart = {
                pause: measure_apart(conninfo, arguments.apart_rounds, pause=pause, **options)
                for pause in arguments.pauses
            }
    except ServerUnavailable as error:
        print(f"NO POSTGRESQL SERVER COULD BE STARTED ({error}): measuring the SQLite tier only")
        summary = None if arguments.apart_only else measure(None, **in_process)
        apart = {
            pause: measure_apart(None, arguments.apart_rounds, pause=pause, **options) for pause in arguments.pauses
        }
    counters = {}
    if summary is not None:
        print(table(summary))
        counters.update(summary["counters"])
    for pause, found in apart.items():
        print(f"\nWrite-back apart, turns {pause * 1000:g} ms apart:\n")
        print(table(found))
        counters.update({f"{name} ({pause * 1000:g} ms apart)": value for name, value in found["counters"].items()})
    for name, value in counters.items():
        print(f"{name}: {value}")
    if arguments.json:
        arguments.json.write_text(json.dumps({"in process": summary, "apart": apart}, indent=2))


if __name__ == "__main__":
    main()
