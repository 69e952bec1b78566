"""Write-back backpressure under many writers at once (issue 34, item 2): when a bound is reached, ONE flush runs
and every writer that needs room waits for it; no writer repeats a flush another is running.

Every flush is counted as a pass, by who ran it (an OS thread, or an asyncio task): a round (``flush_all``), or a
thread's flush outside one (``flush_thread``). The bound is set so that every writer needs room at once.
"""

from __future__ import annotations

import asyncio
import functools
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from langgraph.checkpoint.bounded import TieredSaver, WriteBack
from langgraph.checkpoint.bounded.tiered import flushing
from tests.support.durable_savers import ControlledSqlite, clean, cluster_fixture, postgres_saver, sqlite_durable
from tests.support.helpers import config, make_checkpoint

DIRTY_THREADS = 12  # dirty before the writers come: the bound is full
WRITERS = 8  # each needs room for one turn; one round makes room for all of them

cluster = cluster_fixture("the write-back backpressure tests over PostgreSQL")


@dataclass
class Passes:
    """The flushes that ran, by caller: a pass is a round, or a thread's flush outside one."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    depth: dict[object, int] = field(default_factory=dict)  # caller -> flushes under way (a round's are nested)
    callers: list[object] = field(default_factory=list)  # who ran each pass
    overlaps: int = 0  # passes begun while another caller's pass was under way

    def enter(self, caller: object) -> None:
        with self.lock:
            if not self.depth.get(caller):
                self.callers.append(caller)
                self.overlaps += any(depth for other, depth in self.depth.items() if other != caller)
            self.depth[caller] = self.depth.get(caller, 0) + 1

    def leave(self, caller: object) -> None:
        with self.lock:
            self.depth[caller] -= 1


def caller() -> object:
    try:
        return asyncio.current_task() or threading.get_ident()
    except RuntimeError:  # no running loop: a sync caller
        return threading.get_ident()


def counted(passes: Passes, function: Callable[..., Any], shared: object) -> Callable[..., Any]:
    """``function`` counting its calls for the saver whose ``Shared`` is ``shared`` (a saver an earlier test left
    to the garbage collector is flushed by a thread of its own meanwhile: not this test's pass)."""
    if asyncio.iscoroutinefunction(function):

        @functools.wraps(function)
        async def awaited(*args: Any, **kwargs: Any) -> Any:
            if args[0].shared is not shared:
                return await function(*args, **kwargs)
            who = caller()
            passes.enter(who)
            try:
                return await function(*args, **kwargs)
            finally:
                passes.leave(who)

        return awaited

    @functools.wraps(function)
    def called(*args: Any, **kwargs: Any) -> Any:
        if args[0].shared is not shared:
            return function(*args, **kwargs)
        who = caller()
        passes.enter(who)
        try:
            return function(*args, **kwargs)
        finally:
            passes.leave(who)

    return called


def turn(tiered: TieredSaver, thread_id: str) -> None:
    stored = tiered.put(config(thread_id), make_checkpoint({"n": 1}, {"n": 1}), {"step": 0}, {"n": 1})
    tiered.put_writes(stored, [("n", 2)], "task")


async def aturn(tiered: TieredSaver, thread_id: str) -> None:
    stored = await tiered.aput(config(thread_id), make_checkpoint({"n": 1}, {"n": 1}), {"step": 0}, {"n": 1})
    await tiered.aput_writes(stored, [("n", 2)], "task")


def durable_for(backend: str, db: Path, request: pytest.FixtureRequest) -> Any:
    if backend == "sqlite":
        durable = ControlledSqlite(db)
        durable.delay = 0.002  # a slow tier: the writers pile up while a round runs
        return durable
    conninfo = request.getfixturevalue("cluster").conninfo
    clean(conninfo)
    return postgres_saver(conninfo)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
@pytest.mark.parametrize("use_async", [False, True], ids=["threads", "tasks"])
def test_one_flush_serves_every_writer_waiting_for_room(
    tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, backend: str, use_async: bool
) -> None:
    """Eight writers each need room in a full ledger of twelve dirty threads. Each ran a flush of its own (of
    the oldest dirty thread), one after another: eight passes where one was needed (the collapse at C=50 and
    C=200). Now the first writer runs one round of every dirty thread, the others wait for it: one pass, by one
    caller, and no flush begun while another caller's was under way."""
    db = tmp_path / "durable.sqlite"
    durable = durable_for(backend, db, request)
    tiered = TieredSaver(durable, write=WriteBack(flush_interval_seconds=math.inf))
    for index in range(DIRTY_THREADS):
        turn(tiered, f"dirty-{index}")
    tiered._shared.max_dirty_bytes = tiered.stats().dirty_bytes  # full: every writer needs room
    passes = Passes()
    for name in ("flush_all", "aflush_all", "flush_thread", "aflush_thread"):
        monkeypatch.setattr(flushing, name, counted(passes, getattr(flushing, name), tiered._shared))
    if use_async:

        async def every() -> None:
            await asyncio.gather(*(aturn(tiered, f"writer-{index}") for index in range(WRITERS)))

        asyncio.run(every())
    else:
        threads = [threading.Thread(target=turn, args=(tiered, f"writer-{index}")) for index in range(WRITERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert len(passes.callers) == 1, f"{len(passes.callers)} flushes ran where one was needed"
    assert passes.overlaps == 0
    stats = tiered.stats()
    assert stats.dirty_threads == WRITERS and stats.backpressure_waits >= 1
    assert stats.flushes == DIRTY_THREADS  # each dirty thread flushed once, by the one round
    tiered.close()
    tiered.check()
    reader = sqlite_durable(db) if backend == "sqlite" else tiered.durable
    for name in [f"dirty-{index}" for index in range(DIRTY_THREADS)] + [f"writer-{index}" for index in range(WRITERS)]:
        stored = reader.get_tuple(config(name))
        assert stored is not None and stored.pending_writes == [(stored.pending_writes[0][0], "n", 2)]


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_evicting_a_dirty_thread_hands_it_to_the_flusher(tmp_path: Path, use_async: bool) -> None:
    """A write evicting a dirty thread flushed it inline, in the writer, before being acknowledged. Now the writer
    makes no durable call: the evicted thread's writes wait in the ledger (counted in the bounds) for the next
    round, which counts the spill."""
    from langgraph.checkpoint.bounded import InMemoryCheckpointConfig

    durable = ControlledSqlite(tmp_path / "durable.sqlite")
    tiered = TieredSaver(
        durable, config=InMemoryCheckpointConfig(max_threads=1), write=WriteBack(flush_interval_seconds=math.inf)
    )
    turn(tiered, "first")
    if use_async:
        asyncio.run(aturn(tiered, "second"))  # evicts "first", dirty
    else:
        turn(tiered, "second")
    assert tiered._store.last_used("first") is None
    assert sum(durable.calls.values()) == 0 and tiered.stats().dirty_threads == 2
    tiered.flush()
    assert tiered.stats().spills == 1 and durable.get_tuple(config("first")) is not None
    tiered.close()
    tiered.check()


def test_a_failed_round_nobody_waits_for_keeps_no_error(tmp_path: Path) -> None:
    """A round's failure is kept for the writers waiting on it, then let go: its traceback holds the flush's
    frames, and with them the saver, which an unclosed program's collection would then never flush (a saver
    kept alive to the interpreter's exit, after its durable tier was gone, ended the process with status 70)."""
    import sqlite3

    durable = ControlledSqlite(tmp_path / "durable.sqlite")
    tiered = TieredSaver(durable, write=WriteBack(flush_interval_seconds=math.inf))
    turn(tiered, "t")
    durable.failing = True
    with pytest.raises(sqlite3.OperationalError):
        tiered.flush()
    assert tiered._shared.dirty.rounds.failure is None
    durable.failing = False
    tiered.close()


def test_flush_is_served_by_the_next_round_whoever_runs_it() -> None:
    """``flush()`` under writers that start rounds back to back: the round under way at the call may have claimed
    its threads before it, so it waits for it; the next round begins after the call and flushes every thread dirty
    then, so it serves ``flush()`` too, whoever runs it. Before, ``flush()`` waited for a round of its own, and
    writers beginning each next round first kept it waiting (7.8 s with 20 writers over SQLite)."""
    from types import SimpleNamespace

    from langgraph.checkpoint.bounded.tiered.writeback import FlushRounds

    rounds = FlushRounds()
    tiers: Any = SimpleNamespace(shared=SimpleNamespace(dirty=SimpleNamespace(rounds=rounds)))
    assert rounds.begin() is None  # a writer's round, begun before the call
    plan = flushing._round(tiers, share=False)
    assert next(plan).kind == "wait"
    rounds.end(None)
    assert rounds.begin() is None  # the next round: another writer began it first
    assert plan.send(None).kind == "wait"  # flush() waits for it instead of one of its own
    rounds.end(None)
    with pytest.raises(StopIteration) as served:
        plan.send(None)
    assert served.value.value == 0 and rounds.started == rounds.finished == 2  # no third round ran
