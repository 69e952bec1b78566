"""Errors raised by the store."""

from __future__ import annotations

import math
from datetime import UTC, datetime

__all__ = [
    "BoundedSaverError",
    "CheckpointCapacityError",
    "CheckpointRefusedError",
    "InvalidArgumentError",
    "ResumeRefusedError",
    "ThreadEvictedError",
    "ThreadQuarantinedError",
    "dropped_how",
    "utc_text",
]


class BoundedSaverError(Exception):
    """The root of every error this package raises: one ``except BoundedSaverError`` catches every refusal.

    Each subclass keeps the built-in base it had before the root existed (``ValueError``, ``RuntimeError``), so
    that ``except ValueError`` and ``except RuntimeError`` clauses written against it still catch it.
    """


class InvalidArgumentError(BoundedSaverError, ValueError):
    """A bad argument or setting, refused before anything was done; the message names it and its limit."""


class CheckpointCapacityError(BoundedSaverError):
    """An operation would exceed a limit; it was rejected and changed nothing.

    Attributes:
        limit: The name of the limit, as spelled in ``StoreLimits``.
        limit_value: The limit's configured value.
        needed: What the operation needed, in the limit's unit (None for
            ``ThreadEvictedError``).
        thread_id: The thread the operation was for, when there is one.

    ``hint`` replaces the message's last sentence (which limit to raise) with
    what to do instead.
    """

    def __init__(
        self,
        limit: str,
        limit_value: float,
        needed: float | None,
        *,
        thread_id: str | None = None,
        message: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.limit = limit
        self.limit_value = limit_value
        self.needed = needed
        self.thread_id = thread_id
        where = f" for thread {thread_id!r}" if thread_id is not None else ""
        super().__init__(
            message
            or f"{limit} exceeded{where}: the operation needs {_number(needed)}, "
            f"the limit is {_number(limit_value)}. Nothing was changed. {hint or f'Raise {limit} to allow it.'}"
        )


class ThreadEvictedError(CheckpointCapacityError):
    """A write continues a thread that was evicted or expired: its state is gone.

    Raised instead of silently starting a partial thread whose history points to
    checkpoints that no longer exist. Nothing was changed. A fresh run on the
    same thread id starts cleanly.

    Attributes:
        limit: ``max_threads``, ``max_total_bytes`` or ``max_memory_bytes`` (evicted) or
            ``idle_ttl_seconds`` (expired).
        limit_value: That limit's value.
        needed: None: no amount would have made room for a state that is gone.
        thread_id: The thread.
        checkpoint_id: The dropped checkpoint the write continues from ("" when it names none).
        seconds_ago: How long before this write the thread was dropped.
        dropped_at_wall: When it was dropped, in seconds since the epoch (``time.time()``), or None.
    """

    def __init__(
        self,
        limit: str,
        limit_value: float,
        *,
        thread_id: str,
        checkpoint_id: str,
        seconds_ago: float,
        dropped_at_wall: float | None = None,
        message: str | None = None,
    ) -> None:
        self.seconds_ago = seconds_ago
        self.checkpoint_id = checkpoint_id
        self.dropped_at_wall = dropped_at_wall
        how = dropped_how(limit, limit_value, dropped_at_wall, seconds_ago)
        super().__init__(
            limit,
            limit_value,
            None,
            thread_id=thread_id,
            message=message
            or f"thread {thread_id!r} was {how} before this write, "
            + self._refused.format(checkpoint_id=checkpoint_id, limit=limit),
        )

    _refused = (  # what the write meant and what was refused; a subclass says its own
        "which continues its checkpoint {checkpoint_id!r}: the thread's state is gone, so the write was refused "
        "and nothing was changed. Raise {limit} to keep threads this long; a new run on the thread starts afresh."
    )


class ResumeRefusedError(ThreadEvictedError):
    """A write resumes the state of a thread that was evicted or expired, and the store holds nothing of it.

    The caller marks such writes: pending writes to a channel the store was told
    answers a thread's waiting state (``Store(answer_channels=...)``), or a first
    checkpoint put with ``resumes=True``. Storing them would start the thread
    afresh from an answer to a question nobody asked, so both are refused before
    anything is stored or any other thread evicted. Nothing was changed. The
    saver raises its own subclass, which says what this means for a graph.

    Attributes:
        As ``ThreadEvictedError``; ``checkpoint_id`` is the checkpoint the write names.
    """

    _refused = (
        "which resumes its state: that state is gone, so what the write answers was not applied, nothing was "
        "stored, and no other thread was evicted. A new run on the thread starts it afresh."
    )


class ThreadQuarantinedError(ThreadEvictedError):
    """A new run on a thread dropped less than ``dropped_thread_quarantine_seconds`` ago: refused.

    Within the quarantine a dropped thread is not started afresh, so that a run
    meant to continue it (one that answers what it waited for) fails loudly
    instead of being applied to an empty thread. Nothing was changed.
    ``delete_thread`` ends the quarantine of its thread.

    Attributes:
        limit: The limit that dropped the thread.
        limit_value: That limit's value.
        thread_id: The thread.
        checkpoint_id: The newest checkpoint the thread held ("" if none).
        seconds_ago: How long before this run the thread was dropped.
        dropped_at_wall: When it was dropped (``time.time()``).
        quarantine_seconds: ``dropped_thread_quarantine_seconds``.
    """

    def __init__(
        self,
        limit: str,
        limit_value: float,
        *,
        thread_id: str,
        checkpoint_id: str,
        seconds_ago: float,
        quarantine_seconds: float,
        dropped_at_wall: float | None = None,
    ) -> None:
        self.quarantine_seconds = quarantine_seconds
        left = quarantine_seconds - seconds_ago
        super().__init__(
            limit,
            limit_value,
            thread_id=thread_id,
            checkpoint_id=checkpoint_id,
            seconds_ago=seconds_ago,
            dropped_at_wall=dropped_at_wall,
            message=(
                f"a new run on thread {thread_id!r} was refused: the thread was "
                f"{dropped_how(limit, limit_value, dropped_at_wall, seconds_ago)} ago, and "
                f"dropped_thread_quarantine_seconds={_number(quarantine_seconds)} refuses new runs on a dropped "
                f"thread for that long. If the run was to answer what the thread waited for (a resume), that answer "
                f"was not applied: the state it answers is gone. Nothing was changed. Start the run on a new thread "
                f"id, or delete the thread to start it afresh now"
                + ("." if math.isinf(left) else f" (the quarantine ends in {left:.3g} s).")
            ),
        )


class CheckpointRefusedError(CheckpointCapacityError):
    """Pending writes for a checkpoint whose put was refused: nothing of that checkpoint is stored.

    Raised instead of keeping writes that no checkpoint will ever hold. Nothing
    was changed. The refusal of the put was counted in ``stats().rejections``;
    this one, its consequence, is not counted again.

    Attributes:
        limit: The limit that refused the checkpoint.
        limit_value: That limit's value.
        needed: None.
        thread_id: The thread.
        checkpoint_id: The refused checkpoint.
    """

    def __init__(self, limit: str, limit_value: float, *, thread_id: str, checkpoint_id: str) -> None:
        self.checkpoint_id = checkpoint_id
        super().__init__(
            limit,
            limit_value,
            None,
            thread_id=thread_id,
            message=(
                f"pending writes for checkpoint {checkpoint_id!r} of thread {thread_id!r} were refused: the "
                f"checkpoint's put was refused earlier ({limit}={_number(limit_value)}), so nothing of it is "
                f"stored. Nothing was changed."
            ),
        )


def dropped_how(limit: str, limit_value: float, dropped_at_wall: float | None, seconds_ago: float) -> str:
    """How and when a thread left the store, as an error says it: "evicted (least recently used) under
    max_threads=10 at 2026-01-05 14:03:12 UTC, 42.1 s" (the caller goes on with "before ..." or "ago").

    Runtime complexity: O(1).
    """
    how = "expired after being idle" if limit == "idle_ttl_seconds" else "evicted (least recently used)"
    when = "" if dropped_at_wall is None else f" at {utc_text(dropped_at_wall)},"
    return f"{how} under {limit}={_number(limit_value)}{when} {seconds_ago:.3g} s"


def utc_text(seconds: float) -> str:
    """A wall-clock time (seconds since the epoch) as people read it: ``2026-01-05 14:03:12 UTC``.

    Runtime complexity: O(1).
    """
    try:
        return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, OSError, ValueError):  # a clock injected by a test may read anything
        return f"{seconds:g} s after the epoch"


def _number(value: float | None) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, int) or float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,}"
