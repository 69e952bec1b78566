"""The saver behind a server: one process-wide saver, configured from the environment.

LangGraph's Agent Server (``langgraph dev``, langgraph-api) names it in ``langgraph.json``
with the dotted path form, the one its loader imports as a module:

```json
{"graphs": {"agent": "./graph.py:graph"},
 "checkpointer": {"path": "langgraph.checkpoint.bounded.serving.checkpointer"}}
```

``./my_checkpointer.py:checkpointer`` works too, for a file of your own that does
``from langgraph.checkpoint.bounded.serving import checkpointer``;
``langgraph.checkpoint.bounded.serving:checkpointer`` does not (the serving guide says why).
fastapi-langgraph-server takes the saver itself:
``create_app(StandaloneAppConfig(assistants=..., checkpointer=shared_saver()))``.

Every field of ``InMemoryCheckpointConfig`` can be set from an environment variable
``BOUNDED_SAVER_<FIELD>`` (``BOUNDED_SAVER_MAX_THREADS=500``), in the unit the config uses.
The parsers are chosen by each field's type annotation, so a field added to the config is
covered without a change here (a test fails if its type has no parser).

With ``BOUNDED_SAVER_DURABLE`` set (``sqlite:///checkpoints.db``, ``postgresql://...``, or
``sqlite`` for the embedded default, a SQLite file in the working folder), the process-wide saver is
a ``TieredSaver``: the bounded store as a hot tier over that durable saver, so a thread leaving memory
is not lost. ``BOUNDED_SAVER_WRITE`` (``through`` or ``back``) with ``BOUNDED_SAVER_PROCESSES`` (``one`` or
``many``: ``WriteThrough``) or ``BOUNDED_SAVER_FLUSH_INTERVAL_SECONDS``, ``BOUNDED_SAVER_MAX_DIRTY_BYTES`` and
``BOUNDED_SAVER_MAX_DIRTY_SECONDS`` (``WriteBack``; refused with write-through, naming both variables), and
``BOUNDED_SAVER_OVERSIZE`` set it up (``TIERED_SETTINGS``). ``BOUNDED_SAVER_RETENTION_TTL_SECONDS``,
``BOUNDED_SAVER_RETENTION_STRATEGY``, ``BOUNDED_SAVER_RETENTION_KEEP_LAST`` and
``BOUNDED_SAVER_RETENTION_SWEEP_INTERVAL_SECONDS`` give it a ``RetentionPolicy`` (the Agent Server's
``checkpointer.ttl`` block, in seconds rather than minutes).

Lifetime: the saver is created at the first ``checkpointer()`` entry or ``shared_saver()`` call
and lives as long as the process. The Agent Server enters the factory once per OS thread and
exits it only from the thread that runs its lifespan, so entries are counted: when the last one
exits the saver is closed (its background work stops, after one last autosave), and a later entry
resumes it. An ``atexit`` hook closes it at interpreter exit too, for the
entries that never exit and for ``shared_saver()`` users.
"""

from __future__ import annotations

import asyncio
import atexit
import importlib
import importlib.util
import logging
import math
import os
import re
import sqlite3
import tempfile
import threading
import types
import typing
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, fields
from functools import cache
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from langgraph.checkpoint.bounded.config import InMemoryCheckpointConfig
from langgraph.checkpoint.bounded.engine import BoundedSaverError
from langgraph.checkpoint.bounded.saver import BoundedInMemorySaver
from langgraph.checkpoint.bounded.snapshot import SnapshotError
from langgraph.checkpoint.bounded.tiered import RetentionPolicy, TieredSaver, WriteBack, WriteThrough
from langgraph.checkpoint.bounded.tiered.retention.policy import DEFAULT_SWEEP_INTERVAL_SECONDS
from langgraph.checkpoint.bounded.tiered.retention.policy import STRATEGIES as RETENTION_STRATEGIES
from langgraph.checkpoint.bounded.tiered.settings import OVERSIZE_MODES, PROCESSES, WRITE_SHORTHANDS

__all__ = [
    "EMBEDDED_SQLITE_FILE",
    "ENV_PREFIX",
    "POSTGRES_CONNECT_SECONDS",
    "TIERED_SETTINGS",
    "ServingConfigError",
    "Setting",
    "TieredSettings",
    "checkpointer",
    "config_from_env",
    "fields_without_setting",
    "open_durable",
    "reset_shared_saver",
    "settings",
    "shared_saver",
    "tiered_from_env",
]

logger = logging.getLogger(__name__)

ENV_PREFIX = "BOUNDED_SAVER_"
UNSET_OPTIONAL = ""  # an optional field set to the empty string means None (compose files "unset" that way)


class ServingConfigError(BoundedSaverError, ValueError):
    """An environment variable ``BOUNDED_SAVER_*`` is unknown or holds an invalid value."""


# --- environment variables -----------------------------------------------------------------


class _Invalid(BoundedSaverError, ValueError):
    """A raw value that a parser refused; the caller adds the variable's name."""


@dataclass(frozen=True)
class Setting:
    """How one config field is read from its environment variable.

    Attributes:
        field: The ``InMemoryCheckpointConfig`` field.
        variable: Its environment variable, ``BOUNDED_SAVER_<FIELD>``.
        expected: What a valid value looks like, for error messages and the serving guide.
        parse: Turns the raw string into the field's value; raises ``_Invalid``.
        secret: The value is never echoed, in errors or logs.
    """

    field: str
    variable: str
    expected: str
    parse: Callable[[str], object]
    secret: bool = False

    def read(self, raw: str) -> object:
        """The field's value from the variable's raw string. Runtime complexity: O(len(raw))."""
        try:
            return self.parse(raw)
        except _Invalid as error:
            shown = "(value hidden)" if self.secret else f"is {raw!r:.80}"
            message = f"{self.variable} {shown}: expected {self.expected}. {error}".rstrip()
            raise ServingConfigError(message) from (None if self.secret else error.__cause__)


_DIGITS = re.compile(r"[0-9]+(_[0-9]+)*")


def _whole_number(raw: str) -> float:
    text = raw.strip()
    if text.lower() in ("inf", "infinity"):
        return math.inf  # lifts the limit, as math.inf does in the config
    if _DIGITS.fullmatch(text) is None:
        raise _Invalid("")
    try:
        return int(text)
    except ValueError:  # more digits than Python converts
        raise _Invalid(f"A number of {len(text):,} digits is far past any limit; inf lifts it.") from None


def _seconds(raw: str) -> float:
    text = raw.strip()
    try:
        value = float(text)  # accepts 1.5, 1e3, 1_800, inf
    except ValueError:
        raise _Invalid("") from None
    if math.isinf(value) and text.lower().lstrip("+-") not in ("inf", "infinity"):
        # 1e400 or 5,000 nines: a float makes them inf, which would lift the limit unasked
        raise _Invalid("It is too large to be a number of seconds; inf lifts the limit.")
    return value


def _word(raw: str) -> str:
    text = raw.strip()
    if not text:
        raise _Invalid("")
    return text  # the config names the allowed values if this is not one of them


def _choice(choices: tuple[object, ...]) -> Callable[[str], object]:
    def parse_choice(raw: str) -> object:
        text = raw.strip()
        if text not in choices:
            raise _Invalid("")
        return text

    return parse_choice


def _boolean(raw: str) -> bool:
    text = raw.strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise _Invalid("")


def _optional(parse: Callable[[str], object]) -> Callable[[str], object]:
    def parse_optional(raw: str) -> object:
        return None if raw.strip() == UNSET_OPTIONAL else parse(raw)

    return parse_optional


def _path(raw: str) -> str:
    return raw.strip()


def _secret(raw: str) -> str:
    return raw  # kept exactly: stripping would silently change a key


def _callable(raw: str) -> Callable[..., object]:
    module_name, colon, attribute = raw.strip().partition(":")
    if not colon or not module_name or not attribute:
        raise _Invalid("")
    try:
        target: object = importlib.import_module(module_name)
    except Exception as error:
        raise _Invalid(f"Importing {module_name!r} failed: {type(error).__name__}: {error}") from error
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise _Invalid(f"{module_name!r} has no attribute {attribute!r}.")
        target = getattr(target, part)
    if not callable(target):
        raise _Invalid(f"{raw.strip()!r} is a {type(target).__name__}, not a callable.")
    return target


def _unit(field_name: str) -> str:
    if field_name.endswith("_bytes"):
        return "bytes"
    if field_name.endswith("_seconds"):
        return "seconds"
    return "count"


def _setting_for(field_name: str, annotation: object) -> Setting | None:
    """The parser a field's type annotation calls for, or None for a type no parser handles."""
    variable = ENV_PREFIX + field_name.upper()
    is_union = typing.get_origin(annotation) in (typing.Union, types.UnionType)  # Optional[X] as well as X | None
    members = set(typing.get_args(annotation)) if is_union else {annotation}
    optional = type(None) in members
    members.discard(type(None))
    unit = _unit(field_name)

    def setting(expected: str, parse: Callable[[str], object], *, secret: bool = False) -> Setting:
        if optional:
            return Setting(field_name, variable, f"{expected}, or empty for none", _optional(parse), secret)
        return Setting(field_name, variable, expected, parse, secret)

    if len(members) == 1 and typing.get_origin(next(iter(members))) is typing.Literal:
        choices = typing.get_args(next(iter(members)))
        return setting("one of " + ", ".join(map(str, choices)), _choice(choices))
    if members in ({int}, {int, float}):
        noun = "a whole number of bytes" if unit == "bytes" else "a whole number"
        return setting(f"{noun} (digits, _ separators allowed), or inf to lift the limit", _whole_number)
    if members == {float}:
        return setting(f"a number of {unit} such as 1800 or 0.5, or inf", _seconds)
    if members == {bool}:
        return setting("true or false", _boolean)
    if members == {str} and optional:
        return setting("a file path", _path)
    if members == {str}:
        return setting("one of the values the config allows", _word)
    if members == {str, bytes}:
        return setting("a secret string", _secret, secret=True)
    if len(members) == 1 and typing.get_origin(next(iter(members))) is Callable:
        return setting("an import path package.module:attribute naming a callable", _callable)
    return None


@cache
def settings() -> dict[str, Setting]:
    """Every ``InMemoryCheckpointConfig`` field that can be set from the environment, by field name.

    Runtime complexity: O(fields), once per process.
    """
    hints = typing.get_type_hints(InMemoryCheckpointConfig)
    found = {field.name: _setting_for(field.name, hints[field.name]) for field in fields(InMemoryCheckpointConfig)}
    return {name: setting for name, setting in found.items() if setting is not None}


def fields_without_setting() -> list[str]:
    """Config fields whose type no parser handles (a test keeps this empty). Runtime complexity: O(fields)."""
    return [field.name for field in fields(InMemoryCheckpointConfig) if field.name not in settings()]


def config_from_env(environ: Mapping[str, str] | None = None) -> InMemoryCheckpointConfig:
    """An ``InMemoryCheckpointConfig`` from the ``BOUNDED_SAVER_*`` variables; the defaults elsewhere.

    Args:
        environ: The variables to read; ``os.environ`` if omitted.

    Raises:
        ServingConfigError: A variable names no field, holds a value of the wrong form, or a value
            the config refuses. The message names the variable and what it expected, never the value
            of a secret.

    Runtime complexity: O(variables + fields).
    """
    environ = os.environ if environ is None else environ
    known = settings()
    chosen: dict[str, tuple[Setting, str]] = {}  # field -> its setting and raw value
    for variable, raw in sorted(environ.items()):
        if not variable.startswith(ENV_PREFIX):
            continue
        if variable in TIERED_SETTINGS:
            continue  # the durable tier's (tiered_from_env)
        name = variable[len(ENV_PREFIX) :].lower()
        if name not in known:
            is_field = name in {field.name for field in fields(InMemoryCheckpointConfig)}
            why = f"{name} has no parser for its type" if is_field else f"there is no field {name}"
            choices = ", ".join(sorted([*(setting.variable for setting in known.values()), *TIERED_SETTINGS]))
            raise ServingConfigError(f"{variable} names no InMemoryCheckpointConfig setting ({why}); known: {choices}")
        chosen[name] = (known[name], raw)
    values: dict[str, Any] = {name: setting.read(raw) for name, (setting, raw) in chosen.items()}
    for name in values:  # each value alone first, so that the error names the variable holding it
        _validated({name: values[name]}, [chosen[name]])
    return _validated(values, list(chosen.values()))


def _validated(values: dict[str, Any], named: list[tuple[Setting, str]]) -> InMemoryCheckpointConfig:
    try:
        return InMemoryCheckpointConfig(**values)
    except (ValueError, TypeError) as error:
        message = str(error)
        for setting, raw in named:
            if setting.secret and raw:
                message = message.replace(repr(raw), "(value hidden)").replace(raw, "(value hidden)")
        variables = ", ".join(setting.variable for setting, _ in named)
        raise ServingConfigError(f"{variables}: {message}") from None  # not chained: the cause may echo a secret


# --- the durable tier ----------------------------------------------------------------------


EMBEDDED_SQLITE_FILE = "langgraph-checkpoints.sqlite"
"""The SQLite file ``BOUNDED_SAVER_DURABLE=sqlite`` names: the embedded default, in the working folder."""

POSTGRES_CONNECT_SECONDS = 30.0
"""How long the start-up waits for PostgreSQL before it fails, naming ``BOUNDED_SAVER_DURABLE``."""


def _durable_url(raw: str) -> str:
    text = raw.strip()
    scheme = text.partition(":")[0].lower()
    if text.lower() == "sqlite" or text.startswith("sqlite:///") or scheme in ("postgresql", "postgres"):
        return text
    raise _Invalid("")


TIERED_SETTINGS: dict[str, Setting] = {
    setting.variable: setting
    for setting in (
        Setting(
            "durable",
            f"{ENV_PREFIX}DURABLE",
            "sqlite:///relative/path.db, sqlite:////absolute/path.db, sqlite (the file "
            f"{EMBEDDED_SQLITE_FILE} in the working folder), or postgresql://user@host:port/database",
            _durable_url,
        ),
        Setting("write", f"{ENV_PREFIX}WRITE", "one of " + ", ".join(WRITE_SHORTHANDS), _choice(WRITE_SHORTHANDS)),
        Setting(
            "processes",
            f"{ENV_PREFIX}PROCESSES",
            "one of " + ", ".join(PROCESSES) + " (many: several processes write one SQLite or PostgreSQL tier)",
            _choice(PROCESSES),
        ),
        Setting(
            "flush_interval_seconds",
            f"{ENV_PREFIX}FLUSH_INTERVAL_SECONDS",
            "a number of seconds such as 1 or 0.5, or inf (flush only on eviction, backpressure and shutdown)",
            _seconds,
        ),
        Setting(
            "max_dirty_bytes",
            f"{ENV_PREFIX}MAX_DIRTY_BYTES",
            "a whole number of bytes (digits, _ separators allowed), or inf to lift the limit",
            _whole_number,
        ),
        Setting("oversize", f"{ENV_PREFIX}OVERSIZE", "one of " + ", ".join(OVERSIZE_MODES), _choice(OVERSIZE_MODES)),
        Setting(
            "max_dirty_seconds",
            f"{ENV_PREFIX}MAX_DIRTY_SECONDS",
            "a number of seconds such as 1 or 0.5, or inf (by default the flush interval)",
            _seconds,
        ),
        Setting(
            "retention_ttl_seconds",
            f"{ENV_PREFIX}RETENTION_TTL_SECONDS",
            "a number of seconds such as 2592000 (30 days): a thread with no write for longer is swept",
            _seconds,
        ),
        Setting(
            "retention_strategy",
            f"{ENV_PREFIX}RETENTION_STRATEGY",
            "one of " + ", ".join(RETENTION_STRATEGIES) + " (what sweeping an idle thread does)",
            _choice(RETENTION_STRATEGIES),
        ),
        Setting(
            "retention_keep_last",
            f"{ENV_PREFIX}RETENTION_KEEP_LAST",
            "a whole number of checkpoints each namespace keeps, such as 50",
            _whole_number,
        ),
        Setting(
            "retention_sweep_interval_seconds",
            f"{ENV_PREFIX}RETENTION_SWEEP_INTERVAL_SECONDS",
            "a number of seconds between sweeps, such as 3600, or inf (none in the background)",
            _seconds,
        ),
    )
}
"""The variables of the durable tier, by variable name (they set up ``TieredSaver``, not the config)."""


@dataclass(frozen=True)
class TieredSettings:
    """The durable tier the environment asks for.

    Attributes:
        durable: Where it is: ``sqlite:///path``, ``sqlite`` or a PostgreSQL URL.
        write: ``"through"`` or ``"back"``.
        processes: ``"one"`` or ``"many"`` (``WriteThrough(processes=...)``; None: unset, ``"one"``).
        flush_interval_seconds: ``WriteBack.flush_interval_seconds`` (None: unset, its default).
        max_dirty_bytes: ``WriteBack.max_dirty_bytes`` (None: unset, its default).
        oversize: ``"durable"`` or ``"refuse"``: what a write past a per-item limit does.
        max_dirty_seconds: ``WriteBack.max_dirty_seconds`` (None: unset, the flush interval).
        retention_ttl_seconds: ``RetentionPolicy.idle_ttl_seconds`` (None: no TTL).
        retention_strategy: ``RetentionPolicy.strategy``.
        retention_keep_last: ``RetentionPolicy.keep_last`` (None: no count).
        retention_sweep_interval_seconds: ``RetentionPolicy.sweep_interval_seconds``.
    """

    durable: str
    write: Any = "through"
    processes: Any = None
    flush_interval_seconds: float | None = None
    max_dirty_bytes: float | None = None
    oversize: Any = "durable"
    max_dirty_seconds: float | None = None
    retention_ttl_seconds: float | None = None
    retention_strategy: Any = "delete"
    retention_keep_last: Any = None
    retention_sweep_interval_seconds: float = DEFAULT_SWEEP_INTERVAL_SECONDS

    def write_policy(self) -> WriteThrough | WriteBack:
        """The write policy ``BOUNDED_SAVER_WRITE`` and its companions describe.

        Raises:
            ServingConfigError: A write-back setting with ``BOUNDED_SAVER_WRITE=through`` (or unset), or
                ``BOUNDED_SAVER_PROCESSES`` with ``BOUNDED_SAVER_WRITE=back``, naming both variables; or a value
                the policy refuses, naming its variable.

        Runtime complexity: O(1).
        """
        write = f"{ENV_PREFIX}WRITE"
        if self.write == "through":
            for field in _WRITE_BACK_FIELDS:
                if getattr(self, field) is not None:
                    raise ServingConfigError(
                        f"{TIERED_SETTINGS_BY_FIELD[field].variable} and {write}={self.write}: a write-back setting "
                        f"means nothing with write-through; set {write}=back, or unset the first"
                    )
            return WriteThrough() if self.processes is None else WriteThrough(processes=self.processes)
        if self.processes is not None:
            raise ServingConfigError(
                f"{ENV_PREFIX}PROCESSES and {write}=back: write-back serves each thread from one process (another "
                f"cannot see its unflushed writes); unset the first, or set {write}=through"
            )
        given = {field: getattr(self, field) for field in _WRITE_BACK_FIELDS if getattr(self, field) is not None}
        try:
            return WriteBack(**given)
        except ValueError as error:
            field = str(error).split(" ", 1)[0]
            raise ServingConfigError(f"{TIERED_SETTINGS_BY_FIELD[field].variable}: {error}") from None

    def retention(self) -> RetentionPolicy | None:
        """The retention policy the ``BOUNDED_SAVER_RETENTION_*`` variables describe, or None when neither a TTL
        nor a count is set (the strategy and interval alone remove nothing).

        Raises:
            ServingConfigError: A value the policy refuses, naming its variable.

        Runtime complexity: O(1).
        """
        if self.retention_ttl_seconds is None and self.retention_keep_last is None:
            return None
        settings = {
            "idle_ttl_seconds": self.retention_ttl_seconds,
            "strategy": self.retention_strategy,
            "keep_last": self.retention_keep_last,
            "sweep_interval_seconds": self.retention_sweep_interval_seconds,
        }
        try:
            return RetentionPolicy(**settings)
        except ValueError as error:
            field = str(error).split(" ", 1)[0]
            variable = f"{ENV_PREFIX}RETENTION_{_RETENTION_VARIABLES.get(field, field).upper()}"
            raise ServingConfigError(f"{variable}: {error}") from None


_RETENTION_VARIABLES = {"idle_ttl_seconds": "ttl_seconds"}
_WRITE_BACK_FIELDS = ("flush_interval_seconds", "max_dirty_bytes", "max_dirty_seconds")


def tiered_from_env(environ: Mapping[str, str] | None = None) -> TieredSettings | None:
    """The durable tier ``BOUNDED_SAVER_DURABLE`` and its companions ask for, or None (a memory-only saver).

    Raises:
        ServingConfigError: A value of the wrong form, or a companion variable set without
            ``BOUNDED_SAVER_DURABLE``; the message names the variable.

    Runtime complexity: O(variables).
    """
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {
        setting.field: setting.read(environ[name]) for name, setting in TIERED_SETTINGS.items() if name in environ
    }
    if "durable" not in values:
        if values:
            named = ", ".join(TIERED_SETTINGS_BY_FIELD[field].variable for field in sorted(values))
            raise ServingConfigError(f"{named}: set {ENV_PREFIX}DURABLE too, or unset them (they set up its tier)")
        return None
    return TieredSettings(**values)


TIERED_SETTINGS_BY_FIELD = {setting.field: setting for setting in TIERED_SETTINGS.values()}


def _shown_url(url: str) -> str:
    """A URL without its password, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return urlunsplit(parts._replace(netloc=netloc))


def open_durable(url: str) -> Any:
    """The durable saver a ``BOUNDED_SAVER_DURABLE`` value names, opened and set up.

    A SQLite file (its folder must exist; it is created if absent), or a PostgreSQL database reached
    through a connection pool that checks its connections (so that the saver goes on once the server
    is back after an outage). LangGraph's tables are created if they do not exist.

    Raises:
        ServingConfigError: The folder does not exist, the file cannot be opened, or the database
            cannot be reached; the message names the variable, never a password.

    Runtime complexity: one connection and the tables' set-up.
    """
    variable = f"{ENV_PREFIX}DURABLE"
    if url.lower() == "sqlite" or url.startswith("sqlite:///"):
        try:
            from langgraph.checkpoint.sqlite import SqliteSaver
        except ImportError as error:
            raise ServingConfigError(
                f"{variable} names SQLite, which needs langgraph-checkpoint-sqlite "
                f"(pip install 'langgraph-checkpoint-bounded[tiered]'): {error}"
            ) from None

        path = EMBEDDED_SQLITE_FILE if url.lower() == "sqlite" else url[len("sqlite:///") :]
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            raise ServingConfigError(f"{variable}: the folder of {path} does not exist")
        try:
            saver = SqliteSaver(sqlite3.connect(path, check_same_thread=False))
            saver.setup()
        except sqlite3.Error as error:
            raise ServingConfigError(f"{variable}: cannot open the SQLite file {path}: {error}") from None
        return saver
    try:
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row
        from psycopg_pool import ConnectionPool
    except ImportError as error:
        raise ServingConfigError(
            f"{variable} names PostgreSQL, which needs langgraph-checkpoint-postgres and psycopg[pool] "
            f"(pip install 'langgraph-checkpoint-bounded[tiered]'): {error}"
        ) from None
    pool: ConnectionPool[Any] = ConnectionPool(
        url,
        kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
        check=ConnectionPool.check_connection,
        open=False,
    )
    try:
        pool.open(wait=True, timeout=POSTGRES_CONNECT_SECONDS)
        postgres_saver = PostgresSaver(pool)
        postgres_saver.setup()
    except Exception as error:
        pool.close()
        shown = str(error).replace(url, _shown_url(url))
        raise ServingConfigError(
            f"{variable}: cannot reach {_shown_url(url)}: {type(error).__name__}: {shown}"
        ) from None
    return postgres_saver


# --- the one saver of the process ----------------------------------------------------------


class _Shared:
    """The process-wide saver and how many ``checkpointer()`` entries hold it; guarded by ``lock``."""

    lock = threading.Lock()
    saver: BoundedInMemorySaver | TieredSaver | None = None
    entries = 0
    atexit_registered = False


def shared_saver() -> BoundedInMemorySaver | TieredSaver:
    """The process-wide saver, created from the environment at the first call.

    With ``BOUNDED_SAVER_DURABLE``, it is a ``TieredSaver`` over that durable saver (see
    ``tiered_from_env``). With ``BOUNDED_SAVER_AUTOSAVE_PATH`` naming an existing snapshot, the saver starts from it
    (under the current limits, see ``BoundedInMemorySaver.load``). Prometheus metrics are
    registered in the default registry when ``prometheus_client`` is installed.

    Raises:
        ServingConfigError: A ``BOUNDED_SAVER_*`` variable is unknown or invalid.
        SnapshotError: The autosave file exists but is not a readable snapshot (it is left untouched).

    Runtime complexity: O(1) once created; the first call loads the snapshot, O(its size).
    """
    with _Shared.lock:
        return _shared_locked()


def _shared_locked() -> BoundedInMemorySaver | TieredSaver:
    if _Shared.saver is None:
        _Shared.saver = _create(config_from_env(), tiered_from_env())
        if not _Shared.atexit_registered:
            atexit.register(_close_at_exit)
            _Shared.atexit_registered = True
    return _Shared.saver


@asynccontextmanager
async def checkpointer() -> AsyncIterator[BoundedInMemorySaver | TieredSaver]:
    """Yield the process-wide saver: the factory ``langgraph.json`` names.

    Any number of entries, from any threads and event loops, yield the same saver. The last
    entry to exit closes it (one last autosave); the next entry resumes autosaving.

    Example:
        ``{"checkpointer": {"path": "langgraph.checkpoint.bounded.serving.checkpointer"}}`` in ``langgraph.json``.

    Raises:
        ServingConfigError: A ``BOUNDED_SAVER_*`` variable is unknown or invalid.
        SnapshotError: The autosave file exists but is not a readable snapshot.

    Runtime complexity: O(1) per entry and exit, plus one snapshot load at the first entry and one
    save at the last exit, which run in a worker thread so that the event loop is not held up.
    """
    saver = await asyncio.to_thread(_enter)
    try:
        yield saver
    finally:
        await asyncio.to_thread(_exit)


def _enter() -> BoundedInMemorySaver | TieredSaver:
    with _Shared.lock:
        saver = _shared_locked()
        if _Shared.entries == 0:
            saver.resume()  # a previous last exit closed it: autosave and the expiry sweep start again
        _Shared.entries += 1
        return saver


def _exit() -> None:
    with _Shared.lock:  # held through close(), so that an entry cannot slip in between and find autosave stopped
        _Shared.entries -= 1
        if _Shared.entries == 0 and _Shared.saver is not None:
            _Shared.saver.close()


def _close_at_exit() -> None:
    with _Shared.lock:
        if _Shared.saver is not None:
            _Shared.saver.close()


def reset_shared_saver() -> None:
    """Close and forget the process-wide saver, so the next use builds one from the environment again.

    For tests. Its metrics leave the default registry with it.

    Runtime complexity: one save if it autosaves.
    """
    with _Shared.lock:
        saver, _Shared.saver, _Shared.entries = _Shared.saver, None, 0
        if saver is None:
            return
        saver.close()
        if _metrics_available():
            from langgraph.checkpoint.bounded.metrics import unregister_metrics

            unregister_metrics(saver)


def _check_autosave_path(path: str) -> None:
    """Refuse, at start-up, an autosave path every save would fail on (logged, but unseen for as long as
    the server runs): a folder, a path in a missing folder, or a place this process cannot write."""
    variable = f"{ENV_PREFIX}AUTOSAVE_PATH"
    if os.path.isdir(path):
        raise ServingConfigError(f"{variable}: {path} is a folder; name a file in it (state.snapshot, say)")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ServingConfigError(f"{variable}: the folder of {path} does not exist")
    try:  # what a save does: a temporary file beside the target
        with tempfile.NamedTemporaryFile(dir=folder, prefix=f".{os.path.basename(path)}.probe."):
            pass
    except OSError as error:
        raise ServingConfigError(f"{variable}: cannot write in the folder of {path}: {error.strerror}") from None
    if os.path.exists(path) and not os.access(path, os.R_OK):
        raise ServingConfigError(f"{variable}: {path} exists but cannot be read")


def _create(
    config: InMemoryCheckpointConfig, tiered: TieredSettings | None = None
) -> BoundedInMemorySaver | TieredSaver:
    if tiered is not None:
        return _create_tiered(config, tiered)
    path = config.autosave_path
    if path is not None:
        _check_autosave_path(path)
    if path is not None and os.path.exists(path):
        try:
            saver = BoundedInMemorySaver.load(path, config=config)
        except SnapshotError as error:
            raise SnapshotError(
                f"{path} ({ENV_PREFIX}AUTOSAVE_PATH) is not a readable snapshot: {error}. "
                "It was left untouched: move it away to start with an empty store."
            ) from error
        report = saver.load_report
        if report is not None:
            logger.info(
                "restored %d threads from %s (%d expired, %d evicted, %d rejected under the current limits)",
                len(report.loaded),
                path,
                len(report.expired),
                len(report.evicted),
                len(report.rejected),
            )
    else:
        saver = BoundedInMemorySaver(config=config)
    logger.info("a memory-only saver (no durable tier: a thread it drops is lost): %s", _effective_settings(config))
    if _metrics_available():
        from langgraph.checkpoint.bounded.metrics import register_metrics

        register_metrics(saver)
    return saver


def _effective_settings(config: InMemoryCheckpointConfig) -> str:
    """Every setting of ``config`` as ``field=value``, as the start-up log line shows them: what took effect,
    defaults included, whichever variables set them. The snapshot key is never shown, only whether it is set.

    Runtime complexity: O(fields).
    """
    shown = []
    for field in fields(config):
        value = getattr(config, field.name)
        if field.name == "snapshot_key":
            text = "none" if value is None else "set"
        elif callable(value):
            text = f"{getattr(value, '__module__', '?')}:{getattr(value, '__qualname__', type(value).__name__)}"
        elif isinstance(value, float) and math.isinf(value):
            text = "inf"
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            text = f"{value:_}" if float(value).is_integer() and abs(value) >= 10_000 else f"{value:g}"
        else:
            text = "none" if value is None else str(value)
        shown.append(f"{field.name}={text}")
    return ", ".join(shown)


def _create_tiered(config: InMemoryCheckpointConfig, tiered: TieredSettings) -> TieredSaver:
    for field, why in (("autosave_path", "the durable tier is what persists"), ("on_evict", "nothing is lost")):
        if getattr(config, field) is not None:
            raise ServingConfigError(
                f"{ENV_PREFIX}{field.upper()} and {ENV_PREFIX}DURABLE: unset the first ({why} with a durable tier)"
            )
    write, retention = tiered.write_policy(), tiered.retention()  # refused before a connection is opened
    durable = open_durable(tiered.durable)
    try:
        saver = TieredSaver(durable, config=config, write=write, oversize=tiered.oversize, retention=retention)
    except ServingConfigError:
        raise
    except ValueError as error:
        raise ServingConfigError(f"{ENV_PREFIX}DURABLE and its settings: {error}") from None
    logger.info(
        "a tiered saver: the bounded store over %s (%s), write=%s, retention=%s",
        type(durable).__name__,
        _shown_url(tiered.durable),
        saver.write,
        saver.retention or "none (the durable tier keeps everything)",
    )
    if _metrics_available():
        from langgraph.checkpoint.bounded.metrics import register_metrics

        register_metrics(saver)
    return saver


# --- a thread's size over HTTP ----------------------------------------------------------------------------------


async def thread_storage_report(thread_id: str) -> dict[str, object]:
    """The process-wide saver's report on a thread (``thread_storage``) as JSON-ready data, in the shape of the
    Agent Server's ``GET /threads/{thread_id}/storage`` (``total_bytes``, ``checkpoints``, ``channel_values``
    with ``by_channel``, ``pending_writes``), with ``tier`` and, for a ``TieredSaver``, ``hot`` and ``durable``.

    Raises:
        ValueError: The thread id is invalid.

    Runtime complexity: that of ``thread_storage``.
    """
    report = await shared_saver().athread_storage(thread_id)
    return {**report.as_dict(), "thread_id": thread_id}


@cache
def _storage_app() -> Any:
    """The Starlette app of ``storage_app``, made once (starlette comes with the Agent Server)."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def storage(request: Request) -> JSONResponse:
        try:
            body = await thread_storage_report(request.path_params["thread_id"])
        except ValueError as error:
            return JSONResponse({"detail": str(error)}, status_code=422)
        return JSONResponse(body)

    return Starlette(routes=[Route("/threads/{thread_id}/storage", storage, methods=["GET"])])


def __getattr__(name: str) -> Any:
    """``storage_app``: a Starlette app answering ``GET /threads/{thread_id}/storage`` from the process-wide saver.

    The Agent Server answers that route itself with 501 for any custom checkpointer; its ``langgraph.json``
    ``"http": {"app": "langgraph.checkpoint.bounded.serving:storage_app"}`` puts this app's route first.
    Made at first use, so that importing this module needs no starlette. Runtime complexity: O(1).
    """
    if name == "storage_app":
        return _storage_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _metrics_available() -> bool:
    return importlib.util.find_spec("prometheus_client") is not None


if __name__ != "langgraph.checkpoint.bounded.serving":  # pragma: no cover - loaded by path (".../serving.py:x")
    # A loader that runs this file as a module of another name would give the process a second saver:
    # hand out the package module's one instead.
    from langgraph.checkpoint.bounded.serving import (
        checkpointer,
        config_from_env,
        reset_shared_saver,
        shared_saver,
    )
