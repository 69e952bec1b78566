"""`CheckpointIndex` against a plain dict, ids in any order: every read equal, `check()` after every change."""

from __future__ import annotations

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from engine.index import CheckpointIndex
from engine.records import CheckpointRecord

# Few distinct ids, so that replacing, removing and inserting between stored ids all happen often.
ids = st.sampled_from([f"id-{n:02d}" for n in range(24)])


def record(checkpoint_id: str, payload: bytes = b"") -> CheckpointRecord:
    return CheckpointRecord.of(checkpoint_id, None, ("msgpack", payload), ("msgpack", b""), {})


class IndexMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.index = CheckpointIndex()
        self.oracle: dict[str, CheckpointRecord] = {}

    @rule(checkpoint_id=ids, payload=st.binary(max_size=2))
    def put(self, checkpoint_id: str, payload: bytes) -> None:
        new = record(checkpoint_id, payload)
        assert self.index.put(new) is self.oracle.get(checkpoint_id)
        self.oracle[checkpoint_id] = new

    @rule(batch=st.lists(ids, max_size=6))
    def update(self, batch: list[str]) -> None:
        records = [record(checkpoint_id, b"u") for checkpoint_id in batch]
        self.index.update(records)
        self.oracle.update((r.checkpoint_id, r) for r in records)

    @rule(data=st.data())
    def remove(self, data: st.DataObject) -> None:
        if not self.oracle:
            return
        doomed = data.draw(st.sets(st.sampled_from(sorted(self.oracle)), max_size=4))
        removed = {r.checkpoint_id: r for r in self.index.remove(doomed)}
        assert removed == {checkpoint_id: self.oracle.pop(checkpoint_id) for checkpoint_id in doomed}

    @rule(before=st.one_of(st.none(), ids, st.just("id-"), st.just("id-99")))
    def newest_first(self, before: str | None) -> None:
        expected = sorted((i for i in self.oracle if before is None or i < before), reverse=True)
        assert list(self.index.newest_first(before)) == expected

    @invariant()
    def agrees_with_the_oracle(self) -> None:
        self.index.check()
        ordered = sorted(self.oracle)
        assert list(self.index) == ordered
        assert [r.checkpoint_id for r in self.index.values()] == ordered
        assert dict(self.index.items()) == self.oracle
        assert len(self.index) == len(self.oracle)
        assert self.index.latest() is (self.oracle[ordered[-1]] if ordered else None)
        for checkpoint_id in ("id-00", "id-13", "absent"):
            assert self.index.get(checkpoint_id) is self.oracle.get(checkpoint_id)
            assert (checkpoint_id in self.index) == (checkpoint_id in self.oracle)


TestCheckpointIndex = IndexMachine.TestCase


def test_check_catches_ids_out_of_order() -> None:
    index = CheckpointIndex([record("a"), record("b")])
    index._ids.reverse()
    with pytest.raises(AssertionError, match="out of order"):
        index.check()
