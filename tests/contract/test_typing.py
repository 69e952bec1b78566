"""Types a user's checker sees: mypy --strict and pyright on the package and on the README's examples.

The package is laid out as it installs (``langgraph/checkpoint/bounded/...``, from the folders
``pyproject.toml`` maps) in a scratch folder, so that the checkers read exactly the files the
wheel ships; their messages name the repository's own files. Every ```` ```python ```` block of the
README, in order, makes one user script: the quick start, configuration, serving and the rest must
type-check as written (a block fenced ```` ```py ```` is shown, not checked: it needs packages only
the Python 3.12 server venv holds).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.support.paths import ROOT

BIN = Path(sys.executable).parent


def readme_script() -> str:
    """Every ```python block of the README, in order, as one script."""
    blocks = re.findall(r"^```python\n(.*?)^```$", (ROOT / "README.md").read_text(), flags=re.M | re.S)
    return "\n\n".join(blocks)


def lay_out(destination: Path) -> dict[Path, Path]:
    """Copy the package's files into ``destination`` as they install; return installed folder -> source folder."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = setuptools.get("package-dir", {})
    mapping: dict[Path, Path] = {}
    for package in setuptools["packages"]:
        source = ROOT / folders.get(package, package.replace(".", "/"))
        installed = destination / package.replace(".", "/")
        mapping[installed] = source
        for path in source.rglob("*"):
            if path.is_file() and path.suffix in (".py", ".json", ".typed") and "__pycache__" not in path.parts:
                target = installed / path.relative_to(source)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target)
    return mapping


def sources(output: str, mapping: dict[Path, Path]) -> str:
    """A checker's output with the scratch paths turned back into the repository's (deepest package first)."""
    for installed, source in sorted(mapping.items(), key=lambda item: -len(str(item[0]))):
        output = output.replace(str(installed), str(source.relative_to(ROOT)))
    return output


@pytest.fixture(scope="module")
def laid_out(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[Path, Path]]:
    folder = tmp_path_factory.mktemp("typecheck")
    mapping = lay_out(folder)
    (folder / "readme_examples.py").write_text(readme_script())
    return folder, mapping


def test_the_readme_has_examples_to_check() -> None:
    script = readme_script()
    assert "from langgraph.checkpoint.bounded import" in script and "compile(checkpointer=" in script


def test_mypy_strict_passes(laid_out: tuple[Path, dict[Path, Path]]) -> None:
    folder, mapping = laid_out
    command = [str(BIN / "mypy"), "--config-file", str(ROOT / "pyproject.toml"), "--no-incremental"]
    for checked in (["-p", "langgraph.checkpoint.bounded"], ["readme_examples.py"]):
        done = subprocess.run([*command, *checked], cwd=folder, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, sources(done.stdout + done.stderr, mapping)


def test_pyright_passes(laid_out: tuple[Path, dict[Path, Path]]) -> None:
    folder, mapping = laid_out
    checked = ["langgraph", "readme_examples.py"]
    config = folder / "pyrightconfig.json"
    config.write_text('{"exclude": ["**/examples/serving/fastapi_app.py"], "pythonVersion": "3.11"}')
    command = [str(BIN / "pyright"), "--pythonpath", sys.executable, *checked]
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, sources(done.stdout + done.stderr, mapping)
    assert "0 errors" in done.stdout
