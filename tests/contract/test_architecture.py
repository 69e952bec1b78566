"""The architecture's rules, read from the source with ``ast``.

Three rooms: ``engine/`` (bytes and ids), ``saver/`` (the memory saver, serving, metrics, snapshots) and
``saver/tiered/`` (the hot tier over a durable saver).

* Imports run one way: no cycle among the modules of any room, imports under ``TYPE_CHECKING``
  included, and the engine's and the tiered package's modules sit in the layers the architecture page
  draws, each importing only from layers below it.
* The engine never imports LangGraph (or LangChain): it knows bytes and ids.
* ``saver/`` (the tiered package included) uses the engine only through ``engine/__init__``.
* The memory saver never imports the tiered package: only serving, metrics and the package's exports may.
* Only ``engine/store.py`` takes the store's lock.
* No SQL and no durable saver's connection (``_cursor()``, ``conn``, ``lock``, ``pipe``) outside
  ``saver/tiered/backends/``: each durable saver family is one file there.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.support.paths import ROOT

PACKAGES = {
    "engine": ROOT / "engine",
    "saver": ROOT / "saver",
    "tiered": ROOT / "saver" / "tiered",
    "retention": ROOT / "saver" / "tiered" / "retention",
    "backends": ROOT / "saver" / "tiered" / "backends",
}
ABSOLUTE = {
    "engine": "langgraph.checkpoint.bounded.engine.",
    "saver": "langgraph.checkpoint.bounded.",
    "tiered": "",
    "retention": "",
    "backends": "",
}
SUBPACKAGES = {
    "tiered": {"retention", "backends"}
}  # a folder of a room: one module of it, whose files' imports are its own

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
    {"records", "totals", "limits", "stats"},
    {"errors"},  # the exception root and bad input (InvalidArgumentError), raised from every layer
]


TIERED_LAYERS = [
    {"__init__"},  # the package's exports
    {"saver"},  # the public face: TieredSaver, whose methods choose a path
    {"puts"},  # put and put_writes through both tiers: one plan for both sides
    {"retention"},  # the durable tier bounded too: policies, sweeps, one thread's removal (a folder)
    {"removal", "read_through"},  # paths through both tiers
    {"hot_reads", "hot_writes", "flushing"},  # the hot tier's side of reads and writes; write-back's flushes
    {"storage"},  # a thread's size in both tiers; the durable byte limit of a put
    {"state"},  # what every with_allowlist() copy shares
    {"stats"},
    {"settings"},
    {"conditional"},  # conditional puts on the durable saver
    {"group_commit"},  # many threads' writes in one durable transaction (write-back's flushes, write-through)
    {"durable"},  # the durable saver, called on either side
    {"write_less"},  # write-back's persist="latest": what a flush keeps of a thread's writes
    {"backends", "pools", "writeback", "residency", "coordination", "landing"},  # leaves (backends: a folder)
]
RETENTION_LAYERS = [
    {"__init__"},
    {"sweep"},  # passes: finding due threads, a bounded number a pass
    {"quota"},  # max_thread_bytes: a thread pruned until it fits
    {"threads", "resumes"},  # one thread's removal in both tiers; a resume of a thread it deleted, refused
    {"plan", "waiting"},  # what a prune removes, from ids alone; threads waiting at an interrupt
    {"policy"},  # the policy
    {"ids"},  # the time inside a checkpoint id
]
BACKEND_LAYERS = [
    {"__init__"},  # the exports, and backend_for
    {"sqlite", "postgres"},  # one module per SQL saver family
    {"sql", "spliced"},  # what they share: statements, drivers, the schema check; SQLite rows from hot bytes
    {"generic"},  # any other saver, through its API; InMemorySaver
    {"base"},  # the interface and its values
]
MAY_IMPORT_TIERED = {"__init__", "serving", "metrics", "cli"}  # saver/ modules that are not the memory saver


def imported_names(path: Path) -> list[tuple[int, str]]:
    """``(level, dotted module)`` for every import of ``path`` (``from . import x`` gives ``(1, "x")``),
    ``TYPE_CHECKING`` blocks included."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.module:
                found.append((node.level, node.module))
            else:
                found += [(node.level, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(0, alias.name) for alias in node.names]
    return found


def local_imports(path: Path, package: str, level_of_package: int = 1) -> set[str]:
    """The modules of the same package that ``path`` imports, ``TYPE_CHECKING`` blocks included (a file of a
    subpackage reaches its package at ``level_of_package`` 2)."""
    found: set[str] = set()
    prefix = ABSOLUTE[package]
    for level, module in imported_names(path):
        if level == level_of_package:  # from .x import y, or from . import x
            found.add(module.split(".")[0])
        elif level == 0 and prefix and module.startswith(prefix):
            found.add(module.removeprefix(prefix).split(".")[0])
    return found


def import_graph(package: str) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports; a subpackage is one module, importing what its
    files import of the package."""
    folder = PACKAGES[package]
    subpackages = SUBPACKAGES.get(package, set())
    modules = {path.stem for path in folder.glob("*.py")} | subpackages
    graph = {path.stem: local_imports(path, package) & modules - {path.stem} for path in folder.glob("*.py")}
    for name in subpackages:
        inner = set().union(*(local_imports(path, package, 2) for path in (folder / name).glob("*.py")))
        graph[name] = inner & modules - {name}
    return graph


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


def test_every_tiered_module_has_a_layer() -> None:
    placed = set().union(*TIERED_LAYERS)
    assert {path.stem for path in PACKAGES["tiered"].glob("*.py")} | SUBPACKAGES["tiered"] == placed
    assert {path.stem for path in PACKAGES["retention"].glob("*.py")} == set().union(*RETENTION_LAYERS)
    assert {path.stem for path in PACKAGES["backends"].glob("*.py")} == set().union(*BACKEND_LAYERS)


@pytest.mark.parametrize(
    ("package", "layers"),
    [
        ("engine", ENGINE_LAYERS),
        ("tiered", TIERED_LAYERS),
        ("retention", RETENTION_LAYERS),
        ("backends", BACKEND_LAYERS),
    ],
)
def test_modules_import_only_from_lower_layers(package: str, layers: list[set[str]]) -> None:
    layer = {module: depth for depth, modules in enumerate(layers) for module in modules}
    upward = [
        f"{module} imports {imported}"
        for module, imported_modules in import_graph(package).items()
        for imported in imported_modules
        if layer[imported] <= layer[module]
    ]
    assert upward == []


def saver_modules() -> list[tuple[str, Path]]:
    """Every module of ``saver/``, ``saver/tiered/`` and ``saver/tiered/retention/``, with its package."""
    return [
        (package, path)
        for package in ("saver", "tiered", "retention", "backends")
        for path in sorted(PACKAGES[package].glob("*.py"))
    ]


def test_the_saver_uses_the_engine_only_through_its_exports() -> None:
    offenders = []
    for package, path in saver_modules():
        engine_level = {"saver": 1, "tiered": 2, "retention": 3, "backends": 3}[package]
        for level, module in imported_names(path):
            reaching = (level == engine_level and module.startswith("engine.")) or module.startswith(
                "langgraph.checkpoint.bounded.engine."
            )
            if reaching:
                offenders.append(f"{package}/{path.name}: {module}")
    assert offenders == []


def test_the_memory_saver_never_imports_the_tiered_package() -> None:
    offenders = [
        f"{path.name}: {module}"
        for path in sorted(PACKAGES["saver"].glob("*.py"))
        if path.stem not in MAY_IMPORT_TIERED
        for level, module in imported_names(path)
        if (level == 1 and module.split(".")[0] == "tiered") or module.startswith("langgraph.checkpoint.bounded.tiered")
    ]
    assert offenders == []


def test_the_rules_catch_what_they_forbid(tmp_path: Path) -> None:
    """The readers above see the imports they must refuse."""
    probe = tmp_path / "probe.py"
    probe.write_text("from .engine.records import BlobKey\nfrom . import tiered\nfrom ..engine.store import Store\n")
    assert (1, "engine.records") in imported_names(probe) and (1, "tiered") in imported_names(probe)
    assert (2, "engine.store") in imported_names(probe)


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
        for _, path in saver_modules()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute)
        and node.attr == "lock"
        and (
            (isinstance(node.value, ast.Name) and node.value.id == "store")
            or (isinstance(node.value, ast.Attribute) and node.value.attr == "store")
        )
    ]
    assert offenders == []


SQL = re.compile(
    r"\b(SELECT|INSERT INTO|DELETE FROM|UPDATE|CREATE INDEX|CREATE TABLE|BEGIN|COMMIT|ROLLBACK|PRAGMA)\b|pg_advisory"
)
SAVER_ATTRIBUTES = {"_cursor", "conn", "pipe"}  # a durable saver's connection, whoever's object it is
SAVER_LOCK = "lock"  # only where the object is a saver (other objects of the package have locks of their own)


def docstrings(tree: ast.AST) -> set[int]:
    """The ids of the string constants that are documentation (a bare string statement), not code."""
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
    }


def names_a_saver(node: ast.expr) -> bool:
    """Whether an expression names a durable saver: ``saver``, ``x.saver``, ``durable_saver``..."""
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return "saver" in name.lower()


def durable_boundary_offenders(path: Path) -> list[str]:
    """Where a module writes SQL (in a string that is not documentation) or touches a durable saver's
    connection, cursor, pipeline or lock."""
    tree = ast.parse(path.read_text())
    documentation = docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in documentation:
            if SQL.search(node.value):
                found.append(f"{path.name}:{node.lineno}: SQL {node.value[:40]!r}")
        elif isinstance(node, ast.Attribute):
            if node.attr in SAVER_ATTRIBUTES or (node.attr == SAVER_LOCK and names_a_saver(node.value)):
                found.append(f"{path.name}:{node.lineno}: .{node.attr}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr"):
            named = node.args[1] if len(node.args) > 1 else None
            if isinstance(named, ast.Constant) and named.value in {*SAVER_ATTRIBUTES, SAVER_LOCK}:
                found.append(f"{path.name}:{node.lineno}: {node.func.id}(..., {named.value!r})")
    return found


def test_no_sql_and_no_durable_connection_outside_the_backends() -> None:
    """Each durable saver family's SQL and connection access is in its own file under ``backends/``: a third
    backend touches no other module, and a LangGraph table change is found in one place."""
    tiered = PACKAGES["tiered"]
    offenders = [
        f"{path.relative_to(tiered)}: {offence}"
        for path in sorted(tiered.rglob("*.py"))
        if PACKAGES["backends"] not in path.parents
        for offence in durable_boundary_offenders(path)
    ]
    assert offenders == []


def test_the_boundary_rule_catches_what_it_forbids(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        '"""A docstring may say SELECT and BEGIN IMMEDIATE."""\n'
        "def f(saver, tiers, store):\n"
        '    """So may this one: DELETE FROM checkpoints."""\n'
        '    saver.conn.execute(f"DELETE FROM {table} WHERE thread_id = ?")\n'
        "    with saver._cursor() as cursor, tiers.durable.saver.lock, store.lock:\n"
        '        cursor.execute("SELECT pg_advisory_xact_lock(%s)")\n'
        '    return getattr(saver, "conn", None), "PRAGMA table_info(writes)", "an update"\n'
    )
    found = sorted(offence.split(" ")[0] + " " + offence.split(" ")[1] for offence in durable_boundary_offenders(probe))
    assert found == [
        "probe.py:4: .conn",
        "probe.py:4: SQL",
        "probe.py:5: ._cursor",
        "probe.py:5: .lock",
        "probe.py:6: SQL",
        "probe.py:7: SQL",
        "probe.py:7: getattr(...,",
    ], found
