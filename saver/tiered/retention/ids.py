"""The time inside a LangGraph checkpoint id, and the smallest id of a time.

LangGraph makes checkpoint ids with ``uuid6``: the 60-bit time of the put (in
100 ns since 1582-10-15) comes first, so ids sort as their times do, as strings
too. A thread whose newest checkpoint id sorts below ``checkpoint_id_at(t)`` has
had no put since ``t``: the durable tier answers "which threads are idle" by a
range over an index of ids, without reading a payload.
"""

from __future__ import annotations

import uuid

__all__ = ["UUID_EPOCH_OFFSET", "checkpoint_id_at", "id_after", "time_of"]

UUID_EPOCH_OFFSET = 0x01B21DD213814000
"""100 ns intervals between the UUID epoch (1582-10-15) and the Unix epoch."""


def checkpoint_id_at(seconds: float) -> str:
    """The smallest uuid6 checkpoint id of the Unix time ``seconds``: every id LangGraph made at or after that
    time sorts at or above it. Runtime complexity: O(1)."""
    timestamp = max(0, int(seconds * 10_000_000) + UUID_EPOCH_OFFSET)
    value = ((timestamp >> 12) & 0xFFFFFFFFFFFF) << 80
    value |= (timestamp & 0x0FFF | 0x6000) << 64  # the time's low bits and the version, 6
    value |= 0x8000 << 48  # the RFC 4122 variant, a clock sequence and a node of zeros
    return str(uuid.UUID(int=value))


def id_after(checkpoint_id: str) -> str | None:
    """The smallest uuid6 checkpoint id of the 100 ns tick after ``checkpoint_id``'s: it sorts above that id and
    below every id of a later time (None for an id that is not a uuid6 one). Runtime complexity: O(1)."""
    timestamp = _timestamp_of(checkpoint_id)
    if timestamp is None:
        return None
    timestamp += 1
    value = ((timestamp >> 12) & 0xFFFFFFFFFFFF) << 80 | (timestamp & 0x0FFF | 0x6000) << 64 | 0x8000 << 48
    return str(uuid.UUID(int=value))


def time_of(checkpoint_id: str) -> float | None:
    """The Unix time inside a uuid6 checkpoint id, or None for an id that is not one. Runtime complexity: O(1)."""
    timestamp = _timestamp_of(checkpoint_id)
    return None if timestamp is None else (timestamp - UUID_EPOCH_OFFSET) / 10_000_000


def _timestamp_of(checkpoint_id: str) -> int | None:
    """The 60-bit time of a uuid6 id, in 100 ns since 1582-10-15 (None for another id)."""
    try:
        found = uuid.UUID(checkpoint_id)
    except (ValueError, AttributeError, TypeError):
        return None
    if found.version != 6:
        return None
    value = found.int
    return (((value >> 80) & 0xFFFFFFFFFFFF) << 12) | ((value >> 64) & 0x0FFF)
