"""The rules for identifiers that key the store, and their errors.

Identifiers are dictionary keys and are not counted as payload bytes, so their
size is bounded here instead: every identifier (and every segment of a
namespace path) is a non-empty printable string of at most
``max_identifier_length`` characters.

The store's transactions test a new identifier inline with the same rule
(``type(value) is str and 0 < len(value) <= max_length and value.isprintable()``)
and call ``refuse`` only when it fails, for the precise error. An identifier
that is already a key of the store was checked when it went in and is not
checked again.
"""

from __future__ import annotations

import math
from typing import NoReturn

from .errors import InvalidArgumentError
from .limits import StoreLimits

__all__ = [
    "KNOWN_CHANNELS",
    "MAX_INT_VERSION",
    "MIN_INT_VERSION",
    "NAMESPACE_SEPARATOR",
    "admit_channel",
    "check_blob_keys",
    "check_identifier",
    "check_location",
    "check_namespace",
    "check_record_version",
    "check_text",
    "check_version",
    "check_versions",
    "refuse",
]

NAMESPACE_SEPARATOR = "|"  # between the segments of a nested namespace path

MIN_INT_VERSION = -(2**63)
MAX_INT_VERSION = 2**64 - 1
"""The int versions msgpack, the snapshot format, encodes."""

KNOWN_CHANNELS = 1_024
"""Channel names a store remembers as checked. A graph has a handful of channels, so the set
stays small; a caller inventing new names only empties it (it is cleared when full), and a
name not remembered is simply checked again."""


def check_identifier(field: str, value: object, limits: StoreLimits) -> str:
    """Return ``value`` if it is a valid identifier, else raise ``ValueError`` naming ``field``.

    Runtime complexity: O(length), at most ``max_identifier_length``.
    """
    if not isinstance(value, str):
        raise InvalidArgumentError(f"{field} must be a string, got {type(value).__name__}")
    if not value:
        raise InvalidArgumentError(f"{field} must not be empty")
    if len(value) > limits.max_identifier_length:
        raise InvalidArgumentError(
            f"{field} is {len(value):,} characters long; max_identifier_length is {limits.max_identifier_length:,}"
        )
    if not value.isprintable():
        raise InvalidArgumentError(f"{field} must be printable, got {value!r:.80}")
    return value


def refuse(field: str, value: object, limits: StoreLimits) -> NoReturn:
    """Raise the ``ValueError`` of an identifier that failed the inline test.

    Runtime complexity: O(length).
    """
    check_identifier(field, value, limits)
    raise InvalidArgumentError(f"{field} must be a str, not a subclass ({type(value).__name__})")


def admit_channel(known: set[str], channel: object, limits: StoreLimits) -> None:
    """Check a channel name not seen before, then remember it in ``known`` (the store's known channels).

    Runtime complexity: O(length), plus O(KNOWN_CHANNELS) to clear the set once per that many names.
    """
    if type(channel) is not str:
        raise InvalidArgumentError(f"channel must be a str, got {type(channel).__name__}")
    check_identifier("channel", channel, limits)
    if len(known) >= KNOWN_CHANNELS:
        known.clear()
    known.add(channel)


def check_namespace(value: object, limits: StoreLimits) -> str:
    """Return ``value`` if it is a valid checkpoint namespace, else raise ``ValueError``.

    ``""`` is the root namespace. A nested namespace is a path of segments joined
    by ``|``; the identifier rules apply to each segment, and the path may hold
    at most ``max_namespace_depth`` segments.

    Runtime complexity: O(length).
    """
    if type(value) is not str:
        raise InvalidArgumentError(f"checkpoint_ns must be a string, got {type(value).__name__}")
    if not value:
        return value
    segments = value.split(NAMESPACE_SEPARATOR)
    if len(segments) > limits.max_namespace_depth:
        raise InvalidArgumentError(
            f"checkpoint_ns has {len(segments)} segments; max_namespace_depth is {limits.max_namespace_depth}"
        )
    for segment in segments:
        check_identifier("checkpoint_ns segment", segment, limits)
    return value


def check_location(thread_id: object, namespace: object, checkpoint_id: object, limits: StoreLimits) -> None:
    """The identifiers of a read that found nothing: a miss on invalid ones raises instead.

    ``namespace`` and ``checkpoint_id`` may be None (not given). Runtime complexity: O(length).
    """
    check_identifier("thread_id", thread_id, limits)
    if namespace is not None:
        check_namespace(namespace, limits)
    if checkpoint_id is not None:
        check_identifier("checkpoint_id", checkpoint_id, limits)


def check_version(channel: object, version: object, limits: StoreLimits) -> None:
    """The version of a stored value (a blob key): a valid identifier string, or a number
    ``check_record_version`` accepts.

    Runtime complexity: O(length).
    """
    if type(version) is str:
        check_identifier(f"version of channel {channel!r:.80}", version, limits)
    else:
        check_record_version(channel, version)


def check_record_version(channel: object, version: object) -> None:
    """A version a checkpoint references: text that round-trips (printable: no lone surrogate, no
    control character), an int msgpack encodes (64 bits), or a finite float (a NaN never equals
    itself, so a value stored under it could never be read back).

    Runtime complexity: O(length).
    """
    kind = type(version)
    if kind is str:
        if not version.isprintable():  # type: ignore[attr-defined]
            raise InvalidArgumentError(
                f"version of channel {channel!r:.80} must be printable text, got {version!r:.80}"
            )
    elif kind is int:
        if not MIN_INT_VERSION <= version <= MAX_INT_VERSION:  # type: ignore[operator]
            raise InvalidArgumentError(
                f"version of channel {channel!r:.80} is an int of {version.bit_length()} bits: "  # type: ignore[attr-defined]
                f"versions are at most 64-bit ({MIN_INT_VERSION} to {MAX_INT_VERSION})"
            )
    elif kind is float:
        if not math.isfinite(version):  # type: ignore[arg-type]
            raise InvalidArgumentError(f"version of channel {channel!r:.80} must be a finite number, got {version!r}")
    else:
        raise InvalidArgumentError(f"version of channel {channel!r:.80} must be str, int or float, got {kind.__name__}")


def check_text(field: str, value: object) -> str:
    """Return ``value`` if it is text that round-trips (encodes as UTF-8: no lone surrogate), else raise
    ``ValueError`` naming ``field``. Runtime complexity: O(length).
    """
    if type(value) is not str:
        raise InvalidArgumentError(f"{field} must be a string, got {type(value).__name__}")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as error:
            raise InvalidArgumentError(
                f"{field} holds a lone surrogate at {error.start}, which no file can hold"
            ) from None
    return value


def check_versions(known: set[str], versions: tuple[object, ...], limits: StoreLimits) -> None:
    """A checkpoint's flat ``(channel, ..., version, ...)`` tuple: each channel a valid name (then
    remembered in ``known``), each version as ``check_record_version`` says. Runtime complexity: O(channels).
    """
    if len(versions) % 2:
        raise InvalidArgumentError("channel_versions must map each channel to one version")
    half = len(versions) // 2
    for channel, version in zip(versions[:half], versions[half:], strict=True):
        if channel not in known:
            admit_channel(known, channel, limits)
        check_record_version(channel, version)


def check_blob_keys(keys: object, limits: StoreLimits) -> None:
    """Every ``(channel, version)`` key: a valid channel name and version.

    Runtime complexity: O(total length of the keys).
    """
    for channel, version in keys:  # type: ignore[attr-defined]
        check_identifier("channel", channel, limits)
        check_version(channel, version, limits)
