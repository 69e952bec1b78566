"""Helpers shared by the tests: checkpoints to put, and a fingerprint of the store."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint
from langgraph.checkpoint.base.id import uuid6

from langgraph.checkpoint.bounded import BoundedInMemorySaver
from langgraph.checkpoint.bounded.engine import Store, memory


def make_checkpoint(
    values: dict[str, Any] | None = None,
    versions: dict[str, Any] | None = None,
    checkpoint_id: str | None = None,
) -> Checkpoint:
    """A well-formed checkpoint holding ``values``, each at version 1 unless given."""
    values = values or {}
    return Checkpoint(
        v=4,
        id=checkpoint_id or str(uuid6(clock_seq=-1)),
        ts=datetime.now(UTC).isoformat(),
        channel_values=values,
        channel_versions=versions if versions is not None else dict.fromkeys(values, 1),
        versions_seen={},
        updated_channels=None,
    )


def config(thread_id: Any, namespace: str = "", checkpoint_id: str | None = None) -> RunnableConfig:
    configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": namespace}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def put(
    saver: BoundedInMemorySaver,
    thread_id: Any,
    values: dict[str, Any] | None = None,
    *,
    namespace: str = "",
    parent: RunnableConfig | None = None,
    metadata: dict[str, Any] | None = None,
    checkpoint_id: str | None = None,
    version: Any = 1,
) -> RunnableConfig:
    """Put a checkpoint whose values are all new, at ``version``; returns the stored config.

    The default version 1 makes every put overwrite the thread's blobs, as int
    versions do in LangGraph; pass a fresh version to keep each checkpoint's own.
    """
    checkpoint = make_checkpoint(values, dict.fromkeys(values or {}, version), checkpoint_id)
    parent_id = parent["configurable"]["checkpoint_id"] if parent else None
    return saver.put(
        config(thread_id, namespace, parent_id),
        checkpoint,
        metadata or {"source": "loop", "step": 0, "parents": {}},
        dict(checkpoint["channel_versions"]),
    )


def recording_hook(into: list[str], pause: float = 0.0) -> Callable[[Any, Any], Coroutine[Any, Any, None]]:
    """An async ``on_evict`` hook that sleeps ``pause`` seconds (0: a turn of the loop), then appends the dropped
    thread's id to ``into``."""

    async def hook(dropped: Any, export: Any) -> None:
        await asyncio.sleep(pause)
        into.append(dropped.thread_id)

    return hook


def fingerprint(store: Store) -> Any:
    """Everything the store holds, in LRU order, comparable with ``==``, read through its public API.

    Per thread (least recently used first): when it was last used and its
    complete export (every namespace's checkpoints, writes and blobs; records
    are immutable, so holding them is a faithful snapshot); then every counter
    of ``stats()``, and the order ``list(None)`` visits threads in. A refusal's
    bookkeeping is left out: the rejection counters, and the tombstone a refused
    checkpoint leaves so that its late writes are refused too (with its memory).
    """
    with store.lock:
        threads = [
            (thread_id, store.last_used(thread_id), store.export_thread(thread_id)) for thread_id in store.thread_ids()
        ]
        creation_order = list(dict.fromkeys(ref.thread_id for ref in store.list(None)))  # list(None)'s thread order
        counters = vars(store.stats()).copy()
        del counters["rejections"], counters["refused_checkpoint_records"]
        counters["memory_bytes"] -= memory.REFUSAL * len(store.refusals) + store.refusals.nbytes
        return threads, creation_order, counters


class SteppingClock:
    """A clock that moves a second at every reading: drops get distinct, increasing times, and every thread is
    past a half-second TTL at once."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now
