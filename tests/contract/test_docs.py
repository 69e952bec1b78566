"""The documentation's code runs as written: every ```` ```python ```` block of README.md and of docs/, on its own.

* Every ```` ```python ```` block of ``README.md`` and of every page under ``docs/`` (not the benchmark results
  that ``docs/results`` links to: they hold no code) is a user's script by itself, imports included.
* Each block runs in a fresh subprocess of the project's Python (the one running these tests: ``.venv`` under
  ``make test``), in a temporary folder of its own, so the files it writes (``threads.db``, snapshots) are its own.
* Every block, run or not, type-checks on its own with ``mypy --strict`` and the project's configuration: one mypy
  run over all the blocks, each written as a module of its own.

How a page marks a block:

* ``<!-- not-run: why -->`` on the line before the fence: type-checked, not run. Only for a block that needs a
  server or a database (``<!-- not-run: needs a PostgreSQL server -->``); the reason must say which.
* A block whose only line includes a file of the repository (``--8<-- "examples/serving/fastapi_app.py"``, a
  pymdownx.snippets line, which ``make docs`` resolves) shows that file as it is; the file's own tests run it, so
  here it is only checked to exist. Such a block sits between ``<!-- fmt: off -->`` and ``<!-- fmt: on -->``, or
  ``ruff format``, which formats the Python blocks of Markdown files, would rewrite the line as an expression.
* Any other Python fence (```` ```py ````, ```` ```python3 ````) is refused, so that no block escapes the checks.

Beside the code: the configuration page has a row for every ``InMemoryCheckpointConfig`` field, the serving page a
row for every ``BOUNDED_SAVER_*`` variable, and the README's relative links and anchors lead somewhere.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields
from pathlib import Path

import pytest

from langgraph.checkpoint.bounded import InMemoryCheckpointConfig
from langgraph.checkpoint.bounded.serving import TIERED_SETTINGS, settings

ROOT = next(parent for parent in Path(__file__).resolve().parents if (parent / "pyproject.toml").is_file())
DOCS = ROOT / "docs"
PYTHON = Path(sys.executable)
MYPY = PYTHON.parent / "mypy"
RUN_SECONDS = 120  # one block's limit; they take one or two seconds each

FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
NOT_RUN = re.compile(r"^\s*<!--\s*not-run:(?P<reason>.*?)-->\s*$")
SNIPPET = re.compile(r'^--8<-- "(?P<path>[^"]+)"$')
PYTHON_LANGUAGES = {"python", "py", "python3", "py3", "pycon"}


@dataclass(frozen=True)
class Block:
    """One fenced block of a page."""

    page: str  # relative to the repository
    line: int  # of the opening fence, 1-based
    language: str
    code: str
    not_run: str | None  # the reason, for a block marked not-run

    @property
    def name(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def included_file(self) -> str | None:
        """The repository file a snippet-only block shows, or None."""
        match = SNIPPET.match(self.code.strip())
        return match["path"] if match else None


def pages() -> list[Path]:
    """README.md, then every page under docs/ (not the benchmark results docs/results links to)."""
    found = sorted(path for path in DOCS.rglob("*.md") if (DOCS / "results") not in path.parents)
    return [ROOT / "README.md", *found]


def fenced_blocks(path: Path) -> Iterator[Block]:
    """Every fenced block of a Markdown file, with the language its fence names."""
    yield from _blocks_of_text(path.read_text(), str(path.relative_to(ROOT)))


REFERENCE = re.compile(r"^::: (?P<path>[\w.]+)\s*$", flags=re.M)


def referenced_objects() -> list[str]:
    """The dotted paths the API reference renders (its ``:::`` lines)."""
    return sorted(
        {match["path"] for page in (DOCS / "reference").glob("*.md") for match in REFERENCE.finditer(page.read_text())}
    )


def docstring_blocks() -> Iterator[Block]:
    """The code blocks of the docstrings the API reference renders (the object's own docstring: a class's or a
    module's ``Example``), as blocks of a page named after the object."""
    for path in referenced_objects():
        module_name, _, attribute = path.rpartition(".")
        try:
            found = getattr(importlib.import_module(module_name), attribute)
        except (ImportError, AttributeError):
            found = importlib.import_module(path)
        yield from _blocks_of_text(inspect.getdoc(found) or "", f"docstring of {path}")


def _blocks_of_text(text: str, page: str) -> Iterator[Block]:
    """Every fenced block of a text (a page, a docstring), with the language its fence names and the reason a
    ``NOT_RUN`` comment just above it gives."""
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        indent, fence = opening["indent"], opening["fence"]
        info = opening["info"].strip()
        end = index + 1
        while end < len(lines) and not re.fullmatch(rf" *{re.escape(fence[0])}{{{len(fence)},}}\s*", lines[end]):
            end += 1
        body = [line.removeprefix(indent) for line in lines[index + 1 : end]]
        marker = NOT_RUN.match(lines[index - 1] if index else "")
        yield Block(
            page=page,
            line=index + 1,
            language=info.split()[0].lower() if info else "",
            code="\n".join(body) + "\n",
            not_run=marker["reason"].strip() if marker else None,
        )
        index = end + 1


ALL_BLOCKS = [block for page in pages() for block in fenced_blocks(page)] + list(docstring_blocks())
PYTHON_BLOCKS = [block for block in ALL_BLOCKS if block.language in PYTHON_LANGUAGES]
CHECKED = [block for block in PYTHON_BLOCKS if block.language == "python" and block.included_file is None]
RUNNABLE = [block for block in CHECKED if block.not_run is None]


def user_environment() -> dict[str, str]:
    """This process's environment without the variables that would change what a block does."""
    return {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("BOUNDED_SAVER_", "LANGGRAPH_STRICT_MSGPACK", "PYTEST_"))
    }


@dataclass(frozen=True)
class Checked:
    """What running and type-checking the blocks gave."""

    runs: dict[str, subprocess.CompletedProcess[str]]  # by block name
    mypy_output: str
    mypy_errors: dict[str, list[str]]  # by block name
    module_of: dict[str, str]  # block name -> the module mypy checked it as


def run_block(block: Block, folder: Path) -> subprocess.CompletedProcess[str]:
    folder.mkdir(parents=True)
    (folder / "block.py").write_text(block.code)
    return subprocess.run(
        [str(PYTHON), "block.py"],
        cwd=folder,
        env=user_environment(),
        capture_output=True,
        text=True,
        timeout=RUN_SECONDS,
    )


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> Checked:
    """Every block type-checked by one mypy run while the runnable ones run, each in a process and folder of its own."""
    scratch = tmp_path_factory.mktemp("docs")
    typed = scratch / "typed"
    typed.mkdir()
    module_of = {block.name: f"block_{number:03d}" for number, block in enumerate(CHECKED)}
    for block in CHECKED:
        (typed / f"{module_of[block.name]}.py").write_text(block.code)
    command = [str(MYPY), "--config-file", str(ROOT / "pyproject.toml"), "--strict", "--cache-dir", ".mypy_cache"]
    with subprocess.Popen(
        [*command, *sorted(f"{module}.py" for module in module_of.values())],
        cwd=typed,
        env=user_environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as mypy:
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            futures = {
                block.name: pool.submit(run_block, block, scratch / "run" / module_of[block.name]) for block in RUNNABLE
            }
            runs = {name: future.result() for name, future in futures.items()}
        mypy_output, _ = mypy.communicate(timeout=600)
    name_of = {module: name for name, module in module_of.items()}
    errors: dict[str, list[str]] = {}
    for line in mypy_output.splitlines():
        module = line.partition(".py:")[0]
        if module in name_of:
            errors.setdefault(name_of[module], []).append(line)
    return Checked(runs, mypy_output, errors, module_of)


def test_the_pages_hold_python_blocks_and_the_readme_starts_with_the_quick_start() -> None:
    readme = [block for block in CHECKED if block.page == "README.md"]
    assert len(readme) >= 2 and len(CHECKED) >= 20, [block.name for block in CHECKED]
    quick_start = readme[0].code
    assert "BoundedInMemorySaver" in quick_start and "compile(checkpointer=" in quick_start
    assert any("TieredSaver(" in block.code and "SqliteSaver(" in block.code for block in readme)
    assert {block.page for block in CHECKED} >= {"README.md", "docs/guide/tiered-storage.md", "docs/guide/serving.md"}


def test_every_python_fence_is_checked() -> None:
    """A Python block is ```python (run or type-checked here), or shows a repository file that exists."""
    unchecked = [block.name for block in PYTHON_BLOCKS if block.language != "python"]
    assert unchecked == [], "fence Python as ```python, so that this module checks it"
    for block in PYTHON_BLOCKS:
        if block.included_file is not None:
            assert block.not_run is None, block.name
            assert (ROOT / block.included_file).is_file(), f"{block.name} includes a missing file"


def test_blocks_not_run_need_a_server_and_say_so() -> None:
    marked = [block for block in CHECKED if block.not_run is not None]
    for block in marked:
        assert re.search(r"\b(server|PostgreSQL)\b", block.not_run or ""), f"{block.name}: {block.not_run!r}"
    assert len(marked) < len(RUNNABLE) // 4, [block.name for block in marked]  # the exception, not the rule


@pytest.mark.parametrize("block", RUNNABLE, ids=lambda block: block.name)
def test_the_block_runs_on_its_own(block: Block, checked: Checked) -> None:
    done = checked.runs[block.name]
    assert done.returncode == 0, f"{block.name} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


@pytest.mark.parametrize("block", CHECKED, ids=lambda block: block.name)
def test_the_block_type_checks_on_its_own(block: Block, checked: Checked) -> None:
    errors = checked.mypy_errors.get(block.name, [])
    assert errors == [], f"{block.name} (checked as {checked.module_of[block.name]}.py):\n" + "\n".join(errors)


def test_mypy_checked_every_block(checked: Checked) -> None:
    """mypy read every block: a run that stopped early (a bad option, a crash) reports no error per block."""
    counted = re.search(r"\(checked (\d+) source files\)|no issues found in (\d+) source files", checked.mypy_output)
    assert counted is not None, checked.mypy_output[-3000:]
    assert int(counted[1] or counted[2]) == len(CHECKED), checked.mypy_output[-3000:]


def table_rows(page: Path, start: str, end: str) -> set[str]:
    """The first cells of the table rows between two headings of a page, as written (`name` with backticks)."""
    text = page.read_text()
    section = text[text.index(start) : text.index(end)]
    return {line.split("|")[1].strip() for line in section.splitlines() if line.startswith("| `")}


def test_the_configuration_page_has_a_row_for_every_setting() -> None:
    rows = table_rows(DOCS / "guide" / "configuration.md", "## Every setting", "## What the rules mean exactly")
    missing = [field.name for field in fields(InMemoryCheckpointConfig) if f"`{field.name}`" not in rows]
    assert missing == [], "add a row to the table of docs/guide/configuration.md"


def test_the_serving_page_has_a_row_for_every_variable() -> None:
    rows = table_rows(DOCS / "guide" / "serving.md", "## Environment variables", "## One saver per process")
    variables = [setting.variable for setting in settings().values()] + list(TIERED_SETTINGS)
    missing = [variable for variable in variables if f"`{variable}`" not in rows]
    assert missing == [], "add a row to a table of docs/guide/serving.md, under Environment variables"


def slug(heading: str) -> str:
    """A heading's anchor, as MkDocs' toc and GitHub make it (for the headings these pages use)."""
    text = re.sub(r"[^\w\s-]", "", heading.replace("`", "")).strip().lower()
    return re.sub(r"[\s]+", "-", text)


def anchors(page: Path) -> set[str]:
    outside_code = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.M | re.S)
    return {slug(match[1]) for match in re.finditer(r"^#{1,6} (.+)$", outside_code, flags=re.M)}


def test_the_readme_links_lead_somewhere() -> None:
    readme = ROOT / "README.md"
    targets = re.findall(r"\]\(([^)\s]+)\)", readme.read_text())
    local = [target for target in targets if not re.match(r"[a-z]+:", target)]
    assert any(target.startswith("docs/") for target in local)
    broken = []
    for target in local:
        path, _, anchor = target.partition("#")
        page = ROOT / path if path else readme
        if not page.exists() or (anchor and anchor not in anchors(page)):
            broken.append(target)
    assert broken == []
