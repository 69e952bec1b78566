"""``version_cost.py`` must see a change: a revision whose ``put`` does extra work reads as slower.

The tool once imported the working directory's code for both revisions and reported about 1.00
whatever changed. Here a throwaway commit in a scratch clone makes every ``Store.put_checkpoint``
sleep 200 µs (a put takes about 20 µs), and the tool, run from the repository and from elsewhere,
must report ``put`` several times slower and ``put_writes`` unchanged.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import version_cost

SLOW_PUT = """

# --- a throwaway change for benchmarks/test_version_cost.py: every put sleeps 200 µs ---
import time as _time

_measured_put_checkpoint = Store.put_checkpoint


def _slow_put_checkpoint(self, *args, **kwargs):
    _time.sleep(0.0002)
    return _measured_put_checkpoint(self, *args, **kwargs)


Store.put_checkpoint = _slow_put_checkpoint
"""


@pytest.fixture(scope="module")
def scratch_repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clone of this repository with one more commit, in which ``put`` sleeps."""
    clone = tmp_path_factory.mktemp("version-cost") / "repository"
    subprocess.run(["git", "clone", "--quiet", str(version_cost.ROOT), str(clone)], check=True)
    store = clone / "engine" / "store.py"
    store.write_text(store.read_text() + SLOW_PUT)
    git = ["git", "-C", str(clone), "-c", "user.name=test", "-c", "user.email=test@example.invalid"]
    subprocess.run([*git, "commit", "--quiet", "-am", "put sleeps"], check=True)
    return clone


@pytest.mark.parametrize("where", ["repository root", "another directory"])
def test_a_slower_put_is_seen_from_anywhere(scratch_repository: Path, tmp_path: Path, where: str) -> None:
    cwd = version_cost.ROOT if where == "repository root" else tmp_path
    command = [sys.executable, str(version_cost.ROOT / "benchmarks" / "version_cost.py"), "HEAD~1", "HEAD"]
    command += ["--repo", str(scratch_repository), "--rounds", "2", "--inner-rounds", "5", "--batch", "40"]
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, env={**os.environ}, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    reported = dict(line.split(": new / old = ") for line in done.stdout.splitlines())
    put = float(reported["put"].split()[0])
    put_writes = float(reported["put_writes"].split()[0])
    assert put > 3, done.stdout  # about 10 measured: 200 µs added to a put of about 20 µs
    assert put_writes < 2, done.stdout  # untouched by the change


def test_the_worker_refuses_code_from_outside_its_checkout(scratch_repository: Path, tmp_path: Path) -> None:
    """A checkout whose packages are not where its pyproject says fails loudly instead of measuring
    whatever else is importable (this checkout's editable install, say)."""
    tree = tmp_path / "tree"
    subprocess.run(["git", "clone", "--quiet", str(scratch_repository), str(tree)], check=True)
    for folder in ("saver", "engine"):
        subprocess.run(["git", "-C", str(tree), "mv", folder, f"moved_{folder}"], check=True)
    with pytest.raises(RuntimeError, match="failed"):
        version_cost.ratios(tree, 5, 1)
