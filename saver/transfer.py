"""Copy threads between any two LangGraph checkpointers, through their public API.

The way out of process memory: ``copy_threads(ours, SqliteSaver(...), ids)``
moves threads to a durable saver, and back. Checkpoint ids, parent links,
metadata, pending writes and channel values are kept, so a graph resumed on the
target behaves as on the source (same state, same history, an interrupt still
waits for its answer).

What the public API cannot carry: a pending write's ``task_path`` (a
``CheckpointTuple`` does not expose it), so the target orders a checkpoint's
writes by task id; this only matters to parallel tasks writing one
``DeltaChannel`` in the same step. Between two ``BoundedInMemorySaver``s use
``export_thread`` / ``import_thread``, which keep everything.

Trust: no payload crosses as bytes. The source deserializes with its own
serializer and the target serializes again with its own, so the target's
serializer writes every type tag; a ``"pickle"`` payload reaches a
``BoundedInMemorySaver`` this way only if its own serializer pickles. What a
copy cannot guard against is the source's read: a source whose serializer
unpickles, or rebuilds any msgpack extension type, runs what its database
holds while it is listed, before the target is called.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

from .locations import configurable, normalize_ids

__all__ = [
    "copy_threads",
]


def copy_threads(source: BaseCheckpointSaver[Any], target: BaseCheckpointSaver[Any], thread_ids: Iterable[str]) -> int:
    """Copy every checkpoint of these threads, all namespaces, from ``source`` to ``target``.

    Checkpoints are written oldest first, each with every channel value it
    holds, its metadata and parent link, then its pending writes, task by task
    in their stored order. Returns how many checkpoints were copied.

    Raises:
        ValueError: ``thread_ids`` is a lone string (not split into characters) or holds an invalid id.

    Runtime complexity: O(size of the threads), plus the two savers' own costs.
    """
    copied = 0
    for thread_id in normalize_ids("thread_ids", thread_ids):
        tuples = sorted(
            source.list({"configurable": {"thread_id": thread_id}}),
            key=lambda t: configurable(t.config)["checkpoint_id"],
        )
        for checkpoint_tuple in tuples:
            _copy_checkpoint(target, checkpoint_tuple)
            copied += 1
    return copied


def _copy_checkpoint(target: BaseCheckpointSaver[Any], item: CheckpointTuple) -> None:
    located = configurable(item.config)
    parent_id = configurable(item.parent_config)["checkpoint_id"] if item.parent_config else None
    put_config: dict[str, Any] = {
        "configurable": {"thread_id": located["thread_id"], "checkpoint_ns": located.get("checkpoint_ns", "")}
    }
    if parent_id is not None:
        put_config["configurable"]["checkpoint_id"] = parent_id
    checkpoint: dict[str, Any] = dict(item.checkpoint)
    versions = checkpoint["channel_versions"]
    values = checkpoint["channel_values"]
    # every value the checkpoint holds, at its version: the target stores what a read returns
    new_versions = {channel: versions[channel] for channel in values if channel in versions}
    stored = target.put(put_config, checkpoint, dict(item.metadata), new_versions)  # type: ignore[arg-type]
    for task_id, writes in _writes_by_task(item.pending_writes or []):
        target.put_writes(stored, writes, task_id)


def _writes_by_task(pending: list[tuple[str, str, Any]]) -> list[tuple[str, list[tuple[str, Any]]]]:
    """Pending writes regrouped into ``put_writes`` calls, one per task, in their stored order.

    The target gives a regular write its position in the call as index (the
    relative order of a task's writes is kept); special channels (errors,
    interrupts, ...) get their fixed index from ``WRITES_IDX_MAP`` as always.
    """
    tasks: dict[str, list[tuple[str, Any]]] = {}
    for task_id, channel, value in pending:
        tasks.setdefault(task_id, []).append((channel, value))
    return list(tasks.items())
