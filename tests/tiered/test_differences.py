"""The differences from the durable saver alone that the random differential (``test_differential``) found, each
as the smallest sequence that showed it: ``TieredSaver`` answers as a plain ``SqliteSaver`` fed the same
operations does, in both write modes, sync and async.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver

from langgraph.checkpoint.bounded import InMemoryCheckpointConfig, ThreadDeletedError, TieredSaver, UnstorableWriteError
from tests.support.helpers import config, make_checkpoint
from tests.support.tiered import write_mode

WRITE_MODES = ["through", "back"]
METADATA: dict[str, Any] = {"source": "input", "step": 0}


def sqlite() -> SqliteSaver:
    return SqliteSaver(sqlite3.connect(":memory:", check_same_thread=False))


@pytest.fixture(params=WRITE_MODES)
def savers(request: pytest.FixtureRequest) -> Iterator[tuple[TieredSaver, SqliteSaver]]:
    """A tiered saver whose hot tier holds one thread, and the plain saver it is compared with."""
    tiered = TieredSaver(
        sqlite(),
        config=InMemoryCheckpointConfig(max_threads=1),
        write=write_mode(request.param, flush_interval_seconds=1e9),
    )
    yield tiered, sqlite()
    tiered.close()


def answer(saver: Any, thread: str, checkpoint_id: str | None = None) -> Any:
    item = saver.get_tuple(config(thread, "", checkpoint_id))
    return None if item is None else (item.checkpoint["id"], item.parent_config, item.pending_writes)


def assert_x_kept_its_writes(tiered: TieredSaver, reference: SqliteSaver, thread: str) -> None:
    """Both savers answer checkpoint ``1f01`` of ``thread`` with its root position and the write ``hi``."""
    assert (
        answer(tiered, thread, "1f01")
        == answer(reference, thread, "1f01")
        == ("1f01", None, [("task-a", "messages", "hi")])
    )


def put(saver: Any, thread: str, checkpoint_id: str, parent: str | None = None) -> None:
    saver.put(config(thread, "", parent), make_checkpoint({}, {}, checkpoint_id), dict(METADATA), {})


# --- a checkpoint id put twice -----------------------------------------------------------------------------------

LEAVING_MEMORY: dict[str, Callable[[Any], None]] = {
    "keep_latest": lambda saver: saver.prune(["t1"], strategy="keep_latest"),
    "copy_into": lambda saver: saver.copy_thread("t3", "t1"),
}


@pytest.mark.parametrize("leave", LEAVING_MEMORY)
def test_a_checkpoint_put_twice_keeps_its_writes_after_its_thread_left_memory(
    savers: tuple[TieredSaver, SqliteSaver], leave: str
) -> None:
    """Found as: put X, writes on X, ``prune(keep_latest)`` (or a copy into the thread: it leaves memory), put X
    again. The plain saver replaces X and keeps its writes; the tiered saver stored the new X hot as the start of
    a new hot copy, without the writes the durable tier holds, and answered X with none."""
    tiered, reference = savers
    for saver in (tiered, reference):
        put(saver, "t1", "1f01")
        saver.put_writes(config("t1", "", "1f01"), [("messages", "hi")], "task-a")
        if saver is tiered:
            LEAVING_MEMORY[leave](saver)
        put(saver, "t1", "1f01")
    assert_x_kept_its_writes(tiered, reference, "t1")
    assert answer(tiered, "t1") == answer(reference, "t1")
    tiered.check()


def test_a_copied_checkpoint_put_again_in_the_target_keeps_its_writes(savers: tuple[TieredSaver, SqliteSaver]) -> None:
    """Put X with writes in s, ``copy_thread(s, t)``, put X again in t: this process never wrote X in t, so it did
    not know the durable tier held it there, and the put started t's hot copy without X's writes. The reference
    gets the copy through its own API (it has no ``copy_thread``)."""
    tiered, reference = savers
    for saver in (tiered, reference):
        put(saver, "s", "1f01")
        saver.put_writes(config("s", "", "1f01"), [("messages", "hi")], "task-a")
    tiered.copy_thread("s", "t")
    put(reference, "t", "1f01")
    reference.put_writes(config("t", "", "1f01"), [("messages", "hi")], "task-a")
    for saver in (tiered, reference):
        put(saver, "t", "1f01")
    assert_x_kept_its_writes(tiered, reference, "t")
    tiered.check()


def test_a_checkpoint_below_the_hot_copy_put_again_keeps_its_writes(savers: tuple[TieredSaver, SqliteSaver]) -> None:
    """Put X with writes, its child Y; another thread pushes t1 out; a read brings back its latest (Y) alone; put X
    again. t1 was hot, so the put stored X in its hot copy, below what that copy holds of the durable tier and
    without X's writes: a read of X answered with none, where ``list`` (read from the durable tier) had them."""
    tiered, reference = savers
    for saver in (tiered, reference):
        put(saver, "t1", "1f01")
        saver.put_writes(config("t1", "", "1f01"), [("messages", "hi")], "task-a")
        put(saver, "t1", "1f02", parent="1f01")
        put(saver, "t2", "1f03")
        tiered.flush()
        assert answer(saver, "t1") is not None
        put(saver, "t1", "1f01")
    assert_x_kept_its_writes(tiered, reference, "t1")
    assert answer(tiered, "t1") == answer(reference, "t1")
    tiered.check()


def test_a_checkpoint_put_twice_keeps_its_writes_async(savers: tuple[TieredSaver, SqliteSaver]) -> None:
    """The same, through ``aput`` after ``aprune``."""
    tiered, _ = savers

    async def scenario() -> Any:
        await tiered.aput(config("t1"), make_checkpoint({}, {}, "1f01"), dict(METADATA), {})
        await tiered.aput_writes(config("t1", "", "1f01"), [("messages", "hi")], "task-a")
        await tiered.aprune(["t1"], strategy="keep_latest")
        await tiered.aput(config("t1"), make_checkpoint({}, {}, "1f01"), dict(METADATA), {})
        return await tiered.aget_tuple(config("t1", "", "1f01"))

    item = asyncio.run(scenario())
    assert item is not None and item.pending_writes == [("task-a", "messages", "hi")]


# --- a copy into a deleted thread --------------------------------------------------------------------------------


@pytest.mark.parametrize("delete", ["delete_thread", "prune"])
def test_a_copy_that_revives_a_deleted_thread_takes_its_earlier_ids(
    savers: tuple[TieredSaver, SqliteSaver], delete: str
) -> None:
    """Delete t (or prune it with ``strategy="delete"``), copy a thread holding checkpoints into it: t was written
    again on purpose, so a put or writes continuing an id from before the deletion are taken, as the plain saver
    takes them (the reference gets the copy through its own API). In write-back the flush refuses them instead: they
    continue a checkpoint the durable tier no longer holds."""
    tiered, reference = savers
    for saver in (tiered, reference):
        put(saver, "t", "1f01")
        put(saver, "s", "1f02")
        saver.delete_thread("t")
    if delete == "prune":
        tiered.prune(["t"], strategy="delete")
    tiered.copy_thread("s", "t")
    put(reference, "t", "1f02")
    for saver in (tiered, reference):
        saver.put_writes(config("t", "", "1f01"), [("messages", "late")], "task-a")
        put(saver, "t", "1f03", parent="1f01")
    if tiered._shared.write == "back":
        # The one difference in write-back: the flush finds the checkpoint its writes continue gone from the
        # durable tier (deleted) and refuses them, as it refuses any late flush under a deleted parent (the
        # tiered-storage guide, "Late flushes"): they were acknowledged before the durable tier saw them.
        with pytest.raises(UnstorableWriteError, match="is gone from the durable tier"):
            tiered.flush()
        return
    assert answer(tiered, "t") == answer(reference, "t") == ("1f03", config("t", "", "1f01"), [])
    assert [item.config for item in tiered.list(config("t"))] == [item.config for item in reference.list(config("t"))]


def test_a_copy_of_nothing_leaves_a_deleted_thread_deleted(savers: tuple[TieredSaver, SqliteSaver]) -> None:
    """The documented difference: a copy of an empty source copies nothing, so the deleted thread's late writes are
    still refused (``ThreadDeletedError``) and nothing is written, where the plain saver would bring it back."""
    tiered, _ = savers
    put(tiered, "t", "1f01")
    tiered.delete_thread("t")
    tiered.copy_thread("empty", "t")
    with pytest.raises(ThreadDeletedError):
        tiered.put_writes(config("t", "", "1f01"), [("messages", "late")], "task-a")
    with pytest.raises(ThreadDeletedError):
        put(tiered, "t", "1f02", parent="1f01")
    tiered.flush()
    assert answer(tiered, "t") is None and answer(tiered.durable, "t") is None
