"""Write-back's ``persist="latest"``: a flush writes, per thread, each namespace's newest checkpoint and what it
needs, not every intermediate one (issue 34, item 4; opt-in: ``WriteBack(persist="latest")``).

A LangGraph turn saves a checkpoint after every step (an agent, a tool and a final node: four or more a turn),
and write-back holds them until a flush. What a later read, a resume or an interrupt needs of them is the newest
checkpoint of each namespace, with its pending writes (an interrupt's, a resume's ``Command``, the writes of the
tasks that ran from it). When a flush claims a thread's unflushed writes (``DirtyLedger.claim``), ``select``
keeps those, and drops from the ledger, unwritten:

* every checkpoint of a namespace older than the newest one among the claimed writes;
* the pending writes of the checkpoints it drops.

What it keeps stays readable by the plain durable saver: a kept checkpoint whose parent was dropped (by this
claim or an earlier one) is written with the nearest ancestor that was not dropped as its parent (written, or
already durable), never a parent that is not there (retention leaves such a checkpoint with no parent; keeping
the nearest ancestor keeps the chain, and keeps the late flush's check of the parent it continues,
``flushing._parent_to_check``). It is written whole: its ``new_versions`` are every channel of its versions, so a
durable saver that stores values by version (``PostgresSaver``) stores every value it references, those of
unchanged channels whose values only dropped ancestors held included.

The hot tier keeps every checkpoint while the thread is in memory, so a fork (time travel, ``update_state``, a
"regenerate") may continue a checkpoint an earlier flush dropped. The ledger remembers, per thread, each
checkpoint a claim dropped and its parent (``skipped``), so such a fork is rejoined at its flush like a checkpoint
whose parent this claim dropped, and the pending writes that come for a dropped checkpoint are dropped too (it
is never written: they would be rows no checkpoint holds). The ledger forgets a thread's record when the thread
is deleted or leaves the hot tier (no fork from a dropped checkpoint can come from memory after that), and keeps
at most ``writeback.SKIPPED_BOUND`` entries a thread, the oldest forgotten: a fork from a checkpoint forgotten
that way is refused at its flush, as a fork from a parent another process deleted is.

Kept whole, never thinned:

* a thread whose claimed checkpoints use a ``DeltaChannel`` (a value rebuilt from its ancestors' writes: they
  are needed);
* a checkpoint whose pending writes an earlier flush already wrote before its own put came (LangGraph's sync
  engine may send them first): dropping it would leave write rows no checkpoint holds. ``select`` returns such
  checkpoints as ``pins``; the ledger hands them back at the next claim.

What it gives up: time travel to the checkpoints it dropped, and ``get_state_history`` of a thread read back
from the durable tier (after eviction, or in another process) shows only the checkpoints it wrote. The hot tier
keeps every checkpoint while the thread is in memory.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from types import MappingProxyType

from .writeback import DirtyCheckpoint, DirtyItem, Selection

__all__ = ["select"]

_NOTHING: Mapping[tuple[str, str], str | None] = MappingProxyType({})


def select(
    items: Sequence[DirtyItem],
    pinned: Collection[tuple[str, str]] = (),
    skipped: Mapping[tuple[str, str], str | None] = _NOTHING,
) -> Selection | None:
    """The writes of ``items`` (a thread's claimed unflushed writes, oldest first) a ``persist="latest"`` flush
    writes, or None to write them all unchanged (nothing to drop or rejoin). ``skipped`` maps each checkpoint
    earlier claims dropped, ``(namespace, checkpoint_id)``, to its parent id.

    Runtime complexity: O(items + dropped ancestors walked + channels of the checkpoints rejoined).
    """
    checkpoints = [item for item in items if isinstance(item, DirtyCheckpoint)]
    present = {(item.namespace, item.checkpoint_id) for item in checkpoints}
    pins = {
        (item.namespace, item.checkpoint_id)
        for item in items
        if not isinstance(item, DirtyCheckpoint)
        and (item.namespace, item.checkpoint_id) not in present
        and (item.namespace, item.checkpoint_id) not in skipped
    }
    if any(item.record.delta_channels for item in checkpoints):
        return Selection([(index, item) for index, item in enumerate(items)], pins, {}) if pins else None
    newest: dict[str, str] = {}
    for item in checkpoints:
        newest[item.namespace] = max(newest.get(item.namespace, ""), item.checkpoint_id)
    dropped = {
        (item.namespace, item.checkpoint_id): item.record.parent_id
        for item in checkpoints
        if item.checkpoint_id != newest[item.namespace] and (item.namespace, item.checkpoint_id) not in pinned
    }
    kept: list[tuple[int, DirtyItem]] = []
    changed = False
    for index, claimed in enumerate(items):
        key = (claimed.namespace, claimed.checkpoint_id)
        if isinstance(claimed, DirtyCheckpoint):
            if key in dropped:
                continue
            rejoined = _rejoined(claimed, dropped, skipped)
            changed = changed or rejoined is not claimed
            kept.append((index, rejoined))
        elif key in dropped or (key in skipped and key not in present):
            continue  # the pending writes of a dropped checkpoint: it is never written
        else:
            kept.append((index, claimed))
    if not changed and not pins and len(kept) == len(items):
        return None
    resolved: dict[tuple[str, str], str | None] = {}
    for key, parent in sorted(dropped.items()):  # parents first (smaller ids): each walk is one hop
        resolved[key] = _nearest(key[0], parent, resolved, dropped, skipped)
    return Selection(kept, pins, resolved)


def _rejoined(
    item: DirtyCheckpoint, dropped: Mapping[tuple[str, str], str | None], skipped: Mapping[tuple[str, str], str | None]
) -> DirtyCheckpoint:
    """A kept checkpoint whose parent was dropped, with the nearest ancestor not dropped as its parent, written
    whole (every channel of its versions among its ``new_versions``); the item itself when its parent was not
    dropped. Runtime complexity: O(dropped ancestors walked + channels)."""
    parent = _nearest(item.namespace, item.record.parent_id, dropped, skipped)
    if parent == item.record.parent_id:
        return item
    return item._replace(record=item.record._replace(parent_id=parent), new_versions=item.record.channel_versions)


def _nearest(namespace: str, parent: str | None, *gone: Mapping[tuple[str, str], str | None]) -> str | None:
    """``parent`` or, if dropped (each of ``gone`` maps dropped checkpoints to their parents, the first that
    holds one answering), its nearest ancestor that was not. Runtime complexity: O(dropped ancestors walked):
    the ledger's ``skipped`` and ``select``'s ``resolved`` map to resolved ancestors, so a walk is one hop but
    where a checkpoint kept then was dropped since."""
    for _ in range(sum(map(len, gone)) + 1):  # ids fall along a chain: a bound against a malformed one
        if parent is None:
            break
        key = (namespace, parent)
        hop = next((hops for hops in gone if key in hops), None)
        if hop is None:
            break
        parent = hop[key]
    return parent
