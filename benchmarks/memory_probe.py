"""Heap and RSS per stored checkpoint, measured in a fresh process.

Usage: ``python benchmarks/memory_probe.py KIND CHECKPOINTS`` prints one JSON
object: serialized payload bytes, Python heap bytes (tracemalloc) and resident
memory growth (from /proc/self/statm), each per stored checkpoint.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from workload import SAVERS, ThreadWriter

THREADS = 50


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def payload_bytes(checkpoint, metadata, new_versions, serde) -> int:
    values = checkpoint["channel_values"]
    skeleton = {k: v for k, v in checkpoint.items() if k != "channel_values"}
    size = len(serde.dumps_typed(skeleton)[1]) + len(serde.dumps_typed(metadata)[1])
    return size + sum(len(serde.dumps_typed(values[k])[1]) for k in new_versions if k in values)


def main(kind: str, checkpoints: int) -> None:
    saver = SAVERS[kind]()
    writers = [ThreadWriter(saver, f"thread-{i}") for i in range(THREADS)]
    prepared = []
    for _ in range(checkpoints // THREADS):
        for writer in writers:
            prepared.append(writer.prepare())
    payload = sum(payload_bytes(a[1], a[2], a[3], saver.serde) for a in prepared)
    for writer in writers:
        writer.parent, writer.versions, writer.step = None, {}, 0
    gc.collect()
    rss_before = rss_bytes()
    tracemalloc.start()
    for args in prepared:
        saver.put(*args)
    gc.collect()
    heap, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del prepared
    gc.collect()
    rss_after = rss_bytes()
    count = checkpoints // THREADS * THREADS
    print(
        json.dumps(
            {
                "saver": kind,
                "checkpoints": count,
                "payload_per_checkpoint": payload / count,
                "heap_per_checkpoint": heap / count,
                "rss_per_checkpoint": (rss_after - rss_before) / count,
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
