"""When async methods hand serialization to a worker thread.

A worker-thread hop (``asyncio.to_thread``) costs tens of microseconds, more
than serializing a typical small checkpoint, so small payloads are handled on
the event loop and large ones off it:

* reads know the exact stored size before deserializing;
* writes estimate the size of the values about to be serialized with a bounded
  walk (``estimate_exceeds``) that gives up, answering "large", after
  ``MAX_PROBED_NODES`` objects, so the probe itself never stalls the loop.
"""

from __future__ import annotations

from typing import Any

MAX_PROBED_NODES = 2_048  # objects visited at most by one estimate
_SCALAR_BYTES = 8  # counted for a number, None, or an object the probe does not open


def estimate_exceeds(value: Any, budget: float) -> bool:
    """Whether ``value`` probably serializes to more than ``budget`` bytes.

    Counts the length of strings and bytes and a few bytes per other object,
    opening lists, tuples, sets, dicts and objects with a ``__dict__`` (such as
    pydantic messages). Answers True as soon as the estimate passes the budget
    or the walk reaches ``MAX_PROBED_NODES`` objects.

    Runtime complexity: O(min(size, MAX_PROBED_NODES)).
    """
    stack = [value]
    size = 0
    visited = 0
    while stack:
        item = stack.pop()
        visited += 1
        if visited > MAX_PROBED_NODES:
            return True
        if isinstance(item, (str, bytes, bytearray)):
            size += len(item)
        elif isinstance(item, dict):
            if len(item) > MAX_PROBED_NODES:
                return True
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple, set, frozenset)):
            if len(item) > MAX_PROBED_NODES:
                return True
            stack.extend(item)
        elif hasattr(item, "__dict__") and not isinstance(item, type):
            stack.append(vars(item))
        else:
            size += _SCALAR_BYTES
        if size > budget:
            return True
    return False
