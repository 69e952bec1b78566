"""Group commit: the unflushed writes of many threads in one durable transaction, as the hot tier encoded them.

A write-back flush used to replay each unflushed write through the durable saver's ``put`` / ``put_writes``:
one round trip per item (and, over ``AsyncPostgresSaver``, one turn of its one lock per item), every value
decoded and serialized again. Here a flush hands the backend that owns the saver's SQL (``backends``) one
``Batch``: every claimed thread's items, oldest first and parents first, and the checkpoint each thread's flush
continues (the late-flush check). The backend reads those parents and writes the rows the saver's own ``put``
and ``put_writes`` would write, all in one transaction with one batched statement per table
(``SqliteBackend.write_batch``, ``PostgresBackend.write_batch``: two round trips, pipelined), and returns the
threads whose parent is gone, of which nothing was written.

What is reused: pending writes go in as the hot tier encoded them (the saver's serde, ``WRITES_IDX_MAP`` indexes
in), and so do PostgreSQL's blob rows; a value is decoded only where the row needs it as a value (PostgreSQL:
to tell an inline primitive, skipped for a msgpack map or array; SQLite: its checkpoint row serializes the whole
checkpoint, values inline, as ``SqliteSaver.put`` does).

A saver without tables of its own (``backends.generic``: any other saver, ``InMemorySaver``) is written as
before: each item replayed through its API, the parent read by a ``get_tuple``. Such flushes are never grouped
(``groupable``): a failure there is one item's, and the items before it are durable.

Runtime complexity: O(rows) and two round trips per batch, for SQL savers; one round trip per item otherwise.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from contextlib import ExitStack
from typing import Any, NamedTuple

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata
from langgraph.checkpoint.serde.base import SerializerProtocol

from ..engine import Blob, WriteRecord
from .backends.base import Batch, BatchPut, BatchWrites, stock_writes
from .durable import DurableTier
from .pools import in_jobs_pool
from .writeback import CheckpointReplay, DirtyCheckpoint, DirtyItem, DirtyLedger, Replay, refuses_the_data, replay

__all__ = [
    "BATCH_BYTES",
    "BATCH_ITEMS",
    "Group",
    "GroupPlan",
    "Hooks",
    "Io",
    "Stored",
    "astore",
    "batch_of",
    "group_plan",
    "groupable",
    "nbytes",
    "put",
    "aput",
    "put_writes",
    "aput_writes",
    "store",
]

BATCH_ITEMS = 1_000
"""The most unflushed writes one group commit takes (more threads wait for the next transaction)."""

BATCH_BYTES = 8 * 1024 * 1024
"""The most bytes of unflushed writes one group commit takes (a thread larger than this goes alone)."""


class Group(NamedTuple):
    """One thread's part of a flush: its claimed items, oldest first, and the checkpoint that must still be
    durable before they are written (``flushing._parent_to_check``), or None."""

    thread_id: str
    items: Sequence[DirtyItem]
    parent: tuple[str, str] | None


Clock = Callable[[], float]
"""The saver's clock (``Shared.clock``), which times each item's write."""

Stored = Callable[[str, float], None]
"""Told, per item made durable and in order, its thread and the seconds its write took (a batch's share)."""


class Io(NamedTuple):
    """What a group flush asks its driver (``flushing``) to do: ``enter`` a thread's gate (shared; ``what`` is
    the thread id; held until ``leave``), ``store`` groups (``what``: the groups and their ``Stored``; sent the
    threads whose parent is gone, or the failure), or ``flush`` one thread alone (sent its count or failure)."""

    kind: str
    what: Any


class Hooks(NamedTuple):
    """What a group flush needs of a one-thread flush (``flushing``): the parent to check for a thread's items;
    a thread's end (``finish(thread_id, items, flushed, start, gone)``: its count, or it raises: its parent
    ``gone``); a thread's failure (``failed(thread_id, flushed, start, error)``: what it raises), ``start`` being
    a ``time.perf_counter()`` whose distance to now is the thread's share of the batch's time."""

    parent: Callable[[str, Sequence[DirtyItem]], tuple[str, str] | None]
    finish: Callable[[str, Sequence[DirtyItem], int, float, tuple[str, str] | None], int]
    failed: Callable[[str, int, float, Exception], Exception]


GroupPlan = Generator[Io, Any, dict[str, "int | Exception"]]
"""A group flush as a generator (``flushing``'s plans' pattern): it yields ``Io`` steps and returns each thread's
count of flushed items, or its failure."""


def group_plan(ledger: DirtyLedger, thread_ids: Sequence[str], hooks: Hooks) -> GroupPlan:
    """Flush the threads in group commits, in the given order (the one dirty longest first), at most
    ``BATCH_ITEMS`` writes and ``BATCH_BYTES`` a transaction; each thread's outcome as ``flush_thread`` has it.

    Each batch enters its threads' gates in thread-id order (so two group flushes never wait on each other) and
    claims each thread it can without waiting; a thread another caller is flushing is flushed alone after the
    batch (its flusher's end waited for). A batch the durable tier refuses for its data is retried a thread at a
    time, so one thread's unstorable write never holds up the others (and strikes that thread alone); any other
    failure (the tier down) is every thread's failure.

    Runtime complexity: O(items), two round trips per batch, plus the flushes made alone.
    """
    outcomes: dict[str, int | Exception] = {}
    for chunk in _chunks(ledger, thread_ids):
        outcomes.update((yield from _batch_plan(ledger, chunk, hooks)))
    return {thread_id: outcomes.get(thread_id, 0) for thread_id in thread_ids}


def _chunks(ledger: DirtyLedger, thread_ids: Sequence[str]) -> list[list[str]]:
    """The threads cut into batches by their unflushed writes as they stand now. Runtime complexity: O(threads)."""
    chunks: list[list[str]] = [[]]
    items = size = 0
    with ledger.lock:
        for thread_id in thread_ids:
            backlog = ledger.threads.get(thread_id)
            count, held = (0, 0) if backlog is None else (len(backlog.items), backlog.nbytes)
            if chunks[-1] and (items + count > BATCH_ITEMS or size + held > BATCH_BYTES):
                chunks.append([])
                items = size = 0
            chunks[-1].append(thread_id)
            items, size = items + count, size + held
    return [chunk for chunk in chunks if chunk]


def _batch_plan(ledger: DirtyLedger, chunk: list[str], hooks: Hooks) -> GroupPlan:
    """One group commit of ``chunk``'s threads (see ``group_plan``)."""
    claimed: dict[str, list[DirtyItem]] = {}
    busy: list[str] = []
    tally: dict[str, int] = dict.fromkeys(chunk, 0)

    def stored(thread_id: str, seconds: float) -> None:
        ledger.flushed_one(thread_id, seconds)
        tally[thread_id] += 1

    began = time.perf_counter()
    try:
        for thread_id in sorted(chunk):
            yield Io("enter", thread_id)
            items = ledger.try_claim(thread_id)
            if items is None:
                busy.append(thread_id)
            else:
                claimed[thread_id] = items
        groups = [
            Group(thread_id, claimed[thread_id], hooks.parent(thread_id, claimed[thread_id]))
            for thread_id in chunk
            if claimed.get(thread_id)
        ]
        done = (yield Io("store", (groups, stored))) if groups else set()
    finally:
        for thread_id in claimed:
            ledger.release(thread_id)
    yield Io("leave", None)
    total, elapsed = sum(len(group.items) for group in groups), time.perf_counter() - began

    def start(group: Group) -> float:  # the thread's share of the batch's time, as a start
        return time.perf_counter() - (elapsed * len(group.items) / total if total else 0.0)

    outcomes: dict[str, int | Exception] = {}
    if isinstance(done, Exception):
        if refuses_the_data(done) and len(groups) > 1:
            for group in groups:  # one at a time: the thread that holds the bad write fails alone
                outcomes[group.thread_id] = yield Io("flush", group.thread_id)
        else:
            for group in groups:
                outcomes[group.thread_id] = hooks.failed(group.thread_id, tally[group.thread_id], start(group), done)
    else:
        for group in groups:
            gone = group.parent if group.thread_id in done else None
            try:
                outcomes[group.thread_id] = hooks.finish(
                    group.thread_id, group.items, tally[group.thread_id], start(group), gone
                )
            except Exception as error:
                outcomes[group.thread_id] = error
    for thread_id in busy:
        outcomes[thread_id] = yield Io("flush", thread_id)
    return outcomes


def groupable(durable: DurableTier) -> bool:
    """Whether the durable saver takes group commits: a SQL backend's saver whose ``put`` and ``put_writes`` are
    its class's own (a subclass overriding one is written through its API, so what it adds still runs), on a
    connection where a transaction of ours can begin (not one that keeps its own open: a ``sqlite3`` connection
    with ``autocommit=False``, a psycopg one without autocommit, which ``conditional_problem`` names).

    Runtime complexity: O(1).
    """
    form, saver = durable.format, durable.saver
    return form.batched and stock_writes(saver) and form.conditional_problem(saver) is None


def batch_of(groups: Sequence[Group], serde: SerializerProtocol) -> Batch:
    """The backend's view of the groups: every item as the hot tier encoded it. Runtime complexity: O(items)."""
    items = [_batch_item(group.thread_id, item) for group in groups for item in group.items]
    parents = {group.thread_id: group.parent for group in groups if group.parent is not None}
    return Batch(items, parents, serde.loads_typed)


def _batch_item(thread_id: str, item: DirtyItem) -> BatchPut | BatchWrites:
    if isinstance(item, DirtyCheckpoint):
        record = item.record
        return BatchPut(
            thread_id,
            item.namespace,
            record.checkpoint_id,
            record.parent_id,
            record.checkpoint,
            record.metadata,
            item.values,
            item.new_versions,
        )
    return BatchWrites(thread_id, item.namespace, item.checkpoint_id, item.task_id, item.task_path, item.writes)


def nbytes(item: DirtyItem) -> int:
    """An item's serialized bytes (what a group commit sends). Runtime complexity: O(values of the item)."""
    if isinstance(item, DirtyCheckpoint):
        return item.record.nbytes + sum(len(value[1]) for value in item.values.values())
    return item.nbytes


def store(
    durable: DurableTier, serde: SerializerProtocol, groups: Sequence[Group], stored: Stored, clock: Clock
) -> set[str]:
    """Write the groups: one transaction for a SQL saver, else each item through the saver's API (one group).
    Return the threads whose parent was found gone (nothing of theirs written); ``stored`` is told each item
    written, once it is durable.

    Raises:
        Exception: The durable failure; in a transaction nothing of it was written (every group's items stay
            unflushed); through the API, the items told to ``stored`` are durable.

    Runtime complexity: O(rows), two round trips; one per item through the API.
    """
    if not groupable(durable):
        return _replayed(durable, serde, groups, stored, clock)
    batch, start = batch_of(groups, serde), clock()
    with _flights(durable, groups):
        gone = _write(durable, batch)
    _tell(groups, gone, clock() - start, stored)
    return gone


async def astore(
    durable: DurableTier,
    serde: SerializerProtocol,
    groups: Sequence[Group],
    stored: Stored,
    clock: Clock,
    offload: float,
) -> set[str]:
    """``store`` awaiting the durable tier; a batch past ``offload`` bytes is made into rows in the jobs pool,
    off the event loop. Runtime complexity: that of ``store``."""
    if not groupable(durable):
        return await _areplayed(durable, serde, groups, (stored, clock, offload))
    batch, start = batch_of(groups, serde), clock()
    form, saver = durable.format, durable.saver
    size = sum(nbytes(item) for group in groups for item in group.items)
    prepared = await in_jobs_pool(lambda: form.prepare(saver, batch)) if size > offload else None
    with _flights(durable, groups):
        gone = await _awrite(durable, batch, prepared)
    _tell(groups, gone, clock() - start, stored)
    return gone


def _flights(durable: DurableTier, groups: Sequence[Group]) -> ExitStack:
    """Fly the lowest and the highest checkpoint id of the batch's puts in ``landings`` while it is written:
    retention's discovery reads that range and the lowest under way, which the two bound as all of them would.
    Runtime complexity: O(items)."""
    ids = [item.checkpoint_id for group in groups for item in group.items if isinstance(item, DirtyCheckpoint)]
    stack = ExitStack()
    for checkpoint_id in sorted({min(ids), max(ids)}) if ids else ():
        stack.enter_context(durable.landings.flight(checkpoint_id))
    return stack


def _tell(groups: Sequence[Group], gone: set[str], seconds: float, stored: Stored) -> None:
    """Tell ``stored`` each item written (every group's but those of ``gone``), each with its share of the time."""
    written = [group for group in groups if group.thread_id not in gone]
    count = sum(len(group.items) for group in written)
    share = seconds / count if count else 0.0
    for group in written:
        for _ in group.items:
            stored(group.thread_id, share)


def _replayed(
    durable: DurableTier, serde: SerializerProtocol, groups: Sequence[Group], stored: Stored, clock: Clock
) -> set[str]:
    """Each item through the saver's API, its parent first read by a ``get_tuple`` (a saver with no tables)."""
    gone: set[str] = set()
    for group in groups:
        if group.parent is not None and durable.get_tuple(_located(group.thread_id, group.parent)) is None:
            gone.add(group.thread_id)
            continue
        for item in group.items:
            start = clock()
            _put(durable, replay(item, group.thread_id, serde))
            stored(group.thread_id, clock() - start)
    return gone


async def _areplayed(
    durable: DurableTier, serde: SerializerProtocol, groups: Sequence[Group], told: tuple[Stored, Clock, float]
) -> set[str]:
    """``_replayed`` awaiting the saver; ``told`` is (``stored``, the clock, the bytes past which an item is
    decoded in the jobs pool)."""
    stored, clock, offload = told
    gone: set[str] = set()
    for group in groups:
        if group.parent is not None and await durable.aget_tuple(_located(group.thread_id, group.parent)) is None:
            gone.add(group.thread_id)
            continue
        for item in group.items:
            start = clock()
            if nbytes(item) > offload:  # decoded in the jobs pool, off the event loop
                arguments = await in_jobs_pool(functools.partial(replay, item, group.thread_id, serde))
            else:
                arguments = replay(item, group.thread_id, serde)
            await _aput(durable, arguments)
            stored(group.thread_id, clock() - start)
    return gone


def _located(thread_id: str, parent: tuple[str, str]) -> Any:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": parent[0], "checkpoint_id": parent[1]}}


def _put(durable: DurableTier, arguments: Replay) -> None:
    if isinstance(arguments, CheckpointReplay):
        durable.put(*arguments)
    else:
        durable.put_writes(*arguments)


async def _aput(durable: DurableTier, arguments: Replay) -> None:
    if isinstance(arguments, CheckpointReplay):
        await durable.aput(*arguments)
    else:
        await durable.aput_writes(*arguments)


# --- write-through: one put, one put_writes, on the same path ------------------------------------------------------


def _plain(configurable: Any, *keys: str) -> bool:
    return all(type(configurable.get(key)) is str for key in keys)


def _through_put(durable: DurableTier, blobs: Mapping[tuple[str, Any], Blob], call: PutCall) -> Batch | None:
    """A write-through ``put`` as a batch of one, its new values as the hot tier encoded them; None where it goes
    through the saver's API (no SQL of ours, a subclass's own ``put``, identifiers the saver would read otherwise).
    Runtime complexity: O(new values)."""
    config, checkpoint, metadata, new_versions = call
    located = config.get("configurable") if isinstance(config, dict) else None
    if not groupable(durable) or not isinstance(located, dict) or not _plain(located, "thread_id", "checkpoint_ns"):
        return None
    parent = located.get("checkpoint_id")
    if (parent is not None and type(parent) is not str) or type(checkpoint.get("id")) is not str:
        return None
    values = {channel: blob for (channel, _), blob in blobs.items() if blob is not None}
    thread_id, namespace, checkpoint_id = located["thread_id"], located["checkpoint_ns"], checkpoint["id"]
    given = (config, checkpoint, metadata)
    item = BatchPut(thread_id, namespace, checkpoint_id, parent, _NONE, _NONE, values, new_versions, given)
    return Batch([item], {}, durable.saver.serde.loads_typed)


_NONE = ("", b"")  # a write-through's skeleton and metadata: made from what was given, never decoded

PutCall = tuple[RunnableConfig, Checkpoint, CheckpointMetadata, ChannelVersions]
"""``put``'s arguments: config, checkpoint, metadata, new versions."""

WritesCall = tuple[RunnableConfig, Sequence[tuple[str, Any]], str, str]
"""``put_writes``' arguments: config, writes, task id, task path."""


def _through_writes(durable: DurableTier, records: Sequence[WriteRecord], call: WritesCall) -> Batch | None:
    """A write-through ``put_writes`` as a batch of one, its records as encoded; None where it goes through the
    saver's API. Runtime complexity: O(writes)."""
    config, _, task_id, task_path = call
    located = config.get("configurable") if isinstance(config, dict) else None
    if not groupable(durable) or not isinstance(located, dict):
        return None
    if not _plain(located, "thread_id", "checkpoint_ns", "checkpoint_id") or type(task_id) is not str:
        return None
    if type(task_path) is not str or any(type(record.channel) is not str for record in records):
        return None
    item = BatchWrites(
        located["thread_id"], located["checkpoint_ns"], located["checkpoint_id"], task_id, task_path, records
    )
    return Batch([item], {}, durable.saver.serde.loads_typed)


def put(durable: DurableTier, blobs: Mapping[tuple[str, Any], Blob], *call: Any) -> RunnableConfig:
    """A write-through ``put`` (``call``: its arguments): the rows the saver's own ``put`` writes, in one
    transaction on a connection of the saver's own (over PostgreSQL, one of its pool when it has one, not its
    per-instance lock; its one connection under that lock otherwise), its new values (``blobs``) as the hot tier
    encoded them; or the saver's ``put`` where the backend has no SQL of ours. Flown in ``landings`` meanwhile.

    Runtime complexity: one round trip (pipelined), O(channels).
    """
    batch = _through_put(durable, blobs, call)
    if batch is None:
        return durable.put(*call)
    with durable.landings.flight(batch.items[0].checkpoint_id):
        _write(durable, batch)
    return _stored(batch)


async def aput(durable: DurableTier, blobs: Mapping[tuple[str, Any], Blob], *call: Any) -> RunnableConfig:
    """``put`` awaiting the durable tier. Runtime complexity: that of ``put``."""
    batch = _through_put(durable, blobs, call)
    if batch is None:
        return await durable.aput(*call)
    with durable.landings.flight(batch.items[0].checkpoint_id):
        await _awrite(durable, batch)
    return _stored(batch)


def _stored(batch: Batch) -> RunnableConfig:
    """The config the saver's ``put`` returns. Runtime complexity: O(1)."""
    item = batch.items[0]
    located = {"thread_id": item.thread_id, "checkpoint_ns": item.namespace, "checkpoint_id": item.checkpoint_id}
    return {"configurable": located}


def _write(durable: DurableTier, batch: Batch) -> set[str]:
    """Write a batch on the sync side (an async saver's own loop called from this thread). Runtime complexity:
    the backend's."""
    form = durable.format
    return durable.on_tables(
        lambda saver: form.write_batch(saver, batch), lambda saver: form.awrite_batch(saver, batch)
    )


async def _awrite(durable: DurableTier, batch: Batch, prepared: Any = None) -> set[str]:
    """Write a batch on the async side (a sync saver's in the durable pool), its rows ``prepared`` or made now."""
    form = durable.format
    return await durable.aon_tables(
        lambda saver: form.write_batch(saver, batch, prepared),
        lambda saver: form.awrite_batch(saver, batch, prepared),
    )


def put_writes(durable: DurableTier, records: Sequence[WriteRecord], *call: Any) -> None:
    """A write-through ``put_writes`` (``call``: its arguments): the saver's own rows (its ``ON CONFLICT``
    choice), its ``records`` as encoded, in one statement on a connection of the saver's own (as ``put``); or the
    saver's ``put_writes``. Runtime complexity: one round trip, O(writes).
    """
    batch = _through_writes(durable, records, call)
    if batch is None:
        durable.put_writes(*call)
    else:
        _write(durable, batch)


async def aput_writes(durable: DurableTier, records: Sequence[WriteRecord], *call: Any) -> None:
    """``put_writes`` awaiting the durable tier. Runtime complexity: that of ``put_writes``."""
    batch = _through_writes(durable, records, call)
    if batch is None:
        await durable.aput_writes(*call)
    else:
        await _awrite(durable, batch)
