"""Ancestry: walks along parent links, and removals that keep what surviving checkpoints need.

Some channel values are not stored at every checkpoint: they are rebuilt from
the nearest ancestor that stores a value (the *seed*) plus the writes recorded
at every ancestor on the way (LangGraph's ``DeltaChannel``). So:

* ``channel_history`` performs that walk for a reader;
* ``required_ancestors`` tells a removal which ancestors a surviving
  checkpoint still needs, so that ``prune``, ``delete_runs`` and rolling
  history never cut such a chain;
* ``plan_removal`` says what removing checkpoints takes away, without changing
  anything (``State.remove_checkpoints`` carries the plan out).

Everything here is pure: it reads a namespace and returns plain values.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Sequence

from . import memory
from .namespace import Namespace
from .plans import Removal
from .records import BlobKey, ChannelHistory, CheckpointRecord, Payload, WriteRecord, payload_size
from .totals import Totals

__all__ = [
    "ancestors",
    "channel_history",
    "plan_removal",
    "required_ancestors",
    "seed_at",
    "unseeded_delta_channels",
]

# --- walks -------------------------------------------------------------------------------------------------


def ancestors(space: Namespace, record: CheckpointRecord) -> Iterator[CheckpointRecord]:
    """Stored ancestors of ``record``, nearest first; stops at a missing parent or a loop.

    Runtime complexity: O(1) per ancestor yielded.
    """
    seen = {record.checkpoint_id}
    parent_id = record.parent_id
    records = space.records
    while parent_id is not None and parent_id not in seen:
        parent = records.get(parent_id)
        if parent is None:
            return
        seen.add(parent_id)
        yield parent
        parent_id = parent.parent_id


def seed_at(space: Namespace, record: CheckpointRecord, channel: str) -> Payload | None:
    """The non-empty value ``record`` stores for ``channel``, if any. Runtime complexity: O(channels)."""
    version = record.version_of(channel)
    if version is None:
        return None
    return space.blobs.get((channel, version))


def channel_history(
    space: Namespace, target: CheckpointRecord | None, channels: Sequence[str]
) -> dict[str, ChannelHistory]:
    """For each channel, the writes and seed along ``target``'s ancestor chain.

    Each channel's walk ends at the nearest ancestor storing a non-empty value
    for it; that ancestor's own writes are included (they lead to its child).
    Writes stored at ``target`` itself are excluded.

    Runtime complexity: O(a * (r * C + w log w)) for a ancestors visited, r
    channels asked for, C channels per checkpoint (each version lookup is a C
    ``tuple.index``) and w writes per ancestor (all of them ordered).
    """
    collected: dict[str, list[WriteRecord]] = {channel: [] for channel in channels}
    seeds: dict[str, Payload] = {}
    remaining = set(channels)
    if target is not None:
        for ancestor in ancestors(space, target):
            if not remaining:
                break
            found = {channel: seed for channel in remaining if (seed := seed_at(space, ancestor, channel)) is not None}
            for write in reversed(space.ordered_writes(ancestor.checkpoint_id)):
                if write.channel in remaining:
                    collected[write.channel].append(write)
            seeds.update(found)
            remaining.difference_update(found)
    return {channel: ChannelHistory(writes=collected[channel][::-1], seed=seeds.get(channel)) for channel in channels}


def unseeded_delta_channels(space: Namespace, record: CheckpointRecord) -> set[str]:
    """Delta channels of ``record`` that it does not store a value for.

    Runtime complexity: O(d * C) for its d delta channels and C channels (version lookups).
    """
    return {
        channel
        for channel in record.delta_channels
        if record.version_of(channel) is not None and seed_at(space, record, channel) is None
    }


def required_ancestors(space: Namespace, keep: Iterable[CheckpointRecord]) -> set[str]:
    """Ids of ancestors that the kept checkpoints need to rebuild their delta channels.

    A needed ancestor is needed whole (its writes, and its own needs), so the
    result is closed: every checkpoint in ``keep`` or in the result can still
    be rebuilt once everything else is removed.

    Runtime complexity: O(n * d * C) for n checkpoints, d delta channels and C
    channels per checkpoint: a channel is carried through a checkpoint at most
    once, and each step looks up a version (O(C), in C).
    """
    carried: dict[str, set[str]] = {}
    required: set[str] = set()
    work = [(record, unseeded_delta_channels(space, record)) for record in keep]
    while work:
        record, channels = work.pop()
        for ancestor in ancestors(space, record):
            already = carried.setdefault(ancestor.checkpoint_id, set())
            channels = channels - already
            if not channels:
                break
            already |= channels
            if ancestor.checkpoint_id not in required:
                required.add(ancestor.checkpoint_id)
                own = unseeded_delta_channels(space, ancestor)
                if own:
                    work.append((ancestor, own))
            channels = {c for c in channels if seed_at(space, ancestor, c) is None}
            if not channels:
                break
    return required


def plan_removal(space: Namespace, checkpoint_ids: Iterable[str], keep_blobs: Collection[BlobKey] = ()) -> Removal:
    """What removing these checkpoints, with their writes, would take away from ``space``; changes nothing.

    Blobs that no surviving checkpoint references go too, except ``keep_blobs``.
    Ids not stored are ignored. ``State.remove_checkpoints`` carries it out.
    Runtime complexity: O(n * channels) for a namespace of n checkpoints (the blob sweep).
    """
    records = space.records
    ids = [checkpoint_id for checkpoint_id in dict.fromkeys(checkpoint_ids) if checkpoint_id in records]
    if not ids:
        return Removal([], [], Totals())
    nbytes = writes = overhead = 0
    for checkpoint_id in ids:
        record = records[checkpoint_id]
        nbytes += record.nbytes
        overhead += memory.record_overhead(record)
        stored = space.writes.get(checkpoint_id)
        if stored:
            overhead += memory.write_set_overhead(stored)
            for write in stored.values():
                writes += 1
                nbytes += write.nbytes
    gone = set(ids)
    referenced = {key for cid, record in records.items() if cid not in gone for key in record.blob_keys()}
    blob_keys = [key for key in space.blobs if key not in referenced and key not in keep_blobs]
    if blob_keys:
        removed = set(blob_keys)
        kept = {key: blob for key, blob in space.blobs.items() if key not in removed}
        overhead += memory.blobs_overhead(space.blobs) - memory.blobs_overhead(kept)
        nbytes += sum(payload_size(space.blobs[key]) for key in blob_keys)
    return Removal(ids, blob_keys, Totals(nbytes, len(ids), writes, len(blob_keys), variable_overhead=overhead))
