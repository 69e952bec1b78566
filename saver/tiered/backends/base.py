"""The interface every backend implements (``Backend``), and the values it passes: plans of statements and what
they return, the coherence check's ``Newest``, the schema's ``Table`` and ``SchemaMismatchError``, and the
digests of pending writes both SQL formats and ``InMemorySaver``'s compute.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import re
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal, NamedTuple, Protocol, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointMetadata, CheckpointTuple
from langgraph.checkpoint.serde.base import SerializerProtocol

from ...engine import BoundedSaverError, InvalidArgumentError, Payload, ThreadStorage, Version, WriteRecord

__all__ = [
    "CHUNK",
    "Batch",
    "BatchPut",
    "BatchWrites",
    "INDEX",
    "INTERRUPT_CHANNEL",
    "NOTHING",
    "REMOVED_TABLE",
    "Backend",
    "ConditionalPut",
    "Kind",
    "MetadataFilter",
    "Newest",
    "Plan",
    "Removal",
    "Removed",
    "SchemaMismatchError",
    "Skeleton",
    "Table",
    "digest",
    "exact_digest",
    "kind_of",
    "md5",
    "stock_writes",
]

T = TypeVar("T")

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

INDEX = "bounded_retention_checkpoint_id"
"""The index retention creates on ``checkpoints``, with its columns: ids (times) first, so that a window's page
of due threads reads the index alone."""
INDEX_COLUMNS = "(checkpoint_id, thread_id, checkpoint_ns)"

CHUNK = 500
"""Checkpoint ids per ``IN`` list (SQLite allows 32,766 parameters; this keeps statements small)."""

INTERRUPT_CHANNEL = "__interrupt__"
"""LangGraph's channel for an interrupt's pending write (``langgraph.constants.INTERRUPT``)."""

REMOVED_TABLE = "bounded_retention_removed"
"""Retention's table of the threads it deleted while they waited at an interrupt, one row each."""
REMOVED_INDEX = "bounded_retention_removed_at"

Plan = Generator[tuple[str, Sequence[Any]], list[Any], T]
"""Statements to run in one transaction: yields ``(sql, parameters)``, is sent each one's rows, returns a value."""


class Newest(NamedTuple):
    """What the coherence check compares: a namespace's newest checkpoint id (None: it has none) and a
    digest of that checkpoint's pending writes (None: it has none)."""

    checkpoint_id: str | None
    writes: str | None


class Removed(NamedTuple):
    """What a removal took from the durable tier.

    Attributes:
        checkpoints: Checkpoints removed.
        writes: Pending writes removed (with their checkpoints).
        nbytes: Bytes of the rows removed, as the database measures them (SQLite: the length of each payload;
            PostgreSQL: ``pg_column_size``, after its compression).
        whole: The thread went whole (an idle thread deleted).
        planned: The checkpoint ids a prune planned away, by namespace (empty for a deletion): the hot tier
            removes the same (``removal.prune_memory``).
    """

    checkpoints: int
    writes: int
    nbytes: int
    whole: bool
    planned: Mapping[str, Sequence[str]] = MappingProxyType({})


NOTHING = Removed(0, 0, 0, False)


class Skeleton(NamedTuple):
    """One checkpoint of a thread, as retention plans with it: no payload.

    Attributes:
        namespace: Its ``checkpoint_ns``.
        checkpoint_id: Its id.
        delta: Its metadata counts ``DeltaChannel`` writes (older checkpoints rebuild its values).
        root: The root graph's checkpoint a subgraph call started from (``metadata["parents"][""]``), or None.
    """

    namespace: str
    checkpoint_id: str
    delta: bool
    root: str | None


@dataclass(frozen=True, slots=True)
class Removal:
    """A row of ``bounded_retention_removed``: a waiting thread retention deleted.

    Attributes:
        thread_id: The thread.
        removed_at: When, in seconds since the epoch (the sweeping process's ``wall_clock``).
        limit: The policy's field that deleted it (``interrupted_ttl_seconds``).
        limit_value: That field's value.
        checkpoint_id: The newest checkpoint it held.
    """

    thread_id: str
    removed_at: float
    limit: str
    limit_value: float
    checkpoint_id: str | None


@dataclass(frozen=True, slots=True)
class Table:
    """One table as a LangGraph saver's ``setup()`` creates it.

    Attributes:
        columns: Column name -> (declared type, NOT NULL), in the table's order.
        primary_key: The primary key's columns, in order.
    """

    columns: Mapping[str, tuple[str, bool]]
    primary_key: tuple[str, ...]


_TABLE = re.compile(r"(\w+)\s*\(((?:[^()]|\([^()]*\))*)\)")
_ITEM_SEPARATOR = re.compile(r",\s*(?![^()]*\))")  # a comma outside parentheses


def declared_tables(ddl: str) -> dict[str, Table]:
    """The tables a ``CREATE TABLE``-like declaration names: ``name (column TYPE [NOT NULL], ..., PRIMARY KEY
    (column, ...))``, one after the other, as a LangGraph saver's ``setup()`` leaves them. Runtime complexity:
    O(len(ddl)).

    Raises:
        InvalidArgumentError: A table has no primary key, or a column is not ``name TYPE`` optionally ``NOT NULL``.
    """
    tables: dict[str, Table] = {}
    for name, body in _TABLE.findall(ddl):
        columns: dict[str, tuple[str, bool]] = {}
        key: tuple[str, ...] = ()
        for item in _ITEM_SEPARATOR.split(body.strip()):
            if item.upper().startswith("PRIMARY KEY"):
                key = tuple(part.strip() for part in item[item.index("(") + 1 : item.rindex(")")].split(","))
                continue
            words = item.split()
            if len(words) not in (2, 4) or (len(words) == 4 and " ".join(words[2:]).upper() != "NOT NULL"):
                raise InvalidArgumentError(f"table {name}: column declaration {item!r} is not 'name TYPE [NOT NULL]'")
            columns[words[0]] = (words[1], len(words) == 4)
        if not key:
            raise InvalidArgumentError(f"table {name}: no PRIMARY KEY declared")
        tables[name] = Table(MappingProxyType(columns), key)
    return tables


class SchemaMismatchError(BoundedSaverError, ValueError):
    """The durable saver's tables differ from those its backend module declares: the tiered saver's own SQL
    (retention, conditional puts, the coherence check, resumes) refuses to run against them.

    Attributes:
        table: The first table that differs.
        differences: What differs, one line each.
    """

    def __init__(self, saver: str, table: str, differences: Sequence[str], version: str) -> None:
        self.table = table
        self.differences = list(differences)
        super().__init__(
            f"the durable saver {saver}'s table {table!r} is not the one this version of "
            f"langgraph-checkpoint-bounded knows ({'; '.join(differences)}; installed: {version}): its own SQL "
            f"(retention, conditional writes, resumes) would read or write it wrongly, so it refuses to run. "
            f"Install a langgraph-checkpoint-bounded release that supports this saver version, or pin the saver "
            f"to the version the tables were made with"
        )


class BatchPut(NamedTuple):
    """One checkpoint of a group commit, as the hot tier encoded it (``put``'s arguments, already serialized).

    Attributes:
        thread_id: Its thread.
        namespace: Its ``checkpoint_ns``.
        checkpoint_id: Its id.
        parent_id: The checkpoint it continues (``put``'s config ``checkpoint_id``), or None.
        skeleton: The checkpoint without its ``channel_values``, serialized (the hot tier's record).
        metadata: Its metadata, merged and normalized, serialized.
        values: Every channel value it holds, serialized by the saver's serde (with ``given``: the new ones).
        new_versions: The channels ``put`` stored new values for, and their versions.
        given: A write-through's ``put`` arguments as given, ``(config, checkpoint, metadata)``: the rows are made
            from them as the saver's own ``put`` makes them (nothing decoded), its new values as encoded.
    """

    thread_id: str
    namespace: str
    checkpoint_id: str
    parent_id: str | None
    skeleton: Payload
    metadata: Payload
    values: Mapping[str, Payload]
    new_versions: Mapping[str, Version]
    given: tuple[RunnableConfig, Any, CheckpointMetadata] | None = None

    def config(self) -> RunnableConfig:
        """The config ``put`` is called with (its parent as ``checkpoint_id``). Runtime complexity: O(1)."""
        if self.given is not None:
            return self.given[0]
        target: dict[str, Any] = {"thread_id": self.thread_id, "checkpoint_ns": self.namespace}
        if self.parent_id is not None:
            target["checkpoint_id"] = self.parent_id
        return {"configurable": target}


class BatchWrites(NamedTuple):
    """One ``put_writes`` of a group commit: a task's batch, its records encoded (special channels' indexes in).

    Attributes:
        thread_id, namespace, checkpoint_id: The checkpoint its task ran from.
        task_id: The task.
        task_path: The task's path.
        writes: The records, in the order of the call.
    """

    thread_id: str
    namespace: str
    checkpoint_id: str
    task_id: str
    task_path: str
    writes: Sequence[WriteRecord]


class Batch(NamedTuple):
    """What one group commit writes, in one transaction: the puts and writes of many threads, each thread's in
    order (oldest first, parents first), and, per thread, the checkpoint that must still be there first.

    Attributes:
        items: The puts and writes, in flush order.
        parents: Thread id -> ``(namespace, checkpoint_id)`` read first in the transaction (the late-flush check):
            a thread whose checkpoint is gone has nothing written.
        loads: The serde's ``loads_typed`` (to decode what a row needs as values, not bytes).
    """

    items: Sequence[BatchPut | BatchWrites]
    parents: Mapping[str, tuple[str, str]]
    loads: Callable[[tuple[str, bytes]], Any]

    def without(self, threads: Iterable[str]) -> list[BatchPut | BatchWrites]:
        """The items of every thread but ``threads``. Runtime complexity: O(items)."""
        gone = set(threads)
        return [item for item in self.items if item.thread_id not in gone]


class ConditionalPut(Protocol):
    """One conditional put, as a backend runs it (``conditional._Put``): the put's arguments, where the check
    looks, and the check."""

    @property
    def config(self) -> RunnableConfig: ...
    @property
    def checkpoint(self) -> Any: ...
    @property
    def metadata(self) -> CheckpointMetadata: ...
    @property
    def new_versions(self) -> Any: ...
    @property
    def thread_id(self) -> str: ...
    @property
    def namespace(self) -> str: ...
    @property
    def expected(self) -> str | None: ...
    @property
    def lock_key(self) -> int:
        """The advisory lock's key (PostgreSQL)."""
        ...

    def check(self, found: str | None) -> None:
        """Raise ``CheckpointConflictError`` unless the newest id found is the one expected."""
        ...


class Backend(Protocol):
    """What the tiered saver needs of a durable saver family. The sync methods are for a sync saver, the
    ``a``-prefixed ones for an async saver on its own event loop (``durable.DurableTier`` calls the right side).

    Attributes:
        kind: Which saver it describes.
        exact: Whether ``exact_writes`` reads a write's index and task path (else admitted writes are ordered as
            the saver returned them, their paths invented).
        tables: Whether ``newest`` reads the saver's tables (else the coherence check is a ``get_tuple``).
        first_write_wins: Whether, in a batch of writes mixing regular and special channels, the saver keeps a
            key's first write where one is held already (SQL ``INSERT ... DO NOTHING``), where ``InMemorySaver``
            overwrites a special channel's.
        batched: Whether ``write_batch`` writes a group commit (else the items go through the saver's API).
    """

    kind: Kind
    exact: bool
    tables: bool
    first_write_wins: bool
    batched: bool

    @property
    def sql(self) -> object | None:
        """The statements of its tables (a ``sql.SqlDialect``; ``dialect_of`` gives it typed), or None: it is read
        through its API, and retention uses the API."""
        ...

    # --- format facts ----------------------------------------------------------------------------------------

    def normalize_metadata(self, config: RunnableConfig, metadata: CheckpointMetadata) -> CheckpointMetadata:
        """The metadata as the durable saver will read it back; raises ``ValueError`` for what it cannot store."""
        ...

    def hot_filter(self, filter: Mapping[Any, Any]) -> MetadataFilter | None:
        """The durable saver's ``list()`` filter as a predicate on metadata, or None to read the durable tier."""
        ...

    def writes_digest(self, writes: Sequence[WriteRecord]) -> str | None:
        """The digest ``newest`` answers for these writes (a hot checkpoint's)."""
        ...

    def tuple_digest(self, found: CheckpointTuple | None, serde: SerializerProtocol) -> Newest:
        """``newest`` from a ``get_tuple`` (the generic coherence check)."""
        ...

    # --- reads of its tables (None: not readable this way) -------------------------------------------------

    def newest(self, saver: Any, thread_id: str, namespace: str) -> Newest | None:
        """A namespace's newest id and its writes' digest, by one indexed query, or None."""
        ...

    async def anewest(self, saver: Any, thread_id: str, namespace: str) -> Newest | None:
        """``newest`` for an async saver."""
        ...

    def exact_writes(
        self, saver: Any, thread_id: str, namespace: str, checkpoint_ids: Sequence[str]
    ) -> dict[str, list[WriteRecord]] | None:
        """Each checkpoint's pending writes as stored (index and task path included), or None."""
        ...

    async def aexact_writes(
        self, saver: Any, thread_id: str, namespace: str, checkpoint_ids: Sequence[str]
    ) -> dict[str, list[WriteRecord]] | None:
        """``exact_writes`` for an async saver."""
        ...

    # --- plans of statements, conditional puts, the schema ---------------------------------------------------

    def run_sync(self, saver: Any, plan: Plan[T], *, transaction: bool = True) -> T:
        """Run a plan on a sync saver in one transaction (or, for reads, without one)."""
        ...

    async def run_async(self, saver: Any, plan: Plan[T], *, transaction: bool = True) -> T:
        """``run_sync`` for an async saver, on its own loop."""
        ...

    def prepare(self, saver: Any, batch: Batch) -> Any:
        """A batch's rows for ``write_batch``, made without I/O (so a worker thread can make them)."""
        ...

    def write_batch(self, saver: Any, batch: Batch, prepared: Any = None) -> set[str]:
        """A group commit on a sync saver: read ``batch.parents``, then write every item of the threads whose
        parent is there, in one transaction, with the rows the saver's own ``put`` / ``put_writes`` write; return
        the threads whose parent is gone (nothing of theirs written). ``NotImplementedError``: a saver written
        through its API (``group_commit`` replays the items instead)."""
        ...

    async def awrite_batch(self, saver: Any, batch: Batch, prepared: Any = None) -> set[str]:
        """``write_batch`` for an async saver, on its own loop."""
        ...

    def conditional_problem(self, saver: Any) -> str | None:
        """None when ``put_if_newest`` can guard this saver's puts; else one sentence saying why not."""
        ...

    def put_if_newest(self, saver: Any, call: ConditionalPut) -> RunnableConfig:
        """The check and the saver's own put, in one transaction (a sync saver)."""
        ...

    async def aput_if_newest(self, saver: Any, call: ConditionalPut) -> RunnableConfig:
        """``put_if_newest`` for an async saver, on its own loop."""
        ...

    def reader(self, saver: Any) -> Any:
        """The saver to call for a durable read (``get_tuple``, ``list``): the saver itself, or a view of it that
        reads on a connection of its pool without its per-instance lock (the lock guards its one connection)."""
        ...

    def verify_now(self, saver: Any) -> None:
        """At construction: compare the saver's tables with the declaration if that can be done now (a sync
        saver whose tables exist), else leave it to the first use. Raises ``SchemaMismatchError``."""
        ...

    # --- a thread's size (``TieredSaver.thread_storage``) ----------------------------------------------------

    def storage(self, saver: Any, thread_id: str) -> ThreadStorage | None:
        """The bytes a thread occupies in the saver's tables, summed by the database (one aggregate query per
        table), or None where the saver has no tables to sum (the caller estimates through the API)."""
        ...

    async def astorage(self, saver: Any, thread_id: str) -> ThreadStorage | None:
        """``storage`` for an async saver, on its own loop."""
        ...


# --- digests of pending writes (shared by the formats) -------------------------------------------------------------


def md5(data: bytes) -> str:
    """The hex MD5 of ``data`` (a digest, not security)."""
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


def digest(parts: Iterable[str]) -> str | None:
    """The digest of joined parts, or None for none."""
    joined = "\x1e".join(parts)
    return md5(joined.encode()) if joined else None


def exact_digest(rows: Iterable[tuple[str, int, str, str | None, bytes]]) -> str | None:
    """Rows ``(task_id, idx, channel, type, value)``, in ``(task_id, idx)`` order (byte order of the task id, as
    PostgreSQL's ``COLLATE "C"``), as the PostgreSQL query digests them."""
    return digest(
        f"{task_id}\x1f{idx}\x1f{channel}\x1f{kind or ''}\x1f{md5(value)}"
        for task_id, idx, channel, kind, value in sorted(rows, key=lambda row: (row[0].encode(), row[1]))
    )


# --- which saver ---------------------------------------------------------------------------------------------------


@functools.cache
def _class(module: str, name: str) -> type[Any] | None:
    try:
        found: type[Any] = getattr(importlib.import_module(module), name)
    except ImportError:  # the optional package is absent: no saver of it can exist either
        return None
    return found


_WRITES = ("put", "put_writes", "aput", "aput_writes", "_dump_blobs", "_dump_writes")
"""The methods that make a saver's rows: a subclass overriding one is written through its API."""


@functools.cache
def _stock_writes(saver_type: type[Any]) -> bool:
    for _, module, name in _KNOWN:
        found = _class(module, name)
        if found is not None and issubclass(saver_type, found):
            return all(getattr(saver_type, method, None) is getattr(found, method, None) for method in _WRITES)
    return False


def stock_writes(saver: BaseCheckpointSaver[Any]) -> bool:
    """Whether the saver writes with its known class's own ``put`` and ``put_writes`` (sync and async): a
    subclass that overrides one (to log, to check, to fail on purpose) is written through its API, never
    around it. Runtime complexity: O(1) (cached per class)."""
    saver_type: Any = type(saver)  # a class is hashable (mypy reads BaseCheckpointSaver's __hash__ as not)
    return _stock_writes(saver_type)


def kind_of(saver: BaseCheckpointSaver[Any]) -> Kind:
    """Which known saver this is (a subclass counts as its base), or ``"other"``. Runtime complexity: O(1)."""
    for kind, module, name in _KNOWN:
        found = _class(module, name)
        if found is not None and isinstance(saver, found):
            return kind
    return "other"
