"""Heap and RSS against the limit, for payloads of 16 B to 64 KB: ``max_total_bytes`` versus ``max_memory_bytes``;
and the heap estimate on shapes of store unlike the calibration workloads.

For each payload size and each limit, a fresh process fills a saver far past
the limit (threads of two checkpoints and a task's write, values of that size,
as a small graph stores them), then reports the traced heap the store holds
(``tracemalloc`` between two readings, after a collection), the growth of the
process's resident memory (in a second, untraced process), and
``stats().memory_bytes``, each over the limit.

Then, for each shape in ``SHAPES`` (one-checkpoint threads, long or non-ASCII
identifiers, deep namespaces, 500 channels, compiled graphs of 500 channels,
numpy values, number versions, a store restored by ``load()``), a fresh process
fills a saver under ``max_memory_bytes`` three times past it and reports the
traced heap over ``stats().memory_bytes`` and over the limit.

Usage: ``python benchmarks/memory_bound.py [--limit-mib 4] [--output DIR]`` (``make bench-memory``,
about seven minutes); writes ``{RESULTS.md,heap_over_limit.png}`` to ``DIR``
(``benchmarks/results/memory_bound`` unless given).
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
from typing import Any

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


# --- shapes: each writes one thread per call, through the saver's API or a compiled graph, and returns its id ---


def _write_thread(
    saver: Any, thread_id: str, values: Any, *, steps: int = 2, version: Any = None, **where: str
) -> None:
    """``steps`` checkpoints giving every channel of ``values(step)`` a new version (the stock format unless
    ``version`` makes one), then one task's write, as a graph's steps put them."""
    from langgraph.checkpoint.base.id import uuid6

    namespace = where.get("namespace", "")
    parent, versions, run_id = None, {}, f"run-{thread_id}"
    for step in range(steps):
        state = values(step)
        new = {c: version(step) if version else saver.get_next_version(versions.get(c), None) for c in state}
        versions.update(new)
        checkpoint = {
            "v": 4,
            "id": str(uuid6(clock_seq=step)),
            "ts": "2026-12-01T00:00:00+00:00",
            "channel_values": state,
            "channel_versions": dict(versions),
            "versions_seen": {},
            "updated_channels": list(state),
        }
        configurable = {"thread_id": thread_id, "checkpoint_ns": namespace}
        if parent is not None:
            configurable["checkpoint_id"] = parent["configurable"]["checkpoint_id"]
        parent = saver.put(
            {"configurable": configurable}, checkpoint, {"source": "loop", "step": step, "run_id": run_id}, new
        )
    channel, value = next(iter(values(steps).items()))
    task_id, task_path = where.get("task_id", "task"), where.get("task_path", "~__pregel_pull, agent")
    saver.put_writes(parent, [(channel, value)], f"{task_id}-{thread_id}", task_path)


def _small(step: int) -> dict[str, Any]:
    return {"messages": f"message {step}" * 4, "step": step}


def _shape_writer(name: str, saver: Any) -> Any:
    """The writer of one thread of the shape ``name``."""
    import uuid

    import numpy

    sys.path.insert(0, str(HERE.parent))  # the repository, for tests.support
    from tests.support.graphs import wide_writer

    names = [f"channel_{number}" for number in range(500)]

    def deep(index: int) -> str:
        _write_thread(saver, f"deep-{index}", _small, steps=1)
        path = "|".join(f"node_{depth}:{uuid.UUID(int=(index + 1) * 64 + depth)}" for depth in range(32))
        _write_thread(saver, f"deep-{index}", _small, namespace=path)
        return f"deep-{index}"

    def non_ascii(index: int) -> str:
        def values(step: int) -> dict[str, Any]:
            return {"メッセージ": f"こんにちは {step}", "étape": step, "😀": "ok"}

        thread_id = f"スレッド-{index}-é"
        _write_thread(saver, thread_id, values, task_id="タスク", task_path="~__pregel_pull, エージェント")
        _write_thread(saver, thread_id, values, namespace=f"ノード:{index}", task_id="😀")
        return thread_id

    def simple(thread_id: str, values: Any, **options: Any) -> Any:
        def write(index: int) -> str:
            _write_thread(saver, thread_id.format(index), values, **options)
            return thread_id.format(index)

        return write

    writers = {  # made on demand: a graph compiles once, for its own shape
        "one-checkpoint threads, 20-byte values": lambda: simple(
            "thread-{}", lambda step: {"value": "v" * 18}, steps=1
        ),
        "256-character thread ids": lambda: simple("{:x>256}", _small),
        "namespaces 32 deep": lambda: deep,
        "non-ASCII ids, channel names and task paths": lambda: non_ascii,
        "500 channels, fresh version strings each put": lambda: simple(
            "wide-{}", lambda step: dict.fromkeys(names, step), steps=3
        ),
        "a graph writing 500 channels every turn": lambda: wide_writer(saver, 500),
        "a graph writing 500 channels, then 5 a turn": lambda: wide_writer(saver, 5),
        "numpy array values": lambda: simple(
            "array-{}", lambda step: {"array": numpy.arange(16.0) + step, "step": step}
        ),
        "int versions": lambda: simple("ints-{}", _small, version=lambda step: 1_000 + step),
        "float versions": lambda: simple("floats-{}", _small, version=lambda step: 1_000.5 + step),
    }
    return writers[name]()


LOADED = "a store restored by load()"
SHAPES = (
    "one-checkpoint threads, 20-byte values",
    "256-character thread ids",
    "namespaces 32 deep",
    "non-ASCII ids, channel names and task paths",
    "500 channels, fresh version strings each put",
    "a graph writing 500 channels every turn",
    "a graph writing 500 channels, then 5 a turn",
    "numpy array values",
    "int versions",
    "float versions",
    LOADED,
)


def fill_shape(name: str, limit: int) -> dict[str, float]:
    """In this process: a saver under ``max_memory_bytes=limit`` filled FILL times past it with threads of the
    shape ``name`` (for ``LOADED``: a snapshot of FILL times the limit of the benchmark's threads, restored),
    and its traced heap over ``memory_bytes`` and over the limit."""
    import tempfile

    sys.path.insert(0, str(HERE))  # workload, when imported from elsewhere
    from workload import require_this_checkout

    from langgraph.checkpoint.bounded import BoundedInMemorySaver, InMemoryCheckpointConfig
    from langgraph.checkpoint.bounded.engine import StoreLimits

    require_this_checkout()
    unbounded = {**vars(StoreLimits.unbounded()), "max_dropped_thread_records": 1_000}
    bounded = InMemoryCheckpointConfig(**{**unbounded, "max_memory_bytes": limit})
    if name == LOADED:
        source = BoundedInMemorySaver(config=InMemoryCheckpointConfig(**unbounded))
        write = _shape_writer("256-character thread ids", source)
        index = 0
        while source.stats().memory_bytes < FILL * limit:
            write(index)
            index += 1
        path = Path(tempfile.mkdtemp()) / "store.snapshot"
        source.save(path)
        del source, write
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        saver = BoundedInMemorySaver.load(path, config=bounded)  # its load report kept, as a saver keeps it
    else:
        probe = BoundedInMemorySaver(config=InMemoryCheckpointConfig(**unbounded))
        _shape_writer(name, probe)(0)
        per_thread = probe.stats().memory_bytes
        saver = BoundedInMemorySaver(config=bounded)
        write = _shape_writer(name, saver)
        saver.delete_thread(write(-1))  # the graph's and the serializer's caches, before the readings
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        for index in range(-(-FILL * limit // per_thread)):
            write(index)
    gc.collect()
    heap = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    stats = saver.stats()
    saver.check()
    return {
        "heap_over_estimate": heap / stats.memory_bytes,
        "heap_over_limit": heap / limit,
        "threads": stats.threads,
        "evicted": stats.evicted_for_memory,
    }


def measure(limit_name: str, limit: int, size: int) -> dict[str, float]:
    """The traced heap from one fresh process, resident memory from another, untraced."""

    def run(trace: str) -> dict[str, float]:
        return _worker([sys.executable, __file__, "--worker", limit_name, str(limit), str(size), trace])

    return {**run("trace"), "rss_over_limit": run("rss")["rss_over_limit"]}


def measure_shape(name: str, limit: int) -> dict[str, float]:
    """One shape, in a fresh process."""
    return _worker([sys.executable, __file__, "--shape-worker", name, str(limit)])


def _worker(command: list[str]) -> dict[str, float]:
    """A worker's report; a worker that failed (a refusal to measure another checkout's saver included)
    stops the run with its own error, not only its exit status."""
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"the worker {command[2:]} failed:\n{done.stderr.strip()}")
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit-mib", type=float, default=4)
    parser.add_argument("--output", type=Path, default=HERE / "results" / "memory_bound")
    parser.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    parser.add_argument("--shape-worker", nargs=2, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.worker:
        name, limit, size, trace = options.worker
        print(json.dumps(fill(name, int(limit), int(size), trace == "trace")))
        return
    if options.shape_worker:
        name, limit = options.shape_worker
        print(json.dumps(fill_shape(name, int(limit))))
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    limit = int(options.limit_mib * 1024 * 1024)
    results = {(name, size): measure(name, limit, size) for name in LIMITS for size in SIZES}
    shapes = {name: measure_shape(name, limit) for name in SHAPES}
    output = options.output
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
    lines += [
        "",
        f"## The estimate on other shapes (`max_memory_bytes` = {options.limit_mib:g} MiB, filled {FILL}x past it)",
        "",
        "| shape | traced heap / memory_bytes | traced heap / limit | threads kept | evicted |",
        "|---|---|---|---|---|",
    ]
    for name, row in shapes.items():
        lines.append(
            f"| {name} | {row['heap_over_estimate']:.2f} | {row['heap_over_limit']:.2f} | "
            f"{row['threads']:,} | {row['evicted']:,} |"
        )
    (output / "RESULTS.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
