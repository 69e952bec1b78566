"""What a change costs on put and put_writes: two versions of this code, timed in alternating processes.

Each round starts one process per version, in turn (the order alternating round
to round). A process fills a store as ``test_interleaved.py`` does and times
batches of calls on our saver and on the stock saver alternately; it reports
ours / stock. The cost of the change is the median over rounds of the new
version's ratio over the old one's: a slow phase of the machine slows both
savers in a process, and both versions within a round.

Usage::

    python benchmarks/version_cost.py OLD_REV [NEW_REV] [--rounds 15]

(for example ``a510f8a``, the last commit before the memory accounting). Each
version is checked out with ``git worktree`` into a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

WORKER = r"""
import json, random, statistics, sys, time
sys.path.insert(0, sys.argv[1] + "/benchmarks")
from workload import SAVERS, ThreadWriter, fill, task_writes
BATCH, ROUNDS = 50, 15
result = {}
ours, stock = SAVERS["bounded"](), SAVERS["stock"]()
writers = {name: fill(saver, 50, 20) for name, saver in (("ours", ours), ("stock", stock))}
hot = {name: ThreadWriter(saver, "hot", rng=random.Random(11)) for name, saver in (("ours", ours), ("stock", stock))}
rng = random.Random(5)

def put_batch(name, saver):
    prepared = [hot[name].prepare() for _ in range(BATCH)]
    start = time.perf_counter()
    for args in prepared:
        saver.put(*args)
    return time.perf_counter() - start

def put_writes_batch(name, saver, tag=[0]):
    tag[0] += 1
    stored = writers[name][1].parent
    batch = [(task_writes(rng, i), f"task-{tag[0]}-{i}") for i in range(BATCH)]
    start = time.perf_counter()
    for writes, task_id in batch:
        saver.put_writes(stored, writes, task_id, "~__pregel_pull, agent")
    return time.perf_counter() - start

for operation, run in (("put", put_batch), ("put_writes", put_writes_batch)):
    ratios = []
    for round_number in range(ROUNDS):
        order = (("ours", ours), ("stock", stock)) if round_number % 2 else (("stock", stock), ("ours", ours))
        times = {name: run(name, saver) for name, saver in order}
        ratios.append(times["ours"] / times["stock"])
    result[operation] = statistics.median(ratios)
print(json.dumps(result))
"""


def checkout(revision: str, folder: Path) -> Path:
    tree = folder / revision
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), revision], check=True,
                   capture_output=True)  # fmt: skip
    return tree


def ratios(tree: Path) -> dict[str, float]:
    environment = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, "-c", WORKER, str(tree)], env=environment, check=True,
                          capture_output=True, text=True)  # fmt: skip
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old")
    parser.add_argument("new", nargs="?", default="HEAD")
    parser.add_argument("--rounds", type=int, default=15)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        trees = {
            name: checkout(revision, Path(scratch)) for name, revision in (("old", options.old), ("new", options.new))
        }
        try:
            costs: dict[str, list[float]] = {"put": [], "put_writes": []}
            for round_number in range(options.rounds):
                order = ("old", "new") if round_number % 2 == 0 else ("new", "old")
                measured = {name: ratios(trees[name]) for name in order}
                for operation in costs:
                    costs[operation].append(measured["new"][operation] / measured["old"][operation])
            for operation, values in costs.items():
                quartiles = statistics.quantiles(values, n=4)
                spread = f"quartiles {quartiles[0]:.3f}-{quartiles[2]:.3f}, {len(values)} rounds"
                print(f"{operation}: new / old = {statistics.median(values):.3f} ({spread})")
        finally:
            for tree in trees.values():
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)


if __name__ == "__main__":
    main()
