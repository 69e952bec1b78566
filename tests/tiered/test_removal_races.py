"""Removals that rewrite a thread, racing a retention pass of the same thread (issue 36, finding 1).

Over a durable saver with no ``delete_for_runs`` or ``prune`` of its own (``SqliteSaver``), the tiered saver
rewrites each thread it changes: it reads the thread whole, deletes it, and puts back what survives. A retention
pass that deleted the thread as idle between that read and that rewrite was undone by it: the thread came back,
12 checkpoints, below every later pass's window. Now the rewrite holds the thread's gate alone from its read to its
last put, as a pass does, so the two take turns: whichever goes second sees what the first left.

The read is held (the controlled saver waits after reading the thread, until the test releases it), and the pass
is started meanwhile: without the gate it deletes the thread at once; with it, it waits for the rewrite, and
deletes what the rewrite left (the thread is idle), so the thread is gone in the end either way it is decided.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from langgraph.checkpoint.bounded import InMemoryCheckpointConfig, RetentionPolicy, TieredSaver
from tests.support.durable_savers import ControlledSqlite
from tests.support.helpers import config, make_checkpoint

WAIT = 60.0  # seconds: only ever turns a hang into a failure
TTL = 60.0


class HoldingThreadReads(ControlledSqlite):
    """Holds the first ``list`` of one whole thread (a rewrite's read), after reading it, until released."""

    hold_thread: str | None = None

    def list(self, config: Any, **kwargs: Any) -> Any:
        located = (config or {}).get("configurable", {})
        if self.hold_thread is not None and located.get("thread_id") == self.hold_thread and not kwargs:
            self.hold_thread = None
            read = list(super(ControlledSqlite, self).list(config, **kwargs))
            self.holding.set()
            assert self.release.wait(WAIT), "the test never released the held read"
            return iter(read)
        return super().list(config, **kwargs)


class Clock:
    def __init__(self, start: float) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


def two_runs(saver: TieredSaver, thread_id: str, each: int) -> None:
    """``each`` checkpoints of run ``r1``, then ``each`` of run ``r2``, in one parent chain."""
    parent = None
    for step in range(2 * each):
        version = f"{step + 1:032}.0"
        checkpoint = make_checkpoint({"step": step}, {"step": version})
        metadata = {"source": "loop", "step": step, "parents": {}, "run_id": "r1" if step < each else "r2"}
        stored = saver.put(config(thread_id, "", parent), checkpoint, metadata, {"step": version})
        parent = stored["configurable"]["checkpoint_id"]


def count(durable: Any, thread_id: str) -> int:
    return len(list(durable.list({"configurable": {"thread_id": thread_id}})))


@pytest.mark.parametrize("removal", ["delete_for_runs", "adelete_for_runs", "keep_latest", "akeep_latest"])
def test_a_rewrite_and_an_idle_sweep_of_the_thread_take_turns(tmp_path: Path, removal: str) -> None:
    durable = HoldingThreadReads(tmp_path / "durable.sqlite")
    wall, monotonic = Clock(time.time()), Clock(1_000.0)
    tiered = TieredSaver(
        durable,
        config=InMemoryCheckpointConfig(max_threads=10),
        retention=RetentionPolicy(idle_ttl_seconds=TTL, sweep_interval_seconds=math.inf),
        clock=monotonic,
        wall_clock=wall,
    )
    two_runs(tiered, "t", 6)
    assert count(durable, "t") == 12
    wall.now += 10 * TTL  # the thread is idle now, in the durable tier's time and in this process's
    monotonic.now += 10 * TTL

    durable.hold_thread = "t"
    failures: list[BaseException] = []

    def remove() -> None:
        try:
            if removal == "delete_for_runs":
                tiered.delete_for_runs(["r1"])
            elif removal == "adelete_for_runs":
                asyncio.run(tiered.adelete_for_runs(["r1"]))
            elif removal == "keep_latest":
                tiered.prune(["t"], strategy="keep_latest")
            else:
                asyncio.run(tiered.aprune(["t"], strategy="keep_latest"))
        except BaseException as error:  # reported by the test, not lost in a thread
            failures.append(error)

    rewriting = threading.Thread(target=remove)
    rewriting.start()
    assert durable.holding.wait(WAIT), "the rewrite never read the thread"
    sweeping = threading.Thread(target=lambda: failures.extend(_errors(tiered.sweep)))
    sweeping.start()
    sweeping.join(0.5)  # without the gate the pass deletes the thread now; with it, it waits for the rewrite
    durable.release.set()
    rewriting.join(WAIT)
    sweeping.join(WAIT)
    assert not rewriting.is_alive() and not sweeping.is_alive()
    assert not failures, failures
    assert count(durable, "t") == 0  # the pass went second: it deleted what the rewrite left; nothing came back
    assert tiered.get_tuple(config("t")) is None


def _errors(call: Any) -> list[BaseException]:
    try:
        call()
    except BaseException as error:
        return [error]
    return []


def test_a_tombstone_covers_only_the_deleted_life_of_a_thread(tmp_path: Path) -> None:
    """What a rewrite checks before it puts anything back: ids of the deleted life are covered, a new life's not."""
    tiered = TieredSaver(ControlledSqlite(tmp_path / "durable.sqlite"))
    two_runs(tiered, "t", 2)
    old = [item.config["configurable"]["checkpoint_id"] for item in tiered.list(config("t"))]
    tiered.delete_thread("t")
    deleted = tiered._tiers.shared.deleted
    assert deleted.covers("t", old) and not deleted.covers("other", old)
    two_runs(tiered, "t", 1)  # a new run on the id: its checkpoints are newer than the tombstone
    new = [item.config["configurable"]["checkpoint_id"] for item in tiered.list(config("t"))]
    assert not deleted.covers("t", new) and not deleted.covers("t", [*old, *new])
