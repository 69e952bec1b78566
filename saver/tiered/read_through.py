"""``TieredSaver``'s misses: one durable read per key, and admission of what it read into the hot tier.

A read the hot tier cannot answer (``hot_reads``) comes here. The thread's
unflushed writes are flushed first (write-back), so the durable tier has them.
Concurrent misses on one key make one durable read (``flown``, over
``coordination.Flights``); the others wait for it. What the read found is
admitted into the hot tier before its reader gets it, and only when nothing
touched the thread since the read began (``coordination.WriteMarks``):

* ``get_tuple`` of a namespace's latest starts a new resident suffix, an older
  checkpoint joins a suffix already hot (``admit``);
* ``list()`` of one namespace admits the newest checkpoints, or older ones
  continuing the hot suffix; an exhausted list makes the namespace wholly hot
  (``admit_list``);
* a thread the durable tier holds nothing of is remembered as such.

Admission stores through the engine like any write; a refusal leaves the
thread out of memory, never half there.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Generator, Hashable, Sequence
from typing import Any, Generic, NamedTuple, TypeVar, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import WRITES_IDX_MAP, Checkpoint, CheckpointTuple, PendingWrite
from langgraph.checkpoint.serde.base import SerializerProtocol

from .. import codec
from ..engine import Blob, BlobKey, CheckpointCapacityError, CheckpointRecord, WriteRecord
from ..locations import checkpoint_id_of, configurable
from .flushing import adeliver, aflush_thread, deliver, flush_thread
from .hot_reads import ListRequest
from .residency import COMPLETE
from .state import Shared, Tiers, alive, sweep

__all__ = [
    "DELIVER",
    "Admission",
    "aflown",
    "arun_plan",
    "aread_list",
    "aread_tuple",
    "call_step",
    "durable_step",
    "flown",
    "read_list",
    "read_tuple",
    "run_plan",
]

T = TypeVar("T")


class Admission(NamedTuple):
    """A durable read encoded for the hot tier: the checkpoint, its new values and its writes (by task), and
    whether the writes are exactly as stored (else their indexes and task paths were made up: ``inexact``)."""

    record: CheckpointRecord
    blobs: dict[BlobKey, Blob]
    writes: list[list[WriteRecord]]
    exact: bool


# --- one durable read per key ------------------------------------------------------------------------------------


def read_tuple(
    tiers: Tiers, config: RunnableConfig, thread_id: str, namespace: str, checkpoint_id: str | None
) -> CheckpointTuple | None:
    """A ``get_tuple`` the hot tier could not answer: read once from the durable tier, admitted, returned.

    Runtime complexity: the thread's flush (write-back), the durable saver's
    ``get_tuple`` (and a ``list`` of one when it found nothing of a root
    namespace's latest), plus encoding what is admitted.
    """
    return run_plan(tiers, _tuple_plan(tiers, config, thread_id, namespace, checkpoint_id, sync=True))


async def aread_tuple(
    tiers: Tiers, config: RunnableConfig, thread_id: str, namespace: str, checkpoint_id: str | None
) -> CheckpointTuple | None:
    """Async ``read_tuple``: the durable tier's async side. Runtime complexity: that of
    ``read_tuple``."""
    return await arun_plan(tiers, _tuple_plan(tiers, config, thread_id, namespace, checkpoint_id, sync=False))


def _tuple_plan(
    tiers: Tiers, config: RunnableConfig, thread_id: str, namespace: str, checkpoint_id: str | None, *, sync: bool
) -> Plan[CheckpointTuple | None]:
    """``read_tuple``'s steps, written once for both drivers (``run_plan``, ``arun_plan``)."""
    shared = tiers.shared
    mark = shared.marks.read(thread_id)  # before the flush: a write after it moves the mark
    yield _Step("flush", thread_id)
    key = ("tuple", thread_id, namespace, checkpoint_id, mark)
    flight, leads = shared.flights.join(key, sync=sync)
    if not leads:
        _count_wait(shared)
        return (yield _Step("wait", flight))  # type: ignore[no-any-return]
    try:
        found = yield durable_step("get_tuple", config)
        empty = (
            found is None
            and checkpoint_id is None
            and namespace == ""
            and not (yield durable_step("list", {"configurable": {"thread_id": thread_id}}, limit=1))
        )
    except BaseException as error:
        shared.flights.fail(key, flight, error)
        raise
    shared.flights.land(key, flight, found)
    exact = yield from _exact_plan([found], thread_id, namespace)
    _admit_read(tiers, thread_id, namespace, checkpoint_id, found, mark, empty, exact)
    yield _Step("deliver", None)  # what admitting it evicted
    return found  # type: ignore[no-any-return]


def flown(shared: Shared, key: Hashable, read: Callable[[], Any]) -> Any:
    """``read()`` once for every caller asking ``key`` at the same time (single flight), counted as a miss.

    Runtime complexity: one ``read()`` for all the callers; the others wait for it.
    """
    return run_plan(None, _flown_plan(shared, key, _Step("call", read), sync=True))


async def aflown(shared: Shared, key: Hashable, read: Callable[[], Awaitable[Any]]) -> Any:
    """Async ``flown``: the waiters await the one read. Runtime complexity: one ``read()`` for all the callers."""
    return await arun_plan(None, _flown_plan(shared, key, _Step("call", read), sync=False))


def _flown_plan(shared: Shared, key: Hashable, read: _Step, *, sync: bool) -> Plan[Any]:
    """``flown``'s steps: the leader's ``read`` step, or a wait for the leader's result."""
    flights = shared.flights
    flight, leads = flights.join(key, sync=sync)
    if not leads:
        _count_wait(shared)
        return (yield _Step("wait", flight))
    try:
        result = yield read
    except BaseException as error:
        flights.fail(key, flight, error)
        raise
    _count_miss(shared)
    flights.land(key, flight, result)
    return result


ExactWrites = dict[str, list[WriteRecord]]
"""Checkpoint id to its pending writes as the durable saver stores them (``DurableTier.exact_writes``)."""


def _with_writes(found: Sequence[CheckpointTuple | None]) -> list[str]:
    with_writes = (item for item in found if item is not None and item.pending_writes)
    return [str(configurable(item.config)["checkpoint_id"]) for item in with_writes]


def _exact_plan(found: Sequence[CheckpointTuple | None], thread_id: str, namespace: str) -> Plan[ExactWrites | None]:
    """The exact pending writes of what a read found, for its admission (None: none to read, the format cannot
    read them, or the read failed: the reader has its answer already). Runtime complexity: one round trip."""
    ids = _with_writes(found)
    if not ids:
        return None
    try:
        return (yield durable_step("exact_writes", thread_id, namespace, ids))  # type: ignore[no-any-return]
    except Exception:
        return None  # admitted without them (or not at all: _encode_read decides)


# --- the two drivers ---------------------------------------------------------------------------------------------


class _Step(NamedTuple):
    """What a plan asks its driver for: ``flush`` (the thread's, before a read), ``deliver`` (what an admission
    evicted), ``wait`` (for a flight's result), ``durable`` (a ``DurableTier`` method: name, args, keywords) or
    ``call`` (a function of no argument, its result awaited on the async side)."""

    kind: str
    argument: Any


Plan = Generator[_Step, Any, T]
"""A read's logic as a generator of ``_Step``s, sent each step's result (or thrown its error), returning the
answer. ``run_plan`` runs it on the calling thread, ``arun_plan`` on the event loop, so it is written once for both
(retention's ``resumes`` runs its durable calls so too)."""


def durable_step(method: str, *args: Any, **kwargs: Any) -> _Step:
    """A step calling ``DurableTier``'s ``method`` (``"a" + method`` awaited on the async side)."""
    return _Step("durable", (method, args, kwargs))


def call_step(function: Callable[[], Any]) -> _Step:
    """A step calling ``function``: its result, awaited on the async side (the plan gives the side's function)."""
    return _Step("call", function)


DELIVER = _Step("deliver", None)
"""A step delivering what a write or an admission evicted (``flushing.deliver``, ``adeliver``)."""


def run_plan(tiers: Tiers | None, plan: Plan[T]) -> T:
    """Run a plan on the calling thread. Runtime complexity: its steps'."""
    step = _next(plan, None, None)
    while isinstance(step, _Step):
        try:
            result, failure = _step(tiers, step), None
        except BaseException as error:  # the plan's to handle (a flight it leads fails with it) or to raise
            result, failure = None, error
        step = _next(plan, result, failure)
    return step.value


async def arun_plan(tiers: Tiers | None, plan: Plan[T]) -> T:
    """``run_plan`` awaiting: the durable tier's async side, flights awaited. Runtime complexity: its steps'."""
    step = _next(plan, None, None)
    while isinstance(step, _Step):
        try:
            result, failure = await _astep(tiers, step), None
        except BaseException as error:
            result, failure = None, error
        step = _next(plan, result, failure)
    return step.value


def _step(tiers: Tiers | None, step: _Step) -> Any:
    """One step on the calling thread: its result. Runtime complexity: the step's."""
    if step.kind == "flush":
        return flush_thread(cast(Tiers, tiers), step.argument)
    if step.kind == "deliver":
        return deliver(cast(Tiers, tiers))
    if step.kind == "wait":
        return step.argument.wait()
    if step.kind == "call":
        return step.argument()
    method, args, kwargs = step.argument
    return getattr(cast(Tiers, tiers).durable, method)(*args, **kwargs)


async def _astep(tiers: Tiers | None, step: _Step) -> Any:
    """One step awaited on the event loop (``DurableTier``'s ``a``-prefixed methods). Runtime complexity: the
    step's."""
    if step.kind == "flush":
        return await aflush_thread(cast(Tiers, tiers), step.argument)
    if step.kind == "deliver":
        return await adeliver(cast(Tiers, tiers))
    if step.kind == "wait":
        return await step.argument.await_()
    if step.kind == "call":
        return await step.argument()
    method, args, kwargs = step.argument
    return await getattr(cast(Tiers, tiers).durable, "a" + method)(*args, **kwargs)


class _Done(NamedTuple, Generic[T]):
    """A plan's answer, once it returned."""

    value: T


def _next(plan: Plan[T], result: Any, failure: BaseException | None) -> _Step | _Done[T]:
    """The plan's next step, sent the last one's result or thrown its failure; or its answer."""
    try:
        return plan.send(result) if failure is None else plan.throw(failure)
    except StopIteration as done:
        return _Done(done.value)


def _count_wait(shared: Shared) -> None:
    """Count a caller that waited for another caller's read. Runtime complexity: O(1)."""
    with shared.hot.store.exclusive():
        shared.counters.flight_waits += 1


def _count_miss(shared: Shared) -> None:
    """Count a read of the durable tier. Runtime complexity: O(1)."""
    with shared.hot.store.exclusive():
        shared.counters.misses += 1


# --- admitting a checkpoint --------------------------------------------------------------------------------------


def _admit_read(
    tiers: Tiers,
    thread_id: str,
    namespace: str,
    checkpoint_id: str | None,
    found: CheckpointTuple | None,
    mark: int,
    empty: bool,
    exact: ExactWrites | None,
) -> None:
    """Admit what a read-through found.

    Runtime complexity: O(size of what it found) to encode, plus that of ``_admit``.
    """
    admission = None
    if found is not None and checkpoint_id is None and tiers.shared.conditional_writes:
        newest = str(configurable(found.config)["checkpoint_id"])
        tiers.shared.known_newest.read(thread_id, namespace, newest, current=tiers.shared.marks.read(thread_id) == mark)
    if found is not None:
        with contextlib.suppress(TypeError, ValueError):  # a value this serializer cannot write: not admitted
            admission = _encode_read(tiers, found, exact)
    _admit(tiers.shared, thread_id, namespace, checkpoint_id, found is not None, admission, mark, empty)


def _admit(
    shared: Shared,
    thread_id: str,
    namespace: str,
    checkpoint_id: str | None,
    found: bool,
    admission: Admission | None,
    mark: int,
    empty: bool,
) -> None:
    """Bring what a read-through found into the hot tier, if nothing touched the thread since the read
    began: the namespace's latest (a new suffix), or an older checkpoint beside a suffix already hot.
    A thread the durable tier holds nothing of is remembered as such.

    Runtime complexity: that of ``_store_admitted``.
    """
    store = shared.hot.store
    with store.exclusive():
        shared.counters.misses += 1
        if not found:
            if empty and shared.marks.read(thread_id) == mark and store.last_used(thread_id) is None:
                shared.residency.known_empty(thread_id)
            return
        if admission is None or shared.marks.read(thread_id) != mark:
            return
        was_alive = alive(store, thread_id)
        entry = shared.residency.lookup(thread_id, store.last_used(thread_id) is not None)
        if checkpoint_id is not None:
            if not was_alive or entry is None or namespace not in entry.floors:
                return  # not beside the namespace's latest: the hot latest must stay the durable latest
        elif was_alive and entry is not None and namespace in entry.floors:
            return
        if not _store_admitted(shared, thread_id, namespace, admission):
            return
        shared.counters.admissions += 1
        shared.residency.raise_ceiling(thread_id, namespace, admission.record.checkpoint_id)
        if checkpoint_id is None:
            if not was_alive:
                shared.residency.forget(thread_id)  # found in the durable tier: not empty after all
                shared.residency.came_to_memory(thread_id, namespace, admission.record.checkpoint_id)
                sweep(shared)
            else:
                shared.residency.stored_namespace(thread_id, namespace, admission.record.checkpoint_id)


def _store_admitted(shared: Shared, thread_id: str, namespace: str, admission: Admission) -> bool:
    """Store an admitted checkpoint and its writes (lock held); on a refusal the thread leaves memory
    (it could hold the checkpoint without its writes) unless it has unflushed writes. Nothing is admitted
    over writes the hot tier took for a checkpoint it did not hold: under a key the durable tier already
    held, it kept its own write (a regular write is kept once), so the two cannot be merged. Writes admitted with
    made-up indexes and paths are noted (``ResidencyLedger.inexact``): a later write to their checkpoint
    leaves the thread out of memory rather than be ordered among them differently than the durable tier does.

    Runtime complexity: that of ``Store.put_checkpoint`` and of ``Store.put_writes`` per task.
    """
    store = shared.hot.store
    checkpoint_id = admission.record.checkpoint_id
    if store.held_writes(thread_id, namespace, checkpoint_id) and not store.holds_checkpoint(
        thread_id, namespace, checkpoint_id
    ):
        # writes reached the hot tier for a checkpoint it did not hold: the durable tier may have kept others
        # under their keys (a regular write is kept once), so the hot copy cannot be trusted to merge them
        if not shared.dirty.is_dirty(thread_id):
            store.delete_thread(thread_id)
        shared.residency.forget(thread_id)
        return False
    store.forget_tombstone(thread_id)
    churn = store.pruned_count()
    try:
        store.put_checkpoint(thread_id, namespace, admission.record, admission.blobs, None)
        for task_writes in admission.writes:
            store.put_writes(thread_id, namespace, checkpoint_id, task_writes, None)
    except (CheckpointCapacityError, ValueError):
        store.forget_refusal(checkpoint_id)
        if not shared.dirty.is_dirty(thread_id):
            store.delete_thread(thread_id)
        shared.residency.forget(thread_id)
        return False
    if store.pruned_count() != churn:
        shared.residency.forget(thread_id)
    if admission.writes and not admission.exact:
        shared.residency.mark_inexact(thread_id, namespace, checkpoint_id)
    return True


def _encode_read(tiers: Tiers, found: CheckpointTuple, exact: ExactWrites | None) -> Admission:
    """A durable read as hot records: its checkpoint with every value it holds, and its writes by task: as the
    durable saver stores them (``exact``, when they are the ones the read returned), or else each task given an
    index per write and a path that keeps the durable tier's order (the API returns neither).

    Raises:
        TypeError, ValueError: A value this serializer cannot write.

    Runtime complexity: O(size of the checkpoint and its writes) to serialize.
    """
    serde = tiers.serde
    checkpoint: dict[str, Any] = dict(found.checkpoint)
    versions = checkpoint.get("channel_versions", {})
    values = checkpoint.get("channel_values", {})
    new_versions = {channel: versions[channel] for channel in values if channel in versions}
    parent_id = checkpoint_id_of(configurable(found.parent_config)) if found.parent_config else None
    record, blobs = codec.encode_checkpoint(
        serde, found.config, cast(Checkpoint, checkpoint), found.metadata, new_versions, parent_id
    )
    pending = found.pending_writes or []
    stored = None if exact is None else exact.get(record.checkpoint_id)
    if stored is not None and _same_writes(stored, pending):
        return Admission(record, blobs, _by_task(stored), True)
    return Admission(record, blobs, _admitted_writes(serde, pending), not pending)


def _same_writes(stored: list[WriteRecord], pending: Sequence[PendingWrite]) -> bool:
    """Whether the stored rows are the writes the read returned (none landed between the two reads), in the
    durable tier's order. Runtime complexity: O(w log w)."""
    ordered = sorted(stored, key=lambda write: write.sort_key)
    return [(write.task_id, write.channel) for write in ordered] == [(task, channel) for task, channel, _ in pending]


def _by_task(writes: list[WriteRecord]) -> list[list[WriteRecord]]:
    tasks: dict[str, list[WriteRecord]] = {}
    for write in writes:
        tasks.setdefault(write.task_id, []).append(write)
    return list(tasks.values())


def _admitted_writes(serde: SerializerProtocol, pending: Sequence[PendingWrite]) -> list[list[WriteRecord]]:
    """A read's pending writes as hot records, one batch per task: each task gets the index of each of its
    writes back (its position among the task's regular writes, or a special channel's fixed one) and a
    path that sorts as the durable tier returned them (the API returns no task path).

    Runtime complexity: O(k^2) for a task of k writes (each position is counted among the task's writes so
    far), plus serializing them.
    """
    tasks: dict[str, list[WriteRecord]] = {}
    paths: dict[str, str] = {}
    for task_id, channel, value in pending:
        batch = tasks.get(task_id)
        if batch is None:
            batch = tasks[task_id] = []
            paths[task_id] = f"~{len(paths):06d}"
        position = sum(1 for write in batch if write.idx >= 0)
        idx = WRITES_IDX_MAP.get(channel, position)
        batch.append(WriteRecord.of(task_id, idx, channel, serde.dumps_typed(value), paths[task_id]))
    return list(tasks.values())


# --- admitting a listed suffix -----------------------------------------------------------------------------------


def read_list(tiers: Tiers, request: ListRequest) -> list[CheckpointTuple]:
    """A ``list()`` the hot tier could not answer: read once from the durable tier, admitted, returned.

    Runtime complexity: the thread's flush (write-back), the durable saver's ``list``, plus encoding what
    is admitted.
    """
    return run_plan(tiers, _list_plan(tiers, request, sync=True))


async def aread_list(tiers: Tiers, request: ListRequest) -> list[CheckpointTuple]:
    """Async ``read_list``: the durable tier's async side. Runtime complexity: that of
    ``read_list``."""
    return await arun_plan(tiers, _list_plan(tiers, request, sync=False))


def _list_plan(tiers: Tiers, request: ListRequest, *, sync: bool) -> Plan[list[CheckpointTuple]]:
    """``read_list``'s steps, written once for both drivers (``run_plan``, ``arun_plan``)."""
    mark = tiers.shared.marks.read(request.thread_id)  # before the flush: a write after it moves the mark
    yield _Step("flush", request.thread_id)
    listed = durable_step("list", request.config, filter=request.filter, before=request.before, limit=request.limit)
    items = yield from _flown_plan(tiers.shared, (*_list_key(request), mark), listed, sync=sync)
    exact = None
    if _admissible(request, items):
        exact = yield from _exact_plan(items, request.thread_id, str(request.namespace))
    _admit_list(tiers, request, items, mark, exact)
    yield _Step("deliver", None)  # what admitting it evicted
    return items  # type: ignore[no-any-return]


def _admissible(request: ListRequest, items: list[CheckpointTuple]) -> bool:
    """Whether a listing may be admitted: of one namespace, no filter, no checkpoint id, something found."""
    return request.namespace is not None and not request.filter and request.checkpoint_id is None and bool(items)


def _admit_list(
    tiers: Tiers, request: ListRequest, items: list[CheckpointTuple], mark: int, exact: ExactWrites | None
) -> None:
    """Admit a listed suffix of one namespace (no filter, no checkpoint id): the newest ones, or older
    ones continuing the suffix already hot; when the list was exhausted the namespace is wholly hot.

    Runtime complexity: O(size of the items) to encode, plus storing those admitted.
    """
    namespace = request.namespace
    if namespace is None or not _admissible(request, items):
        return
    if request.before_id is None and tiers.shared.conditional_writes:
        newest = str(configurable(items[0].config)["checkpoint_id"])
        unchanged = tiers.shared.marks.read(request.thread_id) == mark
        tiers.shared.known_newest.read(request.thread_id, namespace, newest, current=unchanged)
    exhausted = request.limit is None or len(items) < request.limit
    try:
        admissions = [_encode_read(tiers, item, exact) for item in reversed(items)]
    except (TypeError, ValueError):
        return
    shared = tiers.shared
    store = shared.hot.store
    thread_id = request.thread_id
    with store.exclusive():
        if shared.marks.read(thread_id) != mark:
            return
        was_alive = alive(store, thread_id)
        entry = shared.residency.lookup(thread_id, store.last_used(thread_id) is not None)
        current = entry.floors.get(namespace, COMPLETE) if entry is not None and was_alive else None
        has_suffix = entry is not None and was_alive and namespace in entry.floors
        if request.before_id is not None and not (has_suffix and (current is None or request.before_id >= current)):
            return  # a page below the hot suffix, with a gap: served, not admitted
        lowest = admissions[0].record.checkpoint_id
        churn = store.pruned_count()
        for admission in admissions:
            checkpoint_id = admission.record.checkpoint_id
            if has_suffix and (current is None or checkpoint_id >= current):
                continue  # already hot
            if was_alive and store.holds_checkpoint(thread_id, namespace, checkpoint_id):
                continue  # hot below the floor a pruning raised: the hot copy holds its writes already
            if not _store_admitted(shared, thread_id, namespace, admission):
                return
            shared.counters.admissions += 1
        if store.pruned_count() != churn:
            return  # rolling history dropped part of what came in: the thread's residency is forgotten
        floor = COMPLETE if exhausted else lowest
        if not was_alive:
            shared.residency.forget(thread_id)
            shared.residency.came_to_memory(thread_id, namespace, floor)
        elif shared.residency.lookup(thread_id, True) is not None:
            shared.residency.lower_floor(thread_id, namespace, floor)


def _list_key(request: ListRequest) -> tuple[Hashable, ...]:
    """The single-flight key of a ``list()`` call: everything that shapes its answer. Runtime complexity:
    O(f log f) for a filter of f keys."""
    shown = None if request.filter is None else repr(sorted(request.filter.items(), key=repr))
    located = (request.thread_id, request.namespace, request.checkpoint_id)
    return ("list", *located, request.before_id, request.limit, shown)
