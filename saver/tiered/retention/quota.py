"""``RetentionPolicy.max_thread_bytes``: a thread larger than the bound is pruned, oldest checkpoints first, until
it fits, by ``keep_last``'s own rule and safety.

The durable tier's bytes are read checkpoint by checkpoint (``backends.sql.sizes_plan``: one statement per table,
outside a transaction); the count to keep is the largest ``keep_last`` (at most the policy's own) whose kept
checkpoints fit (``keep_for_bytes``: the plan of ``plan.removals``, searched by halves). The prune itself is
``threads.remove_from_thread`` with that count, so what it keeps is what ``keep_last`` keeps: each namespace's
newest checkpoints with their pending writes, the ancestors a ``DeltaChannel`` rebuilds from, the subgraph calls
of kept root checkpoints; never fewer than one a namespace. Since those ancestors (planned by the engine, not
here) and rows landing meanwhile can leave the thread over, the thread is read and pruned again, up to
``MAX_ROUNDS`` times; a thread still over the bound then (its newest checkpoints alone pass it) is reported.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..backends import run_async, run_sync
from ..backends.base import Kind, Plan, Removed, Skeleton
from ..backends.sql import CheckpointSizes, SqlDialect, sizes_plan
from ..state import Tiers
from .plan import namespaces_of, removals
from .threads import remove_from_thread

__all__ = ["MAX_ROUNDS", "fit_thread", "keep_for_bytes"]

MAX_ROUNDS = 4
"""Reads and prunes of one thread a pass, at most (each keeps fewer checkpoints than the one before)."""


def keep_for_bytes(skeleton: Sequence[Skeleton], sizes: CheckpointSizes, max_bytes: int, most: int) -> tuple[int, bool]:
    """The largest count in ``[1, most]`` whose ``keep_last`` prune leaves at most ``max_bytes``, and whether one
    does (if none does: 1, False).

    Runtime complexity: O(c x log most) for the thread's c checkpoints (their channels, on PostgreSQL).
    """
    everything = {(row.namespace, row.checkpoint_id) for row in skeleton}

    def fits(count: int) -> bool:
        gone = {
            (namespace, checkpoint_id) for namespace, ids in removals(skeleton, count).items() for checkpoint_id in ids
        }
        return sizes.kept_bytes(everything - gone) <= max_bytes

    if not fits(1):
        return 1, False
    low, high = 1, max(1, most)
    while low < high:  # fits(low) holds; more kept never weighs less
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low, True


def fit_thread(
    tiers: Tiers,
    kind: Kind,
    sql: SqlDialect,
    thread_id: str,
    *,
    max_bytes: int,
    keep_last: int | None,
    in_use_seconds: float,
) -> tuple[Removed | None, bool]:
    """Prune a thread to ``keep_last`` (if set) and until its durable bytes fit ``max_bytes``, in both tiers.

    Returns what went (None: in use, nothing done) and whether the thread is still over ``max_bytes``.

    Raises:
        Exception: The durable tier's failure; what earlier rounds removed stays removed.

    Runtime complexity: per round, one read of the thread's ids and sizes (2 to 4 statements) and, when something
    goes, one removal transaction (``remove_from_thread``); at most ``MAX_ROUNDS`` rounds.
    """

    def read() -> Plan[tuple[list[Skeleton], CheckpointSizes]]:
        skeleton = yield from sql.skeleton(thread_id)
        return skeleton, (yield from sizes_plan(sql, thread_id))

    checkpoints = writes = nbytes = 0
    planned: dict[str, list[str]] = {}
    over = False
    for _ in range(MAX_ROUNDS):
        skeleton, sizes = tiers.durable.on_tables(
            lambda saver: run_sync(saver, kind, read(), transaction=False),
            lambda saver: run_async(saver, kind, read(), transaction=False),
        )
        longest = max((len(rows) for rows in namespaces_of(skeleton).values()), default=0)
        most = longest if keep_last is None else min(longest, keep_last)
        over = sizes.kept_bytes(sizes.own) > max_bytes
        if not over and most == longest:
            break  # fits, and no namespace past keep_last
        count, _fits = keep_for_bytes(skeleton, sizes, max_bytes, most) if over else (most, True)
        removed = remove_from_thread(
            tiers, kind, sql, thread_id, keep_last=count, idle_before=None, in_use_seconds=in_use_seconds
        )
        if removed is None:
            return (None, False) if not checkpoints else (Removed(checkpoints, writes, nbytes, False, planned), over)
        checkpoints, writes, nbytes = (
            checkpoints + removed.checkpoints,
            writes + removed.writes,
            nbytes + removed.nbytes,
        )
        for namespace, ids in removed.planned.items():
            planned.setdefault(namespace, []).extend(ids)
        if not removed.checkpoints:
            break  # what is left is what the safety rule keeps at this count (or another process pruned it)
    else:
        over = _still_over(tiers, kind, sql, thread_id, max_bytes)
    return Removed(checkpoints, writes, nbytes, False, planned), over


def _still_over(tiers: Tiers, kind: Kind, sql: SqlDialect, thread_id: str, max_bytes: int) -> bool:
    """Whether the thread's durable bytes pass ``max_bytes`` now (one read of its sizes)."""
    sizes: CheckpointSizes = tiers.durable.on_tables(
        lambda saver: run_sync(saver, kind, sizes_plan(sql, thread_id), transaction=False),
        lambda saver: run_async(saver, kind, sizes_plan(sql, thread_id), transaction=False),
    )
    return sizes.kept_bytes(sizes.own) > max_bytes
