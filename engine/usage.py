"""Counters of what a namespace, a thread or the whole store holds."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class Usage:
    """Counts and bytes of a thread or of the whole store, kept incrementally.

    An operation collects what it changed in a delta ``Usage`` and adds it to
    the thread's and the store's totals, so totals never need a recount.
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

    def add(self, other: Usage) -> None:
        """Add ``other`` in place. Runtime complexity: O(1)."""
        self.nbytes += other.nbytes
        self.checkpoints += other.checkpoints
        self.writes += other.writes
        self.blobs += other.blobs
        self.namespaces += other.namespaces

    def subtract(self, other: Usage) -> None:
        """Subtract ``other`` in place. Runtime complexity: O(1)."""
        self.nbytes -= other.nbytes
        self.checkpoints -= other.checkpoints
        self.writes -= other.writes
        self.blobs -= other.blobs
        self.namespaces -= other.namespaces

    def copy(self) -> Usage:
        return Usage(self.nbytes, self.checkpoints, self.writes, self.blobs, self.namespaces)
