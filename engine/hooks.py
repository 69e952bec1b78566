"""Announcing dropped threads: the queue between the store and the ``on_drop`` hook.

The store queues each thread it evicts or expires, with a complete export of
what it held, while it holds its lock. Whoever called the operation delivers
the queue after the lock is released, so the hook may take its time and may
use the store. Deliveries take turns: one at a time, in the order the threads
were dropped; a caller whose operation dropped threads delivers them, or
leaves them to the delivery under way. The queue is bounded: past
``QUEUE_BOUND`` drops, a caller that would leave its drops to the delivery
under way waits for room instead (so a slow hook slows the callers that drop
threads, never the others, and the queue cannot outgrow the bound for long).
Until it is delivered, a queued export holds the memory of the thread it
exports: ``queued_bytes`` counts it.

Every drop is delivered or counted: an exception the hook raises, of any
kind, is logged and counted in ``errors``; ``KeyboardInterrupt`` and
``SystemExit`` then go on up, and the drops still queued wait for the next
delivery.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from contextvars import ContextVar
from typing import NamedTuple

from .errors import InvalidArgumentError
from .export import ThreadExport
from .tombstones import DroppedThread

__all__ = ["QUEUE_BOUND", "Announcements", "DropHook", "QueuedDrop", "delivering"]

logger = logging.getLogger(__name__)

DropHook = Callable[[DroppedThread, ThreadExport], object]
"""Called with why and when a thread was evicted or expired, and everything it held."""

QUEUE_BOUND = 64
"""Drops that may wait for the hook before a caller that drops more waits for room."""

ROOM_WAIT_SECONDS = 0.05
"""How often a caller waiting for room in the queue looks again (the delivery under way also wakes it)."""

delivering: ContextVar[bool] = ContextVar("delivering", default=False)
"""True inside a delivery: an operation the hook itself calls leaves its drops to the delivery under way."""


class QueuedDrop(NamedTuple):
    """A dropped thread waiting for the hook.

    Attributes:
        record: Why and when it was dropped.
        export: Everything it held.
        nbytes: The heap the export holds until it is delivered (``engine.memory``).
    """

    record: DroppedThread
    export: ThreadExport
    nbytes: int


class Announcements:
    """Dropped threads waiting for the hook, and the turn of whoever delivers them.

    Invariant (``engine.check``): only filled when ``hook`` is set; emptied in
    order; ``queued_bytes`` is the sum of the queued drops' ``nbytes``.

    Attributes:
        hook: The ``on_drop`` callable, or None (then nothing is queued).
        queue: ``QueuedDrop`` in drop order.
        queued_bytes: The heap the queued exports hold.
        errors: Exceptions the hook raised (logged, never propagated but
            ``KeyboardInterrupt`` and ``SystemExit``).
        turn: Held by the one delivery under way.
        turn_holder: The thread whose event loop holds the turn, when an async
            delivery holds it (a sync call on that loop must never wait for it).
        room: Notified when a drop leaves the queue or the turn is released.
    """

    __slots__ = ("errors", "hook", "queue", "queued_bytes", "room", "turn", "turn_holder")

    def __init__(self, hook: DropHook | None) -> None:
        if hook is not None and not callable(hook):
            raise InvalidArgumentError(f"on_drop must be callable, got {type(hook).__name__}")
        self.hook = hook
        self.queue: deque[QueuedDrop] = deque()
        self.queued_bytes = 0
        self.errors = 0
        self.turn = threading.Lock()
        self.turn_holder: int | None = None
        self.room = threading.Condition(threading.Lock())

    def queue_drop(self, record: DroppedThread, export: ThreadExport, nbytes: int) -> None:
        """Queue a dropped thread for the hook (with the store's lock held). Runtime complexity: O(1)."""
        self.queue.append(QueuedDrop(record, export, nbytes))
        self.queued_bytes += nbytes

    def take(self) -> QueuedDrop | None:
        """The oldest queued drop, out of the queue (by the holder of the turn), or None.

        Runtime complexity: O(1).
        """
        if not self.queue:
            return None
        queued = self.queue.popleft()
        self.queued_bytes -= queued.nbytes
        with self.room:
            self.room.notify_all()
        return queued

    def deliver(
        self, call: Callable[[DroppedThread, ThreadExport], object] | None = None, *, wait: bool = True
    ) -> None:
        """Hand every queued drop to the hook (or to ``call``), one at a time, in drop order.

        Waits for a delivery under way in another thread to finish first, unless
        ``wait`` is false: then that delivery announces these too (a delivery
        looks at the queue again after releasing its turn), unless the queue is
        past ``QUEUE_BOUND``: then this caller waits for room (but never for a
        delivery held by its own thread's event loop). Inside a delivery (the
        hook used the store and dropped more), returns at once: the delivery
        under way announces those too.

        Raises:
            KeyboardInterrupt, SystemExit: From the hook, once counted.

        Runtime complexity: the hook's, per thread announced.
        """
        if delivering.get():
            return
        call = call or self.hook
        # Whoever held the turn looks again once it is released: a drop queued meanwhile by a
        # caller that did not wait for the turn is never left behind.
        while self.queue:
            if not self.turn.acquire(blocking=wait):
                if len(self.queue) <= QUEUE_BOUND or self.turn_holder == threading.get_ident():
                    return
                self.wait_for_room()
                continue
            token = delivering.set(True)
            try:
                while (queued := self.take()) is not None:
                    self.call(call, queued.record, queued.export)  # type: ignore[arg-type]
            finally:
                delivering.reset(token)
                self.release_turn()

    def call(
        self, hook: Callable[[DroppedThread, ThreadExport], object], record: DroppedThread, export: ThreadExport
    ) -> None:
        """Call the hook for one drop; count whatever it raises.

        Raises:
            KeyboardInterrupt, SystemExit: From the hook, once counted.

        Runtime complexity: the hook's.
        """
        try:
            hook(record, export)
        except (KeyboardInterrupt, SystemExit):
            self.failed(record)
            raise
        except BaseException:
            self.failed(record)

    def wait_for_room(self) -> None:
        """Wait until the queue is back within ``QUEUE_BOUND`` or the turn is free (at most a moment).

        Runtime complexity: at most ``ROOM_WAIT_SECONDS`` of waiting.
        """
        with self.room:
            self.room.wait_for(
                lambda: len(self.queue) <= QUEUE_BOUND or not self.turn.locked(), timeout=ROOM_WAIT_SECONDS
            )

    def release_turn(self) -> None:
        """Release the turn and wake whoever waits for room. Runtime complexity: O(1)."""
        self.turn_holder = None
        self.turn.release()
        with self.room:
            self.room.notify_all()

    def failed(self, record: DroppedThread) -> None:
        """Log and count a hook's exception. Runtime complexity: O(1)."""
        logger.exception("on_drop hook failed for thread %r", record.thread_id)
        self.errors += 1
