"""Validation of the identifiers that key the store.

Identifiers are stored as dictionary keys and are not counted as payload bytes,
so their size is bounded here instead: every identifier (and every segment of a
namespace path) is a non-empty printable string of at most
``max_identifier_length`` characters.
"""

from __future__ import annotations

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
