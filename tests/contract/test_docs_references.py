"""What the documentation names exists: every file path, every setting, every environment variable.

Files move and settings get renamed; prose does not follow by itself. These tests read the prose and check its
names against the repository and the code, so that a page, a docstring or a comment that names something gone fails
here instead of sending a reader to it.

* **Paths.** Read: every page under ``docs/`` (not the benchmark results ``docs/results`` links to) and
  ``README.md`` (``CHANGELOG.md`` is history and names what was there then), and the docstrings (module, class,
  function) and comments of every ``.py`` file under ``saver/``, ``engine/``, ``tests/``, ``benchmarks/`` and
  ``examples/``. A path is a run of characters that starts at one of those five folders or ``docs/``, not preceded
  by a letter, digit, ``.``, ``/`` or ``-`` (so a URL, ``langgraph/checkpoint/bounded/saver/...`` of the installed
  layout or ``libs/checkpoint-postgres/tests/...`` of LangGraph's repository is not one), and goes on over letters,
  digits, ``_``, ``-``, ``.``, ``/`` and ``*``; trailing dots (an ellipsis, a full stop) are dropped. It names a file
  if its last part has an extension of ``PATH_EXTENSIONS`` (a glob if it holds a ``*``: it must match a file), a
  folder if it ends with ``/``; anything else (``engine/__init__``, a module, not a file) is not checked. A bare test
  module name (``test_<name>.py``, no folder) must name a module under ``tests/`` or ``benchmarks/``. Relative
  Markdown links (``../guide/limits.md``) are ``mkdocs build --strict``'s to check, and the README's are
  ``test_docs.py``'s.
* **Settings.** A name written in backticks on a page (``max_total_bytes``, ``idle_ttl_seconds=60``) that looks like
  a setting (``max_...``, ``..._seconds``, ``..._bytes``, ``..._ttl``, ``..._minutes``, ``..._interval``) is a field
  of ``InMemoryCheckpointConfig``, ``RetentionPolicy``, ``WriteBack`` or ``WriteThrough``, a parameter of
  ``TieredSaver`` or ``CompressingSerializer``, or else a field of a stats object (``stats().memory_bytes``), or
  on the short ``NOT_SETTINGS`` list with why. A call written in backticks, ``RetentionPolicy(keep_last=20)``,
  ``InMemoryCheckpointConfig(...)`` or ``TieredSaver(...)``, passes only keywords its class takes. The names come
  from the classes themselves, so a field added or renamed in the code is known here at once.
* **Defaults in the API reference.** The reference's signatures (Griffe reads the source) show defaults as their
  values, not as constant names (``max_dirty_bytes = 16_777_216``, not ``DEFAULT_MAX_DIRTY_BYTES``): the Griffe
  extension ``docs/hooks/runtime_defaults.py`` that ``mkdocs.yml`` loads sees to it, checked here on every object
  a reference page documents.
* **Environment variables.** Every ``BOUNDED_SAVER_*`` name on a page or in a docstring or comment is one the
  serving module reads (``settings()`` and ``TIERED_SETTINGS``); a pattern (``BOUNDED_SAVER_<FIELD>``,
  ``BOUNDED_SAVER_RETENTION_*``) is not a name.

Complexity: one pass over the text of every page and module, O(total characters).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import griffe

from langgraph.checkpoint.bounded import (
    CompressingSerializer,
    InMemoryCheckpointConfig,
    RetentionPolicy,
    TieredSaver,
    WriteBack,
    WriteThrough,
)
from langgraph.checkpoint.bounded.serving import TIERED_SETTINGS, settings
from tests.support.paths import ROOT

DOCS = ROOT / "docs"
SOURCE_FOLDERS = ("saver", "engine", "tests", "benchmarks", "examples")
PATH_ROOTS = (*SOURCE_FOLDERS, "docs")
PATH_EXTENSIONS = {"py", "md", "json", "toml", "yml", "yaml", "png", "svg", "csv", "txt", "snapshot", "sh", "sql"}

PATH = re.compile(r"(?<![\w./-])((?:" + "|".join(PATH_ROOTS) + r")/[\w.*/-]*)")
BARE_TEST_MODULE = re.compile(r"(?<![\w./*-])(test_\w+\.py)\b")
VARIABLE = re.compile(r"\bBOUNDED_SAVER_[A-Z0-9_]*[A-Z0-9](?![A-Z0-9_<*])")
BACKTICKED = re.compile(r"`([^`\n]+)`")
SETTING_SHAPE = re.compile(r"max_\w+|\w+_(?:seconds|bytes|ttl|minutes|interval)")
KEYWORD = re.compile(r"^([a-z][a-z0-9]*(?:_[a-z0-9]+)*)(?:=.*)?$")

MISSING_PATHS_ALLOWED: dict[str, str] = {
    # path as written: why it is named although it does not exist in the repository
}
"""Paths named on purpose that are not in the repository (none today: add one only with its reason)."""

NOT_SETTINGS = {
    "sweep_interval_minutes": "langgraph.json's checkpointer.ttl key (LangGraph Agent Server), not ours",
    "default_ttl": "langgraph.json's checkpointer.ttl key (LangGraph Agent Server), not ours",
}
"""Setting-shaped names the pages use that belong to something else, with why."""


def pages() -> list[Path]:
    """README.md and every page under docs/ (not the benchmark results docs/results links to)."""
    found = sorted(path for path in DOCS.rglob("*.md") if (DOCS / "results") not in path.parents)
    return [ROOT / "README.md", *found]


def modules() -> list[Path]:
    """Every Python file of the folders whose docstrings and comments are read."""
    return sorted(path for folder in SOURCE_FOLDERS for path in (ROOT / folder).rglob("*.py"))


def prose(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of each docstring and comment of a Python file."""
    source = path.read_text()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            docstring = ast.get_docstring(node, clean=False)
            if docstring is not None:
                yield node.body[0].lineno, docstring
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string


@functools.cache
def texts() -> tuple[tuple[str, int, str], ...]:
    """(file, line, text): each page whole (from line 1), and each docstring and comment of each module."""
    found = [(page.relative_to(ROOT).as_posix(), 1, page.read_text()) for page in pages()]
    for module in modules():
        found += [(module.relative_to(ROOT).as_posix(), line, text) for line, text in prose(module)]
    return tuple(found)


def where(file: str, line: int, text: str, match: re.Match[str]) -> str:
    """``file:line`` of a match in a text that starts at that line of the file."""
    return f"{file}:{line + text.count(chr(10), 0, match.start())}"


def named_paths(text: str) -> Iterator[tuple[str, re.Match[str]]]:
    """The file and folder paths a text names, as the module docstring defines them, with their matches."""
    for match in PATH.finditer(text):
        path = match[1].rstrip(".")
        last = path.rsplit("/", 1)[-1]
        if path.endswith("/") or ("." in last and last.rsplit(".", 1)[1] in PATH_EXTENSIONS):
            yield path, match


def exists(path: str) -> bool:
    if "*" in path:
        return any(ROOT.glob(path))
    return (ROOT / path).exists()


TEST_MODULES = {path.name for folder in ("tests", "benchmarks") for path in (ROOT / folder).rglob("test_*.py")}


def test_every_path_named_in_docs_docstrings_and_comments_exists() -> None:
    missing = []
    named = 0
    for file, line, text in texts():
        for path, match in named_paths(text):
            named += 1
            if not exists(path) and path not in MISSING_PATHS_ALLOWED:
                missing.append(f"{where(file, line, text, match)}: {path}")
        for match in BARE_TEST_MODULE.finditer(text):
            if match[1] not in TEST_MODULES:
                missing.append(f"{where(file, line, text, match)}: {match[1]} (no test module of that name)")
    assert named > 100, "the pattern found too few paths to be reading the texts"
    assert missing == [], "these name files that do not exist (moved? write the new path):\n" + "\n".join(missing)


def test_the_allowed_missing_paths_are_still_missing_and_named() -> None:
    everything = "\n".join(text for _, _, text in texts())
    stale = [path for path in MISSING_PATHS_ALLOWED if exists(path) or path not in everything]
    assert stale == [], "remove these from MISSING_PATHS_ALLOWED: they exist now, or nothing names them"


def test_the_path_pattern() -> None:
    text = (
        "see tests/tiered/test_writes.py. and `saver/tiered/` or benchmarks/results/..., "
        "https://example.com/tests/x.py, langgraph/checkpoint/bounded/saver/saver.py, "
        "libs/checkpoint-postgres/tests/test_sync.py, engine/__init__, tests/tiered/test_retention*.py"
    )
    assert [path for path, _ in named_paths(text)] == [
        "tests/tiered/test_writes.py",
        "saver/tiered/",
        "benchmarks/results/",
        "tests/tiered/test_retention*.py",
    ]
    assert all(exists(path) for path, _ in named_paths(text))
    assert not exists("tests/test_tiered_support.py")


SETTINGS: dict[str, set[str]] = {
    "InMemoryCheckpointConfig": {field.name for field in dataclasses.fields(InMemoryCheckpointConfig)},
    "RetentionPolicy": {field.name for field in dataclasses.fields(RetentionPolicy)},
    "TieredSaver": set(inspect.signature(TieredSaver.__init__).parameters) - {"self"},
    "WriteBack": {field.name for field in dataclasses.fields(WriteBack)},
    "WriteThrough": {field.name for field in dataclasses.fields(WriteThrough)},
    "CompressingSerializer": set(inspect.signature(CompressingSerializer.__init__).parameters) - {"self"},
}


def stats_fields() -> set[str]:
    """Fields of every stats object the package returns (``stats().memory_bytes``): real names, not settings."""
    from langgraph.checkpoint.bounded import ThreadStorage, tiered
    from langgraph.checkpoint.bounded.saver import SaverStats

    found = {field.name for field in dataclasses.fields(SaverStats)} | {
        f.name for f in dataclasses.fields(ThreadStorage)
    }
    for name in ("TieredStats", "RetentionStats", "SweepReport"):
        stats = getattr(tiered, name, None)
        if stats is not None and dataclasses.is_dataclass(stats):
            found |= {field.name for field in dataclasses.fields(stats)}
    return found


def outside_fences(text: str) -> str:
    """A page without its fenced blocks (their code is run and type-checked by test_docs.py)."""
    return re.sub(r"^ *(`{3,}|~{3,}).*?^ *\1", "", text, flags=re.M | re.S)


def unknown_keywords(span: str) -> list[str]:
    """The keywords a backticked call of a settings class passes that the class does not take.

    The span is parsed as Python (``...`` is an expression), so nested calls, ``TieredSaver(durable,
    retention=RetentionPolicy(keep_last=20))``, give each class its own keywords; a span that is not Python has none.
    """
    try:
        tree = ast.parse(span.strip(), mode="eval")
    except SyntaxError:
        return []
    unknown = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in SETTINGS:
            taken = SETTINGS[node.func.id]
            unknown += [
                f"{node.func.id}({k.arg}=...)" for k in node.keywords if k.arg is not None and k.arg not in taken
            ]
    return unknown


def unknown_settings(text: str, known_elsewhere: set[str]) -> list[str]:
    """The setting-shaped names and call keywords of a page's backticked spans that nothing defines."""
    every_setting = set().union(*SETTINGS.values())
    unknown = []
    for span in BACKTICKED.findall(outside_fences(text)):
        unknown += unknown_keywords(span)
        keyword = KEYWORD.match(span.strip())
        if keyword is None or not SETTING_SHAPE.fullmatch(keyword[1]):
            continue
        name = keyword[1]
        metric = name.startswith("langgraph_checkpoint_bounded_")  # a metric's name: the metrics page's table
        if name not in every_setting | known_elsewhere and name not in NOT_SETTINGS and not metric:
            unknown.append(name)
    return unknown


def test_every_setting_named_in_the_docs_exists() -> None:
    known_elsewhere = stats_fields()
    unknown = [
        f"{page.relative_to(ROOT)}: `{name}`"
        for page in pages()
        for name in unknown_settings(page.read_text(), known_elsewhere)
    ]
    assert unknown == [], (
        "no InMemoryCheckpointConfig/RetentionPolicy field or TieredSaver parameter has these names:\n"
        + "\n".join(unknown)
    )


def test_the_setting_check_catches_a_name_that_never_existed() -> None:
    known_elsewhere = stats_fields()
    text = "bounded by `max_thread_megabytes`, `idle_ttl_seconds=60` and `RetentionPolicy(keep_last=2, keep_first=1)`"
    assert unknown_settings(text, known_elsewhere) == ["max_thread_megabytes", "RetentionPolicy(keep_first=...)"]
    assert unknown_settings("`stats().memory_bytes` and `memory_bytes`", known_elsewhere) == []


def test_every_environment_variable_named_is_one_the_serving_module_reads() -> None:
    variables = {setting.variable for setting in settings().values()} | set(TIERED_SETTINGS)
    unknown = [
        f"{where(file, line, text, match)}: {match[0]}"
        for file, line, text in texts()
        for match in VARIABLE.finditer(text)
        if match[0] not in variables
    ]
    assert unknown == [], "saver/serving.py reads no such variable:\n" + "\n".join(unknown)
    assert VARIABLE.findall("`BOUNDED_SAVER_<FIELD>`, BOUNDED_SAVER_RETENTION_*, BOUNDED_SAVER_MAX_THREADS=5") == [
        "BOUNDED_SAVER_MAX_THREADS"
    ]


REFERENCE = re.compile(r"^::: (?P<path>[\w.]+)\s*$", flags=re.M)
CONSTANT = re.compile(r"\b[A-Z][A-Z0-9_]*[A-Z0-9]\b")


def constant_defaults(obj: griffe.Object | griffe.Alias) -> list[str]:
    """``path(name=DEFAULT)`` for each parameter of the object and of its methods whose default names a constant."""
    target = obj.final_target if isinstance(obj, griffe.Alias) else obj
    functions = [target] if isinstance(target, griffe.Function) else []
    if isinstance(target, griffe.Class):
        # all_members: inherited methods too, and the __init__ Griffe makes for a dataclass
        functions += [member for member in target.all_members.values() if isinstance(member, griffe.Function)]
    found = []
    for function in functions:
        function = function.final_target if isinstance(function, griffe.Alias) else function
        for parameter in function.parameters:
            if parameter.default is not None and CONSTANT.search(str(parameter.default)):
                found.append(f"{obj.path}: {parameter.name}={parameter.default}")
    return sorted(set(found))


def test_the_api_reference_shows_defaults_as_values() -> None:
    documented = [
        match["path"] for page in (DOCS / "reference").glob("*.md") for match in REFERENCE.finditer(page.read_text())
    ]
    assert "langgraph.checkpoint.bounded.TieredSaver" in documented
    extension = griffe.load_extensions(f"{ROOT / 'docs' / 'hooks' / 'runtime_defaults.py'}:RuntimeDefaults")
    package = griffe.load(
        "langgraph.checkpoint.bounded", extensions=extension, resolve_aliases=True, resolve_external=False
    )
    shown = [name for path in documented for name in constant_defaults(package[path.removeprefix(f"{package.path}.")])]
    assert shown == [], "the reference would show these defaults as constant names:\n" + "\n".join(shown)
    plain = griffe.load("langgraph.checkpoint.bounded", resolve_aliases=True, resolve_external=False)
    assert constant_defaults(plain["WriteBack"]) != [], "without the extension a constant shows: the check sees it"
