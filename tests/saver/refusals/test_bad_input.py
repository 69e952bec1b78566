"""Every public method against hostile input: a clear error naming what is wrong,
and a store left exactly as it was."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from langgraph.checkpoint.bounded import BoundedInMemorySaver, InMemoryCheckpointConfig
from tests.support.helpers import config, fingerprint, make_checkpoint, put

LONG = "x" * 10_000


def good_checkpoint() -> dict[str, Any]:
    return make_checkpoint({"a": 1})


def bad_checkpoint(**changes: Any) -> dict[str, Any]:
    checkpoint = good_checkpoint()
    for key, value in changes.items():
        if value is ...:
            del checkpoint[key]
        else:
            checkpoint[key] = value
    return checkpoint


STORED = config("stored", "", "stored-checkpoint")

CASES: list[tuple[str, Any, str]] = [
    # reads
    ("get_tuple, config None", lambda s: s.get_tuple(None), "config"),
    ("get_tuple, no configurable", lambda s: s.get_tuple({}), "configurable"),
    ("get_tuple, configurable None", lambda s: s.get_tuple({"configurable": None}), "configurable"),
    ("get_tuple, no thread_id", lambda s: s.get_tuple({"configurable": {}}), "thread_id"),
    ("get_tuple, thread_id None", lambda s: s.get_tuple(config(None)), "thread_id"),
    ("get_tuple, empty thread_id", lambda s: s.get_tuple(config("")), "thread_id"),
    ("get_tuple, 10k thread_id", lambda s: s.get_tuple(config(LONG)), "thread_id"),
    ("get_tuple, control characters", lambda s: s.get_tuple(config("a\x1b[2J")), "thread_id"),
    ("get_tuple, namespace not a string", lambda s: s.get_tuple(config("t", 5)), "checkpoint_ns"),
    ("get_tuple, 10k namespace", lambda s: s.get_tuple(config("t", LONG)), "checkpoint_ns"),
    ("get_tuple, checkpoint_id not a string", lambda s: s.get_tuple(config("t", "", 123)), "checkpoint_id"),
    ("list, config a string", lambda s: list(s.list("thread")), "config"),
    ("list, bad before", lambda s: list(s.list(None, before={"configurable": {"checkpoint_id": 5}})), "checkpoint_id"),
    ("list, 10k thread_id", lambda s: list(s.list(config(LONG))), "thread_id"),
    ("delta history, no thread", lambda s: s.get_delta_channel_history(config={}, channels=["a"]), "configurable"),
    # put
    ("put, no configurable", lambda s: s.put({}, good_checkpoint(), {}, {"a": 1}), "configurable"),
    ("put, checkpoint id None", lambda s: s.put(config("t"), bad_checkpoint(id=None), {}, {"a": 1}), "id"),
    ("put, 10k checkpoint id", lambda s: s.put(config("t"), bad_checkpoint(id=LONG), {}, {"a": 1}), "checkpoint_id"),
    ("put, empty checkpoint id", lambda s: s.put(config("t"), bad_checkpoint(id=""), {}, {"a": 1}), "checkpoint_id"),
    (
        "put, empty id on a stored thread",
        lambda s: s.put(config("stored"), bad_checkpoint(id=""), {}, {"a": 1}),
        "checkpoint_id",
    ),
    ("list, filter a list", lambda s: list(s.list(config("stored"), filter=["source"])), "filter"),
    (
        "put, no channel_values",
        lambda s: s.put(config("t"), bad_checkpoint(channel_values=...), {}, {}),
        "channel_values",
    ),
    (
        "put, no channel_versions",
        lambda s: s.put(config("t"), bad_checkpoint(channel_versions=...), {}, {}),
        "channel_versions",
    ),
    ("put, checkpoint not a dict", lambda s: s.put(config("t"), ["not", "a", "checkpoint"], {}, {}), "checkpoint"),
    ("put, metadata not a dict", lambda s: s.put(config("t"), good_checkpoint(), "meta", {"a": 1}), "metadata"),
    ("put, new_versions not a dict", lambda s: s.put(config("t"), good_checkpoint(), {}, ["a"]), "new_versions"),
    ("put, 10k channel", lambda s: s.put(config("t"), good_checkpoint(), {}, {LONG: 1}), "channel"),
    (
        "put, 10k channel among channel_versions",
        lambda s: s.put(config("t"), bad_checkpoint(channel_versions={"a": 1, LONG: 1}), {}, {"a": 1}),
        "channel",
    ),
    (
        "put, a list version among channel_versions",
        lambda s: s.put(config("t"), bad_checkpoint(channel_versions={"a": 1, "b": [1]}), {}, {"a": 1}),
        "version",
    ),
    ("put, version a list", lambda s: s.put(config("t"), good_checkpoint(), {}, {"a": [1]}), "version"),
    ("put, 10k parent id", lambda s: s.put(config("t", "", LONG), good_checkpoint(), {}, {"a": 1}), "checkpoint_id"),
    ("put, refused value", lambda s: put(s, "t", {"a": threading.Lock()}), "channel 'a': a lock cannot be serialized"),
    # put_writes
    ("put_writes, no checkpoint_id", lambda s: s.put_writes(config("t"), [("a", 1)], "task"), "checkpoint_id"),
    ("put_writes, task_id None", lambda s: s.put_writes(STORED, [("a", 1)], None), "task_id"),
    ("put_writes, 10k task_id", lambda s: s.put_writes(STORED, [("a", 1)], LONG), "task_id"),
    ("put_writes, 10k channel", lambda s: s.put_writes(STORED, [(LONG, 1)], "task"), "channel"),
    ("put_writes, channel None", lambda s: s.put_writes(STORED, [(None, 1)], "task"), "channel"),
    ("put_writes, task_path not a string", lambda s: s.put_writes(STORED, [("a", 1)], "task", 5), "task_path"),
    ("put_writes, not pairs", lambda s: s.put_writes(STORED, ["abc"], "task"), "writes"),
    ("put_writes, refused value", lambda s: s.put_writes(STORED, [("a", threading.Lock())], "task"), "channel 'a'"),
    # deletions and copies
    ("delete_thread None", lambda s: s.delete_thread(None), "thread_id"),
    ("delete_thread 10k", lambda s: s.delete_thread(LONG), "thread_id"),
    ("delete_for_runs None", lambda s: s.delete_for_runs([None]), "run_id"),
    ("delete_for_runs, a string", lambda s: s.delete_for_runs("run-1"), "run_ids"),
    ("copy_thread, source None", lambda s: s.copy_thread(None, "x"), "source_thread_id"),
    ("copy_thread, 10k target", lambda s: s.copy_thread("stored", LONG), "target thread_id"),
    ("prune, id None", lambda s: s.prune([None]), "thread_id"),
    ("prune, a string", lambda s: s.prune("stored"), "thread_ids"),
    ("prune, strategy", lambda s: s.prune(["stored"], strategy="all"), "strategy"),
    ("on_namespace_limit", lambda s: InMemoryCheckpointConfig(on_namespace_limit="drop"), "on_namespace_limit"),
]


@pytest.fixture
def stocked() -> BoundedInMemorySaver:
    saver = BoundedInMemorySaver()
    put(saver, "stored", {"a": 1}, checkpoint_id="stored-checkpoint", metadata={"run_id": "run-1"})
    saver.put_writes(STORED, [("a", 2)], "task")
    return saver


@pytest.mark.parametrize(("case", "call", "named"), CASES, ids=[c[0] for c in CASES])
def test_hostile_input_gets_a_clear_error_and_changes_nothing(stocked, case, call, named) -> None:
    before = fingerprint(stocked.store)
    with pytest.raises((ValueError, TypeError)) as info:
        call(stocked)
    assert named in str(info.value), f"{case}: the error does not name {named!r}: {info.value}"
    assert fingerprint(stocked.store) == before
    stocked.check()


async def collect(iterator: Any) -> list[Any]:
    return [item async for item in iterator]


ASYNC_CASES: list[tuple[str, Any, str]] = [
    ("aget_tuple, config None", lambda s: s.aget_tuple(None), "config"),
    ("alist, 10k thread_id", lambda s: collect(s.alist(config(LONG))), "thread_id"),
    ("aput, no configurable", lambda s: s.aput({}, good_checkpoint(), {}, {"a": 1}), "configurable"),
    ("aput_writes, no checkpoint_id", lambda s: s.aput_writes(config("t"), [("a", 1)], "task"), "checkpoint_id"),
    ("adelete_thread None", lambda s: s.adelete_thread(None), "thread_id"),
    ("adelete_for_runs None", lambda s: s.adelete_for_runs([None]), "run_id"),
    ("acopy_thread None", lambda s: s.acopy_thread(None, "x"), "source_thread_id"),
    ("aprune strategy", lambda s: s.aprune(["stored"], strategy="all"), "strategy"),
    ("delta history", lambda s: s.aget_delta_channel_history(config=None, channels=["a"]), "config"),
]


@pytest.mark.parametrize(("case", "call", "named"), ASYNC_CASES, ids=[c[0] for c in ASYNC_CASES])
def test_async_methods_reject_the_same_way(stocked, case, call, named) -> None:
    before = fingerprint(stocked.store)
    with pytest.raises(ValueError) as info:
        asyncio.run(call(stocked))
    assert named in str(info.value), f"{case}: {info.value}"
    assert fingerprint(stocked.store) == before
