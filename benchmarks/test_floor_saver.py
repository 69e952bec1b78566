"""The floor saver is only a fair measuring stick if it stores what the stock saver stores."""

from __future__ import annotations

import random

import pytest
from floor_saver import FloorSaver
from langgraph.checkpoint.memory import InMemorySaver
from workload import ThreadWriter, task_writes


def drive(saver, turns: int = 6) -> None:
    random.seed(0)  # the stock version format has a random suffix
    for thread_id in ("alpha", "beta"):
        writer = ThreadWriter(saver, thread_id, rng=random.Random(3))
        for _ in range(turns):
            writer.advance()
        writer.saver.put_writes(writer.parent, task_writes(writer.rng, 99), "task-again", "path")


def test_reads_match_the_stock_saver():
    floor, stock = FloorSaver(), InMemorySaver()
    drive(floor)
    drive(stock)
    for thread_id in ("alpha", "beta"):
        config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        floor_tuples, stock_tuples = list(floor.list(config)), list(stock.list(config))
        assert [comparable(t) for t in floor_tuples] == [comparable(t) for t in stock_tuples]
        assert comparable(floor.get_tuple(config)) == comparable(stock_tuples[0])


def comparable(found):
    """A checkpoint tuple without its time-based ids."""
    checkpoint = {key: value for key, value in found.checkpoint.items() if key != "id"}
    return checkpoint, found.metadata, found.pending_writes, found.parent_config is None


def test_ledger_counts_every_payload_byte_and_keeps_lru_order():
    floor = FloorSaver()
    drive(floor)
    payload = sum(len(data) for _, data in floor.blobs.values())
    for namespaces in floor.storage.values():
        for checkpoints in namespaces.values():
            payload += sum(len(c[1]) + len(m[1]) for c, m, _ in checkpoints.values())
    for writes in floor.writes.values():
        payload += sum(len(value[1]) + len(path) for _, _, value, path in writes.values())
    assert floor.ledger.nbytes == payload == sum(floor.ledger.threads.values())
    floor.get_tuple({"configurable": {"thread_id": "alpha", "checkpoint_ns": ""}})
    assert list(floor.ledger.threads) == ["beta", "alpha"]


def test_total_limit_rejects_and_stores_nothing():
    floor = FloorSaver(max_total_bytes=1)
    with pytest.raises(ValueError, match="max_total_bytes"):
        ThreadWriter(floor, "gamma").advance()
    assert floor.ledger.nbytes == 0 and not floor.ledger.threads and not floor.storage and not floor.blobs

    floor = FloorSaver()
    writer = ThreadWriter(floor, "gamma")
    writer.advance()
    floor.max_total_bytes = stored = floor.ledger.nbytes
    writes_before = {key: dict(writes) for key, writes in floor.writes.items()}
    with pytest.raises(ValueError, match="max_total_bytes"):
        floor.put_writes(writer.parent, [("step", 1)], "late-task")
    assert floor.ledger.nbytes == stored and floor.writes == writes_before
