"""The conformance suite again, driven through the saver's *sync* methods.

The suite only calls async methods, so a facade whose async methods call the
sync ones gives the sync API the same coverage.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES
from langgraph.checkpoint.conformance.report import ProgressCallbacks

from langgraph.checkpoint.bounded import BoundedInMemorySaver


class SyncDriven(BaseCheckpointSaver[str]):
    """Async interface whose every call runs the wrapped saver's sync method."""

    def __init__(self, inner: BoundedInMemorySaver) -> None:
        super().__init__(serde=inner.serde)
        self.inner = inner
        self.sync_calls = 0

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        self.sync_calls += 1
        return getattr(self.inner, name)(*args, **kwargs)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._call("get_tuple", config)

    async def alist(self, config: RunnableConfig | None, **kwargs: Any) -> AsyncIterator[CheckpointTuple]:
        for item in self._call("list", config, **kwargs):
            yield item

    async def aput(self, *args: Any) -> RunnableConfig:
        return self._call("put", *args)

    async def aput_writes(self, *args: Any, **kwargs: Any) -> None:
        self._call("put_writes", *args, **kwargs)

    async def adelete_thread(self, thread_id: str) -> None:
        self._call("delete_thread", thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._call("delete_for_runs", run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._call("copy_thread", source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self._call("prune", thread_ids, strategy=strategy)


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
