"""A namespace's checkpoint index (records by id, ids sorted) against a plain dict, ids in any order.

Checkpoints go in through the store's own write transaction (which appends an id
that sorts last and places any other), come out through ``plan_removal`` and
``State.remove_checkpoints``; every read agrees with the dict and ``check()`` passes after every change.
"""

from __future__ import annotations

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from langgraph.checkpoint.bounded.engine import Store, StoreLimits
from langgraph.checkpoint.bounded.engine.lineage import plan_removal
from langgraph.checkpoint.bounded.engine.namespace import Namespace
from langgraph.checkpoint.bounded.engine.records import CheckpointRecord

# Few distinct ids, so that replacing, removing and inserting between stored ids all happen often.
ids = st.sampled_from([f"id-{n:02d}" for n in range(24)])


def record(checkpoint_id: str, payload: bytes = b"") -> CheckpointRecord:
    return CheckpointRecord.of(checkpoint_id, None, ("msgpack", payload), ("msgpack", b""), {})


class IndexMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.store = Store(StoreLimits.unbounded())
        self.oracle: dict[str, CheckpointRecord] = {}

    @property
    def space(self) -> Namespace:
        return self.store.threads["t"].namespaces[""]

    @rule(checkpoint_id=ids, payload=st.binary(max_size=2))
    def put(self, checkpoint_id: str, payload: bytes) -> None:
        new = record(checkpoint_id, payload)
        self.store.put_checkpoint("t", "", new, {})
        self.oracle[checkpoint_id] = new

    @rule(data=st.data())
    def remove(self, data: st.DataObject) -> None:
        if len(self.oracle) < 2:
            return  # an emptied namespace leaves its thread; keep one checkpoint
        doomed = data.draw(st.sets(st.sampled_from(sorted(self.oracle)), max_size=len(self.oracle) - 1))
        before = dict(self.space.records)
        self.store.remove_checkpoints(self.store.threads["t"], "", plan_removal(self.space, doomed))
        removed = {
            checkpoint_id: record for checkpoint_id, record in before.items() if checkpoint_id not in self.space.records
        }
        assert removed == {checkpoint_id: self.oracle.pop(checkpoint_id) for checkpoint_id in doomed}

    @rule(before=st.one_of(st.none(), ids, st.just("id-"), st.just("id-99")))
    def newest_first(self, before: str | None) -> None:
        if not self.oracle:
            return
        expected = sorted((i for i in self.oracle if before is None or i < before), reverse=True)
        assert list(self.space.newest_first(before)) == expected

    @invariant()
    def agrees_with_the_oracle(self) -> None:
        if not self.oracle:
            return
        space = self.space
        space.check()
        self.store.check()
        ordered = sorted(self.oracle)
        assert space.ids == ordered
        assert space.records == self.oracle
        assert space.latest() is self.oracle[ordered[-1]]


TestNamespaceIndex = IndexMachine.TestCase


def test_check_catches_ids_out_of_order() -> None:
    space = Namespace()
    for checkpoint_id in ("a", "b"):
        space.records[checkpoint_id] = record(checkpoint_id)
    space.ids = ["b", "a"]
    with pytest.raises(AssertionError, match="out of order"):
        space.check()
