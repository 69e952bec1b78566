"""The planners and the eviction step on hand-built states, without LangGraph.

``lineage.required_ancestors``, ``pruning.plan_namespaces``, ``pruning.plan_rolling`` and
``eviction.make_room`` are tried on stores built record by record: what each plans (or evicts) is
checked against what the state holds, and a plan changes nothing until it is carried out.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import pytest

from langgraph.checkpoint.bounded.engine import (
    CheckpointCapacityError,
    CheckpointRecord,
    Store,
    StoreLimits,
    WriteRecord,
    eviction,
    lineage,
    pruning,
)
from langgraph.checkpoint.bounded.engine.namespace import Namespace
from tests.conftest import FakeClock

PAYLOAD = ("json", b"x" * 10)


def delta_record(checkpoint_id: str, parent_id: str | None, version: str) -> CheckpointRecord:
    """A checkpoint whose delta channel ``d`` is at ``version``."""
    return CheckpointRecord.of(
        checkpoint_id, parent_id, PAYLOAD, PAYLOAD, {"d": version}, delta_channels=frozenset({"d"})
    )


def chain(seeded: set[str]) -> Namespace:
    """c1 <- c2 <- c3 <- c4, each at its own version of ``d``; a value is stored only at the ``seeded`` ones."""
    space = Namespace()
    parent = None
    for number in range(1, 5):
        checkpoint_id = f"c{number}"
        space.records[checkpoint_id] = delta_record(checkpoint_id, parent, f"v{number}")
        space.ids.append(checkpoint_id)
        if checkpoint_id in seeded:
            space.blobs[("d", f"v{number}")] = PAYLOAD
        parent = checkpoint_id
    return space


def test_required_ancestors_walks_back_to_the_nearest_seed() -> None:
    assert lineage.required_ancestors(chain({"c1"}), [chain({"c1"}).records["c4"]]) == {"c1", "c2", "c3"}
    space = chain({"c1", "c2"})
    assert lineage.required_ancestors(space, [space.records["c4"]]) == {"c2", "c3"}
    space = chain({"c4"})
    assert lineage.required_ancestors(space, [space.records["c4"]]) == set()  # it holds its own value


def test_required_ancestors_is_closed_over_several_survivors() -> None:
    space = chain({"c1"})
    needed = lineage.required_ancestors(space, [space.records["c2"], space.records["c4"]])
    assert needed == {"c1", "c2", "c3"}  # c2 is kept whole for c4, and needs c1


def stocked(limits: StoreLimits, clock: FakeClock | None = None) -> Store:
    return Store(limits, clock=clock or FakeClock())


def put(store: Store, thread_id: str, namespace: str, checkpoint_id: str, parent_id: str | None = None) -> None:
    record = CheckpointRecord.of(checkpoint_id, parent_id, PAYLOAD, PAYLOAD, {"c": checkpoint_id})
    store.put_checkpoint(thread_id, namespace, record, {("c", checkpoint_id): PAYLOAD})


def test_plan_namespaces_takes_the_least_recently_written_completed_namespace() -> None:
    limits = StoreLimits(max_namespaces_per_thread=3, on_namespace_limit="prune_oldest")
    store = stocked(limits)
    put(store, "t", "", "1")
    put(store, "t", "a:1", "2")  # completed: the root moved on past it
    put(store, "t", "b:2", "3")
    put(store, "t", "", "4")
    thread = store.threads["t"]
    before = thread.recount()
    plan = pruning.plan_namespaces(thread, limits)
    assert list(plan.namespaces) == ["a:1"]  # "b:2" is completed too, but written after "a:1"
    assert plan.freed.checkpoints == 1 and plan.freed.namespaces == 1
    assert plan.freed.nbytes == thread.namespaces["a:1"].recount().nbytes
    assert thread.recount() == before  # planning changed nothing
    store.apply_pruning(thread, plan)
    assert set(thread.namespaces) == {"", "b:2"} and store.pruned_namespaces == 1
    store.check()


def test_plan_namespaces_refuses_when_nothing_is_complete_or_under_reject() -> None:
    limits = StoreLimits(max_namespaces_per_thread=2, on_namespace_limit="prune_oldest")
    store = stocked(limits)
    put(store, "t", "", "1")
    put(store, "t", "a:1", "2")  # newer than the root's newest: still running
    with pytest.raises(CheckpointCapacityError, match="None of them is complete"):
        pruning.plan_namespaces(store.threads["t"], limits)
    with pytest.raises(CheckpointCapacityError, match='on_namespace_limit="prune_oldest"'):
        pruning.plan_namespaces(store.threads["t"], replace(limits, on_namespace_limit="reject"))


def test_plan_rolling_takes_the_oldest_tenth_and_never_the_parent() -> None:
    limits = StoreLimits(max_checkpoints_per_thread=10, on_checkpoint_limit="prune_oldest")
    store = stocked(limits)
    parent = None
    for number in range(10):
        put(store, "t", "", f"{number:02d}", parent)
        parent = f"{number:02d}"
    thread = store.threads["t"]
    new = CheckpointRecord.of("10", "09", PAYLOAD, PAYLOAD, {"c": "10"})
    plan = pruning.plan_rolling(thread, "", new, {("c", "10"): PAYLOAD}, None, limits)
    assert plan is not None and plan.removals[""].checkpoint_ids == ["00"]
    assert thread.checkpoints == 10  # nothing changed yet
    with pytest.raises(CheckpointCapacityError, match="max_checkpoints_per_thread"):
        pruning.plan_rolling(thread, "", new, {}, None, replace(limits, on_checkpoint_limit="reject"))


def test_plan_rolling_keeps_what_a_delta_chain_needs() -> None:
    limits = StoreLimits(max_checkpoints_per_thread=4, on_checkpoint_limit="prune_oldest")
    store = stocked(limits)
    parent = None
    for number in range(1, 5):
        record = delta_record(f"c{number}", parent, f"v{number}")
        blobs = {("d", f"v{number}"): PAYLOAD if number == 1 else None}  # only c1 holds a value
        store.put_checkpoint("t", "", record, blobs)
        parent = f"c{number}"
    new = delta_record("c5", "c4", "v5")
    with pytest.raises(CheckpointCapacityError):  # every older checkpoint is the new one's chain
        pruning.plan_rolling(store.threads["t"], "", new, {("d", "v5"): None}, None, limits)


def test_remove_planned_takes_exactly_the_plan_and_leaves_no_missing_parent() -> None:
    store = stocked(StoreLimits())
    parent = None
    for number in range(5):
        put(store, "t", "", f"{number}", parent)
        parent = f"{number}"
    put(store, "t", "call:1", "a")
    thread = store.threads["t"]
    removed = store.remove_planned("t", {"": ["0", "1", "2", "missing"], "call:1": ["a"], "gone:2": ["b"]})
    assert removed == 4
    assert thread.namespaces[""].ids == ["3", "4"] and "call:1" not in thread.namespaces
    assert thread.namespaces[""].records["3"].parent_id is None  # its parent went: none, not one missing
    assert thread.namespaces[""].records["4"].parent_id == "3"
    assert set(thread.namespaces[""].blobs) == {("c", "3"), ("c", "4")}  # the others' values went with them
    assert thread.checkpoints == 2 and store.stats().checkpoints == 2 and store.stats().blobs == 2
    store.check()  # totals and bytes agree with what is stored
    assert store.remove_planned("t", {"": ["0"]}) == 0 and store.remove_planned("absent", {"": ["3"]}) == 0


def test_remove_planned_clears_parents_and_writes_of_ids_held_only_elsewhere() -> None:
    store = stocked(StoreLimits())
    put(store, "t", "", "3", "2")  # a partial copy: "2" (its parent) and "1" are held elsewhere only
    store.put_writes("t", "", "1", [WriteRecord.of("task", 0, "c", PAYLOAD)])  # writes under a checkpoint not held
    assert store.remove_planned("t", {"": ["1", "2"]}) == 0  # no checkpoint of the plan was held here
    space = store.threads["t"].namespaces[""]
    assert space.records["3"].parent_id is None and "1" not in space.writes
    assert store.stats().pending_writes == 0
    store.check()


def test_make_room_evicts_the_least_recently_used_not_the_kept() -> None:
    clock = FakeClock()
    store = stocked(StoreLimits(max_threads=3), clock)
    for thread_id in ("a", "b", "c"):
        clock.advance(1)
        put(store, thread_id, "", "1")
    eviction.make_room(store, 0, 0, [store.threads["a"]], "new", clock(), adds_thread=True)
    assert list(store.threads) == ["a", "c"] and store.evicted_for_threads == 1
    assert store.tombstones.records["b"].limit == "max_threads"


def test_make_room_that_cannot_succeed_evicts_nobody() -> None:
    clock = FakeClock()
    store = stocked(StoreLimits(max_total_bytes=100), clock)
    put(store, "a", "", "1")
    put(store, "b", "", "1")
    with pytest.raises(CheckpointCapacityError, match="max_total_bytes"):
        eviction.make_room(store, 90, 0, [store.threads["a"]], "a", clock(), adds_thread=False)
    assert list(store.threads) == ["a", "b"] and store.evicted_for_bytes == 0


def test_these_tests_need_no_langgraph() -> None:
    script = (
        "import sys; sys.modules['langgraph.graph'] = None; sys.modules['langchain_core'] = None\n"
        "import langgraph.checkpoint.bounded.engine as engine\n"
        "from langgraph.checkpoint.bounded.engine import eviction, lineage, pruning\n"
        "print(engine.Store().stats().threads)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "0", done.stderr
