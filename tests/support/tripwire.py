"""Payloads that run code when deserialized, to prove whether a read ran them.

``trip(marker)`` stands in for the ``os.system`` of issue 14: a module-level
callable that a tampered payload names, which leaves a file behind when it runs
(no shell, nothing outside the test's temporary folder). A test shows that
code ran, or did not, by whether the marker file exists.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import ormsgpack
from langgraph.checkpoint.serde.jsonplus import EXT_CONSTRUCTOR_SINGLE_ARG

TRIPPED = "tripped"


def trip(marker: str) -> str:
    """Create the file ``marker``: proof that deserializing a payload ran code."""
    Path(marker).write_text(TRIPPED)
    return TRIPPED


def constructor_payload(marker: str | Path) -> tuple[str, bytes]:
    """A ``"msgpack"`` payload that ``JsonPlusSerializer`` decodes by calling ``trip(marker)``.

    It is the shape the serializer writes for objects it rebuilds with one
    argument (``EXT_CONSTRUCTOR_SINGLE_ARG``: module, callable name, argument),
    the same shape the issue's ``os.system`` payload had.
    """
    call = ormsgpack.packb([__name__, trip.__name__, str(marker)])
    return "msgpack", ormsgpack.packb(ormsgpack.Ext(EXT_CONSTRUCTOR_SINGLE_ARG, call))


class PickleTripwire:
    """Unpickling one calls ``trip(marker)``."""

    def __init__(self, marker: str | Path) -> None:
        self.marker = str(marker)

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return trip, (self.marker,)


def pickle_payload(marker: str | Path) -> tuple[str, bytes]:
    """A ``"pickle"`` payload whose unpickling calls ``trip(marker)``."""
    return "pickle", pickle.dumps(PickleTripwire(marker))


class Opaque:
    """A value msgpack cannot encode but pickle can: ``JsonPlusSerializer`` pickles it only with ``pickle_fallback``."""

    __slots__ = ("label",)

    def __init__(self, label: str) -> None:
        self.label = label

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Opaque) and other.label == self.label

    def __hash__(self) -> int:
        return hash(self.label)

    def __getstate__(self) -> str:
        return self.label

    def __setstate__(self, label: str) -> None:
        self.label = label
