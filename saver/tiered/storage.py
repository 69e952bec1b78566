"""A thread's size in both tiers: ``TieredSaver.thread_storage`` (``TieredThreadStorage``).

The hot tier answers from the engine's records (no payload re-serialized, nothing created or marked used).
The durable tier answers by its backend's sums (``backends``: one aggregate query per table, bounded by the
thread's primary-key prefix); a saver with no tables to sum (``backends.generic``) is read through its API,
every checkpoint of the thread, and measured by re-serializing what it returns: an estimate, marked
``estimated``.
"""

from __future__ import annotations

from dataclasses import dataclass

from langchain_core.runnables import RunnableConfig

from ..engine import CheckpointCapacityError, Store, ThreadStorage, render_rows
from .backends.generic import estimate_storage
from .durable import DurableTier
from .settings import WriteBack, WriteThrough
from .state import Shared, count_rejection

__all__ = ["CheckpointTooLargeError", "TieredThreadStorage", "athread_storage", "refuse_too_large", "thread_storage"]


class CheckpointTooLargeError(CheckpointCapacityError):
    """A checkpoint larger than the write policy's ``max_checkpoint_bytes`` (``WriteThrough``, ``WriteBack``):
    refused at ``put`` before anything was written to either tier.

    Attributes: as ``CheckpointCapacityError``'s: ``limit`` (``"max_checkpoint_bytes"``), ``limit_value``,
    ``needed`` (the checkpoint's bytes: its checkpoint, metadata and new channel values, serialized as stored),
    ``thread_id``.
    """

    rejection = "write.max_checkpoint_bytes"
    """Its key in ``TieredStats.rejections`` (and the metric ``tiered_checkpoints_too_large``)."""

    def __init__(self, thread_id: str, checkpoint_id: str, size: int, limit: int) -> None:
        super().__init__(
            "max_checkpoint_bytes",
            limit,
            size,
            thread_id=thread_id,
            message=(
                f"checkpoint {checkpoint_id!r} of thread {thread_id!r} is {size:,} bytes serialized (its checkpoint, "
                f"metadata and new channel values), over the durable tier's limit, the write policy's "
                f"max_checkpoint_bytes ({limit:,}): nothing was written to either tier. Keep large values (files, "
                f"images, tool outputs) out of the graph's state (store them elsewhere and keep a reference), "
                f"compress them (CompressingSerializer), or raise max_checkpoint_bytes"
            ),
        )


@dataclass(frozen=True)
class TieredThreadStorage:
    """A thread's size in each tier of a ``TieredSaver``, read at one call.

    The hot tier is a copy of (part of) the durable one, so the thread's size is the durable tier's:
    ``total_bytes``. Under ``WriteBack`` the hot tier may also hold writes not flushed yet.

    Attributes:
        thread_id: The thread.
        hot: What the hot tier holds of it (zeros when it is not in memory).
        durable: What the durable tier holds (``durable.estimated``: measured through the saver's API).
    """

    thread_id: str
    hot: ThreadStorage
    durable: ThreadStorage

    @property
    def total_bytes(self) -> int:
        """The durable tier's bytes: the thread's size where it is kept. Runtime complexity: O(1)."""
        return self.durable.total_bytes

    def as_dict(self) -> dict[str, object]:
        """JSON-ready: the durable report's fields at the top (the Agent Server's shape), and both tiers'
        reports under ``hot`` and ``durable``. Runtime complexity: O(channels)."""
        return {
            **self.durable.as_dict(),
            "tier": "tiered",
            "hot": self.hot.as_dict(),
            "durable": self.durable.as_dict(),
        }

    def __str__(self) -> str:
        """Two lines: each tier's. Runtime complexity: O(1)."""
        return render_rows(
            [("hot", str(self.hot).partition(": ")[2]), ("durable", str(self.durable).partition(": ")[2])]
        )


def _config(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


def durable_storage(durable: DurableTier, thread_id: str) -> ThreadStorage:
    """The durable tier's report: the backend's sums, else an estimate through the saver's API.

    Runtime complexity: one aggregate query per table; through the API, O(size of the thread) read and
    re-serialized.
    """
    form = durable.format
    if form.sql is not None:
        found = durable.on_tables(
            lambda saver: form.storage(saver, thread_id), lambda saver: form.astorage(saver, thread_id)
        )
        if found is not None:
            return found
    return estimate_storage(thread_id, durable.list(_config(thread_id)), durable.saver.serde)


async def adurable_storage(durable: DurableTier, thread_id: str) -> ThreadStorage:
    """``durable_storage`` for async callers."""
    form = durable.format
    if form.sql is not None:
        found = await durable.aon_tables(
            lambda saver: form.storage(saver, thread_id), lambda saver: form.astorage(saver, thread_id)
        )
        if found is not None:
            return found
    return estimate_storage(thread_id, await durable.alist(_config(thread_id)), durable.saver.serde)


def thread_storage(hot: Store, durable: DurableTier, thread_id: str) -> TieredThreadStorage:
    """Both tiers' reports (``hot`` is the hot tier's engine ``Store``). Runtime complexity: that of
    ``Store.thread_storage`` plus ``durable_storage``."""
    return TieredThreadStorage(thread_id, hot.thread_storage(thread_id, "hot"), durable_storage(durable, thread_id))


async def athread_storage(hot: Store, durable: DurableTier, thread_id: str) -> TieredThreadStorage:
    """``thread_storage`` for async callers (the hot tier's report takes no I/O)."""
    return TieredThreadStorage(
        thread_id, hot.thread_storage(thread_id, "hot"), await adurable_storage(durable, thread_id)
    )


def refuse_too_large(
    shared: Shared, policy: WriteThrough | WriteBack, thread_id: str, checkpoint_id: str, size: int
) -> None:
    """Raise ``CheckpointTooLargeError`` (counted in ``rejections``) when a put of ``size`` bytes passes the write
    policy's ``max_checkpoint_bytes``; before anything is written. Runtime complexity: O(1)."""
    limit = policy.max_checkpoint_bytes
    if limit is not None and size > limit:
        count_rejection(shared, CheckpointTooLargeError.rejection)
        raise CheckpointTooLargeError(thread_id, checkpoint_id, size, limit)
