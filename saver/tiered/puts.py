"""``TieredSaver``'s ``put`` and ``put_writes``, each written once for both sides.

A write is a plan (``read_through``'s steps: durable calls, deliveries, calls of
the side's function) in two parts: the steps before the thread's gate (a resume
LangGraph started afresh refused, the encoding, offloaded on the async side when
large, the checks that refuse a write before anything is written, or write-back's
hot write), then, unless write-back stored it, the steps under the gate held
shared (the durable write, then the hot tier's). ``run`` drives them on the
calling thread, ``arun`` on the event loop, as ``flushing`` and ``read_through``
drive theirs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, NamedTuple, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata

from .. import codec
from ..engine import Blob, BlobKey, CheckpointRecord, WriteRecord
from ..locations import locate, root_checkpoint_of
from ..offload import rough_size
from . import flushing, group_commit, hot_writes, storage
from .pools import in_jobs_pool
from .read_through import DELIVER, Plan, arun_plan, call_step, run_plan
from .retention import resumes
from .state import Tiers

__all__ = ["arun", "put_plan", "put_writes_plan", "run"]

T = TypeVar("T")


class Gated(NamedTuple, Generic[T]):
    """What a write does under its thread's gate, held shared, once the steps before it left it to the durable
    tier."""

    thread_id: str
    plan: Plan[T]


def run(tiers: Tiers, plan: Plan[T | Gated[T]]) -> T:
    """Run a write's plan on the calling thread: its steps, then those under the gate (unless write-back stored
    it), then the delivery of what it evicted. Runtime complexity: its steps'."""
    ready = run_plan(tiers, plan)
    if not isinstance(ready, Gated):
        return ready
    with tiers.shared.gates.sharing(ready.thread_id):
        stored: T = run_plan(tiers, ready.plan)
    flushing.deliver(tiers)
    return stored


async def arun(tiers: Tiers, plan: Plan[T | Gated[T]]) -> T:
    """``run`` on the event loop: the durable tier's async side, the gate's wait never blocking the loop."""
    ready = await arun_plan(tiers, plan)
    if not isinstance(ready, Gated):
        return ready
    async with tiers.shared.gates.asharing(ready.thread_id):
        stored: T = await arun_plan(tiers, ready.plan)
    await flushing.adeliver(tiers)
    return stored


def put_plan(
    tiers: Tiers,
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    versions: ChannelVersions,
    *,
    sync: bool,
) -> Plan[RunnableConfig | Gated[RunnableConfig]]:
    """``TieredSaver.put``'s steps (``aput``'s with ``sync=False``). Runtime complexity: see ``TieredSaver.put``."""
    shared = tiers.shared
    thread_id, namespace, parent_id = locate(config)
    if resumes.starts_afresh(parent_id, checkpoint, metadata):  # a resume LangGraph started afresh
        checkpoint_id = str(checkpoint.get("id", ""))
        yield _side(sync, resumes.resumes_lost, resumes.aresumes_lost, tiers, thread_id, checkpoint_id, log=False)

    def encode() -> tuple[CheckpointRecord, dict[BlobKey, Blob]]:
        read_back = tiers.durable.format.normalize_metadata(config, metadata)  # as the durable tier reads it
        return codec.encode_checkpoint(tiers.serde, config, checkpoint, read_back, versions, parent_id)

    values = checkpoint.get("channel_values", {}) if isinstance(checkpoint, Mapping) else {}
    large = (
        not sync and rough_size(values[name] for name in versions if name in values) > tiers.config.async_offload_bytes
    )
    record, blobs = (yield call_step(lambda: in_jobs_pool(encode))) if large else encode()
    added = hot_writes.added(record, blobs)
    storage.refuse_too_large(shared, shared.write_policy, thread_id, record.checkpoint_id, added)
    missing = functools.partial(hot_writes.encode_values, tiers.serde, checkpoint)  # values a partial copy lacks
    root = root_checkpoint_of(config) if namespace else None
    if shared.write == "back" and (yield _room(tiers, thread_id, added, sync)):
        fallback = hot_writes.back_put(shared, thread_id, namespace, record, blobs, root, versions, missing)
        yield DELIVER
        if fallback is None:
            return hot_writes.stored_config(thread_id, namespace, record.checkpoint_id)
        yield _side(sync, flushing.flush_thread, flushing.aflush_thread, tiers, thread_id, fallback.refusal)
    else:
        hot_writes.precheck_put(tiers, thread_id, namespace, record, blobs, checkpoint)

    def through() -> Plan[RunnableConfig]:
        hot_writes.refuse_deleted(shared, thread_id, parent_id)
        if shared.conditional_writes:
            with shared.landings.flight(record.checkpoint_id):  # not through DurableTier.put: flown here
                put = hot_writes.put_if_newest, hot_writes.aput_if_newest
                stored = yield _side(sync, *put, tiers, config, checkpoint, metadata, versions)
        else:
            written = group_commit.put, group_commit.aput
            stored = yield _side(sync, *written, tiers.durable, blobs, config, checkpoint, metadata, versions)
        hot_writes.through_put(shared, thread_id, namespace, record, blobs, root, missing)
        return stored  # type: ignore[no-any-return]

    return Gated(thread_id, through())


def put_writes_plan(
    tiers: Tiers, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str, *, sync: bool
) -> Plan[Gated[None] | None]:
    """``TieredSaver.put_writes``'s steps (``aput_writes``'s with ``sync=False``). Runtime complexity: see
    ``TieredSaver.put_writes``."""
    shared = tiers.shared
    thread_id, namespace, checkpoint_id = hot_writes.writes_location(config)

    def encode() -> list[WriteRecord]:
        return codec.encode_writes(tiers.serde, writes, task_id, task_path)

    pairs = (write[1] for write in writes if isinstance(write, (tuple, list)) and len(write) == 2)
    large = not sync and rough_size(pairs) > tiers.config.async_offload_bytes
    records = (yield call_step(lambda: in_jobs_pool(encode))) if large else encode()
    if resumes.answers(records):  # an interrupt's answer: refused if retention deleted what it answers
        yield _side(sync, resumes.resumes_lost, resumes.aresumes_lost, tiers, thread_id, checkpoint_id, log=True)
    root = root_checkpoint_of(config) if namespace else None
    batch = hot_writes.batch_bytes(records)
    if shared.write == "back" and (yield _room(tiers, thread_id, batch, sync)):
        fallback = hot_writes.back_put_writes(
            shared, thread_id, namespace, checkpoint_id, records, task_id, task_path, root
        )
        yield DELIVER
        if fallback is None:
            return None
        yield _side(sync, flushing.flush_thread, flushing.aflush_thread, tiers, thread_id, fallback.refusal)
    else:
        hot_writes.precheck_writes(tiers, thread_id, namespace, checkpoint_id, records, batch)

    def through() -> Plan[None]:
        hot_writes.refuse_deleted(shared, thread_id, checkpoint_id)
        put_writes = group_commit.put_writes, group_commit.aput_writes
        yield _side(sync, *put_writes, tiers.durable, records, config, writes, task_id, task_path)
        hot_writes.through_put_writes(shared, thread_id, namespace, checkpoint_id, records, root)

    return Gated(thread_id, through())


def _side(sync: bool, function: Callable[..., Any], afunction: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """A step calling ``function`` (sync) or awaiting ``afunction`` (async) with these arguments."""
    return call_step(functools.partial(function if sync else afunction, *args, **kwargs))


def _room(tiers: Tiers, thread_id: str, needed: int, sync: bool) -> Any:
    """Write-back: the step that waits for room in the ledger, or says there is none (``flushing.dirty_room``)."""
    return _side(sync, flushing.dirty_room, flushing.adirty_room, tiers, thread_id, needed)
