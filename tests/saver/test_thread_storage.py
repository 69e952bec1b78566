"""``BoundedInMemorySaver.thread_storage``: a thread's size in memory, from the byte accounting (issue 35).

The report adds up to the engine's count of the thread (``Thread.nbytes``) with nothing re-serialized, splits
it by channel, counts pending writes and subgraph namespaces, reads a compressed store's compressed bytes, and
never creates, expires early or touches a thread.
"""

from __future__ import annotations

from typing import Any

import pytest

from langgraph.checkpoint.bounded import (
    BoundedInMemorySaver,
    CompressingSerializer,
    InMemoryCheckpointConfig,
    ThreadStorage,
)
from tests.support.graphs import nested_graph, thread
from tests.support.helpers import config, make_checkpoint


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_report_adds_up_to_the_byte_accounting() -> None:
    saver = BoundedInMemorySaver()
    graph = nested_graph(saver, {})
    graph.invoke({"messages": ["hi"]}, thread("t"))  # stops at the subgraph's interrupt: pending writes
    report = saver.thread_storage("t")
    stored = saver.store.threads["t"]
    assert report.total_bytes == stored.nbytes and report.checkpoints == stored.checkpoints
    assert (report.channel_values, report.pending_writes) == (stored.blobs, stored.writes)
    assert report.pending_writes > 0 and report.namespaces == 2
    assert sum(report.by_channel.values()) == report.channel_bytes > 0
    assert report.by_channel["messages"] > 0
    assert report.rows == stored.checkpoints + stored.blobs + stored.writes
    assert (report.tier, report.estimated) == ("memory", False)
    shape = report.as_dict()
    assert shape["total_bytes"] == report.total_bytes
    assert shape["checkpoints"] == {"count": report.checkpoints, "bytes": report.checkpoint_bytes}
    assert shape["pending_writes"] == {"count": report.pending_writes, "bytes": report.pending_write_bytes}


def test_one_checkpoint_counted_exactly() -> None:
    saver = BoundedInMemorySaver()
    stored = saver.put(
        config("t"), make_checkpoint({"a": "x" * 100, "b": [1, 2]}), {"source": "input"}, {"a": 1, "b": 1}
    )
    saver.put_writes(stored, [("a", "y" * 10)], "task-1")
    report = saver.thread_storage("t")
    record = saver.store.threads["t"].namespaces[""].records[stored["configurable"]["checkpoint_id"]]
    assert report.checkpoint_bytes == record.nbytes
    a, b = (len(saver.serde.dumps_typed(value)[1]) for value in ("x" * 100, [1, 2]))
    assert dict(report.by_channel) == {"a": a, "b": b}
    assert report.pending_write_bytes == len(saver.serde.dumps_typed("y" * 10)[1])
    assert report.total_bytes == saver.stats().total_bytes


def test_an_unknown_thread_reports_zeros_and_is_not_created() -> None:
    saver = BoundedInMemorySaver()
    saver.put(config("t"), make_checkpoint({"a": 1}), {}, {"a": 1})
    before = saver.stats()
    assert saver.thread_storage("nobody") == ThreadStorage("nobody", "memory")
    assert saver.store.thread_ids() == ["t"] and saver.stats() == before


async def test_async_and_a_deleted_thread() -> None:
    saver = BoundedInMemorySaver()
    await nested_graph(saver, {}).ainvoke({"messages": ["hi"]}, thread("t"))
    assert await saver.athread_storage("t") == saver.thread_storage("t")
    await saver.adelete_thread("t")
    assert (await saver.athread_storage("t")).total_bytes == 0


def test_the_report_does_not_mark_the_thread_used_and_sees_expiry() -> None:
    clock = Clock()
    saver = BoundedInMemorySaver(config=InMemoryCheckpointConfig(idle_ttl_seconds=10), clock=clock)
    saver.put(config("old"), make_checkpoint({"a": 1}), {}, {"a": 1})
    clock.now = 5
    saver.put(config("new"), make_checkpoint({"a": 1}), {}, {"a": 1})
    assert saver.thread_storage("old").checkpoints == 1
    assert saver.store.thread_ids() == ["old", "new"]  # least recently used first: the report did not use it
    clock.now = 10
    assert saver.thread_storage("old").total_bytes == 0  # idle past the TTL: what a read would find


def test_compressed_values_are_counted_compressed() -> None:
    text = "the same words again and again " * 400
    plain, packed = BoundedInMemorySaver(), BoundedInMemorySaver(serde=CompressingSerializer(threshold_bytes=1024))
    for saver in (plain, packed):
        saver.put(config("t"), make_checkpoint({"a": text}), {}, {"a": 1})
    assert packed.thread_storage("t").by_channel["a"] * 3 < plain.thread_storage("t").by_channel["a"]


@pytest.mark.parametrize("bad", [None, 3.5, b"x", ["t"]])
def test_an_invalid_thread_id_is_refused(bad: Any) -> None:
    with pytest.raises(ValueError, match="thread_id"):
        BoundedInMemorySaver().thread_storage(bad)
