"""Rolling history: which of a thread's oldest checkpoints make room for a new one."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Mapping

from engine import ancestry
from engine.limits import StoreLimits
from engine.namespace import EMPTY_NAMESPACE, Removal
from engine.records import Blob, BlobKey, CheckpointRecord
from engine.thread import Thread


def plan_rolling(
    limits: StoreLimits,
    thread: Thread | None,
    namespace: str,
    record: CheckpointRecord,
    new_blobs: Mapping[BlobKey, Blob],
) -> dict[str, Removal]:
    """With ``on_checkpoint_limit="prune_oldest"``, the removals that make room for ``record``.

    Takes the thread's oldest checkpoints (ids are time-ordered, so across
    namespaces too), a tenth of the limit at a time so that the O(n) planning
    is paid once per that many puts. Never takes the new checkpoint's parent,
    nor an ancestor that a kept checkpoint (or the new one) needs to rebuild
    a delta channel. Returns ``{}`` when the policy is "reject" or too little
    can be taken.
    """
    if limits.on_checkpoint_limit != "prune_oldest" or thread is None:
        return {}
    maximum = limits.max_checkpoints_per_thread
    count = thread.usage.checkpoints + 1
    wanted = count - maximum + max(1, int(maximum // 10)) - 1
    oldest_first = list(
        heapq.merge(*(zip(space.checkpoints, itertools.repeat(name)) for name, space in thread.namespaces.items()))
    )
    written = thread.namespaces.get(namespace)
    parent = written.checkpoints.get(record.parent_id) if written is not None and record.parent_id else None
    # Remove the oldest `cut` checkpoints except those a survivor needs; when that
    # frees too few (the survivors just past the cut lean on the ones before it),
    # move the cut forward, so that whole old chains go first.
    cut = wanted
    taken: dict[str, list[str]] = {}
    while cut <= len(oldest_first):
        keep: dict[str, list[CheckpointRecord]] = {namespace: [record] + ([parent] if parent else [])}
        for checkpoint_id, name in oldest_first[cut:]:
            keep.setdefault(name, []).append(thread.namespaces[name].checkpoints[checkpoint_id])
        required = {
            name: ancestry.required_ancestors(thread.namespaces.get(name, EMPTY_NAMESPACE), records)
            for name, records in keep.items()
        }
        taken = {}
        for checkpoint_id, name in oldest_first[:cut]:
            if checkpoint_id in required.get(name, ()) or (
                parent is not None and checkpoint_id == parent.checkpoint_id
            ):
                continue
            taken.setdefault(name, []).append(checkpoint_id)
        shortfall = wanted - sum(map(len, taken.values()))
        if shortfall <= 0 or cut == len(oldest_first):
            break
        cut = min(len(oldest_first), cut + shortfall)
    if sum(map(len, taken.values())) < count - maximum:
        return {}
    keep_blobs = set(record.blob_keys()) | set(new_blobs)
    return {
        name: thread.namespaces[name].plan_removal(ids, keep_blobs if name == namespace else ())
        for name, ids in taken.items()
    }
