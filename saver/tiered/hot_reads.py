"""The hot tier's side of ``TieredSaver``'s reads: what it can answer alone, and when it cannot.

Each read first asks the hot tier. It answers from memory when it holds the
checkpoint, or when what it knows of the thread's copy (``tiered.residency``)
proves the durable tier holds nothing more; otherwise it says so, and the
caller reads through (``read_through``). With ``WriteThrough(processes="many")`` a
read without a checkpoint id first compares the hot copy with the durable
tier's newest (``coherent``); a stale copy leaves memory.

Every function here holds the hot store's lock only for the store operations
and never across a durable round trip.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, NamedTuple

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointMetadata, CheckpointTuple

from .. import codec
from ..engine import CheckpointView, InvalidArgumentError
from ..locations import checkpoint_id_of, configurable, locate, namespace_of
from .backends.base import Newest
from .pools import in_jobs_pool
from .state import Shared, Tiers, alive

__all__ = [
    "UNKNOWN",
    "HotRead",
    "ListRequest",
    "ameasured_newest",
    "coherent",
    "decode",
    "hot_delta",
    "hot_get",
    "hot_list",
    "list_request",
    "measured_newest",
]


class HotRead(NamedTuple):
    """What the hot tier answered: the checkpoint's view, and whether its answer (a view, or none) is the
    durable tier's too (else the durable tier must be read)."""

    view: CheckpointView | None
    known: bool


UNKNOWN = HotRead(None, False)


class ListRequest(NamedTuple):
    """A ``list()`` call, its identifiers read out of its configs."""

    config: RunnableConfig | None
    thread_id: str
    namespace: str | None
    checkpoint_id: str | None
    filter: Mapping[str, Any] | None
    before: RunnableConfig | None
    before_id: str | None
    limit: int | None


def hot_get(tiers: Tiers, thread_id: str, namespace: str, checkpoint_id: str | None, newest: Newest | None) -> HotRead:
    """The hot tier's view of the checkpoint, and whether its answer (a view, or None) is the durable tier's.

    With ``newest`` (the coherence check), a hot copy that is not the
    durable tier's newest is dropped first.

    Runtime complexity: that of ``Store.get``; with ``newest``, plus that of ``coherent``.
    """
    shared = tiers.shared
    store = shared.hot.store
    with store.exclusive():
        if newest is not None:
            if not coherent(tiers, thread_id, namespace, newest):
                return UNKNOWN
            view = store.get(thread_id, namespace, None)
            shared.counters.hits += 1  # the hot copy is the durable tier's newest, or both have none
            return HotRead(view, True)
        view = store.get(thread_id, namespace, checkpoint_id)
        if view is not None:
            shared.counters.hits += 1
            return HotRead(view, True)
        entry = shared.residency.lookup(thread_id, store.last_used(thread_id) is not None)
        if entry is None or (checkpoint_id is not None and shared.coherence == "validate"):
            return UNKNOWN
        if checkpoint_id is None:
            known = namespace not in entry.floors and entry.all_namespaces
        else:
            known = entry.holds(namespace, checkpoint_id)
        if known:
            shared.counters.hits += 1
        return HotRead(None, known)


def coherent(tiers: Tiers, thread_id: str, namespace: str, newest: Newest) -> bool:
    """Whether the hot copy of the namespace is the durable tier's newest, with the same pending writes (their
    digest: a replaced write counts, not only a new one); a stale thread leaves memory.

    Lock held. Runtime complexity: O(c + w log w) to read the hot latest, plus digesting its w writes.
    """
    shared = tiers.shared
    store = shared.hot.store
    view = store.get(thread_id, namespace, None)
    digest = tiers.durable.format.writes_digest
    hot = Newest(None, None) if view is None else Newest(view.record.checkpoint_id, digest(view.writes))
    if hot == newest:
        return True
    if view is not None or shared.residency.lookup(thread_id, store.last_used(thread_id) is not None):
        shared.counters.stale += 1
        shared.marks.move(thread_id)
        store.delete_thread(thread_id)
        shared.residency.forget(thread_id)
    return False


def measured_newest(tiers: Tiers, thread_id: str, namespace: str) -> Newest:
    """The durable tier's newest checkpoint of the namespace (the coherence check), its time counted.

    Runtime complexity: one durable round trip (``DurableTier.newest``).
    """
    start = time.perf_counter()
    newest = tiers.durable.newest(thread_id, namespace)
    _count_validation(tiers.shared, time.perf_counter() - start)
    return newest


async def ameasured_newest(tiers: Tiers, thread_id: str, namespace: str) -> Newest:
    """Async ``measured_newest``: the durable tier's async side. Runtime complexity: one durable round trip."""
    start = time.perf_counter()
    newest = await tiers.durable.anewest(thread_id, namespace)
    _count_validation(tiers.shared, time.perf_counter() - start)
    return newest


def _count_validation(shared: Shared, seconds: float) -> None:
    """Count a coherence check and its time. Runtime complexity: O(1)."""
    counters = shared.counters
    with shared.hot.store.exclusive():
        counters.validations += 1
        counters.validation_seconds += seconds


def hot_delta(
    tiers: Tiers,
    thread_id: str,
    namespace: str,
    checkpoint_id: str | None,
    channels: list[str],
    newest: Newest | None,
) -> dict[str, Any] | None:
    """The hot tier's delta-channel walk, when it stays within what the hot tier holds; else None.

    Runtime complexity: that of ``Store.delta_history`` (``engine.reads.delta_history``); with ``newest``,
    plus that of ``coherent``.
    """
    shared = tiers.shared
    store = shared.hot.store
    with store.exclusive():
        if newest is not None and not coherent(tiers, thread_id, namespace, newest):
            return None
        entry = shared.residency.lookup(thread_id, store.last_used(thread_id) is not None)
        if entry is None or not entry.stored or namespace not in entry.floors:
            return None
        if checkpoint_id is not None and not entry.holds(namespace, checkpoint_id):
            return None
        if store.get(thread_id, namespace, checkpoint_id) is None:
            return None
        histories = store.delta_history(thread_id, namespace, checkpoint_id, channels)
        if entry.floors[namespace] is not None and any(h.seed is None for h in histories.values()):
            return None
        shared.counters.hits += 1
        return histories


def list_request(
    config: RunnableConfig | None,
    filter: dict[str, Any] | None,
    before: RunnableConfig | None,
    limit: int | None,
) -> ListRequest:
    """A ``list()`` call's arguments, checked, with the identifiers read out of its configs.

    Raises:
        ValueError: ``filter`` is not a mapping, ``limit`` not a whole number, or an identifier is invalid.

    Runtime complexity: O(1).
    """
    if filter is not None and not isinstance(filter, Mapping):
        raise InvalidArgumentError(f"filter must be a mapping of metadata keys to values, got {type(filter).__name__}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
        raise InvalidArgumentError(f"limit must be a whole number or None, got {limit!r:.40} ({type(limit).__name__})")
    before_id = checkpoint_id_of(configurable(before)) if before else None
    if config is None:
        return ListRequest(None, "", None, None, filter, before, before_id, limit)
    thread_id, _, checkpoint_id = locate(config)
    namespace = namespace_of(configurable(config))
    return ListRequest(config, thread_id, namespace, checkpoint_id, filter, before, before_id, limit)


def hot_list(tiers: Tiers, request: ListRequest) -> list[CheckpointTuple] | None:
    """The hot tier's answer to a ``list()`` of one thread, when it holds every candidate; else None.

    Runtime complexity: O(n) for the n checkpoints of the namespace (the suffix
    above its floor), plus deserializing the results' metadata (with a filter)
    and the results.
    """
    shared = tiers.shared
    store = shared.hot.store
    if shared.coherence == "validate":
        return None  # lists read the durable tier in validate mode
    matches = None
    if request.filter:
        matches = tiers.durable.format.hot_filter(request.filter)
        if matches is None:
            return None  # a filter the hot tier cannot apply as the durable saver does
    thread_id, namespace = request.thread_id, request.namespace
    with store.exclusive():
        stored = store.last_used(thread_id) is not None
        if stored and not alive(store, thread_id):
            return None  # expiring: the hot list would drop it and answer nothing, the durable tier answers
        entry = shared.residency.lookup(thread_id, stored)
        if entry is None:
            return None
        if not stored:
            shared.counters.hits += 1
            return []
        if namespace is None:
            if not entry.all_namespaces:
                return None
            partial = [floor for floor in entry.floors.values() if floor is not None]
            floor: str | None = max(partial) if partial else None  # above it, every namespace is whole
            refs = store.list(thread_id, None, checkpoint_id=request.checkpoint_id, before=request.before_id)
            refs.sort(key=lambda ref: ref.record.checkpoint_id, reverse=True)  # the durable tiers' order
            if floor is not None:
                refs = [ref for ref in refs if ref.record.checkpoint_id >= floor]
        else:
            described, floor = entry.floor_of(namespace)
            if not described:
                return None
            if request.checkpoint_id is not None and not entry.holds(namespace, request.checkpoint_id):
                return None
            refs = store.list(thread_id, namespace, checkpoint_id=request.checkpoint_id, before=request.before_id)
            if floor is not None:
                refs = [ref for ref in refs if ref.record.checkpoint_id >= floor]
    serde = tiers.serde
    loads = serde.loads_typed
    chosen: list[tuple[Any, CheckpointMetadata | None]] = []
    for ref in refs:
        if request.limit is not None and len(chosen) >= request.limit:
            break
        metadata = None
        if matches is not None:
            metadata = loads((ref.record.metadata_type, ref.record.metadata_data))
            if not matches(metadata):
                continue
        chosen.append((ref, metadata))
    if floor is not None and (request.limit is None or len(chosen) < request.limit):
        return None  # the answer may reach below the floor: the durable tier's
    views = store.views(ref for ref, _ in chosen)
    if any(view is None for view in views):
        return None  # removed since listed
    with store.exclusive():
        shared.counters.hits += 1
    return [
        codec.decode_view(serde, view, metadata)  # type: ignore[arg-type]
        for view, (_, metadata) in zip(views, chosen, strict=True)
    ]


async def decode(tiers: Tiers, view: CheckpointView) -> CheckpointTuple:
    """A hot view as a checkpoint tuple, decoded in a worker thread of the jobs pool when it is large.

    Runtime complexity: O(size of the view) to deserialize.
    """
    if view.nbytes > tiers.config.async_offload_bytes:
        return await in_jobs_pool(lambda: codec.decode_view(tiers.serde, view))
    return codec.decode_view(tiers.serde, view)
