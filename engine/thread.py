"""One thread: its namespaces, its totals, and when it was last used."""

from __future__ import annotations

from .namespace import Namespace
from .totals import Totals

__all__ = ["Thread"]


class Thread:
    """Everything stored for one thread id, evicted and expired as one unit.

    The store's transactions keep the totals inline as they change the
    namespaces. Invariant (``check``): the totals and runs equal a
    recount of the namespaces, and no namespace is empty.

    Attributes:
        thread_id: The thread's id.
        namespaces: Namespace name to its contents; an emptied namespace is removed.
        nbytes: Counted bytes over all namespaces.
        checkpoints: Checkpoints over all namespaces.
        writes: Pending writes over all namespaces.
        blobs: Blobs over all namespaces.
        variable_overhead: The varying part of its heap estimate (``Totals``).
        last_used: Clock reading of the last operation that used the thread.
        created: Creation sequence number, for ``list(None)``'s thread order.
        runs: The runs that created the thread's checkpoints.
    """

    __slots__ = (
        "blobs",
        "checkpoints",
        "created",
        "last_used",
        "namespaces",
        "nbytes",
        "runs",
        "thread_id",
        "variable_overhead",
        "writes",
    )

    def __init__(self, thread_id: str, now: float, created: int) -> None:
        self.thread_id = thread_id
        self.namespaces: dict[str, Namespace] = {}
        self.nbytes = 0
        self.checkpoints = 0
        self.writes = 0
        self.blobs = 0
        self.variable_overhead = len(thread_id)
        self.last_used = now
        self.created = created
        self.runs: set[str] = set()

    @property
    def totals(self) -> Totals:
        """The kept counters, as one value (``variable_overhead`` aside: ``engine.check`` recounts it).

        Runtime complexity: O(1).
        """
        return Totals(self.nbytes, self.checkpoints, self.writes, self.blobs, len(self.namespaces))

    def newest_id(self) -> str | None:
        """The greatest checkpoint id over its namespaces. Runtime complexity: O(namespaces)."""
        return max((space.ids[-1] for space in self.namespaces.values() if space.ids), default=None)

    def recount(self) -> Totals:
        """Totals recomputed from the namespaces. Runtime complexity: O(size)."""
        total = Totals()
        for space in self.namespaces.values():
            total = total.plus(space.recount())
        return total

    def recount_runs(self) -> set[str]:
        """The runs of the records, recomputed. Runtime complexity: O(checkpoints)."""
        return {
            record.run_id
            for space in self.namespaces.values()
            for record in space.records.values()
            if record.run_id is not None
        }

    def check(self) -> None:
        """Assert the invariant; raise ``AssertionError`` naming what is broken. Runtime complexity: O(size)."""
        for name, space in self.namespaces.items():
            try:
                space.check()
            except AssertionError as error:
                raise AssertionError(f"namespace {name!r}: {error}") from None
        recounted = self.recount()
        if self.totals != recounted:
            raise AssertionError(f"totals drift: kept {self.totals}, recounted {recounted}")
        if self.runs != self.recount_runs():
            raise AssertionError("runs drift")
