"""CPU instructions per operation, counted by valgrind: the figure no noisy neighbour moves.

For each saver and operation, the worker below runs under ``valgrind
--tool=callgrind`` twice after the same set-up (which prepares the arguments of
N calls), once making the N calls and once not; the difference divided by N is
the cost of one operation. The garbage collector is off and ``PYTHONHASHSEED``
fixed, so two runs of the same code agree to within a few hundred
instructions; but counts move by up to about 5% with the memory layout (the
directory the code runs from, the size of its modules): compare savers within
one run, and do not read a difference under 5% between two versions of our
code as a change.

Usage: ``python benchmarks/instruction_counts.py [-n 300] [--ops put put_writes get_tuple]``
(``make bench-instructions``). Needs valgrind; each run takes about a minute, one per core at a time.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from langgraph.checkpoint.base import BaseCheckpointSaver

HERE = Path(__file__).resolve().parent
KINDS = ("stock", "floor", "bounded")
OPERATIONS = ("put", "put_writes", "get_tuple")


def work(kind: str, operation: str, repeat: int, *, run: bool = True) -> BaseCheckpointSaver:
    """Set up a store of 5 threads of 4 checkpoints and the arguments of ``repeat`` calls of
    ``operation``; make those calls if ``run``; return the saver."""
    sys.path.insert(0, str(HERE))
    from floor_saver import FloorSaver
    from workload import SAVERS, ThreadWriter, fill, task_writes

    random.seed(0)
    saver = FloorSaver() if kind == "floor" else SAVERS[kind]()
    writers = fill(saver, 5, 4)
    writer = ThreadWriter(saver, "hot")
    checkpoints = [writer.prepare() for _ in range(repeat)]
    rng = random.Random(1)
    writes = [(task_writes(rng, index), f"task-x-{index}") for index in range(repeat)]
    stored, latest = writers[1].parent, {"configurable": {"thread_id": "thread-3", "checkpoint_ns": ""}}
    calls = {
        "put": lambda: [saver.put(*args) for args in checkpoints],
        "put_writes": lambda: [saver.put_writes(stored, *task, "~__pregel_pull, agent") for task in writes],
        "get_tuple": lambda: [saver.get_tuple(latest) for _ in range(repeat)],
    }
    gc.collect()
    gc.disable()
    if run:
        calls[operation]()
    gc.enable()
    return saver


def instructions(kind: str, operation: str, repeat: int, run: bool) -> int:
    """Instructions of one worker run, as callgrind reports them."""
    command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, __file__]
    command += ["--worker", kind, operation, str(repeat), str(int(run))]
    environment = {**os.environ, "PYTHONHASHSEED": "0"}
    result = subprocess.run(command, capture_output=True, text=True, env=environment, check=True)
    found = re.search(r"Collected : (\d+)", result.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count in valgrind's output:\n{result.stderr[-2000:]}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=300, help="operations per counted run")
    parser.add_argument("--ops", nargs="+", choices=OPERATIONS, default=list(OPERATIONS))
    parser.add_argument("--worker", nargs=4, metavar=("KIND", "OP", "N", "RUN"), help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.worker:
        kind, operation, repeat, run = options.worker
        work(kind, operation, int(repeat), run=run == "1")
        return
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed (Debian: apt install valgrind)")
    print("| operation | " + " | ".join(KINDS) + " | ours / stock | floor / stock |")
    print("|---" * (len(KINDS) + 3) + "|")
    runs = [(kind, operation, options.n, run) for operation in options.ops for kind in KINDS for run in (True, False)]
    with ThreadPoolExecutor(max_workers=os.cpu_count()) as pool:  # each run is its own valgrind process
        counted = dict(zip(runs, pool.map(lambda run: instructions(*run), runs), strict=True))
    for operation in options.ops:
        counts = {
            kind: (counted[kind, operation, options.n, True] - counted[kind, operation, options.n, False]) // options.n
            for kind in KINDS
        }
        cells = [f"{counts[kind]:,}" for kind in KINDS]
        ratios = [f"{counts[kind] / counts['stock']:.2f}" for kind in ("bounded", "floor")]
        print(f"| {operation} | " + " | ".join(cells + ratios) + " |", flush=True)


if __name__ == "__main__":
    main()
