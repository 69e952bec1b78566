"""What a ``TieredSaver`` is set up with: its write policies (``WriteThrough``, ``WriteBack``), the modes and
defaults behind them, the constants its paths use, and the checks of its arguments.

Nothing here holds state: the policies are frozen dataclasses checked when made, and ``check_arguments``
refuses a bad setting with an ``InvalidArgumentError`` that names it before anything is built, then turns
the policy into the ``Settings`` the paths read (``WriteThrough(processes="many")`` is
``coherence="validate"`` with conditional puts).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Literal

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver

from ..config import InMemoryCheckpointConfig
from ..engine import MIB, InvalidArgumentError
from ..saver import BoundedInMemorySaver
from .conditional import conditional_support

__all__ = [
    "DEFAULT_FLUSH_INTERVAL_SECONDS",
    "DEFAULT_MAX_DIRTY_BYTES",
    "DIRTY_ROOM_ATTEMPTS",
    "OVERSIZE_MODES",
    "PERSIST_MODES",
    "PER_ITEM_LIMITS",
    "PROCESSES",
    "TTL_MARGIN_SECONDS",
    "Settings",
    "Coherence",
    "Oversize",
    "Persist",
    "Processes",
    "WriteBack",
    "WriteMode",
    "WriteThrough",
    "check_arguments",
    "check_byte_limit",
]

WriteMode = Literal["through", "back"]
Coherence = Literal["sticky", "validate"]
Oversize = Literal["durable", "refuse"]
Processes = Literal["one", "many"]
Persist = Literal["all", "latest"]
PERSIST_MODES: tuple[Persist, ...] = ("all", "latest")
OVERSIZE_MODES: tuple[Oversize, ...] = ("durable", "refuse")
PROCESSES: tuple[Processes, ...] = ("one", "many")
WRITE_SHORTHANDS = ("through", "back")

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
class WriteThrough:
    """``TieredSaver(write=WriteThrough(...))``: ``put`` and ``put_writes`` return once the durable tier has
    acknowledged the write (``write="through"``, the default, is ``WriteThrough()``).

    Attributes:
        processes: ``"one"`` (the default): one process serves a thread at a time (sticky routing), so the hot
            copy is the newest. ``"many"``: several processes write one durable tier, any of them any thread:
            every read without a checkpoint id checks the hot copy is the durable tier's newest, and a ``put``
            whose namespace another process wrote since this one last read or wrote it raises
            ``CheckpointConflictError`` (naming the thread; nothing written; the stale hot copy leaves memory)
            instead of forking the thread in silence. Needs a SQLite or PostgreSQL durable saver (the check and
            the put are one transaction; the tiered-storage guide says what it costs).
        max_checkpoint_bytes: The most bytes one ``put`` may add to the durable tier (its checkpoint, metadata
            and the channel values it changes, serialized as stored: compressed when the serializer compresses;
            a ``SqliteSaver`` row also repeats the unchanged values, so it can be larger); a larger
            one raises ``CheckpointTooLargeError`` naming the thread, the size and the limit, and nothing is
            written to either tier (None, the default: no limit; ``config.max_checkpoint_bytes`` only decides
            what stays in memory). A whole number of bytes, at least 1.

    Raises:
        InvalidArgumentError: ``processes`` is neither ``"one"`` nor ``"many"``, or ``max_checkpoint_bytes`` is
            not a whole number of bytes (naming it).

    Example:
        ```python
        from langgraph.checkpoint.bounded import WriteThrough

        several_processes = WriteThrough(processes="many")
        ```
    """

    processes: Processes = "one"
    max_checkpoint_bytes: int | None = None

    def __post_init__(self) -> None:
        if self.processes not in PROCESSES:
            raise InvalidArgumentError(f"processes must be one of {PROCESSES}, got {self.processes!r:.40}")
        check_byte_limit("max_checkpoint_bytes", self.max_checkpoint_bytes)


@dataclass(frozen=True)
class WriteBack:
    """``TieredSaver(write=WriteBack(...))``: writes land in memory and are flushed to the durable tier in the
    background, oldest first (``write="back"`` is ``WriteBack()``). One process serves a thread at a time: with
    write-back another process cannot see this one's unflushed writes.

    Attributes:
        flush_interval_seconds: Seconds between periodic flushes (``math.inf``: only on eviction, backpressure,
            ``flush()`` and ``close()``).
        max_dirty_bytes: Bytes of unflushed writes that may wait (every value they keep alive); a write that
            would pass it waits for a flush.
        max_dirty_seconds: What a crash may lose, in seconds, while the durable tier takes writes (None:
            ``flush_interval_seconds``): a write waits for the flushes (the oldest write first) while the oldest
            unflushed write's age, one in a flush under way included, plus the time the backlog takes to flush
            would pass it. Not a bound while the tier is down (then no write waits on it, and
            ``max_dirty_bytes`` bounds what waits).
        max_checkpoint_bytes: The most bytes one ``put`` may add, to memory then flushed to the durable tier
            (its checkpoint, metadata and the channel values it changes, serialized as stored: compressed when the
            serializer compresses); a larger one raises ``CheckpointTooLargeError`` naming the thread, the size
            and the limit, and nothing is written to either tier (None, the default: no limit;
            ``config.max_checkpoint_bytes`` only decides what stays in memory). A whole number of bytes, at
            least 1.
        persist: ``"all"`` (the default): a flush writes every checkpoint. ``"latest"``: per thread, a flush
            writes each namespace's newest unflushed checkpoint with its pending writes (what a resume or an
            interrupt needs), not the intermediate ones before it (their rows and bytes are not written); a
            thread using a ``DeltaChannel`` is written whole. Gives up time travel to the checkpoints it skips:
            ``get_state_history`` of a thread read back from the durable tier shows only those written
            (``tiered.write_less``).

    Raises:
        InvalidArgumentError: A value is not a positive number (or ``math.inf``), or ``persist`` is neither
            ``"all"`` nor ``"latest"``, naming the field.

    Example:
        ```python
        import math

        from langgraph.checkpoint.bounded import WriteBack

        write = WriteBack(flush_interval_seconds=0.5, max_dirty_bytes=64 * 1024 * 1024)
        only_when_asked = WriteBack(flush_interval_seconds=math.inf)  # flush(), close(), eviction, backpressure
        ```
    """

    flush_interval_seconds: float = DEFAULT_FLUSH_INTERVAL_SECONDS
    max_dirty_bytes: int | float = DEFAULT_MAX_DIRTY_BYTES
    max_dirty_seconds: float | None = None
    max_checkpoint_bytes: int | None = None
    persist: Persist = "all"

    def __post_init__(self) -> None:
        check_byte_limit("max_checkpoint_bytes", self.max_checkpoint_bytes)
        if self.persist not in PERSIST_MODES:
            raise InvalidArgumentError(f"persist must be one of {PERSIST_MODES}, got {self.persist!r:.40}")
        _check_positive("flush_interval_seconds", self.flush_interval_seconds)
        _check_positive("max_dirty_bytes", self.max_dirty_bytes)
        if self.max_dirty_seconds is not None:
            _check_positive("max_dirty_seconds", self.max_dirty_seconds)


@dataclass(frozen=True)
class Settings:
    """A ``TieredSaver``'s modes and bounds, checked (``check_arguments``), as its paths read them.

    Attributes:
        write: ``"through"`` or ``"back"``.
        coherence: ``"sticky"`` or ``"validate"`` (``WriteThrough(processes="many")``).
        flush_interval_seconds: Write-back's periodic flush.
        max_dirty_bytes: Write-back's bound on unflushed bytes.
        max_dirty_seconds: Write-back's bound on what a crash may lose: the oldest unflushed write's age plus the
            backlog's flush time.
        oversize: ``"durable"`` or ``"refuse"``: what a write past a per-item limit does.
        conditional_writes: Whether a put checks that no other process wrote its namespace since
            (``WriteThrough(processes="many")``).
        persist: Write-back's flush policy: ``"all"`` or ``"latest"`` (``write_less``).
    """

    write: WriteMode = "through"
    coherence: Coherence = "sticky"
    flush_interval_seconds: float = DEFAULT_FLUSH_INTERVAL_SECONDS
    max_dirty_bytes: float = DEFAULT_MAX_DIRTY_BYTES
    max_dirty_seconds: float = DEFAULT_FLUSH_INTERVAL_SECONDS
    oversize: Oversize = "durable"
    conditional_writes: bool = False
    persist: Persist = "all"


def write_policy(write: object) -> WriteThrough | WriteBack:
    """The write policy ``write`` names: a ``WriteThrough`` or ``WriteBack`` as given, or the default one for
    ``"through"`` or ``"back"``.

    Raises:
        InvalidArgumentError: Anything else, naming ``write``.

    Runtime complexity: O(1).
    """
    if isinstance(write, WriteThrough | WriteBack):
        return write
    if write == "through":
        return WriteThrough()
    if write == "back":
        return WriteBack()
    raise InvalidArgumentError(
        f"write must be 'through', 'back', WriteThrough(...) or WriteBack(...), got {write!r:.60}"
    )


def check_arguments(
    durable: object, config: object, write: object, oversize: object
) -> tuple[InMemoryCheckpointConfig, WriteThrough | WriteBack, Settings]:
    """Check ``TieredSaver``'s arguments, in the order of its signature; return the hot tier's config, the write
    policy and the settings the paths read.

    Raises:
        InvalidArgumentError: A setting is invalid, naming it (the first one found).

    Runtime complexity: O(1).
    """
    if not isinstance(durable, BaseCheckpointSaver):
        raise InvalidArgumentError(f"durable must be a LangGraph BaseCheckpointSaver, got {type(durable).__name__}")
    if isinstance(durable, BoundedInMemorySaver):
        raise InvalidArgumentError(
            f"durable must be a saver that persists (SqliteSaver, PostgresSaver...), got a {type(durable).__name__}: "
            "a thread it evicts would be lost in silence, not kept durable; pass its config as config= instead"
        )
    if isinstance(durable, InMemorySaver):
        warnings.warn(
            "TieredSaver's durable tier is an InMemorySaver: nothing survives the process, so the hot tier bounds "
            "nothing (every thread stays in the InMemorySaver); use SqliteSaver or PostgresSaver to persist",
            stacklevel=3,
        )
    checked = _checked_config(config)
    policy = write_policy(write)
    if oversize not in OVERSIZE_MODES:
        raise InvalidArgumentError(f"oversize must be one of {OVERSIZE_MODES}, got {oversize!r:.40}")
    if isinstance(policy, WriteBack):
        interval = float(policy.flush_interval_seconds)
        age = interval if policy.max_dirty_seconds is None else float(policy.max_dirty_seconds)
        back = Settings("back", "sticky", interval, policy.max_dirty_bytes, age, oversize, persist=policy.persist)
        return checked, policy, back
    many = policy.processes == "many"
    if many:
        reason = conditional_support(durable)
        if reason is not None:
            raise InvalidArgumentError(f"write=WriteThrough(processes='many'): {reason}")
    coherence: Coherence = "validate" if many else "sticky"
    return checked, policy, Settings("through", coherence, oversize=oversize, conditional_writes=many)


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


def check_byte_limit(name: str, value: object) -> None:
    """Refuse anything but None or a whole number of bytes of at least 1 (not a bool, not a float).
    Runtime complexity: O(1)."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise InvalidArgumentError(
            f"{name} must be a whole number of bytes of at least 1, or None for no limit, got {value!r:.40}"
        )
