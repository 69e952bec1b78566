"""Retention measured: the durable tier's size over a long workload, a graph turn's latency while sweeps run,
and what one sweep pass costs per thread it removes, over SQLite and PostgreSQL (issue 28, section 5).

Usage: ``python benchmarks/retention.py [--quick] [--threads N] [--output DIR]``
(``--quick``: 40 threads of 10 turns, under a minute, a smoke test that writes nothing unless ``--output``
is given; the defaults: see ``FULL``, about half an hour; ``--from-json DIR/results.json`` rewrites the
report from a run's raw numbers). Writes ``{RESULTS.md,retention.png,results.json}`` to ``DIR``
(``benchmarks/results/retention`` unless given).

The workload: threads of the benchmarks' tool-calling chat graph (``test_graph.build``: three node runs and
seven new messages a turn, five checkpoints), each doing ``turns`` turns and then going quiet for good. They
arrive staggered, two per tick, so that about ``active`` are under way at a time: a tick is one turn of each
thread under way, in thread order. Real wall time, no pause: the turns run back to back.

Savers, each over its own data, all driven in one process by the same ticks (identical messages):

* ``retention``: ``TieredSaver(durable, retention=RetentionPolicy(idle_ttl_seconds, keep_last, ...))``;
* ``tiered``: the same ``TieredSaver`` without ``retention``, the latency baseline;
* ``PostgresSaver`` (PostgreSQL only): LangGraph's saver alone, the size baseline.

PostgreSQL is a throwaway PostgreSQL 15 (``tiered.postgres``: loopback, ``fsync`` on), one database per
saver; SQLite a file per saver (``SqliteSaver``'s WAL mode). Every tick runs the savers one after the other,
the order rotating tick to tick (the machine is shared: a slow phase hits every saver of the tick).

Size: every ``sample_every`` seconds, between ticks, each durable tier's rows (``count(*)`` of checkpoints,
writes and, PostgreSQL, checkpoint_blobs) and bytes: PostgreSQL, ``pg_total_relation_size`` of the three
tables (heap, TOAST and indexes: what they occupy on disk; a DELETE frees space for reuse, VACUUM does not
give it back to the file system); SQLite, the file's size on disk (database plus ``-wal``: a file never shrinks
without VACUUM) and its live bytes, ``(page_count - freelist_count) * page_size`` (pages in use). After the
last tick, the run goes on without turns for ``idle_ttl_seconds`` plus three sweep intervals, still sampled.

Latency: the retention saver's background sweeps run in its own process, so a pass running while another
saver's tick is timed would slow that saver and flatter ours. So every pass is made to overlap the retention
saver's own ticks: between them this benchmark holds the sweeper's pass lock (``Sweeper.running``, private:
benchmark only), which the background thread takes for each pass; it is released for the retention saver's
tick and taken back after it, which waits for a pass under way to finish (that wait is reported, not timed
as a turn). A round is one tick of each saver; its figure the mean turn time of the tick; the ratio
``retention / tiered`` per round, reported as the median with quartiles, over every round and over the rounds
during which a pass removed something. Every turn's time is kept too, for percentiles.

Sweep cost, two ways: (1) in the long run, each pass's seconds, threads deleted and pruned (from
``stats().retention``, read between ticks, when no pass is under way), fitted by least squares as
``seconds = a * deleted + b * pruned + c * passes``; (2) apart, on a fresh database: ``threads`` threads of
``turns`` turns written, then ``threads`` more, then one ``sweep()`` each: a TTL-only policy deletes the
first group whole (its clock set so that only the first group is idle), a ``keep_last`` policy prunes the
second, a TTL-only policy deletes what the second kept. Retention's index is made beforehand by a pass that
finds nothing (timed apart).

After the last tick, the threads still under way are read from both tiered savers and compared (a prune
must not change what a graph reads).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # tiered, test_graph, workload, when imported from elsewhere

from test_graph import MESSAGES_PER_TURN, build  # noqa: E402
from tiered import ServerUnavailable, postgres, postgres_saver, sqlite_saver  # noqa: E402
from workload import require_this_checkout  # noqa: E402

from langgraph.checkpoint.bounded import InMemoryCheckpointConfig, RetentionPolicy, TieredSaver  # noqa: E402

require_this_checkout()

OUTPUT = HERE / "results" / "retention"
USER_MESSAGE = {"messages": [{"role": "user", "content": "hi"}]}
RETENTION, TIERED, ALONE = "retention", "tiered", "PostgresSaver"


@dataclass(frozen=True)
class Shape:
    """One run's sizes and policy.

    Attributes:
        threads: Threads in the long run; each does ``turns`` turns, then goes quiet.
        turns: Turns per thread.
        active: Threads under way at a time (arrivals are staggered to keep about this many).
        ttl: The policy's ``idle_ttl_seconds``.
        interval: The policy's ``sweep_interval_seconds``.
        keep_last: The policy's ``keep_last``.
        max_per_sweep: The policy's ``max_threads_per_sweep``.
        sample_every: Seconds between size samples.
        cost_threads: Threads per group in the sweep-cost measurement.
        cost_turns: Turns per thread there.
        hot_threads: The hot tier's ``max_threads``.
        hot_bytes: The hot tier's ``max_total_bytes``.
    """

    threads: int
    turns: int
    active: int
    ttl: float
    interval: float
    keep_last: int
    max_per_sweep: int
    sample_every: float
    cost_threads: int
    cost_turns: int
    hot_threads: int = 250
    hot_bytes: int = 512 << 20

    def arrival(self, thread: int) -> int:
        """The tick at which a thread does its first turn."""
        return thread * self.turns // self.active

    @property
    def ticks(self) -> int:
        return self.arrival(self.threads - 1) + self.turns

    def schedule(self) -> Iterator[list[int]]:
        """Each tick's threads, in order: those arrived and not done."""
        first = 0
        for tick in range(self.ticks):
            while first < self.threads and self.arrival(first) + self.turns <= tick:
                first += 1
            last = first
            found = []
            while last < self.threads and self.arrival(last) <= tick:
                found.append(last)
                last += 1
            yield found

    def policy(self) -> RetentionPolicy:
        return RetentionPolicy(
            idle_ttl_seconds=self.ttl,
            keep_last=self.keep_last,
            sweep_interval_seconds=self.interval,
            max_threads_per_sweep=self.max_per_sweep,
        )

    def hot(self) -> InMemoryCheckpointConfig:
        return InMemoryCheckpointConfig(max_threads=self.hot_threads, max_total_bytes=self.hot_bytes)


FULL = Shape(
    threads=500, turns=50, active=100, ttl=30.0, interval=5.0, keep_last=20, max_per_sweep=1_000,
    sample_every=5.0, cost_threads=40, cost_turns=50,
)  # fmt: skip
QUICK = Shape(
    threads=40, turns=10, active=10, ttl=2.0, interval=0.5, keep_last=10, max_per_sweep=1_000,
    sample_every=0.5, cost_threads=4, cost_turns=5,
)  # fmt: skip


def config(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}


def thread_name(index: int) -> str:
    return f"thread-{index:05d}"


# --- what the durable tier holds ------------------------------------------------------------------------------


LIVE_TUPLES = (
    "SELECT coalesce(sum((pgstattuple(oid)).tuple_len), 0) FROM (SELECT oid FROM pg_class WHERE relname IN {names} "
    "UNION ALL SELECT reltoastrelid FROM pg_class WHERE relname IN {names} AND reltoastrelid <> 0) AS tables"
).format(names="('checkpoints', 'checkpoint_writes', 'checkpoint_blobs')")
"""The bytes of the live rows of the three tables and their TOAST tables (``pgstattuple``: a scan of each)."""


def postgres_size(conninfo: str, *, live_always: bool) -> Callable[[bool], dict[str, int]]:
    """A sampler of one PostgreSQL database's three tables: rows, bytes on disk (heap, TOAST, indexes, free and
    dead space), and the bytes of their live rows (heap and TOAST tuples, no index), the last on every sample
    if ``live_always``, else only on samples asked ``full`` (it scans the tables)."""
    from psycopg import Connection

    connection = Connection.connect(conninfo, autocommit=True)
    connection.execute("CREATE EXTENSION IF NOT EXISTS pgstattuple")

    def sample(full: bool = False) -> dict[str, int]:
        row = connection.execute(
            "SELECT (SELECT count(*) FROM checkpoints), (SELECT count(*) FROM checkpoint_writes), "
            "(SELECT count(*) FROM checkpoint_blobs), pg_total_relation_size('checkpoints'), "
            "pg_total_relation_size('checkpoint_writes'), pg_total_relation_size('checkpoint_blobs')"
        ).fetchone()
        assert row is not None
        checkpoints, writes, blobs, *sizes = (int(value) for value in row)
        found = {"checkpoints": checkpoints, "writes": writes, "blobs": blobs, "disk_bytes": sum(sizes)}
        vacuum = connection.execute(
            "SELECT coalesce(sum(autovacuum_count), 0), coalesce(sum(n_dead_tup), 0) FROM pg_stat_all_tables "
            "WHERE relname IN ('checkpoints', 'checkpoint_writes', 'checkpoint_blobs') OR relname LIKE 'pg_toast_%'"
        ).fetchone()
        assert vacuum is not None
        found["autovacuums"], found["dead_tuples"] = int(vacuum[0]), int(vacuum[1])
        if live_always or full:
            live = connection.execute(LIVE_TUPLES).fetchone()
            assert live is not None
            found["live_bytes"] = int(live[0])
        return found

    sample.close = connection.close  # type: ignore[attr-defined]
    return sample


def sqlite_size(path: Path) -> Callable[[bool], dict[str, int]]:
    """A sampler of one SQLite file: rows, its size on disk (database and WAL) and its live bytes (pages in use)."""
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)

    def sample(full: bool = False) -> dict[str, int]:
        checkpoints = connection.execute("SELECT count(*) FROM checkpoints").fetchone()[0]
        writes = connection.execute("SELECT count(*) FROM writes").fetchone()[0]
        pages = connection.execute("PRAGMA page_count").fetchone()[0]
        free = connection.execute("PRAGMA freelist_count").fetchone()[0]
        page_size = connection.execute("PRAGMA page_size").fetchone()[0]
        wal = Path(f"{path}-wal")
        return {
            "checkpoints": checkpoints,
            "writes": writes,
            "disk_bytes": path.stat().st_size + (wal.stat().st_size if wal.exists() else 0),
            "live_bytes": (pages - free) * page_size,
        }

    sample.close = connection.close  # type: ignore[attr-defined]
    return sample


# --- the long run ------------------------------------------------------------------------------------------------


@dataclass
class Subject:
    """One saver of the long run: its graph, its sampler, and what was measured of it."""

    name: str
    saver: Any
    size: Callable[[bool], dict[str, int]]
    app: Any = None
    tick_means: list[float] = field(default_factory=list)
    turn_times: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.app = build(self.saver)

    @property
    def retains(self) -> bool:
        return isinstance(self.saver, TieredSaver) and self.saver.retention is not None


def retention_totals(saver: TieredSaver) -> dict[str, float]:
    totals = saver.stats().retention
    return {
        "sweeps": totals.sweeps,
        "seconds": totals.sweep_seconds,
        "deleted": totals.deleted_threads,
        "pruned": totals.pruned_threads,
        "checkpoints": totals.checkpoints,
        "writes": totals.writes,
        "nbytes": totals.nbytes,
        "failures": totals.sweep_failures,
    }


def delta(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {key: after[key] - before[key] for key in after}


class Gate:
    """The retention saver's pass lock (``Sweeper.running``, private: benchmark only), held by this benchmark
    except during the retention saver's ticks: the background thread takes it for each pass, so every pass
    overlaps the retention saver's own turns and no other saver's."""

    def __init__(self, saver: TieredSaver) -> None:
        self.lock = saver._sweeper.running  # type: ignore[union-attr]
        self.held = False

    def take(self) -> float:
        """Take it (waiting for a pass under way); return the seconds waited."""
        began = time.perf_counter()
        self.lock.acquire()
        self.held = True
        return time.perf_counter() - began

    def give(self) -> None:
        self.held = False
        self.lock.release()


def long_run(subjects: dict[str, Subject], shape: Shape, label: str) -> dict[str, Any]:
    """Run the ticks on every saver, the order rotating, the retention saver's passes confined to its own ticks;
    then the quiet tail. Returns samples, per-round figures, passes and counters."""
    ours = subjects[RETENTION]
    gate = Gate(ours.saver)
    gate.take()
    names = list(subjects)
    samples: list[dict[str, Any]] = []
    passes: list[dict[str, float]] = []
    rounds: list[dict[str, Any]] = []
    gate_waits: list[float] = []
    started = time.perf_counter()
    last_sample = -math.inf
    last_print = started
    turns_done = 0

    def sample(tick: int, tail: bool = False, full: bool = False) -> None:
        nonlocal last_sample
        last_sample = time.perf_counter()
        found: dict[str, Any] = {"t": last_sample - started, "tick": tick, "turns": turns_done, "tail": tail}
        for name, subject in subjects.items():
            found[name] = subject.size(full)
        samples.append(found)

    def passes_since(totals: dict[str, float], tail: bool) -> tuple[dict[str, float], float]:
        """Record the passes ended since ``totals`` (the gate held: none under way); return the new totals and
        the threads they removed."""
        now = retention_totals(ours.saver)
        change = delta(now, totals)
        if change["sweeps"]:
            passes.append({**change, "t": time.perf_counter() - started, "tail": tail})
        return now, change["deleted"] + change["pruned"]

    try:
        totals = retention_totals(ours.saver)
        for tick, threads in enumerate(shape.schedule()):
            rotation = tick % len(names)
            order = names[rotation:] + names[:rotation]
            figures: dict[str, float] = {}
            removed = 0.0
            round_started = time.perf_counter()
            for name in order:
                subject = subjects[name]
                if subject is ours:
                    gate.give()
                times = []
                for thread in threads:
                    began = time.perf_counter()
                    subject.app.invoke(USER_MESSAGE, config(thread_name(thread)))
                    times.append(time.perf_counter() - began)
                if subject is ours:
                    gate_waits.append(gate.take())
                    totals, removed = passes_since(totals, tail=False)
                figures[name] = statistics.fmean(times)
                subject.tick_means.append(figures[name])
                subject.turn_times.extend(times)
            turns_done += len(threads)
            rounds.append({"tick": tick, "t": round_started - started, "threads": len(threads), "means": figures,
                           "removed": removed})  # fmt: skip
            if time.perf_counter() - last_sample >= shape.sample_every:
                sample(tick + 1)
            if time.perf_counter() - last_print >= 30:
                last_print = time.perf_counter()
                print(
                    f"  {label}: tick {tick + 1}/{shape.ticks}, {last_print - started:.0f} s, checkpoints "
                    + ", ".join(f"{name} {samples[-1][name]['checkpoints']:,}" for name in names),
                    flush=True,
                )
        workload_seconds = time.perf_counter() - started
        sample(shape.ticks, full=True)
        check = compare_live(subjects, shape, rounds, time.perf_counter() - started)
        # the tail: no turn, the background sweeps free to run, sampled until every thread is idle past the TTL
        tail_started = time.perf_counter()
        gate.give()
        while time.perf_counter() - tail_started < shape.ttl + 3 * shape.interval:
            time.sleep(max(0.0, shape.sample_every - (time.perf_counter() - last_sample)))
            gate.take()  # between passes
            totals, _ = passes_since(totals, tail=True)
            sample(shape.ticks, tail=True)
            gate.give()
        with ours.saver._sweeper.running:  # type: ignore[union-attr]
            sample(shape.ticks, tail=True, full=True)
    finally:
        if gate.held:
            gate.give()
        for subject in subjects.values():
            if isinstance(subject.saver, TieredSaver):
                subject.saver.close()
    stats = ours.saver.stats()
    counters = {
        name: {"hits": s.saver.stats().hits, "misses": s.saver.stats().misses}
        for name, s in subjects.items()
        if isinstance(s.saver, TieredSaver)
    }
    return {
        "samples": samples,
        "rounds": rounds,
        "passes": passes,
        "gate_waits": gate_waits,
        "workload_seconds": workload_seconds,
        "seconds": time.perf_counter() - started,
        "turns": turns_done,
        "turn_percentiles": {name: percentiles(s.turn_times) for name, s in subjects.items()},
        "retention_stats": asdict(stats.retention),
        "counters": counters,
        "live_check": check,
    }


def compare_live(
    subjects: dict[str, Subject], shape: Shape, rounds: list[dict[str, Any]], now: float
) -> dict[str, int]:
    """Read the threads whose last turn was within half the TTL (pruned by now, not idle long enough to go) from
    both tiered savers: does a graph read the same state, every message of every turn?"""
    recent = [
        thread
        for thread in range(shape.threads)
        if rounds[shape.arrival(thread) + shape.turns - 1]["t"] >= now - shape.ttl / 2
    ]
    differ = 0
    for thread in recent:
        ours = subjects[RETENTION].app.get_state(config(thread_name(thread))).values
        theirs = subjects[TIERED].app.get_state(config(thread_name(thread))).values
        differ += ours != theirs or len(ours.get("messages", ())) != shape.turns * MESSAGES_PER_TURN
    return {"threads": len(recent), "differ": differ}


def percentiles(values: list[float]) -> dict[str, float]:
    cuts = statistics.quantiles(values, n=100)
    return {"p50": statistics.median(values), "p95": cuts[94], "p99": cuts[98], "mean": statistics.fmean(values)}


# --- the cost of a pass, apart ---------------------------------------------------------------------------------


def sweep_cost(make_durable: Callable[[], Any], shape: Shape) -> dict[str, Any]:
    """Write two groups of threads; delete the first (TTL), prune the second (keep_last), delete what it kept (TTL).
    Each step one ``sweep()`` of a fresh ``TieredSaver``; its report, per thread."""
    writer = build(make_durable())
    turns = shape.cost_turns

    def write(group: str) -> float:
        for index in range(shape.cost_threads):
            for _ in range(turns):
                writer.invoke(USER_MESSAGE, config(f"{group}-{index:04d}"))
        return time.time()

    write("first")
    time.sleep(0.05)
    between = time.time()
    time.sleep(0.05)
    write("second")
    offset = [0.0]
    ttl = 3_600.0

    def saver(policy: RetentionPolicy) -> TieredSaver:
        return TieredSaver(
            make_durable(), config=shape.hot(), retention=policy, wall_clock=lambda: time.time() + offset[0]
        )

    by_ttl = saver(RetentionPolicy(idle_ttl_seconds=ttl, sweep_interval_seconds=math.inf))
    by_count = saver(RetentionPolicy(keep_last=shape.keep_last, sweep_interval_seconds=math.inf))
    steps: dict[str, dict[str, Any]] = {}
    steps["index (a pass that finds nothing)"] = report_of(by_ttl.sweep(), None)
    offset[0] = between + ttl - time.time()  # the cutoff falls between the groups: the first is idle
    steps[f"delete whole threads of {turns} turns (TTL)"] = report_of(by_ttl.sweep(), "deleted_threads")
    offset[0] = 0.0
    steps[f"prune threads of {turns} turns to keep_last={shape.keep_last}"] = report_of(
        by_count.sweep(), "pruned_threads"
    )
    offset[0] = 2 * ttl
    steps[f"delete the {shape.keep_last} checkpoints left (TTL)"] = report_of(by_ttl.sweep(), "deleted_threads")
    for made in (by_ttl, by_count):
        made.close()
    return steps


def report_of(report: Any, per: str | None) -> dict[str, Any]:
    found = {key: value for key, value in asdict(report).items()}
    threads = found.get(per, 0) if per else 0
    found["ms_per_thread"] = found["seconds"] / threads * 1000 if threads else None
    found["ms_per_checkpoint"] = found["seconds"] / found["checkpoints"] * 1000 if found["checkpoints"] else None
    return found


# --- the two kinds ---------------------------------------------------------------------------------------------


def postgres_phase(shape: Shape) -> dict[str, Any]:
    from psycopg import Connection

    with postgres() as conninfo:
        admin = Connection.connect(conninfo, autocommit=True)
        databases = {RETENTION: "retention", TIERED: "tiered", ALONE: "alone", "cost": "sweep_cost"}
        for database in databases.values():
            admin.execute(f"CREATE DATABASE {database}")  # type: ignore[arg-type]

        def at(name: str) -> str:
            return conninfo.replace("dbname=postgres", f"dbname={databases[name]}")

        subjects = {
            RETENTION: Subject(
                RETENTION,
                TieredSaver(postgres_saver(at(RETENTION)), config=shape.hot(), retention=shape.policy()),
                postgres_size(at(RETENTION), live_always=True),
            ),
            TIERED: Subject(
                TIERED,
                TieredSaver(postgres_saver(at(TIERED)), config=shape.hot()),
                postgres_size(at(TIERED), live_always=False),
            ),
            ALONE: Subject(ALONE, postgres_saver(at(ALONE)), postgres_size(at(ALONE), live_always=False)),
        }
        result = long_run(subjects, shape, "PostgreSQL")
        for subject in subjects.values():
            subject.size.close()  # type: ignore[attr-defined]
            durable = subject.saver.durable if isinstance(subject.saver, TieredSaver) else subject.saver
            durable.conn.close()
        subjects.clear()
        for name in (RETENTION, TIERED, ALONE):
            admin.execute(f"DROP DATABASE {databases[name]}")  # type: ignore[arg-type]
        admin.execute("CHECKPOINT")
        result["cost"] = sweep_cost(lambda: postgres_saver(at("cost")), shape)
        admin.close()
        return result


def sqlite_phase(shape: Shape) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="retention-bench-") as folder:
        paths = {name: Path(folder) / f"{name}.sqlite" for name in (RETENTION, TIERED, "cost")}
        savers = {
            RETENTION: TieredSaver(sqlite_saver(paths[RETENTION]), config=shape.hot(), retention=shape.policy()),
            TIERED: TieredSaver(sqlite_saver(paths[TIERED]), config=shape.hot()),
        }
        for saver in savers.values():
            saver.durable.setup()  # the tables, so that the sampler can open the file
        subjects = {name: Subject(name, saver, sqlite_size(paths[name])) for name, saver in savers.items()}
        result = long_run(subjects, shape, "SQLite")
        for subject in subjects.values():
            subject.size.close()  # type: ignore[attr-defined]
            subject.saver.durable.conn.close()
        subjects.clear()
        for name in (RETENTION, TIERED):
            for path in paths[name].parent.glob(f"{name}.sqlite*"):
                path.unlink()
        result["cost"] = sweep_cost(lambda: sqlite_saver(paths["cost"]), shape)
        return result


# --- the report ------------------------------------------------------------------------------------------------


def mib(value: float) -> str:
    return f"{value / (1 << 20):,.1f} MiB"


def quartiles(values: list[float]) -> tuple[float, float, float]:
    if len(values) < 2:
        return (values[0],) * 3 if values else (math.nan,) * 3
    q1, _, q3 = statistics.quantiles(values, n=4)
    return q1, statistics.median(values), q3


def ratio_rows(run: dict[str, Any], numerator: str, denominator: str) -> dict[str, list[float]]:
    rounds = run["rounds"]
    every = [r["means"][numerator] / r["means"][denominator] for r in rounds]
    busy = [r for r in rounds if r["threads"] >= 0.9 * max(x["threads"] for x in rounds)]
    return {
        "every round": every,
        "rounds at full load": [r["means"][numerator] / r["means"][denominator] for r in busy],
        "rounds during which a pass removed something": [
            r["means"][numerator] / r["means"][denominator] for r in rounds if r["removed"]
        ],
        "other rounds": [r["means"][numerator] / r["means"][denominator] for r in rounds if not r["removed"]],
    }


def fit_passes(passes: list[dict[str, float]]) -> dict[str, float] | None:
    """Least squares: seconds = a * deleted + b * pruned + c * passes (numpy, installed with matplotlib)."""
    useful = [p for p in passes if p["deleted"] or p["pruned"]]
    if len(useful) < 4:
        return None
    import numpy

    design = numpy.array([[p["deleted"], p["pruned"], p["sweeps"]] for p in useful], dtype=float)
    seconds = numpy.array([p["seconds"] for p in useful])
    (a, b, c), *_ = numpy.linalg.lstsq(design, seconds, rcond=None)
    pure_deleted = [p["seconds"] / p["deleted"] for p in useful if p["deleted"] and not p["pruned"]]
    pure_pruned = [p["seconds"] / p["pruned"] for p in useful if p["pruned"] and not p["deleted"]]
    return {
        "passes": len(useful),
        "ms_per_deleted": a * 1000,
        "ms_per_pruned": b * 1000,
        "ms_per_pass": c * 1000,
        "median_ms_per_deleted_only_deletes": statistics.median(pure_deleted) * 1000 if pure_deleted else math.nan,
        "median_ms_per_pruned_only_prunes": statistics.median(pure_pruned) * 1000 if pure_pruned else math.nan,
        "passes_only_deletes": len(pure_deleted),
        "passes_only_prunes": len(pure_pruned),
        "ms_per_checkpoint": sum(p["seconds"] for p in useful) / max(1, sum(p["checkpoints"] for p in useful)) * 1000,
    }


def size_table(run: dict[str, Any], kind: str, shape: Shape) -> list[str]:
    samples = [s for s in run["samples"] if not s["tail"]]
    names = [name for name in (RETENTION, TIERED, ALONE) if name in samples[0]]
    points = [("10%", 0.1), ("25%", 0.25), ("50%", 0.5), ("75%", 0.75), ("100% (last turn)", 1.0)]
    chosen = [(label, min(samples, key=lambda s, f=f: abs(s["tick"] - f * shape.ticks))) for label, f in points]
    chosen = [(label, s) for label, s in chosen if label != "100% (last turn)"]
    chosen.append(("100% (last turn)", samples[-1]))
    chosen.append(("end of the quiet tail", run["samples"][-1]))
    columns = ["checkpoints", "writes"] + (["blobs"] if kind == "PostgreSQL" else [])
    byte_columns = ["disk_bytes", "live_bytes"]
    live = "live bytes (pages in use)" if kind == "SQLite" else "live bytes (row and TOAST tuples)"
    lines = [
        "| point of the workload | s | saver | "
        + " | ".join(columns)
        + " | "
        + " | ".join({"disk_bytes": "bytes on disk", "live_bytes": live}[c] for c in byte_columns)
        + " |",
        "|---|---|---|" + "---|" * (len(columns) + len(byte_columns)),
    ]
    for label, s in chosen:
        for name in names:
            row = s[name]
            cells = [f"{row[c]:,}" for c in columns] + [mib(row[c]) if c in row else "" for c in byte_columns]
            lines.append(f"| {label} | {s['t']:.0f} | {name} | " + " | ".join(cells) + " |")
    return lines


def steady(run: dict[str, Any], name: str, key: str, shape: Shape) -> tuple[float, float]:
    """Min and max of a figure over the middle half of the workload (threads arriving and leaving alike)."""
    values = [s[name][key] for s in run["samples"] if not s["tail"] and 0.25 <= s["tick"] / shape.ticks <= 0.75]
    return (min(values), max(values)) if values else (math.nan, math.nan)


def kind_report(kind: str, run: dict[str, Any], shape: Shape) -> tuple[list[str], dict[str, Any]]:
    lines = [f"## {kind}", ""]
    lines.append(
        f"{run['turns']:,} turns per saver in {run['workload_seconds']:.0f} s of workload "
        f"({run['seconds']:.0f} s with the quiet tail); {len(run['rounds'])} rounds."
    )
    lines += ["", "### Size of the durable tier", "", *size_table(run, kind, shape)]
    baseline = ALONE if kind == "PostgreSQL" else TIERED
    lo, hi = steady(run, RETENTION, "disk_bytes", shape)
    end_ours, end_base = run["samples"][-1][RETENTION], run["samples"][-1][baseline]
    last_turn = [s for s in run["samples"] if not s["tail"]][-1]
    rows_lo, rows_hi = steady(run, RETENTION, "checkpoints", shape)
    verdict = {
        "steady_checkpoints": (rows_lo, rows_hi),
        "steady_disk": (lo, hi),
        "end_checkpoints": (last_turn[RETENTION]["checkpoints"], last_turn[baseline]["checkpoints"]),
        "end_disk": (last_turn[RETENTION]["disk_bytes"], last_turn[baseline]["disk_bytes"]),
        "tail_checkpoints": end_ours["checkpoints"],
        "tail_disk": end_ours["disk_bytes"],
        "baseline_tail_disk": end_base["disk_bytes"],
    }
    lines += [
        "",
        f"Retention, middle half of the workload: {rows_lo:,.0f}-{rows_hi:,.0f} checkpoints, {mib(lo)}-{mib(hi)} on "
        f"disk. At the last turn: {last_turn[RETENTION]['checkpoints']:,} checkpoints and "
        f"{mib(last_turn[RETENTION]['disk_bytes'])} against {baseline}'s {last_turn[baseline]['checkpoints']:,} and "
        f"{mib(last_turn[baseline]['disk_bytes'])}.",
        "",
        "### A graph turn's latency while sweeps run",
        "",
        "| rounds | n | retention / tiered: median (quartiles) |",
        "|---|---|---|",
    ]
    ratios = ratio_rows(run, RETENTION, TIERED)
    verdict["ratios"] = {}
    for what, values in ratios.items():
        if values:
            q1, q2, q3 = quartiles(values)
            verdict["ratios"][what] = (q2, q1, q3, len(values))
            lines.append(f"| {what} | {len(values)} | {q2:.3f} ({q1:.3f}-{q3:.3f}) |")
    if kind == "PostgreSQL":
        values = ratio_rows(run, ALONE, TIERED)["every round"]
        q1, q2, q3 = quartiles(values)
        lines.append(
            f"| every round, PostgresSaver alone / tiered (for scale) | {len(values)} | {q2:.3f} ({q1:.3f}-{q3:.3f}) |"
        )
    lines += ["", "| saver | turn p50 | p95 | p99 | mean | hot-tier hits / misses |", "|---|---|---|---|---|---|"]
    for name, p in run["turn_percentiles"].items():
        hm = run["counters"].get(name)
        hits = f"{hm['hits']:,} / {hm['misses']:,}" if hm else ""
        lines.append(
            f"| {name} | {p['p50'] * 1000:.2f} ms | {p['p95'] * 1000:.2f} ms | {p['p99'] * 1000:.2f} ms | "
            f"{p['mean'] * 1000:.2f} ms | {hits} |"
        )
    waits = run["gate_waits"]
    rs = run["retention_stats"]
    lines += [
        "",
        f"Sweeps, from `stats().retention`: {rs['sweeps']:,} passes, {rs['sweep_seconds']:.1f} s in all, "
        f"{rs['deleted_threads']:,} threads deleted, {rs['pruned_threads']:,} pruned, {rs['checkpoints']:,} "
        f"checkpoints and {rs['writes']:,} writes removed, {mib(rs['nbytes'])} reclaimed, {rs['sweep_failures']} "
        f"failures{'' if not rs['last_sweep_error'] else ' (last: ' + rs['last_sweep_error'] + ')'}. After a "
        f"retention tick, this benchmark waited {sum(waits):.1f} s in all (max {max(waits) * 1000:.0f} ms) for a "
        "pass under way to end: sweep work "
        "that overlapped no timed turn.",
        "",
        "Threads whose last turn was within half the TTL of the end, read from both tiered savers: "
        f"{run['live_check']['threads']} read, {run['live_check']['differ']} differ.",
        "",
        "### The cost of a pass per thread removed",
        "",
    ]
    fit = fit_passes(run["passes"])
    verdict["fit"] = fit
    if fit:
        lines += [
            f"Over the long run's {fit['passes']} passes that removed something (least squares, seconds = a * deleted "
            "+ b * pruned + c * passes):",
            "",
            "| per thread deleted | per thread pruned | per pass | per checkpoint removed (all passes) |",
            "|---|---|---|---|",
            f"| {fit['ms_per_deleted']:.2f} ms | {fit['ms_per_pruned']:.2f} ms | {fit['ms_per_pass']:.1f} ms | "
            f"{fit['ms_per_checkpoint']:.3f} ms |",
            "",
            f"Passes that only pruned ({fit['passes_only_prunes']}): median "
            f"{fit['median_ms_per_pruned_only_prunes']:.2f} ms per thread; that only deleted "
            f"({fit['passes_only_deletes']}): median "
            f"{fit['median_ms_per_deleted_only_deletes']:.2f} ms per thread.",
            "",
        ]
    lines += [
        f"Apart, on a fresh database, one `sweep()` per step, {shape.cost_threads} threads of {shape.cost_turns} turns "
        f"({shape.cost_turns * 5} checkpoints) each:",
        "",
        "| step | threads | checkpoints | writes | bytes | pass | per thread | per checkpoint |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for step, report in run["cost"].items():
        threads = report["deleted_threads"] + report["pruned_threads"]
        per_thread = "" if report["ms_per_thread"] is None else f"{report['ms_per_thread']:.2f} ms"
        per_checkpoint = "" if report["ms_per_checkpoint"] is None else f"{report['ms_per_checkpoint']:.3f} ms"
        lines.append(
            f"| {step} | {threads} | {report['checkpoints']:,} | {report['writes']:,} | {mib(report['nbytes'])} | "
            f"{report['seconds'] * 1000:.0f} ms | {per_thread} | {per_checkpoint} |"
        )
    verdict["cost"] = run["cost"]
    return [*lines, ""], verdict


def plot(results: dict[str, Any], output: Path, shape: Shape) -> str | None:
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = [kind for kind in ("PostgreSQL", "SQLite") if kind in results["runs"]]
    figure, axes = plt.subplots(len(kinds), 3, figsize=(15, 4.2 * len(kinds)), squeeze=False)
    colours = {RETENTION: "tab:green", TIERED: "tab:orange", ALONE: "tab:red"}
    for row, kind in enumerate(kinds):
        run = results["runs"][kind]
        samples = run["samples"]
        times = [s["t"] for s in samples]
        end = run["workload_seconds"]
        names = [name for name in (RETENTION, TIERED, ALONE) if name in samples[0]]
        rows_axis, bytes_axis, ratio_axis = axes[row]
        for name in names:
            label = {RETENTION: "TieredSaver + retention", TIERED: "TieredSaver, no retention", ALONE: "PostgresSaver"}
            rows_axis.plot(times, [s[name]["checkpoints"] for s in samples], color=colours[name], label=label[name])
            bytes_axis.plot(times, [s[name]["disk_bytes"] / (1 << 20) for s in samples], color=colours[name],
                            label=f"{label[name]}, on disk")  # fmt: skip
            live = [(s["t"], s[name]["live_bytes"] / (1 << 20)) for s in samples if "live_bytes" in s[name]]
            what = "live pages" if kind == "SQLite" else "live tuples"
            bytes_axis.plot([t for t, _ in live], [b for _, b in live], color=colours[name], linestyle="--",
                            marker="." if len(live) < 5 else None, label=f"{label[name]}, {what}")  # fmt: skip
        rounds = run["rounds"]
        starts = [r["t"] for r in rounds]
        ratios = [r["means"][RETENTION] / r["means"][TIERED] for r in rounds]
        ratio_axis.plot(starts, ratios, ".", markersize=2, color="tab:grey", label="each round")
        window = 25
        smooth = [statistics.median(ratios[max(0, i - window) : i + window + 1]) for i in range(len(ratios))]
        ratio_axis.plot(starts, smooth, color="tab:blue", label=f"running median ({2 * window + 1} rounds)")
        ratio_axis.axhline(1.0, color="black", linewidth=0.8)
        ratio_axis.axhline(1.05, color="tab:red", linewidth=0.8, linestyle=":", label="1.05")
        ratio_axis.set_ylim(0.5, 2.0)
        for axis in (rows_axis, bytes_axis, ratio_axis):
            axis.axvline(end, color="grey", linestyle=":", linewidth=0.8)
            axis.set_xlabel("seconds since the first turn (dotted: the last turn)")
            axis.grid(True, alpha=0.3)
            axis.legend(fontsize=7)
        rows_axis.set_ylabel("checkpoints (rows)")
        bytes_axis.set_ylabel("MiB")
        ratio_axis.set_ylabel("mean turn, retention / no retention")
        rows_axis.set_title(f"{kind}: checkpoints in the durable tier")
        bytes_axis.set_title(f"{kind}: bytes of the durable tier")
        ratio_axis.set_title(f"{kind}: a round's turn time, retention / none")
    figure.suptitle(
        f"{shape.threads:,} threads x {shape.turns} turns, ~{shape.active} under way; idle_ttl_seconds={shape.ttl:g}, "
        f"keep_last={shape.keep_last}, sweep_interval_seconds={shape.interval:g}"
    )
    figure.tight_layout()
    figure.savefig(output / "retention.png", dpi=100)
    plt.close(figure)
    return "retention.png"


def report(results: dict[str, Any], output: Path | None) -> str:
    shape = Shape(**results["shape"])
    machine = results["machine"]
    command = "python benchmarks/retention.py" + results.get("arguments", "")
    lines = [
        f"# Retention measured, {results['date']}",
        "",
        f"`{command}` ({results['elapsed'] / 60:.0f} minutes), at commit {results.get('commit', '?')}. "
        f"Machine: {machine}. Load average (1 min) at the start and end of each phase: "
        + ", ".join(f"{kind} {a:.1f} / {b:.1f}" for kind, (a, b) in results.get("load", {}).items())
        + " (other work may have run beside it).",
        "",
        "## Method",
        "",
        f"* Workload: {shape.threads:,} threads x {shape.turns} turns of the benchmarks' tool-calling chat graph "
        f"(`benchmarks/test_graph.py`: 3 node runs, 7 new messages, 5 checkpoints a turn), arriving two per tick so "
        f"that about {shape.active} are under way at a time; a tick is one turn of each thread under way; each thread "
        "goes quiet for good after its last turn. Real wall time, turns back to back; then a quiet tail of "
        f"{shape.ttl:g} s + 3 sweep intervals, still sampled.",
        f"* Policy: `RetentionPolicy(idle_ttl_seconds={shape.ttl:g}, strategy='delete', keep_last={shape.keep_last}, "
        f"sweep_interval_seconds={shape.interval:g}, max_threads_per_sweep={shape.max_per_sweep})`; hot tier "
        f"`InMemoryCheckpointConfig(max_threads={shape.hot_threads}, max_total_bytes={shape.hot_bytes >> 20} MiB)` "
        "for both tiered savers; write-through.",
        "* Savers, each over its own data, driven in one process by the same ticks (identical messages), the order "
        "rotating tick to tick: `retention` (`TieredSaver` with the policy), `tiered` (the same without "
        "`retention`: the latency baseline), and, PostgreSQL only, `PostgresSaver` alone (the size baseline). "
        "PostgreSQL 15 from the distribution's binaries, loopback, `fsync` on (`tiered.postgres`), one database per "
        "saver, one connection each; SQLite, one file per saver (`SqliteSaver`, WAL).",
        f"* Size, every {shape.sample_every:g} s between ticks: rows by `count(*)`; bytes, PostgreSQL: "
        "`pg_total_relation_size` of checkpoints, checkpoint_writes and checkpoint_blobs (heap, TOAST, indexes: "
        "space on disk; a DELETE leaves it for reuse, VACUUM FULL alone gives it back); SQLite: **on disk** is the "
        "file plus its `-wal` (a file never shrinks without VACUUM), **live** is `(page_count - freelist_count) * "
        "page_size`, the pages in use.",
        "* Latency: the machine is shared and noisy (2 cores), so no absolute timing is compared: each round is one "
        "tick of each saver back to back, and its figure the ratio of the two savers' mean turn times in that "
        "tick; reported as the median of the per-round ratios with quartiles. The retention saver's background "
        "passes are confined to its own ticks (this benchmark holds the sweeper's pass lock between them, so no "
        "pass runs while another saver is timed; the background thread itself is the saver's own).",
        "* Sweep cost: (1) per pass of the long run, from `stats().retention` read between ticks, fitted as "
        "`seconds = a * deleted + b * pruned + c * passes`; (2) apart, one `sweep()` per step on a fresh "
        "database (retention's index made first by a pass that finds nothing).",
        "",
    ]
    if shape.threads < 2_000:
        lines += [
            f"**Scaled down** from the issue's 2,000 threads to {shape.threads:,}: a turn of this graph takes "
            f"{results['mean_turn_ms']:.1f} ms on average over a {shape.turns}-turn thread here (mean of every turn "
            "of every saver in this run), and the full-size run drives 5 savers (3 over PostgreSQL, 2 over SQLite) "
            f"through 2,000 x 50 turns each: about {5 * 100_000 * results['mean_turn_ms'] / 1000 / 60:.0f} minutes "
            "of turns alone. `--threads 2000` runs it. The size figures scale with the threads under way "
            f"({shape.active}) for retention and with the threads written for the baselines.",
            "",
        ]
    verdicts = {}
    for kind, run in results["runs"].items():
        body, verdicts[kind] = kind_report(kind, run, shape)
        lines += body
    picture = results.get("plot")
    if picture:
        lines += ["## Plot", "", f"![durable tier size and latency ratio over time]({picture})", ""]
    lines += ["## Conclusions, as measured", ""]
    for kind, v in verdicts.items():
        baseline = "PostgresSaver alone" if kind == "PostgreSQL" else "the tiered saver without retention"
        every = v["ratios"]["every round"]
        busy = v["ratios"].get("rounds during which a pass removed something")
        fit = v["fit"]
        lines.append(
            f"* {kind}: with retention the durable tier held {v['steady_checkpoints'][0]:,.0f}-"
            f"{v['steady_checkpoints'][1]:,.0f} checkpoints ({mib(v['steady_disk'][0])}-{mib(v['steady_disk'][1])} "
            f"on disk) over the middle half of the workload and {v['end_checkpoints'][0]:,} "
            f"({mib(v['end_disk'][0])}) at the last turn, while {baseline} grew to {v['end_checkpoints'][1]:,} "
            f"({mib(v['end_disk'][1])}); {v['tail_checkpoints']:,} checkpoints ({mib(v['tail_disk'])} on disk) once "
            f"every thread was idle past the TTL. A turn with retention / without: median {every[0]:.3f} "
            f"({every[1]:.3f}-{every[2]:.3f}) over {every[3]} rounds"
            + (f", {busy[0]:.3f} ({busy[1]:.3f}-{busy[2]:.3f}) over the {busy[3]} rounds a pass removed something in"
               if busy else "")
            + f": {'within' if every[0] <= 1.05 else '**not** within'} 5%."
            + (f" A pass costs {fit['ms_per_deleted']:.2f} ms per thread deleted and {fit['ms_per_pruned']:.2f} ms "
               "per thread pruned (long run, fitted)." if fit else "")
        )  # fmt: skip
    text = "\n".join(lines) + "\n"
    if output is not None:
        (output / "RESULTS.md").write_text(text)
    return text


def commit() -> str:
    """The checkout's commit, and whether the code measured (saver/, engine/) differs from it."""
    import subprocess

    def git(*arguments: str) -> str:
        done = subprocess.run(["git", *arguments], cwd=HERE.parent, capture_output=True, text=True, check=False)
        return done.stdout.rstrip()

    changed = [line[3:] for line in git("status", "--porcelain", "--", "saver", "engine").splitlines()]
    return git("rev-parse", "--short", "HEAD") + (f" (uncommitted changes to {', '.join(changed)})" if changed else "")


def machine() -> str:
    from importlib.metadata import version

    packages = ", ".join(
        f"{name} {version(name)}"
        for name in ("langgraph", "langgraph-checkpoint-postgres", "langgraph-checkpoint-sqlite", "psycopg")
    )
    return (
        f"{platform.machine()}, {os.cpu_count()} shared cores, Python {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}, {packages}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="40 threads x 10 turns, a smoke test (< 1 minute)")
    parser.add_argument("--threads", type=int, help="threads in the long run")
    parser.add_argument("--kinds", nargs="*", default=["PostgreSQL", "SQLite"], choices=["PostgreSQL", "SQLite"])
    parser.add_argument("--output", type=Path, help=f"where to write the results (default {OUTPUT}, none with --quick)")
    parser.add_argument("--from-json", type=Path, help="rewrite RESULTS.md (and the plot) from a run's results.json")
    arguments = parser.parse_args()
    if arguments.from_json:
        results = json.loads(arguments.from_json.read_text())
        output = arguments.output or arguments.from_json.parent
        results["plot"] = plot(results, output, Shape(**results["shape"]))
        print(report(results, output))
        return
    shape = QUICK if arguments.quick else FULL
    if arguments.threads:
        shape = replace(shape, threads=arguments.threads)
    output = arguments.output or (None if arguments.quick else OUTPUT)
    started = time.perf_counter()
    code = commit()
    runs: dict[str, Any] = {}
    load: dict[str, list[float]] = {}
    for kind in arguments.kinds:
        print(f"{kind}: {shape.threads:,} threads x {shape.turns} turns, {shape.ticks} ticks", flush=True)
        load[kind] = [os.getloadavg()[0]]
        try:
            runs[kind] = postgres_phase(shape) if kind == "PostgreSQL" else sqlite_phase(shape)
        except ServerUnavailable as error:
            print(f"NO POSTGRESQL SERVER COULD BE STARTED ({error}): PostgreSQL not measured")
        load[kind].append(os.getloadavg()[0])
    every_turn = [value for run in runs.values() for p in run["turn_percentiles"].values() for value in [p["mean"]]]
    results = {
        "date": time.strftime("%Y-%m-%d"),
        "arguments": "".join(f" {a}" for a in sys.argv[1:]),
        "machine": machine(),
        "commit": code,
        "load": load,
        "shape": asdict(shape),
        "elapsed": time.perf_counter() - started,
        "mean_turn_ms": statistics.fmean(every_turn) * 1000 if every_turn else math.nan,
        "runs": runs,
    }
    if output is not None:
        output.mkdir(parents=True, exist_ok=True)
        (output / "results.json").write_text(json.dumps(results))
        results["plot"] = plot(results, output, shape)
    print(report(results, output))


if __name__ == "__main__":
    main()
