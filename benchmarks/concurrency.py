"""Concurrent conversations over PostgreSQL: ``TieredSaver`` in both write modes against ``PostgresSaver`` alone
and the memory saver (issue 34, items 5 and 6).

Usage: ``python benchmarks/concurrency.py [--quick] [--rounds N] [--concurrency 1 10 50 200] [--modes async threads]
[--cell-timeout S] [--output DIR]`` (``make bench-concurrency``; ``--quick`` or ``BENCH_QUICK=1``: C = 1 and 10,
one round, a development run; ``--from-json DIR/results.json`` rewrites the report from a run's raw numbers).
Writes ``{RESULTS.md,results.json,concurrency.png}`` to ``DIR`` (``benchmarks/results/concurrency`` unless given).

The workload: C conversations at once, each ``TURNS`` turns of the benchmarks' tool-calling chat graph
(``test_graph.build``: agent, tools, then the agent's final answer; 3 node runs, 7 new messages and 5
checkpoints a turn), with LangGraph's default ``durability="async"``. Two ways of running them:

* ``async``: one asyncio task per conversation, each awaiting ``graph.ainvoke`` turn after turn;
* ``threads``: one thread per conversation (a ``ThreadPoolExecutor`` of C workers), each calling ``graph.invoke``.

Savers (each run gets a fresh database of a throwaway PostgreSQL 15, ``tiered.postgres``: loopback, ``fsync``
on; the durable saver gets a ``psycopg_pool`` pool of ``POOL`` connections):

* ``postgres``: ``AsyncPostgresSaver`` alone (``PostgresSaver`` for threads), the baseline of every ratio;
* ``tiered-through``: ``TieredSaver`` over it, ``write="through"``;
* ``tiered-back``: ``TieredSaver`` over it, ``write="back"`` (its defaults); its clock stops only once
  ``aflush()`` / ``flush()`` has made every write durable: the final flush is counted;
* ``tiered-back-latest``: the same with ``WriteBack(persist="latest")``, when this checkout has that option
  (tried at start; skipped with a printed note where it does not exist);
* ``memory``: ``BoundedInMemorySaver`` (default limits), nothing durable.

Per cell (mode, C, saver), measured: turns per second (turns / the time from the first turn's start to the last
turn's end, plus the final flush for write-back; write-back's throughput without its flush is reported too),
every turn's latency (p50/p95/p99 over every turn of every round), the client's CPU per turn
(``time.process_time`` of this process over the cell, background flush threads included; the server's is not),
and the durable rows and bytes per turn: the three tables' ``count(*)``, the sum of ``pg_column_size`` of their
rows, and ``pg_total_relation_size`` (heap, TOAST, indexes), after the run minus after the warm-up turn.
A cell that has not finished within ``--cell-timeout`` seconds is stopped and reported as stalled with the turns
it did; its saver and pool are abandoned.

The order: every round runs every (mode, C) cell, and in each cell every saver one after the other, the order
rotating cell to cell and round to round (the machine is shared: a slow phase hits every saver of a cell).
Throughput ratios to ``postgres`` are the median of the per-round ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # retention, tiered, test_graph, workload, when imported from elsewhere

from retention import commit, machine  # noqa: E402
from test_graph import build  # noqa: E402
from tiered import ServerUnavailable, postgres  # noqa: E402

from langgraph.checkpoint.bounded import BoundedInMemorySaver, TieredSaver, WriteBack  # noqa: E402

OUTPUT = HERE / "results" / "concurrency"
USER_MESSAGE = {"messages": [{"role": "user", "content": "hi"}]}
TURNS = 5
POOL = 10
BASELINE, THROUGH, BACK, LATEST, MEMORY = "postgres", "tiered-through", "tiered-back", "tiered-back-latest", "memory"
LABELS = {
    BASELINE: "AsyncPostgresSaver alone (PostgresSaver for threads)",
    THROUGH: "TieredSaver write-through",
    BACK: "TieredSaver write-back, final flush counted",
    LATEST: 'TieredSaver WriteBack(persist="latest"), final flush counted',
    MEMORY: "BoundedInMemorySaver",
}
TABLES = ("checkpoints", "checkpoint_writes", "checkpoint_blobs")
STAT_FIELDS = ("backpressure_waits", "backpressure_seconds", "flushes", "flushed_writes", "spills", "durable_calls")


@dataclass(frozen=True)
class Shape:
    """One run's sizes: the concurrencies, the rounds, the ways of running, the per-cell timeout."""

    concurrency: tuple[int, ...] = (1, 10, 50, 200)
    rounds: int = 2
    modes: tuple[str, ...] = ("async", "threads")
    cell_timeout: float = 120.0
    quick: bool = False


QUICK = Shape(concurrency=(1, 10), rounds=1, cell_timeout=60.0, quick=True)


def write_back_variants() -> dict[str, Any]:
    """The write-back settings this checkout has: ``WriteBack()`` always, ``persist="latest"`` where it exists."""
    found: dict[str, Any] = {BACK: WriteBack()}
    try:
        found[LATEST] = WriteBack(persist="latest")  # type: ignore[call-arg]
    except (TypeError, ValueError) as error:
        print(f'note: WriteBack(persist="latest") is not available here ({error}): that variant is skipped')
    return found


# --- one saver's database ------------------------------------------------------------------------------------------


SIZE = " UNION ALL ".join(
    f"SELECT count(*), coalesce(sum(pg_column_size(t.*)), 0), pg_total_relation_size('{table}') FROM {table} AS t"
    for table in TABLES
)


class Database:
    """A fresh database of the benchmark's server for one saver run, dropped afterwards."""

    def __init__(self, server: str, name: str) -> None:
        from psycopg import Connection

        self.admin = Connection.connect(server, autocommit=True)
        self.name = name
        self.admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        self.admin.execute(f"CREATE DATABASE {name}")
        self.conninfo = server.replace("dbname=postgres", f"dbname={name}")
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(self.conninfo) as saver:
            saver.setup()

    def size(self) -> dict[str, int]:
        """Rows, row bytes (``pg_column_size``) and bytes on disk (``pg_total_relation_size``) of the tables."""
        from psycopg import Connection

        with Connection.connect(self.conninfo, autocommit=True) as connection:
            found = connection.execute(SIZE).fetchall()
        return {
            "rows": sum(int(row[0]) for row in found),
            "row_bytes": sum(int(row[1]) for row in found),
            "disk_bytes": sum(int(row[2]) for row in found),
        }

    def drop(self) -> None:
        self.admin.execute(f"DROP DATABASE IF EXISTS {self.name} WITH (FORCE)")
        self.admin.close()


POOL_KWARGS: dict[str, Any] = {"autocommit": True, "prepare_threshold": 0}


def sync_durable(conninfo: str) -> tuple[Any, Callable[[], None]]:
    """``PostgresSaver`` over a pool of ``POOL`` connections, and what closes the pool."""
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool

    pool = ConnectionPool(conninfo, min_size=POOL, max_size=POOL, kwargs={**POOL_KWARGS, "row_factory": dict_row})
    pool.wait()
    return PostgresSaver(pool), lambda: pool.close(timeout=5)  # type: ignore[arg-type]


async def async_durable(conninfo: str) -> tuple[Any, Any]:
    """``AsyncPostgresSaver`` over a pool of ``POOL`` connections, and the pool (the caller closes it)."""
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    pool = AsyncConnectionPool(
        conninfo, min_size=POOL, max_size=POOL, open=False, kwargs={**POOL_KWARGS, "row_factory": dict_row}
    )
    await pool.open(wait=True)
    return AsyncPostgresSaver(pool), pool  # type: ignore[arg-type]


def over(durable: Any, name: str, variants: dict[str, Any]) -> Any:
    """The saver a name stands for, over ``durable`` (the durable saver itself for the baseline)."""
    if name == BASELINE:
        return durable
    return TieredSaver(durable, write="through" if name == THROUGH else variants[name])


# --- one cell ------------------------------------------------------------------------------------------------------


@dataclass
class Cell:
    """What one saver did in one cell of one round."""

    latencies: list[float] = field(default_factory=list)
    seconds: float = 0.0
    load_seconds: float = 0.0
    cpu_seconds: float = 0.0
    stalled: bool = False
    error: str | None = None
    size: dict[str, int] = field(default_factory=dict)
    stats: dict[str, float] = field(default_factory=dict)

    def summary(self, concurrency: int) -> dict[str, Any]:
        turns = len(self.latencies)
        per_turn = max(turns, 1)
        return {
            "turns": turns,
            "expected_turns": concurrency * TURNS,
            "turns_per_s": turns / self.seconds if self.seconds else 0.0,
            "turns_per_s_during_load": turns / self.load_seconds if self.load_seconds else 0.0,
            "seconds": self.seconds,
            "flush_seconds": self.seconds - self.load_seconds,
            "cpu_ms_per_turn": self.cpu_seconds / per_turn * 1000,
            **{f"{key}_per_turn": value / per_turn for key, value in self.size.items()},
            "stalled": self.stalled,
            "error": self.error,
            "stats": self.stats,
            "latencies": self.latencies,
        }


def saver_stats(saver: Any) -> dict[str, float]:
    if not isinstance(saver, TieredSaver):
        return {}
    stats = saver.stats()
    return {name: float(getattr(stats, name)) for name in STAT_FIELDS if hasattr(stats, name)}


def thread_config(index: int) -> dict[str, Any]:
    return {"configurable": {"thread_id": f"conversation-{index:04d}"}}


async def run_async(app: Any, saver: Any, concurrency: int, timeout: float) -> Cell:
    """C asyncio tasks of ``TURNS`` turns each, then the final flush (write-back), within ``timeout``."""
    cell = Cell()

    async def conversation(index: int) -> None:
        for _ in range(TURNS):
            began = time.perf_counter()
            await app.ainvoke(USER_MESSAGE, thread_config(index))
            cell.latencies.append(time.perf_counter() - began)

    cpu, started = time.process_time(), time.perf_counter()
    tasks = [asyncio.create_task(conversation(index)) for index in range(concurrency)]
    _, pending = await asyncio.wait(tasks, timeout=timeout)
    cell.load_seconds = time.perf_counter() - started
    for task in pending:
        task.cancel()
    await asyncio.wait(tasks, timeout=5)
    cell.stalled = bool(pending)
    failures = [task.exception() for task in tasks if task.done() and not task.cancelled() and task.exception()]
    if failures:
        cell.error = f"{type(failures[0]).__name__}: {failures[0]}"[:300]
    if not cell.stalled and isinstance(saver, TieredSaver):
        try:
            await asyncio.wait_for(saver.aflush(), timeout=max(timeout - cell.load_seconds, 1.0))
        except TimeoutError:
            cell.stalled = True
    cell.seconds = time.perf_counter() - started
    cell.cpu_seconds = time.process_time() - cpu
    cell.stats = saver_stats(saver)
    return cell


def run_threads(app: Any, saver: Any, concurrency: int, timeout: float) -> Cell:
    """C threads of ``TURNS`` turns each, then the final flush (write-back), within ``timeout``."""
    cell = Cell()
    stop = threading.Event()
    failures: list[BaseException] = []

    def conversation(index: int) -> None:
        try:
            for _ in range(TURNS):
                if stop.is_set():
                    return
                began = time.perf_counter()
                app.invoke(USER_MESSAGE, thread_config(index))
                cell.latencies.append(time.perf_counter() - began)
        except BaseException as error:
            failures.append(error)
            raise

    cpu, started = time.process_time(), time.perf_counter()
    workers = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="conversation")
    futures = [workers.submit(conversation, index) for index in range(concurrency)]
    _, pending = wait_futures(futures, timeout=timeout)
    cell.load_seconds = time.perf_counter() - started
    cell.stalled = bool(pending)
    stop.set()
    workers.shutdown(wait=not pending, cancel_futures=True)  # a stalled turn cannot be interrupted: left behind
    if failures:
        cell.error = f"{type(failures[0]).__name__}: {failures[0]}"[:300]
    if not cell.stalled and isinstance(saver, TieredSaver):
        flusher = threading.Thread(target=saver.flush, name="final-flush", daemon=True)
        flusher.start()
        flusher.join(max(timeout - cell.load_seconds, 1.0))
        cell.stalled = flusher.is_alive()
    cell.seconds = time.perf_counter() - started
    cell.cpu_seconds = time.process_time() - cpu
    cell.stats = saver_stats(saver)
    return cell


def warm_up(app: Any, saver: Any) -> None:
    app.invoke(USER_MESSAGE, {"configurable": {"thread_id": "warm-up"}})
    if isinstance(saver, TieredSaver):
        saver.flush()


async def awarm_up(app: Any, saver: Any) -> None:
    await app.ainvoke(USER_MESSAGE, {"configurable": {"thread_id": "warm-up"}})
    if isinstance(saver, TieredSaver):
        await saver.aflush()


def measure_sync(name: str, database: Database | None, concurrency: int, timeout: float, variants: Any) -> Cell:
    close_pool: Callable[[], None] = lambda: None  # noqa: E731
    if database is None:
        saver: Any = BoundedInMemorySaver()
    else:
        durable, close_pool = sync_durable(database.conninfo)
        saver = over(durable, name, variants)
    app = build(saver)
    warm_up(app, saver)
    before = database.size() if database else {}
    cell = run_threads(app, saver, concurrency, timeout)
    if not cell.stalled:
        if isinstance(saver, TieredSaver):
            saver.close()
        if database is not None:
            cell.size = subtract(database.size(), before)
        close_pool()
    else:  # closed so that it stops reconnecting to the database about to be dropped; its turns stay stuck
        threading.Thread(target=close_pool, name="close-stalled-pool", daemon=True).start()
    return cell


async def measure_async(name: str, database: Database | None, concurrency: int, timeout: float, variants: Any) -> Cell:
    pool = None
    if database is None:
        saver: Any = BoundedInMemorySaver()
    else:
        durable, pool = await async_durable(database.conninfo)
        saver = over(durable, name, variants)
    app = build(saver)
    await awarm_up(app, saver)
    before = database.size() if database else {}
    cell = await run_async(app, saver, concurrency, timeout)
    if not cell.stalled:
        if isinstance(saver, TieredSaver):
            await saver.aclose()
        if database is not None:
            cell.size = subtract(database.size(), before)
    if pool is not None:
        await pool.close(timeout=5)
    return cell


def in_new_loop(coroutine: Any) -> Cell:
    """Run a cell's coroutine in an event loop of its own, closed without waiting for its default executor's
    threads (``asyncio.run`` would wait for them: a stalled cell's turns may hold some)."""
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coroutine)  # type: ignore[no-any-return]
    finally:
        leftover = asyncio.all_tasks(loop)
        for task in leftover:
            task.cancel()
        if leftover:  # let them see their cancellation (a turn stuck in a worker thread is left behind)
            loop.run_until_complete(asyncio.wait(leftover, timeout=2))
        loop.close()


def subtract(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {key: after[key] - before[key] for key in after}


def measure(server: str, mode: str, name: str, concurrency: int, timeout: float, variants: Any, serial: int) -> Cell:
    """One saver's run of one cell, over a fresh database (none for the memory saver)."""
    database = None if name == MEMORY else Database(server, f"bench_{serial}")
    try:
        if mode == "async":
            return in_new_loop(measure_async(name, database, concurrency, timeout, variants))
        return measure_sync(name, database, concurrency, timeout, variants)
    except Exception as error:  # reported in its cell: the run goes on with the other savers
        return Cell(error=f"{type(error).__name__}: {error}"[:300])
    finally:
        if database is not None:
            database.drop()


# --- the run and its report ---------------------------------------------------------------------------------------


def percentile(values: list[float], fraction: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def run(shape: Shape) -> dict[str, Any]:
    variants = write_back_variants()
    names = [BASELINE, THROUGH, *variants, MEMORY]
    cells: dict[str, dict[str, list[dict[str, Any]]]] = {}
    started = time.perf_counter()
    load = [os.getloadavg()[0]]
    serial = 0
    with postgres(fsync=True) as server:
        for round_index in range(shape.rounds):
            for mode in shape.modes:
                for position, concurrency in enumerate(shape.concurrency):
                    rotation = (round_index + position) % len(names)
                    for name in names[rotation:] + names[:rotation]:
                        serial += 1
                        cell = measure(server, mode, name, concurrency, shape.cell_timeout, variants, serial)
                        summary = cell.summary(concurrency)
                        key = f"{mode}/{concurrency}"
                        cells.setdefault(key, {}).setdefault(name, []).append(summary)
                        print(
                            f"round {round_index + 1} {mode:7} C={concurrency:<3} {name:18} "
                            f"{summary['turns']:>4}/{summary['expected_turns']} turns "
                            f"{summary['turns_per_s']:7.1f} turns/s"
                            + (" STALLED" if cell.stalled else "")
                            + (f" ERROR {cell.error}" if cell.error else ""),
                            flush=True,
                        )
    load.append(os.getloadavg()[0])
    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": ("BENCH_QUICK=1 " if os.environ.get("BENCH_QUICK") == "1" else "")
        + " ".join(["python benchmarks/concurrency.py", *sys.argv[1:]]),
        "machine": machine(),
        "commit": commit(),
        "load": load,
        "shape": {**shape.__dict__},
        "savers": names,
        "elapsed": time.perf_counter() - started,
        "cells": {key: {name: aggregate(one) for name, one in by_saver.items()} for key, by_saver in cells.items()},
        "ratios": {key: ratios(by_saver) for key, by_saver in cells.items()},
    }


def aggregate(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """One saver's cell over its rounds: medians of the per-round figures, percentiles over every turn."""
    latencies = [value for one in rounds for value in one["latencies"]]
    fine = [one for one in rounds if not one["stalled"] and not one["error"]]

    def median(key: str) -> float | None:
        values = [one[key] for one in fine if key in one]
        return statistics.median(values) if values else None

    return {
        "rounds": [{key: value for key, value in one.items() if key != "latencies"} for one in rounds],
        "stalled": sum(one["stalled"] for one in rounds),
        "errors": [one["error"] for one in rounds if one["error"]],
        "turns_per_s": median("turns_per_s"),
        "turns_per_s_during_load": median("turns_per_s_during_load"),
        "cpu_ms_per_turn": median("cpu_ms_per_turn"),
        "rows_per_turn": median("rows_per_turn"),
        "row_bytes_per_turn": median("row_bytes_per_turn"),
        "disk_bytes_per_turn": median("disk_bytes_per_turn"),
        "p50_ms": percentile(latencies, 0.50) * 1000,
        "p95_ms": percentile(latencies, 0.95) * 1000,
        "p99_ms": percentile(latencies, 0.99) * 1000,
    }


def ratios(by_saver: dict[str, list[dict[str, Any]]]) -> dict[str, float | None]:
    """Each saver's throughput over the baseline's, the median of the per-round ratios (rounds where both ran)."""
    baseline = by_saver.get(BASELINE, [])
    found: dict[str, float | None] = {}
    for name, rounds in by_saver.items():
        pairs = [
            one["turns_per_s"] / base["turns_per_s"]
            for one, base in zip(rounds, baseline, strict=False)
            if not one["stalled"] and not one["error"] and base["turns_per_s"] and not base["error"]
        ]
        found[name] = statistics.median(pairs) if pairs else None
    return found


def targets(results: dict[str, Any], mode: str) -> list[str]:
    """The issue's targets (item 6), one line each, for one way of running."""
    cells, ratio = results["cells"], results["ratios"]
    lines = []
    for concurrency in (10, 50, 200):
        key = f"{mode}/{concurrency}"
        if key not in cells:
            lines.append(f"C={concurrency}: not measured in this run")
            continue
        back, through, base = ratio[key].get(BACK), ratio[key].get(THROUGH), cells[key].get(BASELINE, {})
        back_p99, base_p99 = cells[key].get(BACK, {}).get("p99_ms"), base.get("p99_ms")
        back_holds = back is not None and back >= 3 and back_p99 is not None and back_p99 < base_p99
        lines.append(
            f"C={concurrency}: write-back, flush counted, {fmt_ratio(back)} of the baseline (target >= 3x), p99 "
            f"{fmt_ms(back_p99)} vs {fmt_ms(base_p99)} (target lower): **{'holds' if back_holds else 'does not hold'}**"
            f"; write-through {fmt_ratio(through)} (target >= 1.2x): "
            f"**{'holds' if through is not None and through >= 1.2 else 'does not hold'}**"
        )
    key = f"{mode}/1"
    if key in cells and BACK in cells[key] and MEMORY in cells[key]:
        relative = cells[key][BACK]["p50_ms"] / cells[key][MEMORY]["p50_ms"]
        lines.append(
            f"C=1: write-back p50 {fmt_ms(cells[key][BACK]['p50_ms'])}, {relative:.2f}x the memory saver's "
            f"{fmt_ms(cells[key][MEMORY]['p50_ms'])} (target <= 1.2x): "
            f"**{'holds' if relative <= 1.2 else 'does not hold'}**"
        )
    else:
        lines.append("C=1: not measured in this run")
    return lines


def fmt_ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def fmt_ms(value: float | None, pattern: str = ".1f") -> str:
    return "-" if value is None or value != value else f"{value:{pattern}} ms"


def stalled_text(cell: dict[str, Any]) -> str:
    """How many rounds stalled, and the turns those did of those expected."""
    stalled = [one for one in cell["rounds"] if one["stalled"]]
    text = f"{len(stalled)} of {len(cell['rounds'])}"
    if stalled:
        done, expected = sum(one["turns"] for one in stalled), sum(one["expected_turns"] for one in stalled)
        text += f" ({done:,} of {expected:,} turns in {max(one['seconds'] for one in stalled):.0f} s)"
    return text


def fmt(value: float | None, pattern: str) -> str:
    return "-" if value is None else format(value, pattern)


def report(results: dict[str, Any], output: Path | None) -> str:
    shape = Shape(**{**results["shape"], "concurrency": tuple(results["shape"]["concurrency"])})
    quick = shape.quick
    lines = [
        f"# Concurrent conversations over PostgreSQL, {results['date']}" + (" (QUICK RUN)" if quick else ""),
        "",
    ]
    if quick:
        lines += [
            "> **A quick development run** (`--quick`: C = "
            + ", ".join(map(str, shape.concurrency))
            + f", {shape.rounds} round): a smoke test of the harness, not the measurement the issue asks for. "
            "`make bench-concurrency` runs the full one (C = 1, 10, 50, 200, 2 rounds) and overwrites this file.",
            "",
        ]
    lines += [
        f"`{results['command']}` ({results['elapsed'] / 60:.1f} minutes), at commit "
        f"{results['commit']}. Machine: {results['machine']}. Load average (1 min) at the start and end: "
        f"{results['load'][0]:.1f} / {results['load'][1]:.1f} (a shared machine: other work may have run beside it).",
        "",
        "## Method",
        "",
        f"* C conversations at once, {TURNS} turns each, of the benchmarks' tool-calling chat graph "
        "(`benchmarks/test_graph.py`: agent, tools, the agent's final answer; 3 node runs, 7 new messages, 5 "
        'checkpoints a turn), LangGraph\'s default `durability="async"`; **async**: one asyncio task per '
        "conversation calling `ainvoke`; **threads**: one thread per conversation calling `invoke`.",
        "* PostgreSQL 15 from the distribution's binaries, loopback, `fsync` on; each saver run on a fresh "
        f"database, the durable saver over a `psycopg_pool` pool of {POOL} connections (`AsyncConnectionPool` for "
        "async, `ConnectionPool` for threads). One warm-up turn (on its own thread) before the clock starts.",
        "* Savers: " + "; ".join(f"`{name}`: {LABELS[name]}" for name in results["savers"]) + ". The hot tier and "
        "the memory saver have their default limits; write-back its default `WriteBack()`.",
        "* turns/s: turns over the time from the first turn's start to the last turn's end, and for write-back to "
        "the end of its final `aflush()` / `flush()` (the flush counted; *during load* leaves it out). Latency: "
        "every turn of every round pooled. CPU: this process's `time.process_time` over the cell, per turn "
        "(background flush threads included, the server's not). Rows and bytes: the three tables' `count(*)`, the "
        "sum of `pg_column_size` of their rows, and `pg_total_relation_size`, after the run (and `close()`) minus "
        "after the warm-up, per turn.",
        f"* {shape.rounds} round(s); in each, every cell runs every saver in turn, the order rotating cell to cell "
        "and round to round. Throughput and ratios: the median over rounds (ratios per round, to the baseline "
        f"of the same cell). A cell not done within {shape.cell_timeout:g} s is stopped and counted as stalled.",
        "",
    ]
    for mode in shape.modes:
        lines += [f"## {mode}", ""]
        lines += [
            "| C | saver | turns/s | ratio | during load | p50 | p95 | p99 | CPU/turn | rows/turn | row bytes/turn "
            "| disk bytes/turn | stalled | waits |",
            "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for concurrency in shape.concurrency:
            key = f"{mode}/{concurrency}"
            for name, cell in results["cells"].get(key, {}).items():
                waits = [one["stats"].get("backpressure_waits") for one in cell["rounds"]]
                waits_text = "" if not any(w is not None for w in waits) else f"{sum(w or 0 for w in waits):.0f}"
                lines.append(
                    f"| {concurrency} | `{name}` | {fmt(cell['turns_per_s'], '.1f')} "
                    f"| {fmt_ratio(results['ratios'][key].get(name))} | {fmt(cell['turns_per_s_during_load'], '.1f')} "
                    f"| {fmt_ms(cell['p50_ms'])} | {fmt_ms(cell['p95_ms'])} | {fmt_ms(cell['p99_ms'])} "
                    f"| {fmt_ms(cell['cpu_ms_per_turn'], '.2f')} | {fmt(cell['rows_per_turn'], '.1f')} "
                    f"| {fmt(cell['row_bytes_per_turn'], ',.0f')} | {fmt(cell['disk_bytes_per_turn'], ',.0f')} "
                    f"| {stalled_text(cell)} | {waits_text} |"
                )
                for error in cell["errors"]:
                    lines.append(f"| | | error: {error} | | | | | | | | | | | |")
        lines += ["", f"### Targets ({mode})", "", *(f"* {line}" for line in targets(results, mode)), ""]
    lines += [
        "`waits`: write-back's `backpressure_waits`, summed over rounds. A stalled cell's figures count the turns it "
        "did within the timeout; its rows are not counted.",
        "",
    ]
    if results.get("plot"):
        lines += ["## Plot", "", f"![throughput and p99 by concurrency]({results['plot']})", ""]
    text = "\n".join(lines) + "\n"
    if output is not None:
        (output / "RESULTS.md").write_text(text)
    return text


def plot(results: dict[str, Any], output: Path) -> str | None:
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    modes = results["shape"]["modes"]
    figure, axes = plt.subplots(len(modes), 2, figsize=(12, 4.2 * len(modes)), squeeze=False)
    for row, mode in enumerate(modes):
        throughput, tail = axes[row]
        for name in results["savers"]:
            points = [
                (int(key.split("/")[1]), cells[name])
                for key, cells in results["cells"].items()
                if key.startswith(f"{mode}/") and name in cells
            ]
            points.sort(key=lambda point: point[0])
            xs = [c for c, _ in points]
            throughput.plot(xs, [cell["turns_per_s"] or 0 for _, cell in points], marker="o", label=LABELS[name])
            tail.plot(xs, [cell["p99_ms"] for _, cell in points], marker="o", label=LABELS[name])
        for axis in (throughput, tail):
            axis.set_xscale("log")
            axis.set_xlabel("conversations at once (C)")
            axis.grid(True, alpha=0.3)
        throughput.set_yscale("log")
        tail.set_yscale("log")
        throughput.set_ylabel("turns/s")
        tail.set_ylabel("p99 turn latency (ms)")
        throughput.set_title(f"{mode}: throughput (write-back: final flush counted)")
        tail.set_title(f"{mode}: p99 turn latency")
        throughput.legend(fontsize=7)
    figure.suptitle(
        "Concurrent chat conversations over PostgreSQL 15 (fsync on, pool of 10)"
        + (" - QUICK RUN" if results["shape"].get("quick") else "")
    )
    figure.tight_layout()
    figure.savefig(output / "concurrency.png", dpi=100)
    plt.close(figure)
    return "concurrency.png"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="C = 1 and 10, one round (also BENCH_QUICK=1)")
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--concurrency", type=int, nargs="*")
    parser.add_argument("--modes", nargs="*", choices=["async", "threads"])
    parser.add_argument("--cell-timeout", type=float)
    parser.add_argument("--output", type=Path, default=OUTPUT)
    parser.add_argument("--from-json", type=Path, help="rewrite RESULTS.md (and the plot) from a run's results.json")
    arguments = parser.parse_args()
    if arguments.from_json:
        results = json.loads(arguments.from_json.read_text())
        output = arguments.from_json.parent
        results["plot"] = plot(results, output)
        print(report(results, output))
        return
    shape = QUICK if arguments.quick or os.environ.get("BENCH_QUICK") == "1" else Shape()
    shape = Shape(
        concurrency=tuple(arguments.concurrency or shape.concurrency),
        rounds=arguments.rounds or shape.rounds,
        modes=tuple(arguments.modes or shape.modes),
        cell_timeout=arguments.cell_timeout or shape.cell_timeout,
        quick=shape.quick,
    )
    try:
        results = run(shape)
    except ServerUnavailable as error:
        raise SystemExit(f"NO POSTGRESQL SERVER COULD BE STARTED ({error}): nothing measured") from error
    output: Path = arguments.output
    output.mkdir(parents=True, exist_ok=True)
    (output / "results.json").write_text(json.dumps(results, indent=1))
    results["plot"] = plot(results, output)
    print(report(results, output), flush=True)
    os._exit(0)  # a stalled cell's threads (and their pools) are left behind: do not wait for them


if __name__ == "__main__":
    main()
