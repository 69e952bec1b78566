"""The conformance suite again, driven through the saver's *sync* methods.

The suite only calls async methods, so a facade whose async methods call the
sync ones gives the sync API the same coverage.
"""

from __future__ import annotations

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES
from langgraph.checkpoint.conformance.report import ProgressCallbacks

from langgraph.checkpoint.bounded import BoundedInMemorySaver
from tests.support.drivers import SyncDriven

facades: list[SyncDriven] = []


@checkpointer_test(name="BoundedInMemorySaver (sync methods)")
async def sync_driven_saver():
    facade = SyncDriven(BoundedInMemorySaver())
    facades.append(facade)
    yield facade
    facade.inner.check()


@pytest.mark.parametrize("capability", sorted(c.value for c in ALL_CAPABILITIES))
async def test_capability_passes_through_sync_methods(capability: str) -> None:
    facades.clear()
    report = await validate(sync_driven_saver, capabilities={capability}, progress=ProgressCallbacks.quiet())
    result = report.results[capability]
    assert result.detected
    assert result.passed, f"{capability} failed: {result.failures}"
    assert facades and all(f.sync_calls > 0 for f in facades), "the sync methods were not exercised"
