"""How each durable saver stores and answers, so that the hot tier answers as it does.

``TieredSaver`` promises the durable tier's answers whether a thread is hot or
not. The savers differ in ways the public API does not show, so each known one
has a ``DurableFormat`` here:

* **metadata**: ``SqliteSaver`` stores it as JSON (``{1: 'a'}`` reads back as
  ``{'1': 'a'}``, a ``datetime`` cannot be stored at all), ``PostgresSaver`` as
  ``jsonb`` (no ``writes`` key, no NaN, no NUL character, integral floats in
  exponent form read back as ints). ``normalize_metadata`` gives the hot tier
  what the durable saver will read back, and refuses, before anything is
  written or acknowledged, what it cannot store;
* **filters**: ``list(filter=...)`` is ``json_extract`` equality for SQLite
  (a dotted key is a path, a bad key raises), ``jsonb`` containment for
  PostgreSQL (a nested dict matches partially, ``None`` needs the key), Python
  equality for ``InMemorySaver``. ``hot_filter`` gives the same predicate where
  it can be computed from metadata alone, and None where it cannot cheaply be
  (the caller then reads the durable tier);
* **pending writes**: the API returns neither a write's ``idx`` nor its
  ``task_path``, which order and deduplicate later writes. ``exact_writes``
  reads them from the saver's own tables, so that a read-through admits the
  writes exactly as they are stored;
* **the coherence check** (``WriteThrough(processes="many")``): ``newest`` answers a
  namespace's newest checkpoint id and a digest of its pending writes by one
  indexed query, and ``writes_digest`` computes the same digest from the hot
  copy's writes: a replaced write (a retried task's ``__error__``, a second
  ``Command(resume=...)``) changes it, where a count of writes did not.

Other savers get the generic format: metadata as given, every filtered list
read from the durable tier, pending writes admitted in the order the saver
returned them (and a checkpoint admitted so is not kept hot once more writes
land on it), and the coherence check made by a ``get_tuple``.

The sync methods are for a sync saver, the ``a``-prefixed ones for an async
saver on its own event loop; ``durable.DurableTier`` calls the right side.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, NamedTuple

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_metadata,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from ..engine import InvalidArgumentError, WriteRecord

__all__ = [
    "DurableFormat",
    "Kind",
    "MetadataFilter",
    "Newest",
    "format_of",
    "kind_of",
]

Kind = Literal["sqlite", "async_sqlite", "postgres", "async_postgres", "memory", "other"]

_KNOWN: tuple[tuple[Kind, str, str], ...] = (
    ("async_sqlite", "langgraph.checkpoint.sqlite.aio", "AsyncSqliteSaver"),
    ("sqlite", "langgraph.checkpoint.sqlite", "SqliteSaver"),
    ("async_postgres", "langgraph.checkpoint.postgres.aio", "AsyncPostgresSaver"),
    ("postgres", "langgraph.checkpoint.postgres", "PostgresSaver"),
    ("memory", "langgraph.checkpoint.memory", "InMemorySaver"),
)

MetadataFilter = Callable[[Mapping[str, Any]], bool]
"""Whether a checkpoint's (normalized) metadata matches a ``list()`` filter."""

EXACT_INT = 2**53
"""Integers past this, as filter values, go to the durable tier (SQLite compares them as floats)."""


class Newest(NamedTuple):
    """What the coherence check compares: a namespace's newest checkpoint id (None: it has none) and a
    digest of that checkpoint's pending writes (None: it has none)."""

    checkpoint_id: str | None
    writes: str | None


@functools.cache
def _class(module: str, name: str) -> type[Any] | None:
    try:
        found: type[Any] = getattr(importlib.import_module(module), name)
    except ImportError:  # the optional package is absent: no saver of it can exist either
        return None
    return found


def kind_of(saver: BaseCheckpointSaver[Any]) -> Kind:
    """Which known saver this is (a subclass counts as its base), or ``"other"``. Runtime complexity: O(1)."""
    for kind, module, name in _KNOWN:
        found = _class(module, name)
        if found is not None and isinstance(saver, found):
            return kind
    return "other"


# --- digests of pending writes -----------------------------------------------------------------------------------


def _md5(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


def _digest(parts: Iterable[str]) -> str | None:
    joined = "\x1e".join(parts)
    return _md5(joined.encode()) if joined else None


def _exact_digest(rows: Iterable[tuple[str, int, str, str | None, bytes]]) -> str | None:
    """Rows ``(task_id, idx, channel, type, value)``, in ``(task_id, idx)`` order (byte order of the task id, as
    PostgreSQL's ``COLLATE "C"``), as the PostgreSQL query digests them."""
    return _digest(
        f"{task_id}\x1f{idx}\x1f{channel}\x1f{kind or ''}\x1f{_md5(value)}"
        for task_id, idx, channel, kind, value in sorted(rows, key=lambda row: (row[0].encode(), row[1]))
    )


# --- metadata ------------------------------------------------------------------------------------------------------


class DurableFormat:
    """The generic format (any saver): metadata as given, filters and the coherence check through the API.

    Attributes:
        kind: Which saver it describes.
        exact: Whether ``exact_writes`` reads a write's index and task path (else admitted writes are ordered as
            the saver returned them, their paths invented).
        tables: Whether ``newest`` reads the saver's tables (else the coherence check is a ``get_tuple``).
        first_write_wins: Whether, in a batch of writes mixing regular and special channels, the saver keeps a
            key's first write where one is held already (SQL ``INSERT ... DO NOTHING``), where ``InMemorySaver``
            overwrites a special channel's.
    """

    kind: Kind = "other"
    exact = False
    tables = False
    first_write_wins = False

    def normalize_metadata(self, config: RunnableConfig, metadata: CheckpointMetadata) -> CheckpointMetadata:
        """The metadata as the durable saver will read it back (merged with the config's, as every saver does).

        Raises:
            ValueError: The durable saver cannot store it (naming the saver and why).

        Runtime complexity: O(size of the metadata).
        """
        return metadata

    def hot_filter(self, filter: Mapping[Any, Any]) -> MetadataFilter | None:
        """The durable saver's filter as a predicate on metadata, or None to read the durable tier.

        Runtime complexity: O(keys of the filter).
        """
        return None

    def writes_digest(self, writes: Sequence[WriteRecord]) -> str | None:
        """The digest ``newest`` answers for these writes (a hot checkpoint's). Runtime complexity: O(size)."""
        return _digest(f"{w.task_id}\x1f{w.channel}\x1f{w.value_type}\x1f{_md5(w.value_data)}" for w in writes)

    def tuple_digest(self, found: CheckpointTuple | None, serde: SerializerProtocol) -> Newest:
        """``newest`` from a ``get_tuple`` (the generic coherence check). Runtime complexity: serializing its writes."""
        if found is None:
            return Newest(None, None)
        checkpoint_id = str(found.config.get("configurable", {})["checkpoint_id"])
        parts = []
        for task_id, channel, value in found.pending_writes or []:
            kind, data = serde.dumps_typed(value)
            parts.append(f"{task_id}\x1f{channel}\x1f{kind}\x1f{_md5(data)}")
        return Newest(checkpoint_id, _digest(parts))

    # --- the saver's own tables (None: not readable this way) -------------------------------------------------

    def newest(self, saver: Any, thread_id: str, namespace: str) -> Newest | None:
        """The coherence check by one indexed query, or None (use ``tuple_digest``). Runtime complexity: one round
        trip."""
        return None

    async def anewest(self, saver: Any, thread_id: str, namespace: str) -> Newest | None:
        """``newest`` for an async saver, on its own loop."""
        return None

    def exact_writes(
        self, saver: Any, thread_id: str, namespace: str, checkpoint_ids: Sequence[str]
    ) -> dict[str, list[WriteRecord]] | None:
        """Each checkpoint's pending writes as stored (index and task path included), or None.

        Runtime complexity: one round trip.
        """
        return None

    async def aexact_writes(
        self, saver: Any, thread_id: str, namespace: str, checkpoint_ids: Sequence[str]
    ) -> dict[str, list[WriteRecord]] | None:
        """``exact_writes`` for an async saver, on its own loop."""
        return None


def _python_filter(filter: Mapping[Any, Any]) -> MetadataFilter:
    items = list(filter.items())
    return lambda metadata: all(value == metadata.get(key) for key, value in items)


class MemoryFormat(DurableFormat):
    """``InMemorySaver``: metadata kept as given (msgpack), Python equality for filters, its dicts read directly."""

    kind: Kind = "memory"
    exact = True
    tables = True

    def hot_filter(self, filter: Mapping[Any, Any]) -> MetadataFilter | None:
        return _python_filter(filter)

    def writes_digest(self, writes: Sequence[WriteRecord]) -> str | None:
        return _exact_digest((w.task_id, w.idx, w.channel, w.value_type, w.value_data) for w in writes)

    def newest(self, saver: Any, thread_id: str, namespace: str) -> Newest | None:
        checkpoints = saver.storage.get(thread_id, {}).get(namespace, {})  # .get: a read creates nothing
        if not checkpoints:
            return Newest(None, None)
        newest_id = max(checkpoints)
        writes = saver.writes.get((thread_id, namespace, newest_id), {})
        rows = [(task_id, idx, channel, *value) for (task_id, idx), (_, channel, value, _) in writes.items()]
        return Newest(newest_id, _exact_digest(rows))

    def exact_writes(
        self, saver: Any, thread_id: str, namespace: str, checkpoint_ids: Sequence[str]
    ) -> dict[str, list[WriteRecord]] | None:
        found: dict[str, list[WriteRecord]] = {}
        for checkpoint_id in checkpoint_ids:
            writes = saver.writes.get((thread_id, namespace, checkpoint_id), {})
            found[checkpoint_id] = [
                WriteRecord.of(task_id, idx, channel, value, path)
                for (task_id, idx), (_, channel, value, path) in writes.items()
            ]
        return found


_SQLITE_KEY = re.compile(r"^[A-Za-z0-9_]+$")


def _scalar(value: object) -> bool:
    """A filter value whose comparison the hot tier can make as the SQL savers do."""
    if value is None or isinstance(value, bool | str):
        return True
    if isinstance(value, int):
        return abs(value) < EXACT_INT
    return isinstance(value, float) and math.isfinite(value)


class SqliteFormat(DurableFormat):
    """``SqliteSaver``: metadata as JSON text; filters by ``json_extract`` equality; ``writes`` rows read directly."""

    kind: Kind = "sqlite"
    exact = True
    tables = True
    first_write_wins = True

    def normalize_metadata(self, config: RunnableConfig, metadata: CheckpointMetadata) -> CheckpointMetadata:
        if not isinstance(metadata, Mapping):
            return metadata  # not metadata at all: refused by the encoding, naming it
        merged = get_checkpoint_metadata(config, metadata)
        try:
            text = json.dumps(merged, ensure_ascii=False)
        except (TypeError, ValueError) as error:
            raise InvalidArgumentError(
                f"metadata cannot be stored by the durable tier's SqliteSaver, as JSON: {error}"
            ) from None
        normalized: CheckpointMetadata = json.loads(text.encode("utf-8", "ignore"))
        return normalized

    def hot_filter(self, filter: Mapping[Any, Any]) -> MetadataFilter | None:
        """``json_extract(metadata, '$.key') = value`` (``IS NULL`` for None): for plain keys and scalar values the
        same as Python equality (SQLite's true is 1, as Python's; a missing key is NULL); a dotted key (a path), a
        key SqliteSaver refuses, a dict or list value (compared as JSON text), or a string that reads as JSON
        text go to the durable tier."""
        for key, value in filter.items():
            if not isinstance(key, str) or not _SQLITE_KEY.match(key) or not _scalar(value):
                return None
            if isinstance(value, str) and value[:1] in ("{", "["):
                return None
        return _python_filter(filter)

    def writes_digest(self, writes: Sequence[WriteRecord]) -> str | None:
        return _exact_digest((w.task_id, w.idx, w.channel, w.value_type, w.value_data) for w in writes)

    def newest(self, saver: Any, thread_id: str, namespace: str) -> Newest | None:
        with saver.cursor(transaction=False) as cursor:
            row = cursor.execute(_SQLITE_NEWEST, (thread_id, namespace)).fetchone()
            if row is None:
                return Newest(None, None)
            rows = cursor.execute(_SQLITE_WRITES_OF_ONE, (thread_id, namespace, row[0])).fetchall()
        return Newest(str(row[0]), _exact_digest(rows))

    async def anewest(self, saver: Any, thread_id: str, namespace: str) -> Newest | None:
        await saver.setup()
        async with saver.lock, saver.conn.execute(_SQLITE_NEWEST, (thread_id, namespace)) as cursor:
            row = await cursor.fetchone()
        if row is None:
            return Newest(None, None)
        async with saver.lock, saver.conn.execute(_SQLITE_WRITES_OF_ONE, (thread_id, namespace, row[0])) as cursor:
            rows = await cursor.fetchall()
        return Newest(str(row[0]), _exact_digest(rows))

    def exact_writes(
        self, saver: Any, thread_id: str, namespace: str, checkpoint_ids: Sequence[str]
    ) -> dict[str, list[WriteRecord]] | None:
        query, parameters = _sqlite_writes(saver, thread_id, namespace, checkpoint_ids)
        with saver.cursor(transaction=False) as cursor:
            rows = cursor.execute(query, parameters).fetchall()
        return _by_checkpoint(rows, checkpoint_ids)

    async def aexact_writes(
        self, saver: Any, thread_id: str, namespace: str, checkpoint_ids: Sequence[str]
    ) -> dict[str, list[WriteRecord]] | None:
        query, parameters = _sqlite_writes(saver, thread_id, namespace, checkpoint_ids)
        await saver.setup()
        async with saver.lock, saver.conn.execute(query, parameters) as cursor:
            rows = await cursor.fetchall()
        return _by_checkpoint(rows, checkpoint_ids)


_SQLITE_NEWEST = (
    "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? "
    "ORDER BY checkpoint_id DESC LIMIT 1"
)
_SQLITE_WRITES_OF_ONE = (
    "SELECT task_id, idx, channel, type, value FROM writes "
    "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
)


def _sqlite_writes(
    saver: Any, thread_id: str, namespace: str, checkpoint_ids: Sequence[str]
) -> tuple[str, tuple[Any, ...]]:
    task_path = "task_path" if getattr(saver, "_has_task_path", True) else "''"
    marks = ", ".join("?" * len(checkpoint_ids))
    query = (
        f"SELECT checkpoint_id, task_id, idx, channel, type, value, {task_path} FROM writes "
        f"WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id IN ({marks})"
    )
    return query, (thread_id, namespace, *checkpoint_ids)


def _by_checkpoint(rows: Iterable[Any], checkpoint_ids: Sequence[str]) -> dict[str, list[WriteRecord]]:
    found: dict[str, list[WriteRecord]] = {checkpoint_id: [] for checkpoint_id in checkpoint_ids}
    for checkpoint_id, task_id, idx, channel, kind, value, path in rows:
        found[str(checkpoint_id)].append(WriteRecord.of(task_id, int(idx), channel, (kind, bytes(value)), path or ""))
    return found


# --- PostgreSQL ------------------------------------------------------------------------------------------------


_NUL = "\\u0000"


def _jsonb_value(value: Any) -> Any:
    """A JSON value as ``jsonb`` reads it back: a float written in exponent form whose value is whole comes back
    as an integer (``numeric`` keeps no exponent)."""
    if isinstance(value, float):
        if value.is_integer() and "e" in repr(value):
            return int(value)
        return value
    if isinstance(value, dict):
        return {key: _jsonb_value(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_jsonb_value(item) for item in value]
    return value


def _jsonb_equal(stored: Any, wanted: Any) -> bool:
    """Scalar ``jsonb`` equality: numbers by value, but a boolean is no number."""
    if isinstance(wanted, bool) or isinstance(stored, bool):
        return type(stored) is type(wanted) and stored == wanted
    if wanted is None:
        return stored is None
    if isinstance(wanted, str):
        return isinstance(stored, str) and stored == wanted
    return isinstance(stored, int | float) and stored == wanted


class PostgresFormat(DurableFormat):
    """``PostgresSaver``: metadata as ``jsonb`` (no ``writes`` key); filters by containment; tables read directly."""

    kind: Kind = "postgres"
    exact = True
    tables = True
    first_write_wins = True

    def normalize_metadata(self, config: RunnableConfig, metadata: CheckpointMetadata) -> CheckpointMetadata:
        if not isinstance(metadata, Mapping):
            return metadata  # not metadata at all: refused by the encoding, naming it
        merged = get_serializable_checkpoint_metadata(config, metadata)
        try:
            text = json.dumps(merged, allow_nan=False)
        except (TypeError, ValueError) as error:
            raise InvalidArgumentError(
                f"metadata cannot be stored by the durable tier's PostgreSQL saver, as jsonb: {error}"
            ) from None
        if _NUL in text:
            raise InvalidArgumentError(
                "metadata cannot be stored by the durable tier's PostgresSaver: jsonb holds no \\u0000"
            )
        normalized: CheckpointMetadata = _jsonb_value(json.loads(text))
        return normalized

    def hot_filter(self, filter: Mapping[Any, Any]) -> MetadataFilter | None:
        """``metadata @> filter`` for top-level scalar values: the key is present and its value equal, a boolean
        being no number; a dict or list value (matched partially), a non-string key, or a value jsonb refuses go
        to the durable tier."""
        for key, value in filter.items():
            if not isinstance(key, str) or not _scalar(value) or "\x00" in key:
                return None
            if isinstance(value, str) and "\x00" in value:
                return None
        items = list(filter.items())
        return lambda metadata: all(key in metadata and _jsonb_equal(metadata[key], value) for key, value in items)

    def writes_digest(self, writes: Sequence[WriteRecord]) -> str | None:
        return _exact_digest((w.task_id, w.idx, w.channel, w.value_type, w.value_data) for w in writes)

    def newest(self, saver: Any, thread_id: str, namespace: str) -> Newest | None:
        with saver._cursor() as cursor:
            cursor.execute(_POSTGRES_NEWEST, (thread_id, namespace))
            row = cursor.fetchone()
        return Newest(None, None) if row is None else Newest(str(row["checkpoint_id"]), row["digest"])

    async def anewest(self, saver: Any, thread_id: str, namespace: str) -> Newest | None:
        async with saver._cursor() as cursor:
            await cursor.execute(_POSTGRES_NEWEST, (thread_id, namespace))
            row = await cursor.fetchone()
        return Newest(None, None) if row is None else Newest(str(row["checkpoint_id"]), row["digest"])

    def exact_writes(
        self, saver: Any, thread_id: str, namespace: str, checkpoint_ids: Sequence[str]
    ) -> dict[str, list[WriteRecord]] | None:
        with saver._cursor() as cursor:
            cursor.execute(_POSTGRES_WRITES, (thread_id, namespace, list(checkpoint_ids)))
            rows = cursor.fetchall()
        return _by_checkpoint(_postgres_rows(rows), checkpoint_ids)

    async def aexact_writes(
        self, saver: Any, thread_id: str, namespace: str, checkpoint_ids: Sequence[str]
    ) -> dict[str, list[WriteRecord]] | None:
        async with saver._cursor() as cursor:
            await cursor.execute(_POSTGRES_WRITES, (thread_id, namespace, list(checkpoint_ids)))
            rows = await cursor.fetchall()
        return _by_checkpoint(_postgres_rows(rows), checkpoint_ids)


_POSTGRES_NEWEST = """
SELECT c.checkpoint_id, (
    SELECT md5(string_agg(
        w.task_id || chr(31) || w.idx::text || chr(31) || w.channel || chr(31) || coalesce(w.type, '')
            || chr(31) || md5(w.blob),
        chr(30) ORDER BY w.task_id COLLATE "C", w.idx))
    FROM checkpoint_writes w
    WHERE w.thread_id = c.thread_id AND w.checkpoint_ns = c.checkpoint_ns AND w.checkpoint_id = c.checkpoint_id
) AS digest
FROM checkpoints c WHERE c.thread_id = %s AND c.checkpoint_ns = %s ORDER BY c.checkpoint_id DESC LIMIT 1
"""
_POSTGRES_WRITES = (
    "SELECT checkpoint_id, task_id, idx, channel, type, blob, task_path FROM checkpoint_writes "
    "WHERE thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = ANY(%s)"
)


def _postgres_rows(rows: Iterable[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
    return [
        (row["checkpoint_id"], row["task_id"], row["idx"], row["channel"], row["type"], row["blob"], row["task_path"])
        for row in rows
    ]


_FORMATS: dict[Kind, DurableFormat] = {
    "sqlite": SqliteFormat(),
    "async_sqlite": SqliteFormat(),
    "postgres": PostgresFormat(),
    "async_postgres": PostgresFormat(),
    "memory": MemoryFormat(),
    "other": DurableFormat(),
}


def format_of(saver: BaseCheckpointSaver[Any]) -> DurableFormat:
    """The format of a durable saver. Runtime complexity: O(1)."""
    return _FORMATS[kind_of(saver)]
