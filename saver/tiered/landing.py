"""The checkpoint ids this process is putting into the durable tier: what retention's discovery must wait for.

Retention finds due threads by windows of checkpoint ids (``retention.sweep``).
A row this process puts can land with an id below a window a pass already read:
a put whose id was made before the pass (LangGraph makes the id when it makes
the checkpoint; ``durability="async"`` and ``"exit"`` put it later), a
write-back flush, a clock stepped back. So every durable ``put`` of the tiered
saver (write-through, a flush's replay, a copy or a rewrite through the API, a
conditional put) is flown here (``Landings.flight``), and each pass ``take``s:

* ``lowest``: the smallest id a put began with since the last pass: a window
  whose start is above it rewinds to it, so the row is read once landed;
* ``flying``: the smallest id of a put under way: no window ends above it
  before it lands (a window read before the row lands would pass it);
* ``highest``: the greatest id a put began with since the last pass: the
  ``keep_last`` window reaches it even when the wall clock is behind it.

Write-back's unflushed puts are held back by the dirty ledger itself
(``writeback.DirtyLedger.lowest_checkpoint_id``).
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NamedTuple

__all__ = ["Landed", "Landings"]


class Landed(NamedTuple):
    """What ``Landings.take`` answers.

    Attributes:
        lowest: The smallest id a put began with since the last ``take`` (None: no put began).
        highest: The greatest id a put began with since the last ``take`` (None: no put began).
        flying: The smallest id of a put under way now (None: none is).
    """

    lowest: str | None
    highest: str | None
    flying: str | None


class Landings:
    """The ids of the durable puts under way in this process, and the range of those begun since the last pass.

    Invariant: ``flying`` counts each id's puts under way (no zero count); ``heap`` holds every id of
    ``flying`` (and stale ids, skipped when read, rebuilt once they outnumber the live ones); ``lowest`` and
    ``highest`` bound the ids begun since the last ``take``. Everything is guarded by ``lock``, never held
    across a durable call.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.flying: dict[str, int] = {}
        self.heap: list[str] = []
        self.lowest: str | None = None
        self.highest: str | None = None

    @contextmanager
    def flight(self, checkpoint_id: str) -> Iterator[None]:
        """Count a durable put of ``checkpoint_id`` under way for the block (which it runs, whatever it raises).

        Runtime complexity: O(log puts under way), amortized.
        """
        with self.lock:
            count = self.flying.get(checkpoint_id, 0)
            self.flying[checkpoint_id] = count + 1
            if not count:
                heapq.heappush(self.heap, checkpoint_id)
            if self.lowest is None or checkpoint_id < self.lowest:
                self.lowest = checkpoint_id
            if self.highest is None or checkpoint_id > self.highest:
                self.highest = checkpoint_id
        try:
            yield
        finally:
            with self.lock:
                left = self.flying[checkpoint_id] - 1
                if left:
                    self.flying[checkpoint_id] = left
                else:
                    del self.flying[checkpoint_id]
                    if len(self.heap) > 2 * len(self.flying) + 64:  # stale ids under a long put: drop them
                        self.heap = list(self.flying)
                        heapq.heapify(self.heap)

    def take(self) -> Landed:
        """The range of ids begun since the last ``take`` (forgotten now), and the lowest under way.

        Runtime complexity: amortized O(log puts under way).
        """
        with self.lock:
            heap, flying = self.heap, self.flying
            while heap and heap[0] not in flying:
                heapq.heappop(heap)
            landed = Landed(self.lowest, self.highest, heap[0] if heap else None)
            self.lowest = self.highest = None
            return landed

    def check(self) -> None:
        """Assert the invariant (for tests). Runtime complexity: O(puts under way)."""
        with self.lock:
            assert all(count > 0 for count in self.flying.values()), self.flying
            assert set(self.flying) <= set(self.heap), (self.flying, self.heap)
