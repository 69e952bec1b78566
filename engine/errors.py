"""Errors raised by the store."""

from __future__ import annotations

__all__ = [
    "CheckpointCapacityError",
    "CheckpointRefusedError",
    "ThreadEvictedError",
]


class CheckpointCapacityError(Exception):
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
        checkpoint_id: The dropped checkpoint the write continues from.
        seconds_ago: How long before this write the thread was dropped.
    """

    def __init__(
        self, limit: str, limit_value: float, *, thread_id: str, checkpoint_id: str, seconds_ago: float
    ) -> None:
        self.seconds_ago = seconds_ago
        self.checkpoint_id = checkpoint_id
        how = "expired after being idle" if limit == "idle_ttl_seconds" else "evicted (least recently used)"
        super().__init__(
            limit,
            limit_value,
            None,
            thread_id=thread_id,
            message=(
                f"thread {thread_id!r} was {how} under {limit}={_number(limit_value)} "
                f"{seconds_ago:.3g} s before this write, which continues its checkpoint {checkpoint_id!r}: "
                f"the thread's state is gone, so the write was refused and nothing was changed. "
                f"Raise {limit} to keep threads this long; a new run on the thread starts afresh."
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


def _number(value: float | None) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, int) or float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,}"
