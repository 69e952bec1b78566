"""Counts and bytes of what a namespace, a thread or the store holds, or of what a removal frees."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Totals"]


@dataclass(frozen=True, slots=True)
class Totals:
    """An immutable set of counters: recounts for ``check()``, and what a planned removal frees.

    Stored threads and the store keep the same counters as plain integer
    attributes, updated inline by each write transaction and through
    ``State.apply`` / ``State.release`` elsewhere; a ``Totals`` is never mutated.

    Attributes:
        nbytes: Counted payload bytes.
        checkpoints: Checkpoints.
        writes: Pending writes.
        blobs: Channel values.
        namespaces: Namespaces.
        variable_overhead: The part of the heap estimate that varies with the
            objects' contents (identifier text, version slots, value containers;
            ``engine.memory``); the fixed part per object follows from the counts.
    """

    nbytes: int = 0
    checkpoints: int = 0
    writes: int = 0
    blobs: int = 0
    namespaces: int = 0
    variable_overhead: int = 0

    def plus(self, other: Totals) -> Totals:
        """The sum of both. Runtime complexity: O(1)."""
        return Totals(
            self.nbytes + other.nbytes,
            self.checkpoints + other.checkpoints,
            self.writes + other.writes,
            self.blobs + other.blobs,
            self.namespaces + other.namespaces,
            self.variable_overhead + other.variable_overhead,
        )
