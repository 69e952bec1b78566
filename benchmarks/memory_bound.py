"""Heap and RSS against the limit, for payloads of 16 B to 64 KB: ``max_total_bytes`` versus ``max_memory_bytes``.

For each payload size and each limit, a fresh process fills a saver far past
the limit (threads of two checkpoints and a task's write, values of that size,
as a small graph stores them), then reports the traced heap the store holds
(``tracemalloc`` between two readings, after a collection), the growth of the
process's resident memory (in a second, untraced process), and
``stats().memory_bytes``, each over the limit.

Usage: ``python benchmarks/memory_bound.py [--limit-mib 4]`` (``make bench-memory``,
about five minutes); writes ``benchmarks/results/memory_bound/{RESULTS.md,heap_over_limit.png}``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

HERE = Path(__file__).resolve().parent
SIZES = (16, 64, 256, 1_024, 4_096, 16_384, 65_536)
LIMITS = ("max_total_bytes", "max_memory_bytes")
FILL = 3  # payload written, in multiples of the limit


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def fill(limit_name: str, limit: int, size: int, trace: bool) -> dict[str, float]:
    """In this process: fill a saver FILL times past ``limit`` with values of ``size`` bytes.

    With ``trace``, the traced heap; without, the growth of resident memory
    (tracemalloc's own bookkeeping would inflate it).
    """
    sys.path.insert(0, str(HERE))  # workload, when imported from elsewhere
    from langgraph.checkpoint.base.id import uuid6
    from workload import require_this_checkout

    from langgraph.checkpoint.bounded import BoundedInMemorySaver, InMemoryCheckpointConfig
    from langgraph.checkpoint.bounded.engine import StoreLimits

    require_this_checkout()

    limits = {**vars(StoreLimits.unbounded()), "max_dropped_thread_records": 1_000, limit_name: limit}
    saver = BoundedInMemorySaver(config=InMemoryCheckpointConfig(**limits))
    value = "v" * size
    gc.collect()
    rss_before = rss_bytes()
    if trace:
        tracemalloc.start()
    heap_before = tracemalloc.get_traced_memory()[0]
    per_thread, index = 0, 0
    while index * per_thread < FILL * limit:
        thread = f"thread-{index}"
        parent = None
        for step in range(2):
            checkpoint = {
                "v": 4,
                "id": str(uuid6(clock_seq=step)),
                "ts": "2026-12-01T00:00:00+00:00",
                "channel_values": {"messages": value, "step": step},
                "channel_versions": {"messages": saver.get_next_version(None, None), "step": f"{step + 1}.0"},
                "versions_seen": {},
                "updated_channels": ["messages", "step"],
            }
            configurable = {"thread_id": thread, "checkpoint_ns": ""}
            if parent is not None:
                configurable["checkpoint_id"] = parent["configurable"]["checkpoint_id"]
            parent = saver.put(
                {"configurable": configurable},
                checkpoint,
                {"source": "loop", "step": step, "run_id": thread},
                dict(checkpoint["channel_versions"]),
            )
        saver.put_writes(parent, [("messages", value)], f"task-{index}", "~__pregel_pull, agent")
        per_thread = per_thread or saver.stats().total_bytes  # the first thread's payload: every thread's
        index += 1
    gc.collect()
    heap = tracemalloc.get_traced_memory()[0] - heap_before
    tracemalloc.stop()
    stats = saver.stats()
    return {
        "heap_over_limit": heap / limit,
        "rss_over_limit": (rss_bytes() - rss_before) / limit,
        "memory_bytes_over_limit": stats.memory_bytes / limit,
        "total_bytes_over_limit": stats.total_bytes / limit,
        "threads": stats.threads,
    }


def measure(limit_name: str, limit: int, size: int) -> dict[str, float]:
    """The traced heap from one fresh process, resident memory from another, untraced."""

    def run(trace: str) -> dict[str, float]:
        command = [sys.executable, __file__, "--worker", limit_name, str(limit), str(size), trace]
        return json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout)

    return {**run("trace"), "rss_over_limit": run("rss")["rss_over_limit"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit-mib", type=float, default=4)
    parser.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.worker:
        name, limit, size, trace = options.worker
        print(json.dumps(fill(name, int(limit), int(size), trace == "trace")))
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    limit = int(options.limit_mib * 1024 * 1024)
    results = {(name, size): measure(name, limit, size) for name in LIMITS for size in SIZES}
    output = HERE / "results" / "memory_bound"
    output.mkdir(parents=True, exist_ok=True)
    figure, axes = plt.subplots(figsize=(7, 4.2))
    for name, colour in zip(LIMITS, ("tab:red", "tab:blue"), strict=True):
        axes.plot(SIZES, [results[name, s]["heap_over_limit"] for s in SIZES], "o-", color=colour,
                  label=f"traced heap, {name}")  # fmt: skip
        axes.plot(SIZES, [results[name, s]["rss_over_limit"] for s in SIZES], "s--", color=colour, alpha=0.6,
                  label=f"RSS growth, {name}")  # fmt: skip
    axes.axhline(1.0, color="grey", linewidth=0.8)
    axes.set_xscale("log", base=2)
    axes.set_xlabel("payload of each value (bytes)")
    axes.set_ylabel("memory held / limit")
    axes.set_title(f"A store filled {FILL}x past a limit of {options.limit_mib:g} MiB")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(output / "heap_over_limit.png", dpi=110)
    lines = [
        f"# Memory held against the limit ({options.limit_mib:g} MiB), `python benchmarks/memory_bound.py`",
        "",
        "| value size | limit | traced heap / limit | RSS growth / limit | memory_bytes / limit "
        "| total_bytes / limit |",
        "|---|---|---|---|---|---|",
    ]
    for name in LIMITS:
        for size in SIZES:
            row = results[name, size]
            lines.append(
                f"| {size:,} B | `{name}` | {row['heap_over_limit']:.2f} | {row['rss_over_limit']:.2f} | "
                f"{row['memory_bytes_over_limit']:.2f} | {row['total_bytes_over_limit']:.2f} |"
            )
    (output / "RESULTS.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
