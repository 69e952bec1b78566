"""on_checkpoint_limit="prune_oldest": long conversations keep working, time travel keeps working."""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.memory import InMemorySaver as StockSaver

from langgraph.checkpoint.bounded import BoundedInMemorySaver, CheckpointCapacityError, InMemoryCheckpointConfig
from tests.conftest import make_saver
from tests.support.graphs import extend, linear
from tests.support.helpers import config, fingerprint, make_checkpoint, put


def rolling(**limits: Any) -> BoundedInMemorySaver:
    return make_saver(on_checkpoint_limit="prune_oldest", **limits)


def test_the_policy_is_validated() -> None:
    with pytest.raises(ValueError, match="on_checkpoint_limit"):
        InMemoryCheckpointConfig(on_checkpoint_limit="drop_newest")


def test_oldest_checkpoints_go_a_tenth_of_the_limit_at_a_time_with_their_writes() -> None:
    saver = rolling(max_checkpoints_per_thread=20)
    parent = None
    stored = []
    for step in range(50):
        parent = put(saver, "t", {"step": step}, parent=parent, version=f"v{step}")
        saver.put_writes(parent, [("step", step)], f"task-{step}")
        stored.append(parent)
        assert saver.stats().checkpoints <= 20
        saver.check()
    listed = [t.checkpoint["channel_values"]["step"] for t in saver.list(config("t"))]
    assert listed == list(range(49, 49 - len(listed), -1)) and len(listed) >= 18
    assert saver.get_tuple(stored[0]) is None and saver.get_tuple(stored[-1]).pending_writes == [
        ("task-49", "step", 49)
    ]
    stats = saver.stats()
    assert stats.pruned_checkpoints == 50 - len(listed)
    assert stats.pending_writes == len(listed) and stats.blobs == len(listed)


def test_a_fork_from_an_old_checkpoint_keeps_its_parent() -> None:
    saver = rolling(max_checkpoints_per_thread=5)
    chain = [put(saver, "t", {"a": 0}, version="v0")]
    for step in range(1, 5):
        chain.append(put(saver, "t", {"a": step}, parent=chain[-1], version=f"v{step}"))
    fork = put(saver, "t", {"a": "fork"}, parent=chain[0], version="fork")  # the oldest is the parent
    assert saver.get_tuple(chain[0]) is not None
    assert (
        saver.get_tuple(fork).parent_config["configurable"]["checkpoint_id"]
        == chain[0]["configurable"]["checkpoint_id"]
    )
    assert saver.get_tuple(chain[1]) is None  # the oldest that could go
    saver.check()


def test_pruning_counts_across_namespaces() -> None:
    saver = rolling(max_checkpoints_per_thread=4)
    root = put(saver, "t", {"a": 1}, version="r1")
    sub = put(saver, "t", {"a": 1}, namespace="sub:1", version="s1")
    put(saver, "t", {"a": 2}, parent=root, version="r2")
    put(saver, "t", {"a": 2}, parent=sub, namespace="sub:1", version="s2")
    put(saver, "t", {"a": 3}, namespace="sub:2", version="x")  # a fifth: the oldest (root's first) goes
    assert saver.get_tuple(root) is None and saver.get_tuple(sub) is not None
    assert saver.stats().checkpoints == 4
    saver.check()


def test_a_put_rejected_for_bytes_prunes_nothing() -> None:
    saver = rolling(max_checkpoints_per_thread=3, max_total_bytes=4_000)
    parent = None
    for step in range(3):
        parent = put(saver, "t", {"doc": "x" * 500}, parent=parent, version=f"v{step}")
    before = fingerprint(saver.store)
    with pytest.raises(CheckpointCapacityError) as info:
        put(saver, "t", {"doc": "y" * 3_500}, parent=parent, version="big")
    assert info.value.limit == "max_total_bytes"
    assert fingerprint(saver.store) == before


# --- a long conversation with a DeltaChannel, against the stock saver --------------------------


class Conversation(TypedDict, total=False):
    history: Annotated[list, DeltaChannel(extend, snapshot_frequency=7)]
    turns: Annotated[int, operator.add]


def conversation(checkpointer: Any) -> Any:
    builder = linear(Conversation, {"reply": lambda state: {"history": [f"reply {len(state['history'])}"], "turns": 1}})
    return builder.compile(checkpointer=checkpointer)


def check_against_stock(invokes: int, limit: int, check_every: int = 1) -> None:
    """Run the same conversation on both savers; after each invoke, the oldest checkpoint we
    still hold (the one whose ancestors were pruned last) must rebuild the stock saver's state."""
    ours = BoundedInMemorySaver(
        config=InMemoryCheckpointConfig(on_checkpoint_limit="prune_oldest", max_checkpoints_per_thread=limit)
    )
    app, stock_app = conversation(ours), conversation(StockSaver())
    cfg = {"configurable": {"thread_id": "chat"}}
    stock_by_step: dict[int, Any] = {}
    for turn in range(invokes):
        user = {"history": [f"user {turn}"], "turns": 0}
        assert app.invoke(user, cfg) == stock_app.invoke(user, cfg)
        if turn % check_every:
            continue
        for snapshot in stock_app.get_state_history(cfg, limit=3 * check_every + 1):  # 3 checkpoints per invoke
            stock_by_step[snapshot.metadata["step"]] = snapshot.values
        oldest = ours.store.list("chat", "")[-1]
        oldest_config = {
            "configurable": {"thread_id": "chat", "checkpoint_ns": "", "checkpoint_id": oldest.record.checkpoint_id}
        }
        held = app.get_state(oldest_config)
        assert held.values == stock_by_step[held.metadata["step"]], f"turn {turn}: the oldest held state is wrong"
        for step in [step for step in stock_by_step if step < held.metadata["step"]]:
            del stock_by_step[step]  # the oldest held only moves forward; the stock states before it are done
    assert app.get_state(cfg).values == stock_app.get_state(cfg).values
    held = list(app.get_state_history(cfg))
    # the stock saver's newest states, as many as we hold (steps rise with ids in one unforked thread)
    stock_by_step = {s.metadata["step"]: s.values for s in stock_app.get_state_history(cfg, limit=len(held))}
    assert len(held) <= limit < 2 * invokes, "nothing was pruned"
    assert [s.metadata["step"] for s in held] == sorted(stock_by_step, reverse=True)[: len(held)], "not the newest"
    for kept in held:  # the same graph and inputs give the same steps on both savers
        assert kept.values == stock_by_step[kept.metadata["step"]]
    forked = app.update_state(held[-1].config, {"history": ["edited"], "turns": 0})
    assert app.get_state(forked).values["history"][-1] == "edited"
    assert ours.stats().pruned_checkpoints >= 2 * invokes - limit
    ours.check()


def test_a_long_conversation_keeps_working_with_the_same_state_as_the_stock_saver() -> None:
    check_against_stock(invokes=1_000, limit=250)  # a batch of 25 lands at every phase of the snapshots


@pytest.mark.slow
def test_five_thousand_invokes_under_the_default_limit() -> None:
    check_against_stock(invokes=5_000, limit=1_000, check_every=7)


def test_pruning_a_whole_other_namespace_keeps_the_thread_being_written() -> None:
    """Found by the rolling model machine: pruning emptied the thread's only namespace
    just before a put into a new one, and the store dropped the thread under the put."""
    saver = rolling(max_checkpoints_per_thread=2)
    first = put(saver, "t", {}, namespace="sub:1", version="1")
    # a child that stores its delta channel empty, so it needs its parent: the cut takes both
    child = make_checkpoint({}, {"messages": "2"})
    metadata = {"counters_since_delta_snapshot": {"messages": [1, 1]}}
    saver.put(first, child, metadata, {"messages": "2"})
    put(saver, "t", {"a": 1}, namespace="", version="3")
    assert saver.stats().pruned_checkpoints == 2
    saver.check()
    assert saver.get_tuple(config("t")) is not None
    saver.delete_thread("t")
    assert (saver.stats().checkpoints, saver.stats().total_bytes) == (0, 0)


def test_a_put_whose_pruning_empties_its_own_namespace_keeps_the_accounting_exact() -> None:
    """Found by the soak: rolling history removed the only checkpoint of the namespace being written,
    so the put created it anew; its name's bytes must be counted again."""
    saver = BoundedInMemorySaver(
        config=InMemoryCheckpointConfig(max_checkpoints_per_thread=2, on_checkpoint_limit="prune_oldest")
    )
    put(saver, "t", {"a": 1}, namespace="sub:1|inner:2", version="1")
    put(saver, "t", {"a": 1})
    put(saver, "t", {"a": 2}, namespace="sub:1|inner:2", version="2")  # prunes the namespace's only checkpoint
    stats = saver.stats()
    assert (stats.checkpoints, stats.namespaces, stats.pruned_checkpoints) == (2, 2, 1)
    saver.check()
