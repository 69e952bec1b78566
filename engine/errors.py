"""Errors raised by the store."""

from __future__ import annotations


class CheckpointCapacityError(Exception):
    """An operation would exceed a limit; it was rejected and changed nothing.

    Attributes:
        limit: The name of the limit, as spelled in ``StoreLimits``.
        limit_value: The limit's configured value.
        needed: What the operation needed, in the limit's unit.
        thread_id: The thread the operation was for, when there is one.
    """

    def __init__(
        self,
        limit: str,
        limit_value: float,
        needed: float,
        *,
        thread_id: str | None = None,
        detail: str = "",
    ) -> None:
        self.limit = limit
        self.limit_value = limit_value
        self.needed = needed
        self.thread_id = thread_id
        where = f" for thread {thread_id!r}" if thread_id is not None else ""
        extra = f"; {detail}" if detail else ""
        super().__init__(
            f"{limit} exceeded{where}: the operation needs {_number(needed)}, "
            f"the limit is {_number(limit_value)}{extra}. Nothing was changed; "
            f"raise {limit} to allow it."
        )


def _number(value: float) -> str:
    if isinstance(value, int) or float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,}"
