"""Validation of the identifiers that key the store.

Identifiers are stored as dictionary keys and are not counted as payload bytes,
so their size is bounded here instead: every identifier (and every segment of a
namespace path) is a non-empty printable string of at most
``max_identifier_length`` characters.
"""

from __future__ import annotations

from collections.abc import Iterable

from engine.limits import StoreLimits

NAMESPACE_SEPARATOR = "|"  # between the segments of a nested namespace path


def check_identifier(field: str, value: object, limits: StoreLimits) -> str:
    """Return ``value`` if it is a valid identifier, else raise ``ValueError``.

    Runtime complexity: O(length), at most ``max_identifier_length``.
    """
    if not isinstance(value, str):
        raise ValueError(f"{field} must be a string, got {type(value).__name__}")
    if not value:
        raise ValueError(f"{field} must not be empty")
    if len(value) > limits.max_identifier_length:
        raise ValueError(
            f"{field} is {len(value):,} characters long; max_identifier_length is {limits.max_identifier_length:,}"
        )
    if not value.isprintable():
        raise ValueError(f"{field} must be printable, got {value!r}")
    return value


def check_namespace(value: object, limits: StoreLimits) -> str:
    """Return ``value`` if it is a valid checkpoint namespace, else raise ``ValueError``.

    ``""`` is the root namespace. A nested namespace is a path of segments joined
    by ``|``; the identifier rules apply to each segment, and the path may hold
    at most ``max_namespace_depth`` segments.

    Runtime complexity: O(length).
    """
    if not isinstance(value, str):
        raise ValueError(f"checkpoint_ns must be a string, got {type(value).__name__}")
    if not value:
        return value
    segments = value.split(NAMESPACE_SEPARATOR)
    if len(segments) > limits.max_namespace_depth:
        raise ValueError(
            f"checkpoint_ns has {len(segments)} segments; max_namespace_depth is {limits.max_namespace_depth}"
        )
    for segment in segments:
        check_identifier("checkpoint_ns segment", segment, limits)
    return value


class IdentifierCheck:
    """The checks above on the hot path: one set lookup for a name seen recently.

    Names that repeat (thread ids, namespaces, channels) are remembered once
    accepted, up to ``KNOWN_NAMES`` of them; ids that do not repeat (checkpoint
    ids, task ids, versions) take the fast inline test. Either way a bad value
    gets the precise ``ValueError`` of ``check_identifier``.
    """

    KNOWN_NAMES = 4_096  # remembered accepted names; the set is emptied when full

    __slots__ = ("_known", "_max_length", "limits")

    def __init__(self, limits: StoreLimits) -> None:
        self.limits = limits
        self._max_length = limits.max_identifier_length
        self._known: set[str] = set()

    def name(self, field: str, value: object) -> str:
        """``check_identifier`` for a repeating name. Runtime complexity: O(1) when seen before."""
        if type(value) is str and value in self._known:
            return value
        check_identifier(field, value, self.limits)
        self._remember(value)  # type: ignore[arg-type]
        return value  # type: ignore[return-value]

    def namespace(self, value: object) -> str:
        """``check_namespace``. Runtime complexity: O(1) when seen before."""
        if value == "" or (type(value) is str and value in self._known):
            return value  # type: ignore[return-value]
        check_namespace(value, self.limits)
        self._remember(value)  # type: ignore[arg-type]
        return value  # type: ignore[return-value]

    def unique(self, field: str, value: object) -> str:
        """``check_identifier`` for an id that does not repeat. Runtime complexity: O(length)."""
        if type(value) is str and self._is_short_printable(value):
            return value
        return check_identifier(field, value, self.limits)

    def location(self, thread_id: object, namespace: object) -> None:
        """``name`` of a thread id and ``namespace`` of a namespace. Runtime complexity: O(1) when seen before."""
        self.name("thread_id", thread_id)
        self.namespace(namespace)

    def blob_keys(self, keys: Iterable[tuple[object, object]]) -> None:
        """``name`` of each channel and ``version`` of each version. Runtime complexity: O(1) per key seen before."""
        for channel, version in keys:
            self.name("channel", channel)
            self.version(channel, version)  # type: ignore[arg-type]

    def version(self, channel: str, version: object) -> None:
        """A channel version must be an int, a float or a valid identifier string."""
        kind = type(version)
        if kind is int or kind is float:
            return
        if kind is str:
            if not self._is_short_printable(version):  # type: ignore[arg-type]
                check_identifier(f"version of channel {channel!r}", version, self.limits)
            return
        raise ValueError(f"version of channel {channel!r} must be str, int or float, got {kind.__name__}")

    def _is_short_printable(self, value: str) -> bool:
        return 0 < len(value) <= self._max_length and value.isprintable()

    def _remember(self, value: str) -> None:
        if len(self._known) >= self.KNOWN_NAMES:
            self._known.clear()
        self._known.add(value)
