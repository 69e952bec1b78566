"""The architecture's rules, read from the source with ``ast``.

* Imports run one way: no cycle among the modules of ``engine/`` or of ``saver/``, imports under
  ``TYPE_CHECKING`` included, and the engine's modules sit in the layers the README draws, each
  importing only from layers below it.
* The engine never imports LangGraph (or LangChain): it knows bytes and ids.
* Only ``engine/store.py`` takes the store's lock.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"engine": ROOT / "engine", "saver": ROOT / "saver"}

ENGINE_LAYERS = [
    {"__init__"},  # the package's exports
    {"store"},  # the door: the only module that takes the lock
    {"reads", "moves", "removal", "check"},  # cold operations, with the lock held
    {"eviction"},  # threads leaving for a limit: used by the write paths and by moves
    {"pruning"},  # pure planners
    {"lineage"},
    {"state"},  # the one owner of the store's fields
    {"hooks"},  # per-thread data and leaves
    {"export", "memory"},
    {"identifiers", "thread", "tombstones", "plans"},
    {"namespace"},
    {"records", "totals", "limits", "errors", "stats"},
]


def local_imports(path: Path, package: str) -> set[str]:
    """The modules of the same package that ``path`` imports, ``TYPE_CHECKING`` blocks included."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1:  # from .x import y, or from . import x
                if node.module:
                    found.add(node.module.split(".")[0])
                else:
                    found.update(alias.name for alias in node.names)
            elif node.level == 0 and node.module and node.module.startswith("langgraph.checkpoint.bounded."):
                rest = node.module.removeprefix("langgraph.checkpoint.bounded.").split(".")
                if package == "saver" and rest[0] != "engine":
                    found.add(rest[0])
    return found


def import_graph(package: str) -> dict[str, set[str]]:
    folder = PACKAGES[package]
    modules = {path.stem for path in folder.glob("*.py")}
    return {path.stem: local_imports(path, package) & modules - {path.stem} for path in folder.glob("*.py")}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of the graph, as the modules along it, or None."""
    visiting: list[str] = []
    done: set[str] = set()

    def visit(module: str) -> list[str] | None:
        if module in visiting:
            return [*visiting[visiting.index(module) :], module]
        if module in done:
            return None
        visiting.append(module)
        for imported in sorted(graph.get(module, ())):
            cycle = visit(imported)
            if cycle:
                return cycle
        visiting.pop()
        done.add(module)
        return None

    for module in sorted(graph):
        cycle = visit(module)
        if cycle:
            return cycle
    return None


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_no_import_cycle(package: str) -> None:
    assert find_cycle(import_graph(package)) is None


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_every_engine_module_has_a_layer() -> None:
    placed = set().union(*ENGINE_LAYERS)
    assert {path.stem for path in PACKAGES["engine"].glob("*.py")} == placed


def test_engine_imports_only_from_lower_layers() -> None:
    layer = {module: depth for depth, modules in enumerate(ENGINE_LAYERS) for module in modules}
    upward = [
        f"{module} imports {imported}"
        for module, imported_modules in import_graph("engine").items()
        for imported in imported_modules
        if layer[imported] <= layer[module]
    ]
    assert upward == []


def test_the_engine_never_imports_langgraph() -> None:
    offenders = []
    for path in PACKAGES["engine"].glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            offenders += [
                f"{path.name}: {name}" for name in names if name.split(".")[0] in ("langgraph", "langchain_core")
            ]
    assert offenders == []


def test_only_the_store_takes_the_lock() -> None:
    """No engine module but store.py touches an attribute named ``lock``."""
    offenders = [
        f"{path.name}:{node.lineno}"
        for path in PACKAGES["engine"].glob("*.py")
        if path.name != "store.py"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute) and node.attr == "lock"
    ]
    assert offenders == []


def test_the_saver_never_takes_the_store_s_lock_itself() -> None:
    """A layer built on the store holds its lock through ``Store.exclusive()``, never ``store.lock`` directly:
    store.py stays the one module that takes it."""
    offenders = [
        f"{path.name}:{node.lineno}"
        for path in PACKAGES["saver"].glob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute)
        and node.attr == "lock"
        and (
            (isinstance(node.value, ast.Name) and node.value.id == "store")
            or (isinstance(node.value, ast.Attribute) and node.value.attr == "store")
        )
    ]
    assert offenders == []
