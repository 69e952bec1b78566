"""What a write removes from its own thread to fit the per-thread limits, planned before anything changes.

* ``admit_location``: the identifiers a write adds as new keys, and
  ``max_namespaces_per_thread``;
* ``plan_namespaces``: under ``on_namespace_limit="prune_oldest"``, the
  completed subgraph namespaces that make room for a new one;
* ``plan_rolling``: under ``on_checkpoint_limit="prune_oldest"``, the oldest
  checkpoints that make room for a new one.

Everything here is pure: it reads a thread and returns a ``Pruning`` (or raises
``CheckpointCapacityError``, which the store counts); ``State.apply_pruning``
carries the plan out once every other check of the write has passed.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Mapping

from . import identifiers, memory
from .errors import CheckpointCapacityError
from .limits import StoreLimits
from .lineage import plan_removal, required_ancestors
from .namespace import EMPTY_NAMESPACE
from .plans import NO_PRUNING, Pruning
from .records import Blob, BlobKey, CheckpointRecord
from .thread import Thread
from .totals import Totals

__all__ = ["admit_location", "plan_namespaces", "plan_rolling"]


def admit_location(
    limits: StoreLimits, thread: Thread | None, thread_id: str, namespace: str, root_checkpoint_id: str | None = None
) -> Pruning | None:
    """Check the identifiers a write adds as new keys, and ``max_namespaces_per_thread``.

    Returns the namespaces to prune first when the thread is at the limit under
    ``on_namespace_limit="prune_oldest"`` (``plan_namespaces``), else None.

    Raises:
        ValueError: A new thread id or namespace is invalid.
        CheckpointCapacityError: The thread would have one namespace too many.

    Runtime complexity: O(length of the identifiers), plus, at the limit,
    O(s log s + size of the namespaces taken) for a thread of s namespaces
    (``plan_namespaces``).
    """
    if thread is None:
        identifiers.check_identifier("thread_id", thread_id, limits)
    identifiers.check_namespace(namespace, limits)
    if thread is None or len(thread.namespaces) < limits.max_namespaces_per_thread:
        return None
    return plan_namespaces(thread, limits, root_checkpoint_id)


_SUBGRAPHS = (
    "Namespaces come from subgraph calls: each call checkpoints under a namespace of its own "
    "(node:<task id>), so a thread gains one per call."
)


def plan_namespaces(thread: Thread, limits: StoreLimits, root_checkpoint_id: str | None = None) -> Pruning:
    """The namespaces to remove whole so that a thread at ``max_namespaces_per_thread`` can take a new one.

    Under ``on_namespace_limit="prune_oldest"``, takes the least recently written
    non-root namespaces that are complete: their newest checkpoint id sorts below
    the root namespace's newest, or below ``root_checkpoint_id``, the root
    checkpoint the write's own subgraph runs under (a step's checkpoint is made
    before its tasks start, so every subgraph of an earlier step finished before
    it: under async durability it may not be stored yet). Ids are time-ordered,
    so what stays is what the current step still needs: subgraphs running,
    interrupted, or of the current step are never taken. Changes nothing.

    Raises:
        CheckpointCapacityError: ``max_namespaces_per_thread``, under ``"reject"``
            or when no namespace is complete; the message says why and what to do.

    Runtime complexity: O(s log s) for the s namespaces of the thread, plus the
    size of the one taken.
    """
    maximum = limits.max_namespaces_per_thread
    count = len(thread.namespaces) + 1
    held = f"The thread holds {len(thread.namespaces)} namespaces; this write would add one more."
    if limits.on_namespace_limit != "prune_oldest":
        hint = (
            f'{held} {_SUBGRAPHS} Set on_namespace_limit="prune_oldest" to remove the oldest completed '
            f"subgraph namespaces as new ones come, or raise max_namespaces_per_thread."
        )
        raise CheckpointCapacityError(
            "max_namespaces_per_thread", maximum, count, thread_id=thread.thread_id, hint=hint
        )
    root = thread.namespaces.get("")
    cutoff = root.ids[-1] if root is not None and root.ids else None
    if type(root_checkpoint_id) is str and (cutoff is None or root_checkpoint_id > cutoff):
        cutoff = root_checkpoint_id
    complete = sorted(
        (space.ids[-1], name)
        for name, space in thread.namespaces.items()
        if name and space.ids and cutoff is not None and space.ids[-1] < cutoff
    )
    if not complete:
        hint = (
            f"{held} None of them is complete: every subgraph namespace belongs to a subgraph that is still "
            f"running, interrupted, or of the current step (more than max_namespaces_per_thread at once, a wide "
            f"fan-out for example). Raise max_namespaces_per_thread above the widest step."
        )
        raise CheckpointCapacityError(
            "max_namespaces_per_thread", maximum, count, thread_id=thread.thread_id, hint=hint
        )
    name = complete[0][1]
    space = thread.namespaces[name]
    freed = space.recount()
    freed = Totals(
        freed.nbytes,
        freed.checkpoints,
        freed.writes,
        freed.blobs,
        1,
        memory.namespace_overhead(space) + memory.namespace_text(name),
    )
    return Pruning({name: freed}, {}, freed)


# --- rolling history ---------------------------------------------------------------------------------------


def plan_rolling(
    thread: Thread,
    namespace: str,
    record: CheckpointRecord,
    new_blobs: Mapping[BlobKey, Blob],
    pruning: Pruning | None,
    limits: StoreLimits,
) -> Pruning | None:
    """The thread's oldest checkpoints that make room for ``record`` (with what ``pruning`` already
    takes), or a rejection; None when the namespaces ``pruning`` removes make room enough.

    Under ``on_checkpoint_limit="prune_oldest"``, takes the thread's oldest
    checkpoints (ids are time-ordered, so across namespaces too), a tenth of the
    limit at a time, so that this O(n) planning is paid once per that many puts.
    Never takes the new checkpoint's parent, nor an ancestor that a kept
    checkpoint (or the new one) needs to rebuild a delta channel. Changes nothing.

    Raises:
        CheckpointCapacityError: ``max_checkpoints_per_thread``, under ``"reject"``
            or when too little can be taken.

    When the checkpoints just past the cut lean on the ones before it (a delta
    channel seeded long ago), the cut moves forward, at least doubling each
    time, so that whole old chains go first; it may then take more than a tenth.

    Runtime complexity: O(n * (d * C + 1) * log n + n * (C + log s)) for the n
    checkpoints of the thread in s namespaces, d delta channels and C channels
    per checkpoint: O(log n) passes (the cut at least doubles), each recomputing
    what the survivors need (``lineage.required_ancestors``); the ids merged
    oldest first; the blob sweeps (``lineage.plan_removal``).
    """
    maximum = limits.max_checkpoints_per_thread
    pruning = pruning or NO_PRUNING
    count = thread.checkpoints - pruning.freed.checkpoints + 1
    if count <= maximum:
        return pruning if pruning.namespaces else None
    if limits.on_checkpoint_limit != "prune_oldest":
        hint = (
            f"The thread holds {thread.checkpoints} checkpoints, all namespaces counted. Set "
            f'on_checkpoint_limit="prune_oldest" to keep a rolling history of the newest ones (time travel and '
            f"DeltaChannel state keep working), or raise max_checkpoints_per_thread."
        )
        raise CheckpointCapacityError(
            "max_checkpoints_per_thread", maximum, count, thread_id=thread.thread_id, hint=hint
        )
    wanted = int(count - maximum) + max(1, int(maximum // 10)) - 1  # maximum is finite here: count passed it
    oldest_first = list(
        heapq.merge(
            *(
                zip(space.ids, itertools.repeat(name))
                for name, space in thread.namespaces.items()
                if name not in pruning.namespaces
            )
        )
    )
    written = thread.namespaces.get(namespace)
    parent = written.records.get(record.parent_id) if written is not None and record.parent_id else None
    # Remove the oldest `cut` checkpoints except those a survivor needs; when that
    # frees too few (the survivors just past the cut lean on the ones before it),
    # move the cut forward, so that whole old chains go first.
    cut = wanted
    taken: dict[str, list[str]] = {}
    while cut <= len(oldest_first):
        keep: dict[str, list[CheckpointRecord]] = {namespace: [record] + ([parent] if parent else [])}
        for checkpoint_id, name in oldest_first[cut:]:
            keep.setdefault(name, []).append(thread.namespaces[name].records[checkpoint_id])
        required = {
            name: required_ancestors(thread.namespaces.get(name, EMPTY_NAMESPACE), records)
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
        cut = min(len(oldest_first), cut + max(shortfall, cut))  # at least doubling: O(log n) passes
    if sum(map(len, taken.values())) < count - maximum:
        raise CheckpointCapacityError("max_checkpoints_per_thread", maximum, count, thread_id=thread.thread_id)
    keep_blobs = set(record.blob_keys()) | set(new_blobs)
    removals = {
        name: plan_removal(thread.namespaces[name], ids, keep_blobs if name == namespace else ())
        for name, ids in taken.items()
    }
    freed = pruning.freed
    for removal in removals.values():
        freed = freed.plus(removal.freed)
    return Pruning(pruning.namespaces, removals, freed)
