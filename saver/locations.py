"""Reading thread, namespace and checkpoint ids out of LangGraph configs.

Thread ids are normalized the way LangGraph's persistent savers store them,
with ``str()``: LangGraph accepts ``str``, ``int`` and ``UUID`` thread ids, and
``1`` and ``"1"`` name the same thread. The engine then validates the strings.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from uuid import UUID

from langchain_core.runnables import RunnableConfig

from .engine import InvalidArgumentError

MAX_ID_BITS = 1_024
"""An int id printed has at most about 310 digits this way; the engine's own limit then names the length."""

__all__ = [
    "MAX_ID_BITS",
    "channel_names",
    "checkpoint_id_of",
    "configurable",
    "locate",
    "namespace_of",
    "normalize_id",
    "normalize_ids",
    "root_checkpoint_of",
]


def normalize_id(field: str, value: object) -> str:
    """``str`` of a thread or run id given as ``str``, ``int`` or ``UUID``.

    Raises:
        ValueError: ``value`` is another type (``None`` and ``bool`` included).
    """
    if type(value) is str:
        return value
    if isinstance(value, str):
        return str.__str__(value)  # the same text as an exact str (a subclass's hash or __eq__ could be anything)
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, int) and not isinstance(value, bool):
        if value.bit_length() > MAX_ID_BITS:
            raise InvalidArgumentError(
                f"{field} is an int of {value.bit_length():,} bits: far longer than an id may be"
            )
        return str(value)
    raise InvalidArgumentError(f"{field} must be a str, int or UUID, got {type(value).__name__}: {value!r}")


def normalize_ids(field: str, values: object) -> list[str]:
    """``normalize_id`` of each id of a sequence (a lone string is refused, not split)."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise InvalidArgumentError(f"{field} must be a sequence of ids, got {type(values).__name__}: {values!r:.80}")
    return [normalize_id(field[:-1], value) for value in values]


def configurable(config: object) -> Mapping[str, Any]:
    """``config["configurable"]``, checked to be a mapping."""
    if type(config) is not dict and not isinstance(config, Mapping):
        raise InvalidArgumentError(
            f"config must be a mapping with a 'configurable' mapping, got {type(config).__name__}"
        )
    section = config.get("configurable")
    if type(section) is not dict and not isinstance(section, Mapping):
        raise InvalidArgumentError(f"config['configurable'] must be a mapping, got {type(section).__name__}")
    return section


def locate(config: RunnableConfig) -> tuple[str, str, str | None]:
    """``(thread_id, namespace, checkpoint_id)`` of a config. A missing namespace is the root ``""``;
    a missing or empty checkpoint id is None.

    Raises:
        ValueError: The config is not a mapping, has no ``thread_id``, or a
            namespace or checkpoint id that is not a string.
    """
    if type(config) is dict:  # the shape LangGraph passes, checked in one go
        section = config.get("configurable")
        if type(section) is dict:
            thread_id = section.get("thread_id")
            namespace = section.get("checkpoint_ns", "")
            checkpoint_id = section.get("checkpoint_id")
            if (
                type(thread_id) is str
                and type(namespace) is str
                and (checkpoint_id is None or type(checkpoint_id) is str)
            ):
                return thread_id, namespace, checkpoint_id or None
    given = configurable(config)
    if "thread_id" not in given:
        raise InvalidArgumentError("config['configurable']['thread_id'] is required")
    return normalize_id("thread_id", given["thread_id"]), namespace_of(given) or "", checkpoint_id_of(given)


def channel_names(channels: object) -> list[str]:
    """Channel names asked for, as a list: a sequence of strings, not one string (which would be its letters)."""
    if isinstance(channels, (str, bytes)) or not isinstance(channels, Iterable):
        raise InvalidArgumentError(
            f"channels must be a sequence of channel names, got {type(channels).__name__}: {channels!r:.60}"
        )
    names = list(channels)
    for name in names:
        if not isinstance(name, str):
            raise InvalidArgumentError(f"channels must be a sequence of channel names (text), got {name!r:.60} in it")
    return [str.__str__(name) for name in names]


def root_checkpoint_of(config: RunnableConfig) -> str | None:
    """The root namespace's checkpoint a subgraph's write runs under, when the config names it
    (LangGraph passes ``checkpoint_map``: namespace to the checkpoint each enclosing graph is at)."""
    section = config.get("configurable") if isinstance(config, Mapping) else None
    checkpoint_map = section.get("checkpoint_map") if isinstance(section, Mapping) else None
    root = checkpoint_map.get("") if isinstance(checkpoint_map, Mapping) else None
    return root if type(root) is str else None


def namespace_of(section: Mapping[str, Any]) -> str | None:
    """``checkpoint_ns`` of a configurable section, or None when absent."""
    namespace = section.get("checkpoint_ns")
    if namespace is None or type(namespace) is str:
        return namespace
    if not isinstance(namespace, str):
        raise InvalidArgumentError(f"checkpoint_ns must be a string, got {type(namespace).__name__}")
    return str.__str__(namespace)


def checkpoint_id_of(section: Mapping[str, Any]) -> str | None:
    """``checkpoint_id`` of a configurable section, or None when absent or empty."""
    checkpoint_id = section.get("checkpoint_id")
    if not checkpoint_id:
        return None
    if not isinstance(checkpoint_id, str):
        raise InvalidArgumentError(f"checkpoint_id must be a string, got {type(checkpoint_id).__name__}")
    return str.__str__(checkpoint_id)
