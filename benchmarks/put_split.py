"""Where a ``put``'s time goes: ours in two halves beside the stock saver, timed in alternation.

For the same prepared calls (one thread, a parent chain, three channels of 1-4 KB,
as ``workload.ThreadWriter`` makes them), each round times, on fresh savers and in
an order that rotates round to round:

* ``stock put``: LangGraph's ``InMemorySaver.put``;
* ``stock serialization``: the serializer calls and dict copies inside it, alone,
  keeping what they make (as a saver does: freed buffers would be reused hot);
* ``ours put``: ``BoundedInMemorySaver.put``;
* ``ours encode``: its first half, ``langgraph.checkpoint.bounded.codec.encode_checkpoint`` (serialization
  and the record), with ``locate``;
* ``ours store``: its second half, ``engine.Store.put_checkpoint`` on the encoded records.

Prints the median per call over the rounds. Usage::

    python benchmarks/put_split.py [--calls 400] [--rounds 9]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from langgraph.checkpoint.base import get_checkpoint_metadata
from workload import SAVERS, ThreadWriter

from langgraph.checkpoint.bounded import BoundedInMemorySaver, codec
from langgraph.checkpoint.bounded.locations import locate

Call = tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]


def per_call_us(function: Callable[..., object], calls: Sequence[Sequence[Any]]) -> float:
    start = time.perf_counter_ns()
    for call in calls:
        function(*call)
    return (time.perf_counter_ns() - start) / len(calls) / 1_000


def one_round(calls: list[Call], rotation: int) -> tuple[dict[str, float], BoundedInMemorySaver]:
    """Microseconds per call of each part in one round, and the saver whose store the halves filled."""
    stock, ours, halves = SAVERS["stock"](), SAVERS["bounded"](), SAVERS["bounded"]()
    dumps = stock.serde.dumps_typed
    encoded: list[tuple[Any, ...]] = []
    serialized: list[object] = []

    def stock_serialization(config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> None:
        skeleton = checkpoint.copy()
        values = skeleton.pop("channel_values")
        for channel in new_versions:
            if channel in values:
                serialized.append(dumps(values[channel]))
        serialized.append(dumps(skeleton))
        serialized.append(dumps(get_checkpoint_metadata(config, metadata)))

    def encode(config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> None:
        thread_id, namespace, parent_id = locate(config)
        record, blobs = codec.encode_checkpoint(halves.serde, config, checkpoint, metadata, new_versions, parent_id)
        encoded.append((thread_id, namespace, record, blobs))

    timings = [
        ("stock put", lambda: per_call_us(stock.put, calls)),
        ("stock serialization", lambda: per_call_us(stock_serialization, calls)),
        ("ours put", lambda: per_call_us(ours.put, calls)),
        ("ours encode", lambda: per_call_us(encode, calls)),
        ("ours store", lambda: per_call_us(halves.store.put_checkpoint, encoded)),
    ]
    # "ours store" needs what "ours encode" made: rotate the other four, and keep it right after encode
    head, halves_pair = timings[:3], timings[3:]
    order = head[rotation % 3 :] + head[: rotation % 3]
    order.insert(rotation % 4, halves_pair[0])
    order.insert(order.index(halves_pair[0]) + 1, halves_pair[1])
    return {name: time_it() for name, time_it in order}, halves


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=9)
    options = parser.parse_args()
    writer = ThreadWriter(SAVERS["stock"](), "hot")
    calls = [writer.prepare() for _ in range(options.calls)]
    rounds = [one_round(calls, rotation)[0] for rotation in range(options.rounds)]
    names = list(rounds[0])
    print(f"median µs per put over {options.rounds} rounds of {options.calls} calls")
    for name in sorted(names):
        print(f"  {name:22s} {statistics.median(r[name] for r in rounds):7.2f}")


if __name__ == "__main__":
    main()
