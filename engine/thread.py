"""One thread: its namespaces, its totals, and when it was last used."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import TypeVar

from engine.namespace import Namespace
from engine.records import CheckpointRecord
from engine.usage import Usage

T = TypeVar("T")


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

    def change(self, name: str, mutate: Callable[[Namespace, Usage], T], delta: Usage) -> T:
        """Apply ``mutate(namespace, change)`` to namespace ``name`` (created if absent).

        ``mutate`` records what it changes in ``change``; a namespace created or
        left empty (and so dropped) is recorded too. The change is added to the
        thread's totals and to ``delta``, which the caller applies to the store's.
        Returns what ``mutate`` returned.

        Runtime complexity: O(1) plus the cost of ``mutate``.
        """
        space = self.namespaces.get(name)
        change = Usage()
        if space is None:
            space = self.namespaces[name] = Namespace()
            change.namespaces = 1
        result = mutate(space, change)
        if space.is_empty():
            del self.namespaces[name]
            change.namespaces -= 1
        self.usage.add(change)
        delta.add(change)
        return result

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
        """Add everything ``other`` holds, its records winning on equal keys.

        Records are immutable, so they are shared, not copied.

        Runtime complexity: O(size of both threads).
        """
        delta = Usage()
        for name, space in other.namespaces.items():
            self.change(name, lambda target, change, source=space: target.absorb(source, change), delta)
        self.runs = Counter(
            record.run_id
            for space in self.namespaces.values()
            for record in space.checkpoints.values()
            if record.run_id is not None
        )
