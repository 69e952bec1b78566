"""Conditional puts: store a checkpoint only while the namespace's newest durable checkpoint is the one
the caller read, atomically across processes.

Why: LangGraph has no per-thread lock. Two processes running the same thread at once (a request
retried on another pod, two workers) each read the newest checkpoint, run a step and put a child of
what they read. Both puts succeed: the thread forks, ``get_state`` follows the newer branch, and the
other process's acknowledged update is gone without an error (issue 29, finding 11: 28-46 of 50
racing updates kept, with the durable savers alone as well). ``put_if_newest`` makes the check and the
insert one step: exactly one racer stores its child; the others get ``CheckpointConflictError``,
naming the thread, with nothing written, and read the thread again.

How, per saver (the code is each backend's ``put_if_newest``: ``backends/sqlite.py``,
``backends/postgres.py``). The check and the saver's own ``put`` run in one transaction on the saver's own
connection, behind a lock every conditional put of that namespace takes, in every process:

* ``SqliteSaver`` and ``AsyncSqliteSaver``: ``BEGIN IMMEDIATE`` takes SQLite's write lock (one per
  database file, shared by every process that opens it) before the newest id is read, so no other
  writer can commit between the read and the insert; the put's commit releases it, and a conflict
  rolls back. Waiting for the lock is the connection's busy timeout (``sqlite3``'s default: 5 s),
  after which ``sqlite3.OperationalError`` ("database is locked") is raised, as for any write.
* ``PostgresSaver`` and ``AsyncPostgresSaver`` (one connection, one in pipeline mode, or a pool): one
  transaction on one connection, ``BEGIN ISOLATION LEVEL READ COMMITTED``, ``pg_advisory_xact_lock(key)``
  where ``key`` is a 64-bit hash of (thread id, namespace), the newest id, then the put. ``COMMIT``
  (or the rollback of an error, or the end of a dead session) releases the lock. Read committed is
  set explicitly because the newest id must be read with a snapshot taken after the lock was granted:
  under repeatable read or serializable (a server or connection default), the snapshot would date
  from the lock statement, before the wait, and miss the winner's commit.

Why a transaction-scoped advisory lock, and not the alternatives:

* A session lock (``pg_advisory_lock``) taken, then an ordinary ``saver.put``, then an unlock: with a
  pool, the lock's connection must be held out of the pool while the put takes a second one (two
  connections per put: a pool of N deadlocks under N concurrent puts until its timeout); a lock left
  on a pooled connection by a failed unlock outlives the call; session locks are re-entrant, so
  threads sharing one connection need a per-process lock as well; and the check and the insert are
  not one transaction. The transaction lock has none of these: one connection, released by the
  transaction's end whatever happens, and the check and the insert commit together (a crash between
  them writes nothing).
* A conditional ``INSERT ... WHERE (newest) = expected`` alone: under read committed two racers both
  see the old newest and both insert (their rows do not collide), and the put's blob rows are
  separate statements. It needs the lock anyway.
* A lock on the thread's rows (``SELECT ... FOR UPDATE``): there is no row to lock in a new namespace.

Reusing the saver's own ``put``: the savers' puts take the saver's lock (``SqliteSaver.lock``,
``PostgresSaver.lock``, the async savers' ``asyncio.Lock``), which is not re-entrant and is already
held here (it keeps the saver's other callers, in this process, off the connection while the
transaction is open), and choose their connection themselves (a pool's). So the put runs on a *view*:
a shallow copy of the saver, as ``with_allowlist`` makes one, whose lock is a no-op and whose
connection is the one holding the transaction. What it stores is the put's own doing, byte for byte:
the serde, ``get_checkpoint_metadata`` / ``get_serializable_checkpoint_metadata``, PostgreSQL's split
of channel values between the checkpoint and its blobs (``tests/tiered/test_conditional_puts.py`` compares the
rows with a plain put's). For SQLite the checkpoint is serialized before the write lock is taken (the
view's serde hands the put those bytes), since that lock blocks every writer of the file; PostgreSQL's
put serializes its blobs inside, holding only this namespace's lock.

Cost per put, against a plain ``put``:

* SQLite: four statements instead of three (``BEGIN IMMEDIATE``, an indexed ``SELECT`` of the newest
  id, the put's ``INSERT``, ``COMMIT``: the same single commit, one fsync in WAL mode). The file's
  write lock is taken at ``BEGIN`` instead of at the insert, so its writers are serialized for the
  length of the check as well (not of the serialization, done before).
* PostgreSQL: three round trips instead of one (``BEGIN``, the lock and the ``SELECT`` pipelined into
  one; the put's own; ``COMMIT``), five where libpq has no pipeline mode; with
  ``prepare_threshold=0``, each new statement costs one more round trip the first time a connection
  runs it. One advisory lock held from the check to the commit: conditional puts of one namespace
  queue on it; other namespaces and threads do not (a hash collision only makes two queue).
* A conflict costs the check and nothing else: SQLite's ``ROLLBACK``; PostgreSQL's two round trips
  (the check and a ``COMMIT`` of the empty transaction, not ``ROLLBACK``, whose psycopg bookkeeping
  deallocates every statement the connection prepared).
* In-process, on one connection: the saver's lock is held for the whole transaction, a wait for the
  advisory lock included (a plain put holds it for its own statements), since the connection is
  shared. On a pool, the call takes a connection of its own and not the saver's lock (which a plain
  put takes even there), so its wait holds up no other call of the process.

Measured (``benchmarks/conditional.py``, 21 interleaved rounds of 200 puts of a chat step: 2 shared
cores; a SQLite file; PostgreSQL 15 on loopback TCP with fsync on): SQLite 0.310 ms per put, 0.316 ms
guarded, ratio 1.04 (quartiles 0.96-1.09); PostgreSQL 0.484 ms and 0.798 ms, ratio 1.69 (1.59-1.77),
0.31 ms more per put: the two extra round trips, so over a network add two round-trip times.

The guard covers conditional puts only: a plain ``put`` (or ``put_writes``, ``delete_thread``) of
another process is not held back, and a plain put that lands between two conditional ones is seen by
the next check as the newest. Every process writing a thread must use the guard for the chain to stay
linear. ``put_writes`` needs no guard: writes attach to a checkpoint id and never fork a thread.

Async callers: ``AsyncSqliteSaver`` and ``AsyncPostgresSaver`` are called natively on their own event
loop (a caller on another loop hands the call to it, as ``durable.DurableTier`` does); a sync saver
runs on ``pools.durable_pool()``, never the loop's default executor (see ``tiered.pools``).
A sync call on an async saver is handed to its loop and waited for (``DURABLE_CALL_SECONDS``); made on
that loop itself, it raises ``DurableSideError``. ``AsyncPostgresSaver.aput`` itself serializes its
blobs with ``asyncio.to_thread`` (the default executor), as a plain ``aput`` does: here that happens
while the namespace's lock is held.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import functools
import hashlib
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, ChannelVersions, Checkpoint, CheckpointMetadata
from langgraph.checkpoint.base.id import UUID as LangGraphUUID

from ..engine import BoundedSaverError, InvalidArgumentError
from .backends import backend_for, kind_of
from .durable import DURABLE_CALL_SECONDS, DurableSideError
from .pools import in_durable_pool

__all__ = [
    "KNOWN_NEWEST_THREADS",
    "CheckpointConflictError",
    "KnownNewest",
    "aput_if_newest",
    "conditional_support",
    "put_if_newest",
]

S = TypeVar("S")

Kind = Literal["sqlite", "async_sqlite", "postgres", "async_postgres"]
_SYNC = ("sqlite", "postgres")


_LOCK_KEY_PERSON = b"lg-put-if-newest"  # blake2b's personalization: these keys differ from other uses' hashes


class CheckpointConflictError(BoundedSaverError, RuntimeError):
    """A conditional put found another newest checkpoint than the one expected: nothing was written.

    Attributes:
        thread_id: The thread.
        checkpoint_ns: The namespace ("" for the root graph).
        expected: The newest checkpoint id the caller expected (None: it expected the namespace empty).
        found: The newest checkpoint id found (None: the namespace has none, as after ``delete_thread``).
        checkpoint_id: The checkpoint the refused put would have stored.
        found_metadata: What the durable tier holds of the found checkpoint's metadata (``source``, ``step``,
            ``run_id``...), read after the conflict to say who wrote it; None when it could not be read.
    """

    def __init__(
        self,
        thread_id: str,
        checkpoint_ns: str,
        expected: str | None,
        found: str | None,
        *,
        checkpoint_id: str | None = None,
        found_metadata: Mapping[str, Any] | None = None,
    ) -> None:
        self.thread_id = thread_id
        self.checkpoint_ns = checkpoint_ns
        self.expected = expected
        self.found = found
        self.checkpoint_id = checkpoint_id
        self.found_metadata = None if found_metadata is None else dict(found_metadata)
        wanted = (
            f"expected its newest durable checkpoint to be {expected}"
            if expected is not None
            else "expected it to have no checkpoint yet"
        )
        if found is None:
            seen = "found none (was the thread deleted, by delete_thread or retention, in another process?)"
        else:
            seen = f"found {found}{_written_by(found, self.found_metadata)}"
            if expected is not None and found < expected:
                seen += (
                    ", older than expected: checkpoints were removed since (by another writer's delete_for_runs, a "
                    "prune, a copy into the thread, or a deletion and a new run)"
                )
        if found is not None and found == checkpoint_id:
            seen += ", the very checkpoint being put (an earlier attempt of this put was stored)"
        super().__init__(
            f"conditional put refused on thread {thread_id!r}, namespace {checkpoint_ns!r}: {wanted}, {seen}. "
            f"Nothing was written: another writer changed the thread since this process last read or wrote it "
            f"(another process, or a writer that does not use WriteThrough(processes='many')). Read the thread "
            f"again (get_state) and retry the run from there."
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # An exception's default pickling passes only the message to __init__: keep the fields across processes.
        return (
            functools.partial(type(self), checkpoint_id=self.checkpoint_id, found_metadata=self.found_metadata),
            (self.thread_id, self.checkpoint_ns, self.expected, self.found),
        )


_UUID_EPOCH = datetime.datetime(1582, 10, 15, tzinfo=datetime.UTC)


def _written_by(checkpoint_id: str, metadata: Mapping[str, Any] | None) -> str:
    """Who wrote a checkpoint, as far as its id (uuid6 ids hold the time of their put) and metadata say."""
    parts = []
    with contextlib.suppress(ValueError, TypeError, AttributeError):
        made = LangGraphUUID(checkpoint_id)
        if made.version == 6:
            written = _UUID_EPOCH + datetime.timedelta(microseconds=made.time // 10)
            parts.append(f"written at {written:%Y-%m-%d %H:%M:%S.%f} UTC")
    for key in ("source", "step", "run_id", "graph_id", "assistant_id"):
        if metadata is not None and metadata.get(key) is not None:
            parts.append(f"{key} {metadata[key]!r:.60}")
    return f" ({', '.join(parts)})" if parts else ""


@dataclass(frozen=True)
class _Put:
    """One conditional put: the saver's arguments and where the check looks."""

    config: RunnableConfig
    checkpoint: Checkpoint
    metadata: CheckpointMetadata
    new_versions: ChannelVersions
    thread_id: str
    namespace: str
    expected: str | None

    def check(self, found: str | None) -> None:
        """Raise ``CheckpointConflictError`` unless the newest id found is the one expected."""
        if found != self.expected:
            raise CheckpointConflictError(
                self.thread_id, self.namespace, self.expected, found, checkpoint_id=str(self.checkpoint["id"])
            )

    @property
    def lock_key(self) -> int:
        """The advisory lock's key: a signed 64-bit hash of (thread id, namespace), the same in every process."""
        name = f"{self.thread_id}\x00{self.namespace}".encode("utf-8", "surrogatepass")
        digest = hashlib.blake2b(name, digest_size=8, person=_LOCK_KEY_PERSON).digest()
        return int.from_bytes(digest, "big", signed=True)


def _put(
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    new_versions: ChannelVersions,
    expected: str | None,
) -> _Put:
    located = config.get("configurable") or {}
    if "thread_id" not in located:
        raise InvalidArgumentError("a conditional put needs config['configurable']['thread_id']")
    if expected is not None and not isinstance(expected, str):
        raise InvalidArgumentError(f"expected must be a checkpoint id (str) or None, got {type(expected).__name__}")
    namespace = located.get("checkpoint_ns", "") or ""
    return _Put(config, checkpoint, metadata, new_versions, str(located["thread_id"]), str(namespace), expected)


# --- which savers -----------------------------------------------------------------------------------------


def _kind(saver: BaseCheckpointSaver[Any]) -> Kind | None:
    kind = kind_of(saver)
    return None if kind in ("memory", "other") else kind  # type: ignore[return-value]


def conditional_support(saver: BaseCheckpointSaver[Any]) -> str | None:
    """None when ``put_if_newest`` can guard this saver's puts; else one sentence saying why not.

    For a ``ValueError`` at set-up. Supported: ``SqliteSaver``, ``AsyncSqliteSaver``, ``PostgresSaver``
    and ``AsyncPostgresSaver`` (one connection or a pool; a single connection must be in autocommit
    mode, as LangGraph's Postgres savers require). Runtime complexity: O(1).
    """
    return backend_for(saver).conditional_problem(saver)


def _supported(saver: BaseCheckpointSaver[Any]) -> Kind:
    reason = conditional_support(saver)
    if reason is not None:
        raise InvalidArgumentError(reason)
    kind = _kind(saver)
    assert kind is not None
    return kind


# --- the two sides ---------------------------------------------------------------------------------------


def _own_loop(saver: Any) -> asyncio.AbstractEventLoop:
    """The event loop an async saver was made on (``AsyncSqliteSaver.loop``, ``AsyncPostgresSaver.loop``)."""
    loop: asyncio.AbstractEventLoop = saver.loop
    return loop


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def put_if_newest(
    saver: BaseCheckpointSaver[Any],
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    new_versions: ChannelVersions,
    *,
    expected: str | None,
) -> RunnableConfig:
    """Store the checkpoint exactly as ``saver.put(config, checkpoint, metadata, new_versions)`` would, if
    and only if the newest checkpoint id of its (thread_id, checkpoint_ns) in the saver is ``expected``
    (None: the namespace has none); check and store are one atomic step across processes.

    An async saver's call is handed to its event loop and waited for (at most ``DURABLE_CALL_SECONDS``;
    a ``TimeoutError`` leaves the outcome unknown: read the thread).

    Args:
        saver: ``SqliteSaver``, ``AsyncSqliteSaver``, ``PostgresSaver`` or ``AsyncPostgresSaver``.
        config: The put's config (its ``checkpoint_id``, if any, is the new checkpoint's parent).
        checkpoint: The checkpoint to store.
        metadata: Its metadata.
        new_versions: The channel versions new in it.
        expected: The newest checkpoint id the caller read, or None if it found the namespace empty. Usually
            the new checkpoint's parent; not when forking on purpose from an older checkpoint (time travel,
            ``update_state`` on a past config), where it is the newest the caller saw.

    Returns:
        The config ``saver.put`` returns.

    Raises:
        CheckpointConflictError: The newest checkpoint is another (nothing was written).
        ValueError: The saver is not supported (``conditional_support`` says why), or no thread id.
        DurableSideError: An async saver called on its own event loop (use ``aput_if_newest`` there).
        Exception: Whatever the saver raised (nothing was written; on SQLite, "database is locked" once the
            connection's busy timeout ran out waiting for the write lock).

    Runtime complexity: one indexed lookup and the saver's put, in one transaction (see the module's
    docstring for round trips and locks).
    """
    kind = _supported(saver)
    call = _put(config, checkpoint, metadata, new_versions, expected)
    backend = backend_for(saver)
    if kind in _SYNC:
        return backend.put_if_newest(saver, call)
    loop = _own_loop(saver)
    if _running_loop() is loop:
        raise DurableSideError(
            f"{type(saver).__name__} refuses sync calls made on its own event loop: use aput_if_newest there"
        )
    if loop.is_closed():
        raise DurableSideError(f"the event loop {type(saver).__name__} was made on is closed: it cannot be called")
    future = asyncio.run_coroutine_threadsafe(backend.aput_if_newest(saver, call), loop)
    try:
        return future.result(DURABLE_CALL_SECONDS)
    except TimeoutError:
        future.cancel()  # rolls the transaction back unless its commit is under way
        raise


async def aput_if_newest(
    saver: BaseCheckpointSaver[Any],
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    new_versions: ChannelVersions,
    *,
    expected: str | None,
) -> RunnableConfig:
    """``put_if_newest`` for async callers, never blocking the caller's event loop.

    ``AsyncSqliteSaver`` and ``AsyncPostgresSaver`` run natively on their own loop (a caller on another
    loop hands the call over and awaits it); ``SqliteSaver`` and ``PostgresSaver`` run on
    ``durable_pool()`` (never the default executor: see ``durable``'s docstring).

    Args:
        saver: As for ``put_if_newest``.
        config: The put's config.
        checkpoint: The checkpoint to store.
        metadata: Its metadata.
        new_versions: The channel versions new in it.
        expected: The newest checkpoint id the caller read, or None if it found the namespace empty.

    Returns:
        The config the saver's put returns.

    Raises:
        CheckpointConflictError: The newest checkpoint is another (nothing was written).
        ValueError: The saver is not supported, or no thread id.
        Exception: Whatever the saver raised (nothing was written).

    Runtime complexity: as ``put_if_newest``, plus a hop to the saver's loop or a pool thread.
    """
    kind = _supported(saver)
    call = _put(config, checkpoint, metadata, new_versions, expected)
    backend = backend_for(saver)
    if kind in _SYNC:
        return await in_durable_pool(lambda: backend.put_if_newest(saver, call))
    loop = _own_loop(saver)
    native = backend.aput_if_newest(saver, call)
    if _running_loop() is loop:
        return await native
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(native, loop))


# --- what this process knows of each namespace's newest ------------------------------------------------------

KNOWN_NEWEST_THREADS = 100_000
"""Threads ``KnownNewest`` remembers at most (about 200 bytes each): past it, the least recently written or read
is forgotten, and a fork of it that is no longer hot is checked against its parent only (a needless conflict,
never a fork let through)."""


class KnownNewest:
    """Per thread and namespace: the newest checkpoint id this process knows the durable tier holds (what it
    last wrote there with a conditional put, or read there as the newest), kept after the thread leaves the hot
    tier. A conditional put of a thread that is not hot expects the greater of that and its parent: a deliberate
    fork from an older checkpoint is then no conflict, and a put continuing what was read since is none either.

    Invariant: at most ``capacity`` threads, least recently noted first out; each holds at least one namespace.
    Reads and writes under ``lock`` (the engine's lock is not held: this is the durable side's knowledge).

    Args:
        capacity: Threads remembered at most.
    """

    def __init__(self, capacity: int = KNOWN_NEWEST_THREADS) -> None:
        self.capacity = capacity
        self.lock = threading.Lock()
        self.threads: OrderedDict[str, dict[str, str]] = OrderedDict()

    def note(self, thread_id: str, namespace: str, checkpoint_id: str) -> None:
        """The durable tier holds ``checkpoint_id`` in the namespace, newest or not: keep the greater id known
        (ids are time-ordered). Runtime complexity: O(1) amortized."""
        with self.lock:
            namespaces = self._namespaces(thread_id)
            known = namespaces.get(namespace)
            if known is None or checkpoint_id > known:
                namespaces[namespace] = checkpoint_id

    def _namespaces(self, thread_id: str) -> dict[str, str]:
        """The thread's entry, made (the least recently noted thread out past ``capacity``) or moved to the end;
        ``lock`` held."""
        namespaces = self.threads.get(thread_id)
        if namespaces is None:
            namespaces = self.threads[thread_id] = {}
            while len(self.threads) > self.capacity:
                self.threads.popitem(last=False)
        else:
            self.threads.move_to_end(thread_id)
        return namespaces

    def read(self, thread_id: str, namespace: str, checkpoint_id: str, *, current: bool) -> None:
        """A read found ``checkpoint_id`` the namespace's newest in the durable tier. A ``current`` read (no write
        of this process came between its start and now) is what the durable tier holds, lower ids included (another
        writer's ``delete_for_runs``, a prune or a copy may have taken the newest away); another only raises what is
        known, as a write does. Runtime complexity: O(1) amortized."""
        if not current:
            self.note(thread_id, namespace, checkpoint_id)
            return
        with self.lock:
            self._namespaces(thread_id)[namespace] = checkpoint_id

    def expected(self, thread_id: str, namespace: str, parent_id: str | None) -> str | None:
        """What a put of a thread that is not hot expects to be the namespace's newest: the greater of what this
        process knows and the put's parent (which it read). A put with no parent that finds the namespace emptied
        since (another process deleted the thread) is a new run, not a conflict: ``hot_writes`` tries it again
        expecting it empty. Runtime complexity: O(1)."""
        with self.lock:
            namespaces = self.threads.get(thread_id)
            known = None if namespaces is None else namespaces.get(namespace)
        if known is None or (parent_id is not None and parent_id > known):
            return parent_id
        return known

    def forget(self, thread_id: str) -> None:
        """Forget a thread (deleted, or found moved on by another writer). Runtime complexity: O(1)."""
        with self.lock:
            self.threads.pop(thread_id, None)

    def check(self) -> None:
        """Assert the invariant (for tests). Runtime complexity: O(threads)."""
        with self.lock:
            assert len(self.threads) <= self.capacity, len(self.threads)
            assert all(self.threads.values()), "a thread with no namespace"
