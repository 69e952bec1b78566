"""What a change costs on put and put_writes: two versions of this code, timed in alternating processes.

Each round starts one process per version, in turn (the order alternating round
to round). A process fills a store as ``test_interleaved.py`` does and times
batches of calls on our saver and on the stock saver alternately; it reports
ours / stock. The cost of the change is the median over rounds of the new
version's ratio over the old one's: a slow phase of the machine slows both
savers in a process, and both versions within a round.

Usage::

    python benchmarks/version_cost.py OLD_REV [NEW_REV] [--rounds 15] [--repo PATH]

(for example ``a510f8a``, the last commit before the memory accounting). Each
version is checked out with ``git worktree`` into a temporary folder, and its
process imports that checkout and nothing else, whatever the working directory
and whatever is installed: the process runs with ``-P`` (no working directory
on ``sys.path``) from inside the checkout; a finder placed first on
``sys.meta_path`` maps the checkout's packages, as its ``pyproject.toml``
declares them (``saver``/``engine`` at the top before the package moved,
``langgraph.checkpoint.bounded`` since), to its folders; an editable install's
finder is taken out; and before reporting, the process checks that every
module of those packages it loaded came from the checkout (it fails otherwise).
The workload (``benchmarks/workload.py``) is the checkout's own too.
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

# Makes the checkout in argv[1] the only source of the project's packages, then times it.
WORKER = r"""
import importlib.util, json, random, statistics, sys, time, tomllib
from pathlib import Path

tree = Path(sys.argv[1]).resolve()
setuptools = tomllib.loads((tree / "pyproject.toml").read_text())["tool"]["setuptools"]
folders = setuptools.get("package-dir", {})
packages = {name: tree / folders.get(name, name.replace(".", "/")) for name in setuptools["packages"]}


class CheckoutFinder:
    # The checkout's packages from its own folders; their submodules follow from each package's __path__.
    @staticmethod
    def find_spec(fullname, path=None, target=None):
        folder = packages.get(fullname)
        if folder is None:
            return None
        return importlib.util.spec_from_file_location(
            fullname, folder / "__init__.py", submodule_search_locations=[str(folder)]
        )


def editable(finder):
    return (getattr(finder, "__module__", None) or type(finder).__module__).startswith("__editable__")


sys.meta_path[:] = [CheckoutFinder] + [finder for finder in sys.meta_path if not editable(finder)]
for name in list(sys.modules):
    if any(name == package or name.startswith(package + ".") for package in packages):
        del sys.modules[name]
sys.path.insert(0, str(tree / "benchmarks"))

from workload import SAVERS, ThreadWriter, fill, task_writes

BATCH, ROUNDS = int(sys.argv[2]), int(sys.argv[3])
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

loaded = {
    name: module.__file__
    for name, module in sys.modules.items()
    if any(name == package or name.startswith(package + ".") for package in packages)
}
strays = {name: file for name, file in loaded.items() if not file or not Path(file).resolve().is_relative_to(tree)}
if strays or type(ours).__module__ not in loaded:
    sys.exit(f"measured code from outside {tree}: {strays or type(ours).__module__}")
result["source"] = str(Path(loaded[type(ours).__module__]).resolve())
print(json.dumps(result))
"""


def checkout(repository: Path, revision: str, folder: Path) -> Path:
    """A detached worktree of ``revision`` in ``folder``."""
    tree = folder / revision.replace("/", "_")
    subprocess.run(["git", "-C", str(repository), "worktree", "add", "--detach", str(tree), revision], check=True,
                   capture_output=True)  # fmt: skip
    return tree


def ratios(tree: Path, batch: int, rounds: int) -> dict[str, float]:
    """Ours / stock per operation, from one process that imports only ``tree``."""
    environment = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "PYTHONSAFEPATH")}
    done = subprocess.run([sys.executable, "-P", "-c", WORKER, str(tree), str(batch), str(rounds)], cwd=tree,
                          env=environment, capture_output=True, text=True)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"the worker for {tree} failed:\n{done.stderr[-3000:]}")
    measured = json.loads(done.stdout)
    source = measured.pop("source")
    if not Path(source).is_relative_to(tree.resolve()):
        raise RuntimeError(f"the worker for {tree} measured {source}")
    return measured


def compare(
    old: str, new: str = "HEAD", *, rounds: int = 15, repository: Path = ROOT, batch: int = 50, inner_rounds: int = 15
) -> dict[str, list[float]]:
    """new / old of ours / stock, per operation, one value per round."""
    with tempfile.TemporaryDirectory() as scratch:
        trees = {
            name: checkout(repository, revision, Path(scratch) / name)
            for name, revision in (("old", old), ("new", new))
        }
        try:
            costs: dict[str, list[float]] = {"put": [], "put_writes": []}
            for round_number in range(rounds):
                order = ("old", "new") if round_number % 2 == 0 else ("new", "old")
                measured = {name: ratios(trees[name], batch, inner_rounds) for name in order}
                for operation in costs:
                    costs[operation].append(measured["new"][operation] / measured["old"][operation])
            return costs
        finally:
            for tree in trees.values():
                subprocess.run(["git", "-C", str(repository), "worktree", "remove", "--force", str(tree)],
                               check=False, capture_output=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old")
    parser.add_argument("new", nargs="?", default="HEAD")
    parser.add_argument("--rounds", type=int, default=15, help="alternating rounds, one process per version each")
    parser.add_argument("--repo", type=Path, default=ROOT, help="the git repository the revisions are taken from")
    parser.add_argument("--batch", type=int, default=50, help="calls per timed batch")
    parser.add_argument("--inner-rounds", type=int, default=15, help="batches per operation and saver in a process")
    options = parser.parse_args()
    costs = compare(options.old, options.new, rounds=options.rounds, repository=options.repo.resolve(),
                    batch=options.batch, inner_rounds=options.inner_rounds)  # fmt: skip
    for operation, values in costs.items():
        quartiles = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
        spread = f"quartiles {quartiles[0]:.3f}-{quartiles[2]:.3f}, {len(values)} rounds"
        print(f"{operation}: new / old = {statistics.median(values):.3f} ({spread})")


if __name__ == "__main__":
    main()
