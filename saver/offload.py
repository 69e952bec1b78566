"""When async methods hand serialization to a worker thread.

Measured on the development machine (``benchmarks/test_memory_and_loop.py``,
``benchmarks/test_operations.py``):

* A state of 2,500 chat messages (about 1 MB): serialized on the event loop,
  as the stock saver does, it stalls a 1 ms ticker for 18-23 ms; in a worker
  thread the longest stall is about 7 ms, because the interpreter hands the
  GIL back to the loop every switch interval (5 ms) while the serializer runs
  Python code for each message.
* One large string or bytes value is packed by a single C call that holds the
  GIL, so a worker thread does not shorten that stall (about 2 ms per MB).
* A worker-thread hop (``asyncio.to_thread``) costs tens of microseconds, more
  than serializing a typical small checkpoint.

So small payloads are handled on the event loop and large ones off it:

* reads know the exact stored size before deserializing;
* writes estimate the size of the values about to be serialized from their
  top level only (``rough_size``): the length of a string, or a fixed size per
  element of a container. Walking nested values would cost as much as a thread
  hop for a typical chat state; the top level is enough to tell a 30-message
  history from a 2,500-message one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = [
    "BYTES_PER_ELEMENT",
    "BYTES_PER_SCALAR",
    "rough_size",
]

BYTES_PER_ELEMENT = 64  # bytes assumed per element of a list, tuple, set or dict (a short message or entry)
BYTES_PER_SCALAR = 8  # bytes assumed for a number, None or an object not inspected


def rough_size(values: Iterable[Any]) -> int:
    """A cheap estimate of the serialized size of ``values``.

    Runtime complexity: O(number of values): nested values are not visited.
    """
    size = 0
    for value in values:
        if isinstance(value, (str, bytes, bytearray)):
            size += len(value)
        elif isinstance(value, (list, tuple, dict, set, frozenset)):
            size += BYTES_PER_ELEMENT * len(value)
        else:
            size += BYTES_PER_SCALAR
    return size
