"""What a ``TieredSaver`` is set up with: its modes, their defaults, the constants its paths use, and the
checks of its arguments.

Nothing here holds state: the modes and bounds are plain values, and
``check_arguments`` refuses a bad setting with a ``ValueError`` that names it
before anything is built.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from langgraph.checkpoint.base import BaseCheckpointSaver

from ..config import InMemoryCheckpointConfig
from ..engine import MIB, InvalidArgumentError
from .conditional import conditional_support

__all__ = [
    "COHERENCE_MODES",
    "DEFAULT_FLUSH_INTERVAL_SECONDS",
    "DEFAULT_MAX_DIRTY_BYTES",
    "DIRTY_ROOM_ATTEMPTS",
    "OVERSIZE_MODES",
    "PER_ITEM_LIMITS",
    "TTL_MARGIN_SECONDS",
    "Settings",
    "WRITE_MODES",
    "Coherence",
    "Oversize",
    "WriteMode",
    "check_arguments",
]

WriteMode = Literal["through", "back"]
Coherence = Literal["sticky", "validate"]
Oversize = Literal["durable", "refuse"]
WRITE_MODES: tuple[WriteMode, ...] = ("through", "back")
COHERENCE_MODES: tuple[Coherence, ...] = ("sticky", "validate")
OVERSIZE_MODES: tuple[Oversize, ...] = ("durable", "refuse")

DEFAULT_FLUSH_INTERVAL_SECONDS = 1.0
"""Seconds between write-back's periodic flushes: what a crash may lose, at most."""

DEFAULT_MAX_DIRTY_BYTES = 16 * MIB
"""Bytes of unflushed writes write-back holds before a write must flush first."""

PER_ITEM_LIMITS = frozenset({"max_checkpoint_bytes", "max_pending_write_bytes"})
"""Limits about one write alone: with ``oversize="durable"`` (the default) a write past them goes to the durable tier
and its thread stays out of memory; with ``oversize="refuse"`` they refuse it. Every other limit only decides what
stays in memory."""

DIRTY_ROOM_ATTEMPTS = 3
"""Flushes a write-back write tries to make room with before it is written through instead."""

TTL_MARGIN_SECONDS = 1.0
"""A hot thread this close to its idle TTL is treated as leaving: the write may expire it and start it anew."""


@dataclass(frozen=True)
class Settings:
    """A ``TieredSaver``'s modes and bounds, checked (``check_arguments``).

    Attributes:
        write: ``"through"`` or ``"back"``.
        coherence: ``"sticky"`` or ``"validate"``.
        flush_interval_seconds: Write-back's periodic flush.
        max_dirty_bytes: Write-back's bound on unflushed bytes.
        max_dirty_seconds: Write-back's bound on what a crash may lose: the oldest unflushed write's age plus the
            backlog's flush time.
        oversize: ``"durable"`` or ``"refuse"``: what a write past a per-item limit does.
        conditional_writes: Whether a put checks that no other process wrote its namespace since.
    """

    write: WriteMode = "through"
    coherence: Coherence = "sticky"
    flush_interval_seconds: float = DEFAULT_FLUSH_INTERVAL_SECONDS
    max_dirty_bytes: float = DEFAULT_MAX_DIRTY_BYTES
    max_dirty_seconds: float = DEFAULT_FLUSH_INTERVAL_SECONDS
    oversize: Oversize = "durable"
    conditional_writes: bool = False


def check_arguments(
    durable: object,
    config: object,
    write: object,
    coherence: object,
    flush_interval_seconds: object,
    max_dirty_bytes: object,
    max_dirty_seconds: object,
    oversize: object,
    conditional_writes: object,
) -> tuple[InMemoryCheckpointConfig, Settings]:
    """Check ``TieredSaver``'s arguments, in the order of its signature; return the hot tier's config and the
    settings (``max_dirty_seconds`` None: the flush interval).

    Raises:
        ValueError: A setting is invalid, naming it (the first one found).

    Runtime complexity: O(1).
    """
    if not isinstance(durable, BaseCheckpointSaver):
        raise InvalidArgumentError(f"durable must be a LangGraph BaseCheckpointSaver, got {type(durable).__name__}")
    checked = _checked_config(config)
    if write not in WRITE_MODES:
        raise InvalidArgumentError(f"write must be one of {WRITE_MODES}, got {write!r}")
    if coherence not in COHERENCE_MODES:
        raise InvalidArgumentError(f"coherence must be one of {COHERENCE_MODES}, got {coherence!r}")
    if coherence == "validate" and write == "back":
        raise InvalidArgumentError(
            "coherence='validate' needs write='through': with write='back' another process cannot see this "
            "one's unflushed writes, so no check can make its reads coherent"
        )
    _check_positive("flush_interval_seconds", flush_interval_seconds)
    _check_positive("max_dirty_bytes", max_dirty_bytes)
    if max_dirty_seconds is None:
        max_dirty_seconds = flush_interval_seconds
    _check_positive("max_dirty_seconds", max_dirty_seconds)
    if oversize not in OVERSIZE_MODES:
        raise InvalidArgumentError(f"oversize must be one of {OVERSIZE_MODES}, got {oversize!r:.40}")
    if not isinstance(conditional_writes, bool):
        raise InvalidArgumentError(f"conditional_writes must be True or False, got {conditional_writes!r:.40}")
    if conditional_writes:
        if write == "back":
            raise InvalidArgumentError(
                "conditional_writes=True needs write='through': with write='back' a write is acknowledged before the "
                "durable tier sees it, so a conflict found at its flush could be told to nobody"
            )
        reason = conditional_support(durable)
        if reason is not None:
            raise InvalidArgumentError(f"conditional_writes=True: {reason}")
    settings = Settings(
        write,
        coherence,
        float(flush_interval_seconds),  # type: ignore[arg-type]
        max_dirty_bytes,  # type: ignore[arg-type]
        float(max_dirty_seconds),  # type: ignore[arg-type]
        oversize,
        conditional_writes,
    )
    return checked, settings


def _checked_config(config: object) -> InMemoryCheckpointConfig:
    """The config (the defaults for None), refused when it asks for what a tier over a durable saver must not
    do. Runtime complexity: O(1)."""
    if config is None:
        return InMemoryCheckpointConfig()
    if not isinstance(config, InMemoryCheckpointConfig):
        raise InvalidArgumentError(f"config must be an InMemoryCheckpointConfig, got {type(config).__name__}")
    if config.on_evict is not None:
        raise InvalidArgumentError(
            "config.on_evict must be unset for a TieredSaver: a thread leaving memory is not lost, it stays in the "
            "durable tier"
        )
    if config.autosave_path is not None:
        raise InvalidArgumentError(
            "config.autosave_path must be unset for a TieredSaver: the durable tier is what persists, not snapshots"
        )
    return config


def _check_positive(name: str, value: object) -> None:
    """Refuse anything but a positive number (``math.inf`` included). Runtime complexity: O(1)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or not value > 0:
        raise InvalidArgumentError(f"{name} must be a positive number (or math.inf), got {value!r:.40}")
