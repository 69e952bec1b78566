"""LangGraph's checkpointer conformance suite, every capability, base and extended."""

from __future__ import annotations

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES
from langgraph.checkpoint.conformance.report import ProgressCallbacks

from langgraph.checkpoint.bounded import BoundedInMemorySaver


@checkpointer_test(name="BoundedInMemorySaver")
async def bounded_saver():
    saver = BoundedInMemorySaver()
    yield saver
    saver.check()


@pytest.mark.parametrize("capability", sorted(c.value for c in ALL_CAPABILITIES))
async def test_capability_passes(capability: str) -> None:
    report = await validate(bounded_saver, capabilities={capability}, progress=ProgressCallbacks.quiet())
    result = report.results[capability]
    assert result.detected, f"{capability} is not implemented (its async method is not overridden)"
    assert result.passed, f"{capability} failed: {result.failures}"
    assert result.tests_passed > 0 and result.tests_failed == 0
