"""Group commit measured: one write-back flush of many threads, through the saver's API (the old path) and by
group commit (the new one), over a throwaway PostgreSQL (fsync on); and write-through puts, one at a time and
concurrently over a pool.

Usage: ``python benchmarks/group_commit.py [--threads 50] [--writes 10] [--rounds 7] [--through-turns 200]``

* **flush**: ``--threads`` threads each get ``--writes`` unflushed writes (a checkpoint of a chat-like state, a
  list of message dicts growing by one a turn, and a task's pending write, alternately) in a write-back
  ``TieredSaver``; then ``flush()`` (``aflush()`` over ``AsyncPostgresSaver``) is timed. The old path is a
  subclass of the stock saver that overrides ``put`` (delegating to it): the tiered saver writes such a saver
  through its API, item by item, as every flush did before group commits. Old and new alternate within each
  round, and each takes fresh tables.
* **through**: ``--through-turns`` write-through turns (a put and a put_writes) of 20 threads over
  ``AsyncPostgresSaver`` on a pool of 10, 20 at once: old (through the saver's API and its one lock) and new
  (group-commit path, a pool connection each).

Reported: the median seconds of each and the ratio old/new (above 1: the new path is faster), as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.tiered import postgres
from langgraph.checkpoint.bounded import TieredSaver, WriteBack, WriteThrough
from tests.support.helpers import config, make_checkpoint

BACK = WriteBack(flush_interval_seconds=float("inf"), max_dirty_bytes=1 << 30, max_dirty_seconds=float("inf"))
KWARGS: dict[str, Any] = {"autocommit": True, "prepare_threshold": 0}


def _through(saver_class: type[Any]) -> type[Any]:
    """A subclass overriding ``put`` and ``aput``: written through its API (the old path)."""
    methods = {
        "put": lambda self, *args, **kwargs: saver_class.put(self, *args, **kwargs),
        "aput": lambda self, *args, **kwargs: saver_class.aput(self, *args, **kwargs),
    }
    return type(f"Through{saver_class.__name__}", (saver_class,), methods)


def _turn_state(thread_id: str, turn: int) -> dict[str, Any]:
    messages = [
        {"role": "user" if i % 2 else "assistant", "content": f"{thread_id} message {i} " * 8} for i in range(turn + 1)
    ]
    return {"messages": messages, "step": turn, "node": "agent"}


def _writes(threads: int, writes: int) -> list[tuple[str, tuple[Any, ...]]]:
    calls: list[tuple[str, tuple[Any, ...]]] = []
    for index in range(threads):
        thread_id, parent = f"thread-{index}", None
        for turn in range(writes // 2):
            values = _turn_state(thread_id, turn)
            versions = {channel: f"{turn + 1:032}.0" for channel in values}
            checkpoint = make_checkpoint(values, versions)
            calls.append(
                ("put", (config(thread_id, "", parent), checkpoint, {"step": turn, "source": "loop"}, versions))
            )
            parent = checkpoint["id"]
            located = config(thread_id, "", parent)
            calls.append(
                ("put_writes", (located, [("messages", {"role": "tool", "content": "ok " * 20})], f"task-{turn}"))
            )
    return calls


def _clean(conninfo: str) -> None:
    from psycopg import Connection

    with Connection.connect(conninfo, autocommit=True) as connection:
        for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes"):
            connection.execute(f"TRUNCATE {table}")


def flush_once(conninfo: str, *, old: bool, use_async: bool, threads: int, writes: int) -> float:
    """Seconds one flush of ``threads`` x ``writes`` unflushed writes takes."""
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg import AsyncConnection, Connection
    from psycopg.rows import dict_row

    _clean(conninfo)
    if not use_async:
        with Connection.connect(conninfo, **KWARGS, row_factory=dict_row) as connection:
            durable = (_through(PostgresSaver) if old else PostgresSaver)(connection)
            tiered = TieredSaver(durable, write=BACK)
            for method, arguments in _writes(threads, writes):
                getattr(tiered, method)(*arguments)
            start = time.perf_counter()
            assert tiered.flush() == threads * writes
            return time.perf_counter() - start

    async def run() -> float:
        async with await AsyncConnection.connect(conninfo, **KWARGS, row_factory=dict_row) as connection:
            durable = (_through(AsyncPostgresSaver) if old else AsyncPostgresSaver)(connection)
            tiered = TieredSaver(durable, write=BACK)
            for method, arguments in _writes(threads, writes):
                await getattr(tiered, "a" + method)(*arguments)
            start = time.perf_counter()
            assert await tiered.aflush() == threads * writes
            return time.perf_counter() - start

    return asyncio.run(run())


def through_once(conninfo: str, *, old: bool, turns: int) -> float:
    """Seconds ``turns`` write-through turns of 20 concurrent threads take over ``AsyncPostgresSaver`` on a pool."""
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    _clean(conninfo)

    async def run() -> float:
        kwargs = {**KWARGS, "row_factory": dict_row}
        async with AsyncConnectionPool(conninfo, kwargs=kwargs, min_size=10, max_size=10, open=False) as pool:
            durable = (_through(AsyncPostgresSaver) if old else AsyncPostgresSaver)(pool)
            tiered = TieredSaver(durable, write=WriteThrough())

            async def conversation(thread_id: str, count: int) -> None:
                parent = None
                for turn in range(count):
                    values = _turn_state(thread_id, turn)
                    versions = {channel: f"{turn + 1:032}.0" for channel in values}
                    checkpoint = make_checkpoint(values, versions)
                    stored = await tiered.aput(config(thread_id, "", parent), checkpoint, {"step": turn}, versions)
                    await tiered.aput_writes(stored, [("messages", {"content": "ok"})], f"task-{turn}")
                    parent = checkpoint["id"]

            start = time.perf_counter()
            await asyncio.gather(*(conversation(f"conversation-{index}", turns // 20) for index in range(20)))
            return time.perf_counter() - start

    return asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for option, default in {"--threads": 50, "--writes": 10, "--rounds": 7, "--through-turns": 200}.items():
        parser.add_argument(option, type=int, default=default)
    arguments = parser.parse_args()
    results: dict[str, Any] = {"threads": arguments.threads, "writes": arguments.writes, "rounds": arguments.rounds}
    with postgres(fsync=True) as conninfo:
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(conninfo) as saver:
            saver.setup()
        cases = {
            "flush_sync": lambda old: flush_once(
                conninfo, old=old, use_async=False, threads=arguments.threads, writes=arguments.writes
            ),
            "flush_async": lambda old: flush_once(
                conninfo, old=old, use_async=True, threads=arguments.threads, writes=arguments.writes
            ),
            "through_async_pool": lambda old: through_once(conninfo, old=old, turns=arguments.through_turns),
        }
        for name, case in cases.items():
            case(True), case(False)  # warm-up: connections, prepared plans, imports
            times: dict[bool, list[float]] = {True: [], False: []}
            for round_ in range(arguments.rounds):
                for old in (True, False) if round_ % 2 == 0 else (False, True):  # interleaved, order alternating
                    times[old].append(case(old))
            old, new = statistics.median(times[True]), statistics.median(times[False])
            results[name] = {"old_s": round(old, 4), "new_s": round(new, 4), "old_over_new": round(old / new, 2)}
            print(name, results[name], file=sys.stderr, flush=True)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
