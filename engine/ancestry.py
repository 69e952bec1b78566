"""Walks along parent links inside one namespace.

Some channel values are not stored at every checkpoint: they are rebuilt from
the nearest ancestor that stores a value (the *seed*) plus the writes recorded
at every ancestor on the way. Two things follow, both computed here:

* ``delta_history`` performs that walk for a reader;
* ``required_ancestors`` tells a deletion which ancestors a surviving
  checkpoint still needs, so that pruning never cuts such a chain.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from engine.namespace import Namespace
from engine.records import ChannelHistory, CheckpointRecord, Payload, WriteRecord


def ancestors(space: Namespace, record: CheckpointRecord) -> Iterator[CheckpointRecord]:
    """Stored ancestors of ``record``, nearest first; stops at a missing parent or a loop.

    Runtime complexity: O(1) per ancestor yielded.
    """
    seen = {record.checkpoint_id}
    parent_id = record.parent_id
    while parent_id is not None and parent_id not in seen:
        parent = space.checkpoints.get(parent_id)
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
    return space.blob(channel, version)


def delta_history(
    space: Namespace, target: CheckpointRecord | None, channels: Sequence[str]
) -> dict[str, ChannelHistory]:
    """For each channel, the writes and seed along ``target``'s ancestor chain.

    Each channel's walk ends at the nearest ancestor storing a non-empty value
    for it; that ancestor's own writes are included (they lead to its child).
    Writes stored at ``target`` itself are excluded.

    Runtime complexity: O(a * (c + w log w)) for a ancestors visited, c channels
    and w writes per ancestor.
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

    Runtime complexity: O(len(record.delta_channels)).
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

    Runtime complexity: O(n * d) for n checkpoints and d delta channels: a
    channel is carried through a checkpoint at most once.
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
