"""Announcing dropped threads: the queue between the store and the ``on_drop`` hook.

The store queues each thread it evicts or expires, with a complete export of
what it held, while it holds its lock. Whoever called the operation delivers
the queue after the lock is released, so the hook may take its time and may
use the store. Deliveries take turns: one at a time, in the order the threads
were dropped; a caller whose operation dropped threads delivers them, or
leaves them to the delivery under way (so a slow hook slows the callers that
drop threads, never the others, and the queue cannot outgrow what they drop).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from contextvars import ContextVar

from .export import ThreadExport
from .tombstones import DroppedThread

__all__ = ["Announcements", "DropHook", "delivering"]

logger = logging.getLogger(__name__)

DropHook = Callable[[DroppedThread, ThreadExport], object]
"""Called with why and when a thread was evicted or expired, and everything it held."""

delivering: ContextVar[bool] = ContextVar("delivering", default=False)
"""True inside a delivery: an operation the hook itself calls leaves its drops to the delivery under way."""


class Announcements:
    """Dropped threads waiting for the hook, and the turn of whoever delivers them.

    Invariant: only filled when ``hook`` is set; emptied in order.

    Attributes:
        hook: The ``on_drop`` callable, or None (then nothing is queued).
        queue: ``(DroppedThread, ThreadExport)`` pairs in drop order.
        errors: Exceptions the hook raised (logged, never propagated).
        turn: Held by the one delivery under way.
    """

    __slots__ = ("errors", "hook", "queue", "turn")

    def __init__(self, hook: DropHook | None) -> None:
        if hook is not None and not callable(hook):
            raise ValueError(f"on_drop must be callable, got {type(hook).__name__}")
        self.hook = hook
        self.queue: deque[tuple[DroppedThread, ThreadExport]] = deque()
        self.errors = 0
        self.turn = threading.Lock()

    def deliver(
        self, call: Callable[[DroppedThread, ThreadExport], object] | None = None, *, wait: bool = True
    ) -> None:
        """Hand every queued drop to the hook (or to ``call``), one at a time, in drop order.

        Waits for a delivery under way in another thread to finish first, unless
        ``wait`` is false: then that delivery announces these too (a delivery
        looks at the queue again after releasing its turn). Inside a
        delivery (the hook used the store and dropped more), returns at once: the
        delivery under way announces those too.

        Runtime complexity: the hook's, per thread announced.
        """
        if delivering.get():
            return
        call = call or self.hook
        # Whoever held the turn looks again once it is released: a drop queued meanwhile by a
        # caller that did not wait for the turn is never left behind.
        while self.queue:
            if not self.turn.acquire(blocking=wait):
                return
            token = delivering.set(True)
            try:
                while self.queue:
                    record, export = self.queue.popleft()
                    try:
                        call(record, export)  # type: ignore[misc]
                    except Exception:
                        self.failed(record)
            finally:
                delivering.reset(token)
                self.turn.release()

    def failed(self, record: DroppedThread) -> None:
        """Log and count a hook's exception. Runtime complexity: O(1)."""
        logger.exception("on_drop hook failed for thread %r", record.thread_id)
        self.errors += 1
