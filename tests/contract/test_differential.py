"""The same real graphs on our saver and on LangGraph's stock InMemorySaver must
give the same results, states and histories, sync and async, in every durability mode."""

from __future__ import annotations

import asyncio

import pytest
from langgraph.checkpoint.memory import InMemorySaver as StockSaver

from langgraph.checkpoint.bounded import BoundedInMemorySaver, InMemoryCheckpointConfig
from tests.support.graphs import SCENARIOS, Runner

DURABILITIES = ["sync", "async", "exit"]


def run(scenario_name: str, checkpointer, *, use_async: bool, durability: str):
    factory, scenario = SCENARIOS[scenario_name]
    calls: dict[str, int] = {}
    runner = Runner(factory(checkpointer, calls), use_async=use_async, durability=durability, calls=calls)
    return asyncio.run(scenario(runner))


# With durability="exit" nothing is written until the run ends, so a run that
# crashes mid-step has no saved writes to resume from: that scenario needs the
# writes to be saved during the run, and runs in the two other modes.
NEEDS_WRITES_DURING_RUN = {"failing_branch_is_retried"}

CASES = [
    pytest.param(name, use_async, durability, id=f"{name}-{'async' if use_async else 'sync'}-{durability}")
    for name in sorted(SCENARIOS)
    for use_async in (False, True)
    for durability in DURABILITIES
    if not (durability == "exit" and name in NEEDS_WRITES_DURING_RUN)
]


ROLLING = InMemoryCheckpointConfig(on_checkpoint_limit="prune_oldest", on_namespace_limit="prune_oldest")


@pytest.mark.parametrize("config", [None, ROLLING], ids=["reference policies", "rolling policies"])
@pytest.mark.parametrize(("scenario_name", "use_async", "durability"), CASES)
def test_same_results_states_and_history_as_the_stock_saver(scenario_name, use_async, durability, config) -> None:
    """With the rolling policies too: where nothing had to be pruned, nothing differs."""
    expected = run(scenario_name, StockSaver(), use_async=use_async, durability=durability)
    ours = BoundedInMemorySaver(config=config)
    actual = run(scenario_name, ours, use_async=use_async, durability=durability)
    assert actual == expected
    ours.check()
    stats = ours.stats()
    assert stats.checkpoints > 0 and (stats.pruned_checkpoints, stats.pruned_namespaces) == (0, 0)


def test_a_failed_branch_does_not_rerun_the_successful_one() -> None:
    trace = run("failing_branch_is_retried", BoundedInMemorySaver(), use_async=False, durability="sync")
    assert trace[0] == "raised transient failure"
    assert trace[-1] == {"start": 1, "steady": 1, "flaky": 2, "join": 1}


def test_delta_channel_values_are_rebuilt_not_stored_at_every_checkpoint() -> None:
    ours = BoundedInMemorySaver()
    trace = run("delta_channel_conversation", ours, use_async=False, durability="sync")
    final = trace[-2]["values"]["items"]
    assert final[:3] == ["user 0", "reply 1", "reviewed 2"]
    stored_items = [
        view.channel_values.get("items") for view in ours.store.views(ours.store.list("delta", "")) if view is not None
    ]
    assert any(value is None for value in stored_items), "every checkpoint stored the delta channel"
