"""One thread: its namespaces, its totals, and when it was last used."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from engine.namespace import Namespace, Removal
from engine.records import Blob, BlobKey, CheckpointRecord, WriteKey, WriteRecord
from engine.usage import Usage


class Thread:
    """Everything stored for one thread id, evicted and expired as one unit.

    Attributes:
        thread_id: The thread's id.
        namespaces: Namespace name to its contents; empty namespaces are dropped.
        usage: Totals over all namespaces, kept incrementally.
        last_used: Clock reading of the last operation that used the thread.
        created: Creation sequence number, for ``list(None)``'s thread order.
        runs: Run id to how many of the thread's checkpoints it created.
    """

    __slots__ = ("thread_id", "namespaces", "usage", "last_used", "created", "runs")

    def __init__(self, thread_id: str, *, now: float, created: int) -> None:
        self.thread_id = thread_id
        self.namespaces: dict[str, Namespace] = {}
        self.usage = Usage()
        self.last_used = now
        self.created = created
        self.runs: Counter[str] = Counter()

    def put_checkpoint(
        self, name: str, record: CheckpointRecord, new_blobs: Mapping[BlobKey, Blob], change: Usage
    ) -> CheckpointRecord | None:
        """Store a checkpoint in namespace ``name`` (created if absent); return the record it replaced.

        ``change`` is the namespace's planned change (``Namespace.plan_checkpoint``);
        a namespace created is added to it, and it is added to the thread's totals
        for the caller to add to the store's.

        Runtime complexity: O(1) plus ``Namespace.put_checkpoint``.
        """
        space = self._namespace(name, change)
        replaced = space.put_checkpoint(record, new_blobs)
        self.usage.add(change)
        return replaced

    def put_writes(
        self, name: str, checkpoint_id: str, accepted: Mapping[WriteKey, WriteRecord], change: Usage
    ) -> None:
        """Store writes planned by ``Namespace.plan_writes``; ``change`` as in ``put_checkpoint``.

        Runtime complexity: O(len(accepted)).
        """
        self._namespace(name, change).put_writes(checkpoint_id, accepted)
        self.usage.add(change)

    def remove(self, name: str, removal: Removal) -> list[CheckpointRecord]:
        """Carry out a removal planned in namespace ``name``; return the removed records.

        A namespace left empty is dropped, and counted in ``removal.freed``,
        which is subtracted from the thread's totals for the caller to subtract
        from the store's. Runtime complexity: that of ``Namespace.apply_removal``.
        """
        space = self.namespaces[name]
        removed = space.apply_removal(removal)
        if space.is_empty():
            del self.namespaces[name]
            removal.freed.namespaces += 1
        self.usage.subtract(removal.freed)
        return removed

    def _namespace(self, name: str, change: Usage) -> Namespace:
        space = self.namespaces.get(name)
        if space is None:
            space = self.namespaces[name] = Namespace()
            change.namespaces += 1
        return space

    def count_run(self, record: CheckpointRecord | None, delta: int) -> str | None:
        """Add ``delta`` to the count of ``record``'s run.

        Returns the run id when it appeared in or vanished from the thread, so
        the store can update its run index. Runtime complexity: O(1).
        """
        if record is None or record.run_id is None:
            return None
        run_id = record.run_id
        before = self.runs[run_id]
        after = before + delta
        if after:
            self.runs[run_id] = after
        else:
            del self.runs[run_id]
        return run_id if (before == 0) != (after == 0) else None

    def recount(self) -> Usage:
        """Totals recomputed from scratch, for ``check()``. Runtime complexity: O(size)."""
        total = Usage()
        for space in self.namespaces.values():
            total = total + space.recount()
        return total

    def absorb(self, other: Thread) -> None:
        """Add everything ``other`` holds, its records winning on equal keys, and recount.

        Records are immutable, so they are shared, not copied.

        Runtime complexity: O(size of both threads).
        """
        for name, space in other.namespaces.items():
            self._namespace(name, Usage()).absorb(space)
        self.usage = self.recount()
        self.runs = Counter(
            record.run_id
            for space in self.namespaces.values()
            for record in space.checkpoints.values()
            if record.run_id is not None
        )
