"""Counters of what a namespace, a thread or the whole store holds."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class Usage:
    """Counts and bytes, kept incrementally at every level of the store.

    Each level updates its ``Usage`` by the difference between a child's usage
    after and before a mutation, so totals never need a recount.
    """

    nbytes: int = 0
    checkpoints: int = 0
    writes: int = 0
    blobs: int = 0
    namespaces: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.nbytes + other.nbytes,
            self.checkpoints + other.checkpoints,
            self.writes + other.writes,
            self.blobs + other.blobs,
            self.namespaces + other.namespaces,
        )

    def __sub__(self, other: Usage) -> Usage:
        return Usage(
            self.nbytes - other.nbytes,
            self.checkpoints - other.checkpoints,
            self.writes - other.writes,
            self.blobs - other.blobs,
            self.namespaces - other.namespaces,
        )

    def copy(self) -> Usage:
        return Usage(self.nbytes, self.checkpoints, self.writes, self.blobs, self.namespaces)
