"""``TieredSaver`` answers as the durable tier does, and never older than a write acknowledged before a read.

Races are played deterministically: ``ControlledSqlite`` (tests/test_tiered_support.py) holds a durable read
after it has read, until the test releases it, so a read that began before a write lands after it. Every
wait is on an event or a condition, never on time.
"""

from __future__ import annotations

import asyncio
import math
import threading
from pathlib import Path
from typing import Any

import pytest

from langgraph.checkpoint.bounded import InMemoryCheckpointConfig, TieredSaver
from tests.helpers import config, make_checkpoint
from tests.test_tiered_support import ControlledSqlite, sqlite_durable

WAIT = 60.0
ONE_THREAD = InMemoryCheckpointConfig(max_threads=1)
MODES = [("through", "sticky"), ("back", "sticky"), ("through", "validate")]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "durable.sqlite"


def waiters(tiered: TieredSaver) -> int:
    flights = tiered._shared.flights
    with flights.lock:
        return sum(flight.waiters for flight in flights.flights.values())


def wait_until(condition: Any) -> None:
    pause = threading.Event()
    for _ in range(int(WAIT / 0.001)):
        if condition():
            return
        pause.wait(0.001)
    raise AssertionError("the condition never held")


def put_step(tiered: TieredSaver, thread_id: str, parent: dict[str, Any] | None, value: int) -> dict[str, Any]:
    parent_id = parent["configurable"]["checkpoint_id"] if parent else None
    version = f"{value:032}.0"
    checkpoint = make_checkpoint({"x": value}, {"x": version})
    return tiered.put(config(thread_id, "", parent_id), checkpoint, {"step": value}, {"x": version})  # type: ignore[return-value]


def newest_value(method: str, answer: Any) -> int:
    if method == "list":
        answer = answer[0]
    return int(answer.checkpoint["channel_values"]["x"])


# --- 1. read-your-writes: a read never joins a durable read that began before a write acknowledged to it ---------


@pytest.mark.parametrize(("write", "coherence"), MODES)
@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("method", ["get", "list"])
def test_a_read_never_answers_older_than_a_write_acknowledged_before_it_began(
    db: Path, method: str, use_async: bool, write: str, coherence: str
) -> None:
    """A durable read of ``t`` begins (and reads checkpoint 1), a write of checkpoint 2 is acknowledged, ``t``
    leaves memory, then a second read begins: before the fix it joined the first read in flight and answered 1."""
    durable = ControlledSqlite(db)
    tiered = TieredSaver(
        durable,
        config=ONE_THREAD,
        write=write,  # type: ignore[arg-type]
        coherence=coherence,  # type: ignore[arg-type]
        flush_interval_seconds=math.inf,
    )
    first = put_step(tiered, "t", None, 1)
    put_step(tiered, "u", None, 1)  # t leaves memory
    tiered.flush()
    durable.held = {"get_tuple" if method == "get" else "list"}
    target = config("t")

    def read() -> Any:
        return tiered.get_tuple(target) if method == "get" else list(tiered.list(target))

    async def aread() -> Any:
        if method == "get":
            return await tiered.aget_tuple(target)
        return [item async for item in tiered.alist(target)]

    def write_then_evict() -> None:
        put_step(tiered, "t", first, 2)  # acknowledged from here on
        put_step(tiered, "u", None, 2)  # t leaves memory again (write-back: flushed as it goes)
        tiered.flush()

    if use_async:

        async def main() -> tuple[Any, Any]:
            early = asyncio.ensure_future(aread())
            while not durable.holding.is_set():
                await asyncio.sleep(0.001)
            write_then_evict()
            late = asyncio.ensure_future(aread())
            while not late.done() and waiters(tiered) == 0:
                await asyncio.sleep(0.001)
            durable.release.set()
            return await early, await late

        early, late = asyncio.run(main())
    else:
        answers: dict[str, Any] = {}
        first_reader = threading.Thread(target=lambda: answers.__setitem__("early", read()))
        first_reader.start()
        assert durable.holding.wait(WAIT)
        write_then_evict()
        second_reader = threading.Thread(target=lambda: answers.__setitem__("late", read()))
        second_reader.start()
        wait_until(lambda: not second_reader.is_alive() or waiters(tiered) > 0)
        durable.release.set()
        first_reader.join(WAIT)
        second_reader.join(WAIT)
        early, late = answers["early"], answers["late"]
    assert newest_value(method, early) in (1, 2)  # it began before the write: either answer is right
    assert newest_value(method, late) == 2, "a read answered older than a write acknowledged before it began"
    tiered.check()
    tiered.close()


def test_reads_that_begin_together_still_share_one_durable_read(db: Path) -> None:
    """Single flight still holds for reads with no write between them."""
    seed = TieredSaver(sqlite_durable(db))
    put_step(seed, "t", None, 1)
    durable = ControlledSqlite(db)
    tiered = TieredSaver(durable)
    durable.gated = {"get_tuple"}
    durable.gate.clear()
    answers: list[Any] = []
    readers = [threading.Thread(target=lambda: answers.append(tiered.get_tuple(config("t")))) for _ in range(4)]
    readers[0].start()
    assert durable.entered.wait(WAIT)
    for reader in readers[1:]:
        reader.start()
    wait_until(lambda: waiters(tiered) == 3)
    durable.gate.set()
    for reader in readers:
        reader.join(WAIT)
    assert durable.calls["get_tuple"] == 1 and len(answers) == 4


# --- 4. a deleted thread never comes back -------------------------------------------------------------------------


def tiered_saver(db: Path, write: str) -> Any:
    return TieredSaver(sqlite_durable(db), config=ONE_THREAD, write=write)  # type: ignore[arg-type]


SAVERS = [
    pytest.param(tiered_saver, "through", id="through"),
    pytest.param(tiered_saver, "back", id="back"),
]


@pytest.mark.parametrize(("make", "write"), SAVERS)
@pytest.mark.parametrize("again", ["delete_thread", "copy_onto_itself", "adelete_thread"])
def test_a_deleted_thread_deleted_again_still_refuses_its_late_writes(
    db: Path, make: Any, write: str, again: str
) -> None:
    """A retried deletion (the thread already empty) or a copy of the thread onto itself replaced its tombstone
    with one that refused nothing, so a late write of the old run brought the thread back."""
    from langgraph.checkpoint.bounded import ThreadDeletedError

    saver = make(db, write)
    first = put_step(saver, "t", None, 1)
    second = put_step(saver, "t", first, 2)
    saver.delete_thread("t")
    if again == "delete_thread":
        saver.delete_thread("t")
    elif again == "adelete_thread":
        asyncio.run(saver.adelete_thread("t"))
    else:
        saver.copy_thread("t", "t")
    with pytest.raises(ThreadDeletedError):
        put_step(saver, "t", second, 3)  # the old run's next step
    with pytest.raises(ThreadDeletedError):
        saver.put_writes(second, [("x", 9)], "late-task")
    saver.flush()
    assert saver.get_tuple(config("t")) is None
    assert list(saver.list(config("t"))) == []
    fresh = put_step(saver, "t", None, 10)  # a new run on the id starts afresh
    assert saver.get_tuple(config("t")).config == fresh  # type: ignore[union-attr]


def test_a_copy_from_an_empty_thread_does_not_lift_a_tombstone(db: Path) -> None:
    from langgraph.checkpoint.bounded import ThreadDeletedError

    tiered = tiered_saver(db, "through")
    first = put_step(tiered, "t", None, 1)
    tiered.delete_thread("t")
    tiered.copy_thread("never-written", "t")
    with pytest.raises(ThreadDeletedError):
        put_step(tiered, "t", first, 2)
    source = put_step(tiered, "s", None, 5)
    tiered.copy_thread("s", "t")  # a real copy: t holds s's checkpoints now, and writes continuing them go on
    put_step(tiered, "t", source, 6)
    assert newest_value("get", tiered.get_tuple(config("t"))) == 6


# --- 8. checkpoint ids below the thread's latest (a clock behind, or stepped back) ----------------------------------


def put_with_id(saver: Any, thread_id: str, checkpoint_id: str, parent_id: str | None, value: int) -> None:
    version = f"{value:032}.0"
    checkpoint = make_checkpoint({"x": value}, {"x": version}, checkpoint_id=checkpoint_id)
    saver.put(config(thread_id, "", parent_id), checkpoint, {"step": value}, {"x": version})


def answers(saver: Any, thread_id: str, ids: list[str]) -> Any:
    """What every read of the thread answers: the latest, each checkpoint by id, the list, and pages before each id."""

    def shown(item: Any) -> Any:
        return (
            None if item is None else (item.config["configurable"]["checkpoint_id"], item.checkpoint["channel_values"])
        )

    return (
        shown(saver.get_tuple(config(thread_id))),
        [shown(saver.get_tuple(config(thread_id, "", checkpoint_id))) for checkpoint_id in ids],
        [shown(item) for item in saver.list(config(thread_id))],
        [[shown(item) for item in saver.list(config(thread_id), before=config(thread_id, "", cid))] for cid in ids],
        [shown(item) for item in saver.list(config(thread_id), limit=2)],
    )


@pytest.mark.parametrize("write", ["through", "back"])
def test_ids_below_the_latest_answer_as_the_durable_tier(db: Path, write: str) -> None:
    """A checkpoint whose id sorts below its parent's was made the hot latest of a thread that had left memory:
    'latest' answered it instead of the greatest id, and reads by id or before an id missed what the durable
    tier held between the two."""
    from langgraph.checkpoint.base.id import uuid6

    low, low2, mid, high = sorted(str(uuid6(clock_seq=-1)) for _ in range(4))
    tiered = TieredSaver(sqlite_durable(db), config=ONE_THREAD, write=write, flush_interval_seconds=math.inf)  # type: ignore[arg-type]
    put_with_id(tiered, "t", mid, None, 1)
    put_with_id(tiered, "t", high, mid, 2)
    put_step(tiered, "u", None, 1)  # t leaves memory
    put_with_id(tiered, "t", low, high, 3)  # a clock stepped back: its id sorts below its parent's
    put_with_id(tiered, "t", low2, low, 4)  # and the next step's, made by the same clock
    ids = [low, low2, mid, high]
    tiered.flush()
    durable = sqlite_durable(db)
    expected = answers(durable, "t", ids)
    assert expected[0][0] == high  # the durable tier's latest is the greatest id
    assert answers(tiered, "t", ids) == expected
    assert answers(tiered, "t", ids) == expected  # and again, from what the reads admitted
    tiered.check()
    tiered.close()


@pytest.mark.parametrize("write", ["through", "back"])
def test_an_id_below_the_latest_of_a_hot_thread_keeps_the_greatest_as_latest(db: Path, write: str) -> None:
    from langgraph.checkpoint.base.id import uuid6

    low, high = sorted(str(uuid6(clock_seq=-1)) for _ in range(2))
    tiered = TieredSaver(sqlite_durable(db), write=write)  # type: ignore[arg-type]
    put_with_id(tiered, "t", high, None, 1)
    put_with_id(tiered, "t", low, high, 2)
    tiered.flush()
    assert answers(tiered, "t", [low, high]) == answers(sqlite_durable(db), "t", [low, high])
