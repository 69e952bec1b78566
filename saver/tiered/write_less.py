"""Write-back's ``persist="latest"``: a flush writes, per thread, each namespace's newest checkpoint and what it
needs, not every intermediate one (issue 34, item 4; opt-in: ``WriteBack(persist="latest")``).

A LangGraph turn saves a checkpoint after every step (an agent, a tool and a final node: four or more a turn),
and write-back holds them until a flush. What a later read, a resume or an interrupt needs of them is the newest
checkpoint of each namespace, with its pending writes (an interrupt's, a resume's ``Command``, the writes of the
tasks that ran from it). When a flush claims a thread's unflushed writes (``DirtyLedger.claim``), ``select``
keeps those, and drops from the ledger, unwritten:

* every checkpoint of a namespace older than the newest one among the claimed writes;
* the pending writes of the checkpoints it drops.

What it keeps stays readable by the plain durable saver: a kept checkpoint whose parent was dropped is written
with the nearest ancestor that is written (or already durable) as its parent, never a parent that is not there
(retention leaves such a checkpoint with no parent; keeping the nearest ancestor keeps the chain, and keeps the
late flush's check of the parent it continues, ``flushing._parent_to_check``). Its ``new_versions`` take in the
channels the dropped ancestors wrote, so a durable saver that stores values by version (``PostgresSaver``)
stores every value the kept checkpoint references.

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

from collections.abc import Collection, Sequence

from .writeback import DirtyCheckpoint, DirtyItem, Selection

__all__ = ["select"]


def select(items: Sequence[DirtyItem], pinned: Collection[tuple[str, str]] = ()) -> Selection | None:
    """The writes of ``items`` (a thread's claimed unflushed writes, oldest first) a ``persist="latest"`` flush
    writes, or None to write them all (nothing to drop).

    Runtime complexity: O(items + channels of the kept checkpoints' dropped ancestors).
    """
    checkpoints = [item for item in items if isinstance(item, DirtyCheckpoint)]
    present = {(item.namespace, item.checkpoint_id) for item in checkpoints}
    pins = {
        (item.namespace, item.checkpoint_id)
        for item in items
        if not isinstance(item, DirtyCheckpoint) and (item.namespace, item.checkpoint_id) not in present
    }
    if len(checkpoints) < 2 or any(item.record.delta_channels for item in checkpoints):
        return Selection([(index, item) for index, item in enumerate(items)], pins) if pins else None
    newest: dict[str, str] = {}
    for item in checkpoints:
        newest[item.namespace] = max(newest.get(item.namespace, ""), item.checkpoint_id)
    dropped = {
        (item.namespace, item.checkpoint_id): item
        for item in checkpoints
        if item.checkpoint_id != newest[item.namespace] and (item.namespace, item.checkpoint_id) not in pinned
    }
    if not dropped and not pins:
        return None
    kept: list[tuple[int, DirtyItem]] = []
    for index, claimed in enumerate(items):
        if (claimed.namespace, claimed.checkpoint_id) in dropped:
            continue  # a dropped checkpoint, or the pending writes of one
        kept.append((index, _rejoined(claimed, dropped) if isinstance(claimed, DirtyCheckpoint) else claimed))
    return Selection(kept, pins)


def _rejoined(item: DirtyCheckpoint, dropped: dict[tuple[str, str], DirtyCheckpoint]) -> DirtyCheckpoint:
    """A kept checkpoint whose parent was dropped, with the nearest ancestor kept as its parent, and the channels
    its dropped ancestors wrote (at its own versions) among its ``new_versions``. Runtime complexity: O(dropped
    ancestors and their channels)."""
    parent = item.record.parent_id
    channels = set(item.new_versions)
    while parent is not None and (item.namespace, parent) in dropped:
        gone = dropped[item.namespace, parent]
        channels.update(gone.new_versions)
        parent = gone.record.parent_id
    if parent == item.record.parent_id:
        return item
    versions = {}
    for channel in channels:
        version = item.record.version_of(channel)
        if version is not None:
            versions[channel] = version
    return item._replace(record=item.record._replace(parent_id=parent), new_versions=versions)
