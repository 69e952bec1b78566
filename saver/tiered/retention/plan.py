"""What a prune removes from a thread in the durable tier, planned from its checkpoints' ids alone.

The rule is the memory saver's (``engine.removal.prune``), with one more for
subgraph calls:

* each namespace keeps its newest ``keep_last`` checkpoints, with their pending
  writes (a removal takes only the writes of the checkpoints it removes);
* a thread whose metadata counts ``DeltaChannel`` writes also keeps the
  ancestors a kept checkpoint rebuilds its values from: that plan is made by
  the engine itself, on a copy of the thread (``durable.survivors``), and
  handed here as ``kept``;
* a subgraph call's namespace (its name holds the call's task id after a
  ``:``) goes whole with the root graph's checkpoint the call started from,
  once that checkpoint is removed, as ``PostgresSaver.prune`` does: each call
  makes a namespace of its own, so keeping ``keep_last`` of each would keep
  every call forever. A call whose root checkpoint is newer than the root's
  newest saved one (its run saves it in the background) is kept.

Planning returns plain values: namespace -> checkpoint ids to remove, oldest first.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Sequence

from ..backends.base import Skeleton

__all__ = ["ROOT", "namespaces_of", "removals"]

ROOT = ""
"""The root graph's namespace."""


def namespaces_of(skeleton: Sequence[Skeleton]) -> dict[str, list[Skeleton]]:
    """The thread's checkpoints by namespace, each oldest first (the skeleton is read oldest first).
    Runtime complexity: O(checkpoints)."""
    spaces: dict[str, list[Skeleton]] = defaultdict(list)
    for row in skeleton:
        spaces[row.namespace].append(row)
    return dict(spaces)


def removals(
    skeleton: Sequence[Skeleton], keep_last: int, kept: Collection[tuple[str, str]] | None = None
) -> dict[str, list[str]]:
    """The checkpoint ids to remove, by namespace, keeping each namespace's newest ``keep_last`` (or, when
    ``kept`` is given, the (namespace, id) pairs in it), and removing subgraph calls whose root checkpoint goes.

    Runtime complexity: O(checkpoints of the thread).
    """
    spaces = namespaces_of(skeleton)
    keeps: dict[str, set[str]] = {}
    for namespace, rows in spaces.items():
        if kept is None:
            keeps[namespace] = {row.checkpoint_id for row in rows[-keep_last:]}
        else:
            keeps[namespace] = {row.checkpoint_id for row in rows if (namespace, row.checkpoint_id) in kept}
    roots = spaces.get(ROOT, [])
    newest_root = roots[-1].checkpoint_id if roots else None
    kept_roots = keeps.get(ROOT, set())
    planned: dict[str, list[str]] = {}
    for namespace, rows in spaces.items():
        if _call_removed(namespace, rows, newest_root, kept_roots):
            planned[namespace] = [row.checkpoint_id for row in rows]
            continue
        removed = [row.checkpoint_id for row in rows if row.checkpoint_id not in keeps[namespace]]
        if removed:
            planned[namespace] = removed
    return planned


def _call_removed(namespace: str, rows: Sequence[Skeleton], newest_root: str | None, kept_roots: set[str]) -> bool:
    """Whether a subgraph call's namespace goes with its root checkpoint (removed now or by an earlier prune)."""
    if ":" not in namespace or newest_root is None:
        return False
    root = rows[-1].root
    return root is not None and root not in kept_roots and root <= newest_root
