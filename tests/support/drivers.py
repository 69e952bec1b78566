"""``SyncDriven``: the async interface of a checkpointer whose every call runs the wrapped saver's *sync* method.

LangGraph's conformance suite only calls async methods; driven through this facade, it covers the sync API
of the memory saver and of the tiered saver alike.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

__all__ = ["SyncDriven"]


class SyncDriven(BaseCheckpointSaver[str]):
    """Async interface whose every call runs the wrapped saver's sync method, counted in ``sync_calls``."""

    def __init__(self, inner: Any) -> None:
        super().__init__(serde=inner.serde)
        self.inner = inner
        self.sync_calls = 0

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        self.sync_calls += 1
        return getattr(self.inner, name)(*args, **kwargs)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._call("get_tuple", config)  # type: ignore[no-any-return]

    async def alist(self, config: RunnableConfig | None, **kwargs: Any) -> AsyncIterator[CheckpointTuple]:
        for item in self._call("list", config, **kwargs):
            yield item

    async def aput(self, *args: Any) -> RunnableConfig:
        return self._call("put", *args)  # type: ignore[no-any-return]

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
