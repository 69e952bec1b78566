"""Counts and bytes of what a namespace, a thread or the store holds, or of what a removal frees."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Totals:
    """An immutable set of counters: recounts for ``check()``, and what a planned removal frees.

    Stored threads and the store keep the same counters as plain integer
    attributes, updated inline by each transaction; a ``Totals`` is never
    mutated.
    """

    nbytes: int = 0
    checkpoints: int = 0
    writes: int = 0
    blobs: int = 0
    namespaces: int = 0
    extra: int = 0  # the varying part of the heap estimate (engine.memory)

    def plus(self, other: Totals) -> Totals:
        """The sum of both. Runtime complexity: O(1)."""
        return Totals(
            self.nbytes + other.nbytes,
            self.checkpoints + other.checkpoints,
            self.writes + other.writes,
            self.blobs + other.blobs,
            self.namespaces + other.namespaces,
            self.extra + other.extra,
        )
