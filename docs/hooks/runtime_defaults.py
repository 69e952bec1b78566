"""A Griffe extension for the API reference: defaults shown as their values, not as the names of constants.

Griffe reads the source without running it, so a signature shows a default as written:
``flush_interval_seconds: float = DEFAULT_FLUSH_INTERVAL_SECONDS`` or ``max_total_bytes = 64 * MIB``, which
tells a reader nothing until they find the constant. This extension (``mkdocs.yml`` loads it for mkdocstrings)
imports each documented function, class and module attribute once the package is loaded, and where a default or
a value written in the source names an upper-case constant, replaces it with the value the running code has, as a
Python literal (``1.0``, ``67_108_864``). Only plain values (numbers, strings, bytes, booleans) are replaced; a
callable (``time.monotonic``), ``math.inf`` and anything the build cannot import stay as written. Nothing in the
package changes: this runs at documentation build time only.

Runtime complexity: O(documented objects), one import per module (already imported by then).
"""

from __future__ import annotations

import importlib
import inspect
import re
from typing import Any

import griffe

CONSTANT = re.compile(r"\b[A-Z][A-Z0-9_]*[A-Z0-9]\b")
"""An upper-case name in a default's source: a module constant such as ``DEFAULT_MAX_DIRTY_BYTES`` or ``MIB``."""

MISSING = object()


def literal(value: object) -> str | None:
    """``value`` as a Python literal a reader can take in at a glance, or None if it is not a plain value."""
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, int):
        return f"{value:_}"
    if isinstance(value, float) and value == value and abs(value) != float("inf"):
        return repr(value)
    if isinstance(value, (str, bytes)):
        return repr(value)
    return None


def runtime(obj: griffe.Object) -> object:
    """The running object a Griffe object documents (imported by its path), or MISSING."""
    module = obj.module
    try:
        found: Any = importlib.import_module(module.path)
        for part in obj.path[len(module.path) + 1 :].split(".") if obj is not module else []:
            found = getattr(found, part)
    except (ImportError, AttributeError):
        return MISSING
    return found


def names_a_constant(source: object) -> bool:
    return source is not None and CONSTANT.search(str(source)) is not None


class RuntimeDefaults(griffe.Extension):
    """Replace defaults and attribute values that name constants with the values they have at run time."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        self.replace_in(pkg)

    def replace_in(self, obj: griffe.Object) -> None:
        for member in list(obj.members.values()):
            if member.is_alias:
                continue
            if isinstance(member, griffe.Function):
                self.function(member)
            elif isinstance(member, griffe.Attribute) and names_a_constant(member.value):
                shown = literal(runtime(member))
                if shown is not None:
                    member.value = shown
            if isinstance(member, (griffe.Module, griffe.Class)):
                self.replace_in(member)

    def function(self, function: griffe.Function) -> None:
        if not any(names_a_constant(parameter.default) for parameter in function.parameters):
            return
        running = runtime(function)
        try:
            signature = inspect.signature(running)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return
        for parameter in function.parameters:
            if names_a_constant(parameter.default) and parameter.name in signature.parameters:
                shown = literal(signature.parameters[parameter.name].default)
                if shown is not None:
                    parameter.default = shown
