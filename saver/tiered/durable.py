"""The durable tier of ``TieredSaver``: any LangGraph checkpointer, with its sync and async sides resolved.

A durable saver may lack a side. ``SqliteSaver`` and ``PostgresSaver`` are sync
(``SqliteSaver``'s async methods raise ``NotImplementedError``);
``AsyncSqliteSaver`` and ``AsyncPostgresSaver`` are async and bound to the event
loop they were made on, and refuse sync calls made from it. ``DurableTier``
calls each side the way the saver allows:

* a sync saver: sync calls go straight to it; async calls use its async
  method when it has one that works, else run the sync method in a worker
  thread of the tier's own pool (``pools.durable_pool``), so the caller's event loop
  never waits on I/O;
* an async saver (one with its own ``loop``): async calls await it (on its
  loop, when the caller runs on another); sync calls are handed to its loop
  from the calling thread and waited for (at most ``timeout`` seconds). A sync
  call made on that loop itself cannot be served (it would wait for the loop
  it blocks): it raises ``DurableSideError`` saying to use the async methods.

Optional operations (``delete_for_runs``, ``copy_thread``, ``prune``) use the
saver's own method when it has one and emulate it otherwise through ``list``,
``put``, ``put_writes`` and ``delete_thread`` (``copy_thread_through_api`` and
``rewrite_thread``). Emulations are cold: they read whole threads, and a
rewrite deletes a thread and puts back what survives, which is not atomic (a
crash between the two loses the thread's survivors) and cannot carry a pending
write's ``task_path`` (the public API does not expose it).

``newest`` answers the coherence check of ``WriteThrough(processes="many")``: the newest
checkpoint id of a namespace and a digest of its pending writes, by one indexed
query where the saver's backend reads its tables (``backends``: SQLite,
PostgreSQL and ``InMemorySaver``, sync or async), else by a ``get_tuple``;
``exact_writes`` reads pending writes as stored, for read-throughs to admit.

Every failure of the durable saver is counted in ``DurableHealth`` and raised
to the caller unchanged.

Why a pool of its own (``pools.durable_pool``), not the event loop's default
executor: a coroutine may hold a thread's gate (``coordination.ThreadGates``:
``adelete_thread`` alone, a write-through ``aput`` shared) across its durable
call while jobs wait on that gate; the call must never queue behind them
(``tiered.pools`` says more).
"""

from __future__ import annotations

import asyncio
import builtins
import threading
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Collection,
    Coroutine,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)

from ..config import InMemoryCheckpointConfig
from ..engine import BoundedSaverError, InvalidArgumentError, StoreLimits, WriteRecord
from ..locations import configurable
from .backends import SchemaMismatchError, format_of
from .backends.base import Newest
from .landing import Landings
from .writeback import refuses_the_data

if TYPE_CHECKING:
    from ..saver import BoundedInMemorySaver
from .pools import in_durable_pool

__all__ = [
    "DURABLE_CALL_SECONDS",
    "OPTIONAL_OPERATIONS",
    "DurableClosedError",
    "DurableHealth",
    "DurableSideError",
    "DurableTier",
    "Newest",
    "RewriteGuard",
    "connection_closed",
    "copy_thread_through_api",
    "location_of",
    "put_tuple",
    "rewrite_keeping",
    "rewrite_thread",
    "survivors",
]

DURABLE_CALL_SECONDS = 60.0
"""How long a sync call waits for an async durable saver's loop before it fails (a stopped loop never answers)."""

OPTIONAL_OPERATIONS = ("delete_for_runs", "copy_thread", "prune")
"""Operations a durable saver may lack; the tier emulates those it lacks."""

T = TypeVar("T")
_READS = frozenset({"get_tuple", "list"})
"""The durable reads ``_target`` sends to the backend's ``reader``."""


class DurableSideError(BoundedSaverError, RuntimeError):
    """The durable saver cannot serve this side here (a sync call on an async saver's own event loop)."""


class DurableClosedError(BoundedSaverError, RuntimeError):
    """Write-back: a write refused because the durable saver's connection was found closed (``DurableHealth.closed``),
    so the unflushed writes before it cannot be flushed; the message names the failure and those writes."""


@dataclass
class DurableHealth:
    """How the durable tier has fared: calls, successes, failures, and the last failure. Shared by a saver's copies.

    Attributes:
        calls: Calls made to the durable saver (counted as they end).
        successes: Calls that returned.
        errors: Calls that raised (each raised on to the caller too).
        last_error: The last of them, as ``ExceptionType: message``, or None.
        down: The last call failed for want of the tier (a connection or operational error, a timeout: not a
            refusal of what was written, ``writeback.refuses_the_data``), and none succeeded since: write-back's
            writes do not wait on it (``flushing``).
        closed: The last call failed because the durable connection (or pool) is closed, as
            ``ExceptionType: message``; None once a call succeeds. Permanent for that connection: write-back's
            writes are refused while it is set (``connection_closed``).
        lock: Guards the counters (sync callers in many threads).
    """

    calls: int = 0
    successes: int = 0
    errors: int = 0
    last_error: str | None = None
    down: bool = False
    closed: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @contextmanager
    def counting(self) -> Iterator[None]:
        """Count the call made inside as it ends: a success, or a failure kept (a method the saver lacks,
        ``NotImplementedError``, is neither). Runtime complexity: O(1)."""
        try:
            yield
        except NotImplementedError:
            with self.lock:
                self.calls += 1
            raise
        except BaseException as error:
            with self.lock:
                self.calls += 1
                self.errors += 1
                self.last_error = f"{type(error).__name__}: {error}"
                if not isinstance(error, DurableSideError):  # a call made on the wrong side: the tier is fine
                    self.down = not refuses_the_data(error)
                    if connection_closed(error):
                        self.closed = self.last_error
            raise
        with self.lock:
            self.calls += 1
            self.successes += 1
            self.down = False
            self.closed = None


_CLOSED_KINDS = frozenset({"ProgrammingError", "OperationalError", "InterfaceError", "ValueError"})
_CLOSED_PHRASES = (
    "cannot operate on a closed database",  # sqlite3, the connection closed by the program
    "the connection is closed",  # psycopg, conn.close() called (not a server gone: that one comes back)
    "no active connection",  # aiosqlite, after close()
)


def connection_closed(error: BaseException) -> bool:
    """Whether a durable failure says the program closed its connection (or pool), a permanent error for that
    saver: ``sqlite3.ProgrammingError: Cannot operate on a closed database.``, psycopg's ``OperationalError: the
    connection is closed``, psycopg_pool's ``PoolClosed``, aiosqlite's ``ValueError: no active connection``. A
    server that closed the connection (``server closed the connection unexpectedly``: a restart, a network
    failure) is an outage, not this: the tier comes back.

    Runtime complexity: O(depth of the error's class hierarchy + length of its message).
    """
    kinds = {kind.__name__ for kind in type(error).__mro__}
    if "PoolClosed" in kinds:
        return True
    if not kinds & _CLOSED_KINDS:
        return False
    text = str(error).lower()
    return any(phrase in text for phrase in _CLOSED_PHRASES)


def _own_loop(saver: BaseCheckpointSaver[Any]) -> asyncio.AbstractEventLoop | None:
    """The event loop an async saver is bound to (``AsyncPostgresSaver.loop``, ``AsyncSqliteSaver.loop``)."""
    loop = getattr(saver, "loop", None)
    return loop if isinstance(loop, asyncio.AbstractEventLoop) else None


def _overrides(saver: BaseCheckpointSaver[Any], method: str) -> bool:
    """Whether the saver's class defines ``method`` itself (not ``BaseCheckpointSaver``'s default)."""
    return getattr(type(saver), method, None) is not getattr(BaseCheckpointSaver, method, None)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


async def _collect(tuples: AsyncIterator[CheckpointTuple]) -> list[CheckpointTuple]:
    return [item async for item in tuples]


class DurableTier:
    """The durable saver, called on the side each caller runs on, its failures counted.

    Args:
        saver: Any ``BaseCheckpointSaver``.
        health: Where calls and failures are counted.
        timeout: Seconds a sync call waits for an async saver's loop.
        landings: Where each ``put`` under way is flown, for retention's discovery (shared by a saver's copies).

    Raises:
        ValueError: ``saver`` is not a ``BaseCheckpointSaver``; ``SchemaMismatchError`` (a ``ValueError``): its
            tables differ from those its backend declares (``backends``).
    """

    def __init__(
        self,
        saver: BaseCheckpointSaver[Any],
        health: DurableHealth,
        *,
        timeout: float = DURABLE_CALL_SECONDS,
        landings: Landings | None = None,
    ) -> None:
        if not isinstance(saver, BaseCheckpointSaver):
            raise InvalidArgumentError(f"durable must be a LangGraph BaseCheckpointSaver, got {type(saver).__name__}")
        self.saver = saver
        self.health = health
        self.timeout = timeout
        self.loop = _own_loop(saver)
        self.no_async: set[str] = set()  # async methods found to raise NotImplementedError: use the sync one
        self.native = {operation: self._has(operation) for operation in ("delete_thread", *OPTIONAL_OPERATIONS)}
        self.format = format_of(saver)
        self.landings = Landings() if landings is None else landings
        try:  # the tables checked before any SQL of ours runs on them (where it can be now; else at the first use)
            self.format.verify_now(saver)
        except SchemaMismatchError:
            raise
        except Exception:
            pass

    @property
    def name(self) -> str:
        """The durable saver's class name, for messages."""
        return type(self.saver).__name__

    def sides(self) -> str:
        """Which side serves what, in one sentence (for ``repr`` and errors). Runtime complexity: O(1)."""
        if self.loop is not None:
            return (
                f"{self.name} is async: async methods await it; sync methods hand their calls to its event loop "
                f"from other threads, and cannot be used on that loop itself"
            )
        return f"{self.name} is sync: sync methods call it; async methods run its sync methods in a worker thread"

    def _has(self, operation: str) -> bool:
        if self.loop is not None:
            return _overrides(self.saver, "a" + operation)
        return _overrides(self.saver, operation) or _overrides(self.saver, "a" + operation)

    # --- the two sides -----------------------------------------------------------------------------------

    def _call(self, method: str, /, *args: Any, **kwargs: Any) -> Any:
        """Call ``method`` on the sync side. Runtime complexity: the durable saver's.

        Raises:
            DurableSideError: An async saver called on its own event loop.
            Exception: Whatever the durable saver raised (counted).
        """
        with self.health.counting():
            saver = self._target(method)
            if self.loop is None:
                return getattr(saver, method)(*args, **kwargs)
            return self._on_own_loop(getattr(saver, "a" + method)(*args, **kwargs))

    def _target(self, method: str) -> Any:
        """The saver a call goes to: for a read, the backend's ``reader`` (over a pool, none of the saver's lock).
        Runtime complexity: O(1)."""
        return self.format.reader(self.saver) if method in _READS else self.saver

    def _on_own_loop(self, coroutine: Coroutine[Any, Any, T]) -> T:
        loop = self.loop
        assert loop is not None
        if _running_loop() is loop:
            coroutine.close()
            raise DurableSideError(
                f"{self.name} refuses sync calls made on its own event loop, and TieredSaver's sync methods were "
                f"called there: use the async methods (ainvoke, aget_state, aget_tuple, ...) on that loop"
            )
        if loop.is_closed():
            coroutine.close()
            raise DurableSideError(f"the event loop {self.name} was made on is closed: it cannot be called")
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result(self.timeout)

    async def _acall(self, method: str, /, *args: Any, **kwargs: Any) -> Any:
        """Call ``method`` on the async side, never blocking the caller's loop. Runtime complexity: the saver's.

        Raises:
            Exception: Whatever the durable saver raised (counted).
        """
        with self.health.counting():
            saver = self._target(method)
            return await self._async(
                method,
                lambda: getattr(saver, "a" + method)(*args, **kwargs),
                lambda: getattr(saver, method)(*args, **kwargs),
            )

    async def _async(self, method: str, native: Callable[[], Awaitable[T]], sync: Callable[[], T]) -> T:
        if self.loop is not None:
            if _running_loop() is self.loop:
                return await native()
            future = asyncio.run_coroutine_threadsafe(cast(Coroutine[Any, Any, T], native()), self.loop)
            return await asyncio.wrap_future(future)
        if method not in self.no_async and _overrides(self.saver, "a" + method):
            try:
                return await native()
            except NotImplementedError:
                self.no_async.add(method)  # SqliteSaver's async methods: a sync saver after all
        return await in_durable_pool(sync)  # never the default executor: see the module's docstring

    # --- reads and writes ---------------------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The durable saver's ``get_tuple``."""
        return cast(CheckpointTuple | None, self._call("get_tuple", config))

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The durable saver's ``aget_tuple`` (or ``get_tuple`` in a worker thread)."""
        return cast(CheckpointTuple | None, await self._acall("get_tuple", config))

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """The durable saver's ``put``, flown in ``landings`` while under way."""
        with self.landings.flight(str(checkpoint["id"])):
            return cast(RunnableConfig, self._call("put", config, checkpoint, metadata, new_versions))

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """The durable saver's ``aput`` (or ``put`` in the durable pool), flown in ``landings`` while under way."""
        with self.landings.flight(str(checkpoint["id"])):
            return cast(RunnableConfig, await self._acall("put", config, checkpoint, metadata, new_versions))

    def put_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        """The durable saver's ``put_writes``."""
        self._call("put_writes", config, writes, task_id, task_path)

    async def aput_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        """The durable saver's ``aput_writes`` (or ``put_writes`` in the durable pool)."""
        await self._acall("put_writes", config, writes, task_id, task_path)

    def delete_thread(self, thread_id: str) -> None:
        """The durable saver's ``delete_thread``."""
        self._call("delete_thread", thread_id)

    async def adelete_thread(self, thread_id: str) -> None:
        """The durable saver's ``adelete_thread`` (or ``delete_thread`` in the durable pool)."""
        await self._acall("delete_thread", thread_id)

    def get_delta_channel_history(
        self, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """The durable saver's ``get_delta_channel_history`` (its own fast path where it has one)."""
        history = self._call("get_delta_channel_history", config=config, channels=channels)
        return cast(Mapping[str, DeltaChannelHistory], history)

    async def aget_delta_channel_history(
        self, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """The durable saver's ``aget_delta_channel_history``."""
        history = await self._acall("get_delta_channel_history", config=config, channels=channels)
        return cast(Mapping[str, DeltaChannelHistory], history)

    def list(self, config: RunnableConfig | None, **criteria: Any) -> builtins.list[CheckpointTuple]:
        """The durable saver's ``list``, read whole (its cursor and lock are released before it returns).

        Runtime complexity: the saver's, for every result.
        """
        with self.health.counting():
            saver = self._target("list")
            if self.loop is None:
                return list(saver.list(config, **criteria))
            return self._on_own_loop(_collect(saver.alist(config, **criteria)))

    async def alist(self, config: RunnableConfig | None, **criteria: Any) -> builtins.list[CheckpointTuple]:
        """The durable saver's ``alist`` read whole (or ``list`` in a worker thread)."""
        with self.health.counting():
            saver = self._target("list")
            return await self._async(
                "list",
                lambda: _collect(saver.alist(config, **criteria)),
                lambda: list(saver.list(config, **criteria)),
            )

    def newest(self, thread_id: str, namespace: str) -> Newest:
        """The newest checkpoint id of a namespace and a digest of its pending writes (the coherence check).

        One indexed query where the backend reads the saver's tables (``backends``), else a ``get_tuple``.
        Runtime complexity: one round trip.
        """
        form = self.format
        if form.tables:
            found = self.on_tables(
                lambda saver: form.newest(saver, thread_id, namespace),
                lambda saver: form.anewest(saver, thread_id, namespace),
            )
            if found is not None:
                return found
        latest = self.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": namespace}})
        return form.tuple_digest(latest, self.saver.serde)

    async def anewest(self, thread_id: str, namespace: str) -> Newest:
        """``newest`` for async callers."""
        form = self.format
        if form.tables:
            found = await self.aon_tables(
                lambda saver: form.newest(saver, thread_id, namespace),
                lambda saver: form.anewest(saver, thread_id, namespace),
            )
            if found is not None:
                return found
        latest = await self.aget_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": namespace}})
        return form.tuple_digest(latest, self.saver.serde)

    def exact_writes(
        self, thread_id: str, namespace: str, checkpoint_ids: Sequence[str]
    ) -> dict[str, builtins.list[WriteRecord]] | None:
        """Each checkpoint's pending writes as the saver stores them (index and task path included), or None
        where the format cannot read them. Runtime complexity: one round trip."""
        form = self.format
        if not form.exact or not checkpoint_ids:
            return None
        return self.on_tables(
            lambda saver: form.exact_writes(saver, thread_id, namespace, checkpoint_ids),
            lambda saver: form.aexact_writes(saver, thread_id, namespace, checkpoint_ids),
        )

    async def aexact_writes(
        self, thread_id: str, namespace: str, checkpoint_ids: Sequence[str]
    ) -> dict[str, builtins.list[WriteRecord]] | None:
        """``exact_writes`` for async callers."""
        form = self.format
        if not form.exact or not checkpoint_ids:
            return None
        return await self.aon_tables(
            lambda saver: form.exact_writes(saver, thread_id, namespace, checkpoint_ids),
            lambda saver: form.aexact_writes(saver, thread_id, namespace, checkpoint_ids),
        )

    def on_tables(self, read: Callable[[Any], T], aread: Callable[[Any], Awaitable[T]]) -> T:
        """Work on the saver's own tables on the sync side (``read`` for a sync saver, ``aread`` handed to an
        async saver's loop), counted as a durable call. Runtime complexity: the work's."""
        with self.health.counting():
            if self.loop is None:
                return read(self.saver)
            return self._on_own_loop(cast(Coroutine[Any, Any, T], aread(self.saver)))

    async def aon_tables(self, read: Callable[[Any], T], aread: Callable[[Any], Awaitable[T]]) -> T:
        """Read the saver's own tables on the async side (a sync saver's ``read`` on the durable pool)."""
        if self.loop is None:
            return await in_durable_pool(lambda: self.on_tables(read, aread))
        with self.health.counting():
            if _running_loop() is self.loop:
                return await aread(self.saver)
            future = asyncio.run_coroutine_threadsafe(cast(Coroutine[Any, Any, T], aread(self.saver)), self.loop)
            return await asyncio.wrap_future(future)

    # --- optional operations: the saver's own, or emulated ----------------------------------------------------

    def copy_thread(self, source_id: str, target_id: str) -> None:
        """Copy a thread, all namespaces, with the saver's ``copy_thread`` or through its API.

        Runtime complexity: O(size of the source) round trips when emulated.
        """
        if self.native["copy_thread"]:
            self._call("copy_thread", source_id, target_id)
        else:
            copy_thread_through_api(self, source_id, target_id)

    def prune(self, thread_ids: Sequence[str], *, strategy: str, guard: RewriteGuard | None = None) -> None:
        """Prune threads: the saver's own ``prune``, or (when it has none, or refuses a thread, as
        ``PostgresSaver.prune`` refuses ``keep_latest`` on threads using a ``DeltaChannel``) emulated.

        ``"keep_latest"`` keeps each namespace's latest checkpoint and the
        ancestors it needs to rebuild its ``DeltaChannel`` values (the engine's
        rule, computed on a copy); ``"delete"`` deletes the threads. An emulated
        thread is read and rewritten inside ``guard(thread_id)`` (see ``RewriteGuard``).

        Runtime complexity: the saver's, or O(size of the threads) round trips when emulated.
        """
        if self.native["prune"]:
            try:
                self._call("prune", list(thread_ids), strategy=strategy)
                return
            except NotImplementedError:
                pass  # a thread the saver's own rule refuses: the engine's rule keeps its delta chains
        for thread_id in thread_ids:
            if strategy == "keep_latest":
                keep = lambda scratch, ids: scratch.prune(ids, strategy="keep_latest")  # noqa: E731
                rewrite_thread(self, thread_id, keep, guard)
            else:
                self._call("delete_thread", thread_id)

    def delete_for_runs(self, run_ids: Sequence[str], guard: RewriteGuard | None = None) -> set[str]:
        """Delete the checkpoints of these runs, with the saver's own method or emulated; return the threads
        the emulation rewrote (empty when the saver's own method ran).

        Emulated, every thread holding one of the runs is found by a metadata
        filter over every thread, and rewritten keeping the ancestors a
        surviving checkpoint needs (the engine's rule), each read and rewritten
        inside ``guard(thread_id)``. Runtime complexity: the saver's, or a scan of
        every checkpoint plus O(size of those threads) when emulated.
        """
        if not run_ids:
            return set()
        if self.native["delete_for_runs"]:
            self._call("delete_for_runs", list(run_ids))
            return set()
        holders = sorted(
            {
                str(configurable(item.config)["thread_id"])
                for run_id in run_ids
                for item in self.list(None, filter={"run_id": run_id})
            }
        )
        runs = list(run_ids)
        for thread_id in holders:
            rewrite_thread(self, thread_id, lambda scratch, ids: scratch.delete_for_runs(runs), guard)
        return set(holders)


# --- emulations through the public API ---------------------------------------------------------------------


def put_tuple(tier: DurableTier, item: CheckpointTuple, thread_id: str) -> None:
    """Put one checkpoint as a read returned it (every value it holds, its metadata, parent link and
    pending writes, task by task) into ``thread_id`` of the durable tier. Runtime complexity: one round trip
    for the checkpoint, one per task."""
    _put_copy(tier, item, thread_id)


def _put_copy(target_saver: DurableTier | BaseCheckpointSaver[Any], item: CheckpointTuple, thread_id: str) -> None:
    """Put a read checkpoint into ``thread_id`` through a saver's (or the tier's) ``put`` and ``put_writes``."""
    located = configurable(item.config)
    target: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": located.get("checkpoint_ns", "") or ""}
    if item.parent_config is not None:
        target["checkpoint_id"] = configurable(item.parent_config)["checkpoint_id"]
    checkpoint: dict[str, Any] = dict(item.checkpoint)
    versions = checkpoint.get("channel_versions", {})
    values = checkpoint.get("channel_values", {})
    new_versions = {channel: versions[channel] for channel in values if channel in versions}
    metadata = cast(CheckpointMetadata, dict(item.metadata))
    stored = target_saver.put({"configurable": target}, cast(Checkpoint, checkpoint), metadata, new_versions)
    tasks: dict[str, list[tuple[str, Any]]] = {}
    for task_id, channel, value in item.pending_writes or []:
        tasks.setdefault(task_id, []).append((channel, value))
    for task_id, writes in tasks.items():
        target_saver.put_writes(stored, writes, task_id)


def copy_thread_through_api(tier: DurableTier, source_id: str, target_id: str) -> None:
    """Copy every checkpoint of a thread, all namespaces, oldest first, with its writes, into another.

    The whole parent chain is copied, so a ``DeltaChannel`` rebuilds on the
    target. A pending write's ``task_path`` is not carried (the API does not
    expose it). Runtime complexity: O(size of the source) round trips.
    """
    if source_id == target_id:
        return
    for item in _oldest_first(tier.list({"configurable": {"thread_id": source_id}})):
        put_tuple(tier, item, target_id)


RewriteGuard = Callable[[str], AbstractContextManager[Callable[[Sequence[CheckpointTuple]], bool]]]
"""What a rewrite of a thread runs inside: ``guard(thread_id)`` holds whatever keeps the thread's other removals
out (``TieredSaver``: its gate, alone, so a retention pass and a rewrite take turns) and yields a check,
``gone(read)``, true when what the rewrite read was deleted since (a tombstone covers it): then nothing is put back."""


def rewrite_thread(
    tier: DurableTier,
    thread_id: str,
    operation: Callable[[BoundedInMemorySaver, list[str]], None],
    guard: RewriteGuard | None = None,
) -> int:
    """Apply a removal to a thread the durable saver cannot apply itself: find what survives by running
    ``operation`` on an in-memory copy (the engine's ancestry-aware rules), then delete the thread and
    put back the survivors, oldest first. Return how many checkpoints were removed.

    With ``guard``, the read and the rewrite happen inside ``guard(thread_id)``, and nothing is rewritten when
    its check says what was read is gone. Not atomic: a crash between the deletion and the last put loses
    survivors; another process's removal is not kept out (its own transaction is; see the retention guide).
    Runtime complexity: O(size of the thread) round trips, and its copy in memory.
    """
    with nullcontext(lambda read: False) if guard is None else guard(thread_id) as gone:
        everything, surviving = survivors(tier, thread_id, operation)
        if gone(everything):
            return 0
        return rewrite_keeping(tier, thread_id, everything, surviving)


def rewrite_keeping(
    tier: DurableTier, thread_id: str, everything: Sequence[CheckpointTuple], keep: Collection[tuple[str, str]]
) -> int:
    """Delete the thread, then put back the checkpoints of ``everything`` (oldest first) whose (namespace, id)
    is in ``keep``, each whose parent is not kept with none; return how many were left out (0: nothing done).

    Not atomic: a crash between the deletion and the last put loses survivors.
    Runtime complexity: O(size of the thread) round trips.
    """
    kept = [item for item in everything if location_of(item) in keep]
    if len(kept) == len(everything):
        return 0
    tier.delete_thread(thread_id)
    for item in kept:
        parent = item.parent_config
        if parent is not None and (location_of(item)[0], str(configurable(parent)["checkpoint_id"])) not in keep:
            item = item._replace(parent_config=None)
        put_tuple(tier, item, thread_id)
    return len(everything) - len(kept)


def survivors(
    tier: DurableTier, thread_id: str, operation: Callable[[BoundedInMemorySaver, list[str]], None]
) -> tuple[list[CheckpointTuple], set[tuple[str, str]]]:
    """Every checkpoint of the thread, oldest first, and the (namespace, id) of those that survive
    ``operation`` run on an in-memory copy of the thread (the engine's ancestry-aware rules). Nothing is
    changed in the durable tier.

    The copy seeds a ``DeltaChannel`` at a checkpoint only where the durable saver returns its value for
    that very checkpoint: a saver that stores values inline (``SqliteSaver``) returns none at a checkpoint
    that shares its version with the snapshot before it, and removing that snapshot would lose the value.
    So each copied checkpoint's versions are its own (the engine shares a value between checkpoints of one
    version, as ``InMemorySaver`` and ``PostgresSaver`` do, but not every saver does).

    Runtime complexity: one ``list`` of the whole thread, and its copy in memory.
    """
    from ..saver import BoundedInMemorySaver

    everything = _oldest_first(tier.list({"configurable": {"thread_id": thread_id}}))
    if not everything:
        return [], set()
    scratch = BoundedInMemorySaver(config=_UNBOUNDED, serde=tier.saver.serde)
    for item in everything:
        _put_copy(scratch, _own_versions(item), thread_id)
    operation(scratch, [thread_id])
    return everything, {location_of(item) for item in scratch.list({"configurable": {"thread_id": thread_id}})}


_UNBOUNDED = InMemoryCheckpointConfig(**vars(StoreLimits.unbounded()))


def _own_versions(item: CheckpointTuple) -> CheckpointTuple:
    """The checkpoint with versions no other checkpoint shares (for a planning copy: see ``survivors``)."""
    checkpoint: dict[str, Any] = dict(item.checkpoint)
    suffix = f"@{checkpoint.get('id', '')}"
    checkpoint["channel_versions"] = {
        channel: f"{version}{suffix}" for channel, version in checkpoint.get("channel_versions", {}).items()
    }
    return item._replace(checkpoint=cast(Checkpoint, checkpoint))


def location_of(item: CheckpointTuple) -> tuple[str, str]:
    """A read checkpoint's (namespace, id)."""
    located = configurable(item.config)
    return located.get("checkpoint_ns", "") or "", str(located["checkpoint_id"])


def _oldest_first(items: Iterable[CheckpointTuple]) -> list[CheckpointTuple]:
    return sorted(items, key=lambda item: str(configurable(item.config)["checkpoint_id"]))
