"""Every limit at its exact boundary: the limit itself is accepted, one more is rejected and changes nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from langgraph.checkpoint.bounded import BoundedInMemorySaver, CheckpointCapacityError, InMemoryCheckpointConfig
from tests.conftest import FakeClock
from tests.support.helpers import config, fingerprint, make_checkpoint, put

MAX = 256  # the reference max_identifier_length


def saver_with(**limits: Any) -> BoundedInMemorySaver:
    return BoundedInMemorySaver(config=InMemoryCheckpointConfig(**limits), clock=FakeClock())


def refused(saver: BoundedInMemorySaver, error: type[Exception], named: str, action: Any) -> Exception:
    before = fingerprint(saver.store)
    with pytest.raises(error) as info:
        action()
    assert named in str(info.value), info.value
    assert fingerprint(saver.store) == before
    saver.check()
    return info.value


# --- identifiers: 256 characters pass, 257 do not ----------------------------------------------------

IDENTIFIER_CALLS = {
    "thread_id": lambda s, ident: put(s, ident, {"a": 1}),
    "checkpoint_ns segment": lambda s, ident: put(s, "t", {"a": 1}, namespace=f"parent|{ident}"),
    "checkpoint_id": lambda s, ident: put(s, "t", {"a": 1}, checkpoint_id=ident),
    "parent checkpoint_id": lambda s, ident: s.put(config("t", "", ident), make_checkpoint({"a": 1}), {}, {"a": 1}),
    "task_id": lambda s, ident: s.put_writes(config("t", "", "c"), [("a", 1)], ident),
    "channel": lambda s, ident: put(s, "t", {ident: 1}),
    "version of channel": lambda s, ident: put(s, "t", {"a": 1}, version=ident),
}


@pytest.mark.parametrize("field", list(IDENTIFIER_CALLS))
def test_identifiers_of_exactly_max_identifier_length_are_accepted_one_more_is_not(field: str) -> None:
    saver = saver_with()
    call = IDENTIFIER_CALLS[field]
    call(saver, "x" * MAX)
    assert saver.stats().total_bytes > 0
    error = refused(saver, ValueError, field, lambda: call(saver, "y" * (MAX + 1)))
    assert "max_identifier_length" in str(error) and "257" in str(error)


def test_a_write_channel_at_the_boundary() -> None:
    saver = saver_with()
    saver.put_writes(config("t", "", "c"), [("x" * MAX, 1)], "task")
    refused(saver, ValueError, "channel", lambda: saver.put_writes(config("t", "", "c"), [("y" * (MAX + 1), 1)], "t2"))


def test_namespace_depth_of_exactly_max_namespace_depth_is_accepted_one_more_is_not() -> None:
    saver = saver_with()
    put(saver, "t", {"a": 1}, namespace="|".join(["node:x"] * 32))
    error = refused(
        saver, ValueError, "max_namespace_depth", lambda: put(saver, "t", {"a": 1}, namespace="|".join(["n:y"] * 33))
    )
    assert "33" in str(error)


# --- byte limits: measured sizes, then the limit set to exactly that ----------------------------------


def measured(action: Any) -> int:
    """Bytes ``action`` adds to an unbounded saver (the same serializer as every saver here)."""
    saver = saver_with(max_checkpoint_bytes=10**9, max_pending_write_bytes=10**9, max_total_bytes=10**9)
    before = saver.stats().total_bytes
    action(saver)
    return saver.stats().total_bytes - before


def big_checkpoint(saver: BoundedInMemorySaver, thread: str = "t") -> Any:
    return put(saver, thread, {"doc": "d" * 5_000, "n": 7}, checkpoint_id="1ef-1", metadata={"step": 1})


def big_writes(saver: BoundedInMemorySaver) -> None:
    saver.put_writes(config("t", "", "1ef-1"), [("doc", "w" * 3_000), ("n", 8)], "task", "~__pregel_pull, node")


@pytest.mark.parametrize(
    ("limit", "write", "at_least"),
    [("max_checkpoint_bytes", big_checkpoint, 5_000), ("max_pending_write_bytes", big_writes, 3_000)],
)
def test_an_item_of_exactly_its_limit_is_accepted_one_byte_over_is_not(
    limit: str, write: Callable[[BoundedInMemorySaver], object], at_least: int
) -> None:
    size = measured(write)
    assert size > at_least
    saver = saver_with(**{limit: size})
    write(saver)
    assert saver.stats().total_bytes == size
    smaller = saver_with(**{limit: size - 1})
    error = refused(smaller, CheckpointCapacityError, limit, lambda: write(smaller))
    assert (error.limit_value, error.needed) == (size - 1, size)


def test_a_store_of_exactly_max_total_bytes_holds_one_more_byte_evicts_or_rejects() -> None:
    size = measured(big_checkpoint)
    saver = saver_with(max_total_bytes=2 * size)
    big_checkpoint(saver, "first")
    big_checkpoint(saver, "second")
    assert (saver.stats().total_bytes, saver.stats().threads) == (2 * size, 2)  # exactly full: nobody evicted
    saver.put_writes(config("second", "", "1ef-1"), [("n", 0)], "task")  # a few bytes more: the LRU thread goes
    assert saver.store.thread_ids() == ["second"] and saver.stats().evicted_for_bytes == 1
    alone = saver_with(max_total_bytes=size - 1)
    error = refused(alone, CheckpointCapacityError, "max_total_bytes", lambda: big_checkpoint(alone))
    assert (error.limit_value, error.needed) == (size - 1, size)


# --- count limits: the limit-th is accepted, the next one is not ------------------------------------------


def test_exactly_max_checkpoints_per_thread_are_accepted() -> None:
    saver = saver_with(max_checkpoints_per_thread=3)
    parent = None
    for _ in range(3):
        parent = put(saver, "t", {"a": 1}, parent=parent)
    error = refused(saver, CheckpointCapacityError, "max_checkpoints_per_thread", lambda: put(saver, "t", {"a": 2}))
    assert (error.limit_value, error.needed) == (3, 4)


def test_exactly_max_namespaces_per_thread_are_accepted() -> None:
    saver = saver_with(max_namespaces_per_thread=3)
    for namespace in ("", "a:1", "b:2"):
        put(saver, "t", {"a": 1}, namespace=namespace)
    error = refused(
        saver, CheckpointCapacityError, "max_namespaces_per_thread", lambda: put(saver, "t", {"a": 1}, namespace="c:3")
    )
    assert (error.limit_value, error.needed) == (3, 4)


def test_exactly_max_threads_are_kept_one_more_evicts_the_least_recently_used() -> None:
    saver = saver_with(max_threads=3)
    for thread in ("a", "b", "c"):
        put(saver, thread, {"v": 1})
    assert saver.stats().evicted_threads == 0
    put(saver, "d", {"v": 1})
    assert saver.store.thread_ids() == ["b", "c", "d"] and saver.stats().evicted_for_threads == 1
