"""The built wheel, installed as a user would, into a fresh venv beside an application of their own.

The application has its own ``engine.py`` and ``saver.py`` (common names: the package once shipped
top-level packages of those names, and either shadowed the other). The README's quick start runs
there from the installed wheel, and both the user's modules and ours import. Nothing named
``saver`` or ``engine`` may reach the top of ``site-packages``, and no ``__init__.py`` for the
``langgraph`` or ``langgraph.checkpoint`` namespace packages.

Dependencies are resolved by pip from the package index, as for a user (pip's cache keeps it quick).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.support.paths import ROOT

USER_ENGINE = 'WHAT = "the application\'s own engine"\n'
USER_SAVER = 'WHAT = "the application\'s own saver"\n'


def run(*command: str | Path, cwd: Path | None = None) -> str:
    done = subprocess.run([str(part) for part in command], cwd=cwd, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"{command}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def quick_start() -> str:
    """The README's first Python block: the quick start."""
    return re.findall(r"^```python\n(.*?)^```$", (ROOT / "README.md").read_text(), flags=re.M | re.S)[0]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from a clean copy of the sources (a reused build/ folder could ship stale files)."""
    scratch = tmp_path_factory.mktemp("wheel")
    source = scratch / "source"
    skipped = shutil.ignore_patterns(".git", ".venv*", "build", "dist", "*.egg-info", "__pycache__", ".*_cache")
    shutil.copytree(ROOT, source, ignore=skipped)
    run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", scratch / "dist", source)
    (built,) = (scratch / "dist").glob("langgraph_checkpoint_bounded-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding the wheel, its dependencies and langgraph."""
    folder = tmp_path_factory.mktemp("venv") / "venv"
    run(sys.executable, "-m", "venv", folder)
    run(folder / "bin" / "python", "-m", "pip", "install", "--quiet", f"{wheel}[metrics]", "langgraph")
    return folder


def test_the_wheel_holds_one_package_under_the_namespace(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    ours = [name for name in names if ".dist-info/" not in name]
    assert ours and all(name.startswith("langgraph/checkpoint/bounded/") for name in ours), ours
    for expected in ("py.typed", "engine/py.typed", "engine/store.py", "serving.py", "examples/serving/langgraph.json"):
        assert f"langgraph/checkpoint/bounded/{expected}" in names
    metadata = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "License-Expression: MIT" in metadata
    assert (
        "Classifier: Typing :: Typed" in metadata and "Classifier: Programming Language :: Python :: 3.11" in metadata
    )
    assert "Project-URL:" in metadata
    entry_points = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "langgraph-bounded = langgraph.checkpoint.bounded.cli:main" in entry_points


def test_nothing_of_ours_lands_at_the_top_of_site_packages(venv: Path) -> None:
    (site,) = venv.glob("lib/python3.*/site-packages")
    assert not {"saver", "engine", "saver.py", "engine.py"} & {path.name for path in site.iterdir()}
    assert (site / "langgraph" / "checkpoint" / "bounded" / "__init__.py").exists()
    assert not (site / "langgraph" / "__init__.py").exists()
    assert not (site / "langgraph" / "checkpoint" / "__init__.py").exists()
    run(venv / "bin" / "python", "-m", "pip", "check")


def test_the_quick_start_runs_beside_the_user_s_own_engine_and_saver(venv: Path, tmp_path: Path) -> None:
    (tmp_path / "engine.py").write_text(USER_ENGINE)
    (tmp_path / "saver.py").write_text(USER_SAVER)
    (tmp_path / "quick_start.py").write_text(quick_start())
    shown = run(venv / "bin" / "python", "quick_start.py", cwd=tmp_path)
    assert (
        "['hello', 'echo: hello']" in shown and "\n1 3 " in shown
    )  # one thread, three checkpoints (input, loop, reply)
    both = (
        "import engine, saver\n"
        "from langgraph.checkpoint.bounded import BoundedInMemorySaver, CheckpointCapacityError, __version__\n"
        "from langgraph.checkpoint.bounded.engine import Store\n"
        "from langgraph.checkpoint.bounded.serving import checkpointer\n"
        "from langgraph.checkpoint.memory import InMemorySaver\n"
        "print(engine.WHAT, '|', saver.WHAT, '|', BoundedInMemorySaver.__module__, __version__)\n"
    )
    shown = run(venv / "bin" / "python", "-c", both, cwd=tmp_path)
    assert shown.startswith("the application's own engine | the application's own saver | ")
    assert "langgraph.checkpoint.bounded.saver 0.1.0" in shown


def test_the_command_is_installed(venv: Path, tmp_path: Path) -> None:
    assert "usage: langgraph-bounded" in run(venv / "bin" / "langgraph-bounded", "--help")
    assert "inspect" in run(venv / "bin" / "langgraph-bounded", "--help")
    assert run(venv / "bin" / "python", "-m", "langgraph.checkpoint.bounded", "--version").startswith(
        "langgraph-bounded "
    )
    run(venv / "bin" / "langgraph-bounded", "examples", tmp_path / "recipes")
    assert sorted(path.name for path in (tmp_path / "recipes").iterdir()) == [
        "fastapi_app.py",
        "graph.py",
        "langgraph.json",
        "langgraph.tiered.json",
    ]


def test_the_engine_imports_without_langgraph(venv: Path, tmp_path: Path) -> None:
    """The engine knows bytes and ids: importing it loads no LangGraph module."""
    script = (
        "import sys\n"
        "import langgraph.checkpoint.bounded.engine as engine\n"
        "loaded = sorted(m for m in sys.modules if m.startswith(('langchain', 'langgraph.checkpoint.base', "
        "'langgraph.checkpoint.serde', 'langgraph.graph')))\n"
        "assert not loaded, loaded\n"
        "store = engine.Store()\n"
        "print(store.stats().threads)\n"
    )
    assert run(venv / "bin" / "python", "-c", script, cwd=tmp_path).strip() == "0"
