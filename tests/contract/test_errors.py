"""One exception root (issue 33): every exception class the package defines subclasses ``BoundedSaverError``, so
one ``except`` catches every refusal, and keeps the built-in base it had, so older ``except`` clauses still work."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import langgraph.checkpoint.bounded as package
from langgraph.checkpoint.bounded import BoundedSaverError, InvalidArgumentError
from langgraph.checkpoint.bounded import engine as engine_package

ROOT = Path(__file__).resolve().parents[2]
OPTIONAL = ("metrics",)  # modules whose extra may be missing: walked when importable


def package_modules() -> list[object]:
    """Every module of the package, imported."""
    modules = []
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        try:
            modules.append(importlib.import_module(info.name))
        except ImportError:
            if info.name.rsplit(".", 1)[-1] not in OPTIONAL:
                raise
    return modules


def defined_exceptions() -> dict[str, type[BaseException]]:
    """Every exception class defined in the package (not imported into it), by qualified name."""
    found = {}
    for module in package_modules():
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, BaseException)
                and value.__module__.startswith(package.__name__)
            ):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return found


def test_every_exception_the_package_defines_has_the_one_root() -> None:
    found = defined_exceptions()
    assert len(found) >= 15, sorted(found)  # the walk found them (13 public ones before the root)
    assert [name for name, cls in found.items() if not issubclass(cls, BoundedSaverError)] == []


@pytest.mark.parametrize(
    ("name", "built_in"),
    [
        ("CheckpointConflictError", RuntimeError),
        ("ThreadDeletedError", RuntimeError),
        ("UnstorableWriteError", RuntimeError),
        ("PayloadTagError", ValueError),
        ("SnapshotError", ValueError),
        ("InvalidArgumentError", ValueError),
    ],
)
def test_each_keeps_its_built_in_base(name: str, built_in: type[Exception]) -> None:
    assert issubclass(getattr(package, name), built_in) and issubclass(getattr(package, name), BoundedSaverError)


def test_the_root_is_exported_from_the_package_and_the_engine() -> None:
    assert package.BoundedSaverError is engine_package.BoundedSaverError
    assert "BoundedSaverError" in package.__all__ and "BoundedSaverError" in engine_package.__all__
    assert issubclass(package.CheckpointCapacityError, BoundedSaverError)
    assert issubclass(InvalidArgumentError, ValueError)


def test_no_plain_value_error_is_raised() -> None:
    """Bad input raises ``InvalidArgumentError`` (a ``ValueError`` too), so ``except BoundedSaverError`` sees it."""
    raising = re.compile(r"raise ValueError\(")
    offenders = [
        f"{path.relative_to(ROOT)}:{number}"
        for folder in ("saver", "engine")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if raising.search(line)
    ]
    assert offenders == []


def test_a_bad_argument_is_caught_by_the_root_and_by_value_error() -> None:
    from langgraph.checkpoint.bounded import InMemoryCheckpointConfig

    for caught in (BoundedSaverError, ValueError):
        with pytest.raises(caught, match="max_threads must be"):
            InMemoryCheckpointConfig(max_threads=0)
