"""Write-back's crash window over a slow durable tier, measured: how old the oldest unflushed write grows, per
thread, and what a ``kill -9`` loses.

Usage: ``python benchmarks/writeback_window.py [--seconds 6] [--threads 4] [--delay-ms 15] [--runs 3]``
(about ``runs * (seconds + 2)`` seconds); ``--parent-check TURNS [--postgres CONNINFO]`` measures instead what
the check of a late flush's parent costs a flush (median ms of a one-turn flush, read or skipped).

The durable tier is ``SqliteSaver`` on a file in a temporary folder whose every ``put`` and ``put_writes``
first sleeps ``--delay-ms`` (a tier slower than the writes: four writers putting back to back outrun it).
The tiered saver writes back with ``flush_interval_seconds=0.3`` and ``max_dirty_seconds=0.3``.

Each run starts a child process (this script with ``--child``) whose ``--threads`` threads each put
checkpoints back to back on a thread of their own (a checkpoint and one pending write a turn), each
logging the id of every acknowledged put with the time it was acknowledged (``time.monotonic``, which
parent and child share on Linux) to a pipe. A sampler thread in the child records, every 10 ms, each
thread's oldest unflushed write (its age in the ledger). After ``--seconds`` the parent kills the child
with ``SIGKILL`` and reads the durable file: every acknowledged put missing from it is lost, and its age
at the kill is the time from its acknowledgement to the kill. Reported per run: the oldest unflushed
write any sample saw (all threads, and the worst thread's), the oldest lost write's age, and how many
acknowledged puts were lost.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from langgraph.checkpoint.sqlite import SqliteSaver

FLUSH_SECONDS = 0.3


class SlowSqlite(SqliteSaver):
    """``SqliteSaver`` whose every write first sleeps: a durable tier slower than the writes."""

    def __init__(self, path: Path, delay: float) -> None:
        super().__init__(sqlite3.connect(path, check_same_thread=False))
        self.delay = delay

    def put(self, *args: Any, **kwargs: Any) -> Any:
        time.sleep(self.delay)
        return super().put(*args, **kwargs)

    def put_writes(self, *args: Any, **kwargs: Any) -> None:
        time.sleep(self.delay)
        super().put_writes(*args, **kwargs)


def child(path: Path, threads: int, delay: float) -> None:
    """Write back to back from ``threads`` threads until killed, logging each acknowledged put to stdout."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository, for tests.support
    from langgraph.checkpoint.bounded import TieredSaver, WriteBack
    from tests.support.helpers import config, make_checkpoint

    durable = SlowSqlite(path, delay)
    durable.setup()
    tiered = TieredSaver(
        durable, write=WriteBack(flush_interval_seconds=FLUSH_SECONDS, max_dirty_seconds=FLUSH_SECONDS)
    )
    out = sys.stdout
    lock = threading.Lock()

    def writer(index: int) -> None:
        thread_id, parent = f"w-{index}", None
        step = 0
        while True:
            checkpoint = make_checkpoint({"step": step}, {"step": step + 1})
            stored = tiered.put(config(thread_id, "", parent), checkpoint, {"step": step}, {"step": step + 1})
            acknowledged = time.monotonic()
            tiered.put_writes(stored, [("step", step + 1)], f"task-{step}")
            parent = stored["configurable"]["checkpoint_id"]
            with lock:
                out.write(json.dumps(["ack", thread_id, parent, acknowledged]) + "\n")
                out.flush()
            step += 1

    def sampler() -> None:
        ledger = tiered._shared.dirty  # the ledger of unflushed writes (a measurement, not an API)
        while True:
            now = time.monotonic()
            with ledger.lock:
                ages = {thread_id: now - backlog.times[0] for thread_id, backlog in ledger.threads.items()}
            with lock:
                out.write(json.dumps(["ages", ages]) + "\n")
                out.flush()
            time.sleep(0.01)

    for index in range(threads):
        threading.Thread(target=writer, args=(index,), daemon=True).start()
    threading.Thread(target=sampler, daemon=True).start()
    threading.Event().wait()


def one_run(seconds: float, threads: int, delay: float) -> dict[str, Any]:
    """One child, killed after ``seconds``: the ages sampled and the acknowledged puts lost."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "durable.sqlite"
        root = Path(__file__).resolve().parent.parent
        command = [sys.executable, __file__, "--child", str(path), "--threads", str(threads)]
        command += ["--delay-ms", str(delay * 1000)]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=root)
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(process.stdout or []), daemon=True)
        reader.start()
        time.sleep(seconds)
        os.kill(process.pid, signal.SIGKILL)
        killed = time.monotonic()
        process.wait()
        reader.join()
        acked: dict[str, float] = {}
        worst: dict[str, float] = {}
        for line in lines:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # the last line, cut by the kill
            if record[0] == "ack":
                acked[record[2]] = record[3]
            else:
                for thread_id, age in record[1].items():
                    worst[thread_id] = max(worst.get(thread_id, 0.0), age)
        with sqlite3.connect(path) as connection:
            durable = {row[0] for row in connection.execute("SELECT checkpoint_id FROM checkpoints")}
    lost = [killed - at for checkpoint_id, at in acked.items() if checkpoint_id not in durable]
    return {
        "acknowledged": len(acked),
        "lost": len(lost),
        "oldest_lost_seconds": max(lost, default=0.0),
        "oldest_unflushed_seconds": max(worst.values(), default=0.0),
        "per_thread_oldest_seconds": dict(sorted(worst.items())),
    }


def parent_check_cost(turns: int, conninfo: str | None) -> dict[str, float]:
    """The late-flush parent check's cost: the median time of a flush of one turn (a checkpoint and a pending
    write) continuing the thread, with the check (every such flush reads its parent) and without it (the check
    replaced, for this measurement only, by one that finds nothing to read)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from langgraph.checkpoint.bounded import TieredSaver, WriteBack
    from langgraph.checkpoint.bounded.tiered import flushing
    from tests.support.helpers import config, make_checkpoint

    def durable(folder: str) -> Any:
        if conninfo is None:
            saver = SqliteSaver(sqlite3.connect(Path(folder) / "d.sqlite", check_same_thread=False))
        else:
            from langgraph.checkpoint.postgres import PostgresSaver
            from psycopg import Connection
            from psycopg.rows import dict_row

            saver = PostgresSaver(
                Connection.connect(conninfo, autocommit=True, prepare_threshold=0, row_factory=dict_row)
            )
        saver.setup()
        return saver

    medians: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as folder:
        checked = flushing._parent_to_check
        for label, check in (("checked", checked), ("skipped", lambda *arguments: None)):
            flushing._parent_to_check = check  # type: ignore[assignment]
            tiered = TieredSaver(durable(folder), write=WriteBack(flush_interval_seconds=math.inf))
            parent, times = None, []
            for step in range(turns):
                stored = tiered.put(config(label, "", parent), make_checkpoint({"n": step}), {}, {"n": step + 1})
                tiered.put_writes(stored, [("n", step)], "task")
                parent = stored["configurable"]["checkpoint_id"]
                began = time.perf_counter()
                tiered.flush()
                times.append(time.perf_counter() - began)
            medians[label] = statistics.median(times[1:]) * 1000  # the first flush has no parent
            medians[f"{label}_reads"] = tiered._shared.counters.parent_checks
        flushing._parent_to_check = checked
    return medians


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--delay-ms", type=float, default=15.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--child", type=Path)
    parser.add_argument("--parent-check", type=int, metavar="TURNS", help="measure the late-flush parent check")
    parser.add_argument("--postgres", metavar="CONNINFO", help="with --parent-check: over PostgreSQL")
    arguments = parser.parse_args()
    delay = arguments.delay_ms / 1000
    if arguments.parent_check:
        print(json.dumps(parent_check_cost(arguments.parent_check, arguments.postgres)))
        return
    if arguments.child is not None:
        child(arguments.child, arguments.threads, delay)
        return
    results = [one_run(arguments.seconds, arguments.threads, delay) for _ in range(arguments.runs)]
    for result in results:
        print(json.dumps(result))
    print(
        json.dumps(
            {
                "median_oldest_unflushed_seconds": statistics.median(r["oldest_unflushed_seconds"] for r in results),
                "max_oldest_lost_seconds": max(r["oldest_lost_seconds"] for r in results),
            }
        )
    )


if __name__ == "__main__":
    main()
