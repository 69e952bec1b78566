"""The hot tier's side of ``TieredSaver``'s writes, and the checks that refuse a write before it is written.

``TieredSaver.put`` and ``put_writes`` choose the path; this module carries it
out in the hot tier:

* per-item checks (``precheck_put``, ``precheck_writes``): before a
  write-through's durable write, refuse what the hot tier would refuse for the
  write alone (an invalid identifier, ``max_checkpoint_bytes``,
  ``max_pending_write_bytes``), so a refused write is written nowhere;
* write-through (``through_put``, ``through_put_writes``): once the durable
  tier acknowledged, the hot tier takes the write, or a store-wide limit
  refuses it and the thread leaves memory whole (``_leave_out``);
* write-back (``back_put``, ``back_put_writes``): the hot tier and the ledger
  of unflushed writes take the write together, or the store-wide refusal is
  returned for the caller to write through instead;
* ``refuse_deleted``: a write continuing a thread deleted since is refused
  (``coordination.DeletedThreads``), before anything is written.

LangGraph's ``put`` hands over the new values only, relying on the saver
holding the others. The hot tier may not: the thread may have left memory
mid-run, or its copy may begin above the checkpoint's parent (a fork from an
old checkpoint, a parent pruned). So a checkpoint's put first asks the hot
tier which of the values it references it lacks (``Store.missing_values``)
and adds those, encoded from the checkpoint's ``channel_values`` (a channel's
value at one version is the same whenever it is read, which is what every
LangGraph saver keying values by version relies on). The hot copy is then
complete, and so is what write-back replays from it to the durable tier.

Writes can also arrive before their checkpoint's put (LangGraph's async and
exit durabilities); if the thread left memory in between, the hot tier lost
them. ``residency.EarlyWrites`` counts such writes, and a put whose hot copy
holds fewer is not kept hot (``_early_writes_lost``): the thread is read from
the durable tier, which has them.

Each hot-tier step runs in one hold of the hot store's lock, with what it tells
``tiered.residency`` about the thread's copy.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint
from langgraph.checkpoint.serde.base import SerializerProtocol

from ..engine import (
    Blob,
    BlobKey,
    CheckpointCapacityError,
    CheckpointRecord,
    InvalidArgumentError,
    Store,
    WriteRecord,
    identifiers,
    payload_size,
)
from ..locations import locate
from . import conditional
from .coordination import ThreadDeletedError, UnstorableWriteError
from .settings import PER_ITEM_LIMITS
from .state import Shared, Tiers, alive, count_rejection, sweep
from .writeback import DirtyCheckpoint, DirtyWrites

__all__ = [
    "Fallback",
    "added",
    "back_put",
    "back_put_writes",
    "batch_bytes",
    "encode_values",
    "precheck_put",
    "precheck_writes",
    "refuse_deleted",
    "stored_config",
    "through_put",
    "through_put_writes",
    "writes_location",
    "aput_if_newest",
    "expected_newest",
    "put_if_newest",
]


class Fallback(NamedTuple):
    """A write-back put the hot tier cannot keep: it is written through instead, after the thread's flush.

    Attributes:
        refusal: The store-wide limit that refused it (a flush failure is raised as this refusal, naming
            the durable failure), or None: writes acknowledged before it are no longer hot, its id sorts
            below what the durable tier holds (``_stays_latest``), or rolling history pruned the checkpoint
            as it was stored (an id older than the ones kept).
    """

    refusal: CheckpointCapacityError | None


ValueEncoder = Callable[[list[BlobKey]], dict[BlobKey, Blob]]
"""Encodes the values of the given keys from the checkpoint being put (``encode_values``, bound)."""


def encode_values(serde: SerializerProtocol, checkpoint: Checkpoint, keys: list[BlobKey]) -> dict[BlobKey, Blob]:
    """The blobs of ``keys`` from the checkpoint's ``channel_values``, as ``codec.encode_checkpoint`` encodes new
    ones (a channel without a value: an empty blob). Runtime complexity: serializing those values."""
    values = checkpoint.get("channel_values") or {}
    dumps = serde.dumps_typed
    return {key: dumps(values[key[0]]) if key[0] in values else None for key in keys}


def _early_writes_lost(store: Store, shared: Shared, thread_id: str, namespace: str, checkpoint_id: str) -> bool:
    """Whether writes acknowledged before the checkpoint's put are missing from the hot copy (lock held).

    Runtime complexity: O(1).
    """
    expected = shared.early.expected(thread_id, namespace, checkpoint_id)
    return expected > 0 and store.held_writes(thread_id, namespace, checkpoint_id) < expected


def _stays_latest(
    shared: Shared, store: Store, thread_id: str, namespace: str, record: CheckpointRecord, was_alive: bool
) -> bool:
    """Whether the hot tier may store the checkpoint and keep its latest of the namespace the durable tier's
    latest (lock held): a namespace already hot (the engine's latest is the greatest id, as the durable tier's
    is) unless the id sorts below the copy's floor there and is not hot (the durable tier may hold it, with
    pending writes the copy lacks), one the durable tier is known not to have, or a checkpoint newer than its
    parent and than the greatest id this process saw the durable tier hold there (``ResidencyLedger.ceiling``,
    raised by a copy into the thread too). A checkpoint whose id sorts below those (a clock behind, or stepped
    back) would be the hot latest while the durable tier's is another; one put again under that greatest id
    would start a hot copy without the pending writes the durable tier keeps for it: either stays out of memory,
    and reads go to the durable tier.

    Runtime complexity: O(1).
    """
    newest = store.newest_id(thread_id, namespace) if was_alive else None
    if newest is not None:
        if record.checkpoint_id >= newest or store.holds_checkpoint(thread_id, namespace, record.checkpoint_id):
            return True
        # below the hot copy's newest and not in it: a new id where the copy holds every durable one, else perhaps
        # an id put again, whose pending writes the durable tier keeps and the copy would not hold
        hot = shared.residency.lookup(thread_id, True)
        return hot is not None and hot.holds(namespace, record.checkpoint_id)
    entry = shared.residency.lookup(thread_id, was_alive)
    if entry is not None and entry.all_namespaces and namespace not in entry.floors:
        return True
    ceiling = shared.residency.ceiling(thread_id, namespace)
    if ceiling is not None and record.checkpoint_id <= ceiling:
        return False  # equal: the id put again, whose durable writes a new hot copy would not hold
    parent_id = record.parent_id
    return parent_id is None or record.checkpoint_id > parent_id


def _complete(
    store: Store,
    thread_id: str,
    namespace: str,
    record: CheckpointRecord,
    blobs: dict[BlobKey, Blob],
    encode_missing: ValueEncoder,
    was_alive: bool,
) -> dict[BlobKey, Blob]:
    """``blobs`` with the values the record references and the hot tier lacks (lock held).

    A thread that is not ``alive`` may expire in the put itself (an ``idle_ttl_seconds`` within
    ``TTL_MARGIN_SECONDS``), which would store the checkpoint in a fresh copy holding none of the values it
    has now: so for it every referenced value is added, not only those missing now.
    Runtime complexity: O(channels), plus encoding what is missing (only when the hot copy is partial).
    """
    if was_alive:
        missing = store.missing_values(thread_id, namespace, record, blobs)
    else:
        missing = [key for key in record.blob_keys() if key not in blobs]
    return {**blobs, **encode_missing(missing)} if missing else blobs


# --- write-through: after the durable tier acknowledged ----------------------------------------------------------


def through_put(
    shared: Shared,
    thread_id: str,
    namespace: str,
    record: CheckpointRecord,
    blobs: dict[BlobKey, Blob],
    root: str | None,
    encode_missing: ValueEncoder,
) -> None:
    """Write-through, after the durable tier acknowledged: the hot tier takes the checkpoint (with the values
    it references that the hot copy lacks: ``encode_missing``), or the thread leaves memory (a store-wide
    limit). Runtime complexity: that of ``Store.put_checkpoint``."""
    store = shared.hot.store
    with store.exclusive():
        was_alive, churn = _acknowledged(shared, store, thread_id)
        lost = _early_writes_lost(store, shared, thread_id, namespace, record.checkpoint_id)
        shared.early.settled(thread_id, namespace, record.checkpoint_id)
        stays = _stays_latest(shared, store, thread_id, namespace, record, was_alive)
        shared.residency.raise_ceiling(thread_id, namespace, record.checkpoint_id)  # the durable tier holds it
        if lost or not stays:
            _leave_out(shared, thread_id, record.checkpoint_id)
            return
        try:
            complete = _complete(store, thread_id, namespace, record, blobs, encode_missing, was_alive)
            store.put_checkpoint(thread_id, namespace, record, complete, root)
        except CheckpointCapacityError as error:
            _leave_out(shared, thread_id, record.checkpoint_id, error.limit)
            return
        except ValueError:
            _leave_out(shared, thread_id, record.checkpoint_id)
            return
        _note_checkpoint(shared, thread_id, namespace, record.checkpoint_id, was_alive, churn)


def through_put_writes(
    shared: Shared, thread_id: str, namespace: str, checkpoint_id: str, records: Sequence[WriteRecord], root: str | None
) -> None:
    """Write-through, after the durable tier acknowledged: the hot tier takes the writes, or the thread
    leaves memory. Runtime complexity: that of ``Store.put_writes``."""
    store = shared.hot.store
    with store.exclusive():
        was_alive, churn = _acknowledged(shared, store, thread_id)
        if shared.residency.is_inexact(thread_id, namespace, checkpoint_id):
            _leave_out(shared, thread_id, None)  # ordered among made-up paths, they could read back otherwise
            return
        kept = _kept(shared, store, thread_id, namespace, checkpoint_id, records)
        if not store.holds_checkpoint(thread_id, namespace, checkpoint_id):
            shared.early.arrived(thread_id, namespace, checkpoint_id, len(kept))
        try:
            if kept:
                store.put_writes(thread_id, namespace, checkpoint_id, kept, root)
        except CheckpointCapacityError as error:
            _leave_out(shared, thread_id, None, error.limit)
            return
        except ValueError:
            _leave_out(shared, thread_id, None)
            return
        _note_writes(shared, thread_id, was_alive, churn)


def _acknowledged(shared: Shared, store: Store, thread_id: str) -> tuple[bool, int]:
    """What every write-through does first once the durable tier acknowledged (lock held): the thread's
    tombstone goes (its late writes are welcome: it is durable) and its write mark moves. Returns whether the
    thread was alive and the store's prune count before the write. Runtime complexity: O(1)."""
    was_alive = alive(store, thread_id)
    store.forget_tombstone(thread_id)
    churn = store.pruned_count()
    shared.marks.move(thread_id)
    return was_alive, churn


def _kept(
    shared: Shared, store: Store, thread_id: str, namespace: str, checkpoint_id: str, records: Sequence[WriteRecord]
) -> Sequence[WriteRecord]:
    """The writes of a batch the durable saver keeps (lock held): all of them, but for a SQL saver given a batch
    mixing regular and special channels, which it inserts only where ``(task_id, idx)`` is absent (the first of
    a key wins), where the engine, as ``InMemorySaver``, overwrites a special channel's write.

    Runtime complexity: O(len(records)).
    """
    if not shared.first_write_wins or not records:
        return records
    special = [record.idx < 0 for record in records]
    if all(special) or not any(special):
        return records
    return store.absent_writes(thread_id, namespace, checkpoint_id, records)


def _leave_out(shared: Shared, thread_id: str, checkpoint_id: str | None, limit: str | None = None) -> None:
    """Write-through: the hot tier refused a write the durable tier has: the thread leaves memory whole
    (its copy would be behind), counted as ``oversize`` for a per-item ``limit``, else as ``left_out``.
    Lock held. Runtime complexity: that of ``Store.delete_thread``."""
    store = shared.hot.store
    store.delete_thread(thread_id)
    if checkpoint_id is not None:
        store.forget_refusal(checkpoint_id)
    shared.residency.forget(thread_id)
    if limit in PER_ITEM_LIMITS:
        shared.counters.oversize += 1
    else:
        shared.counters.left_out += 1


# --- write-back: the hot tier and the ledger together ------------------------------------------------------------


def back_put(
    shared: Shared,
    thread_id: str,
    namespace: str,
    record: CheckpointRecord,
    blobs: dict[BlobKey, Blob],
    root: str | None,
    new_versions: ChannelVersions,
    encode_missing: ValueEncoder,
) -> Fallback | None:
    """Write-back: the hot tier and the ledger take the checkpoint (with the values it references that the hot
    copy lacks: ``encode_missing``, so that what the ledger replays is whole); or why it must be written
    through instead (a store-wide refusal, or writes acknowledged before it that are no longer hot).

    Raises:
        ThreadDeletedError, ValueError, CheckpointCapacityError (per item, with ``oversize="refuse"``): the write
            is refused.

    Runtime complexity: that of ``Store.put_checkpoint``, plus O(c + w log w) to read back its c values.
    """
    store = shared.hot.store
    with store.exclusive():
        refuse_deleted(shared, thread_id, record.parent_id)
        was_alive = alive(store, thread_id)
        store.forget_tombstone(thread_id)
        churn = store.pruned_count()
        if _early_writes_lost(store, shared, thread_id, namespace, record.checkpoint_id):
            return Fallback(None)  # through_put settles it
        if not _stays_latest(shared, store, thread_id, namespace, record, was_alive):
            return Fallback(None)  # through_put leaves the thread out of memory
        shared.residency.raise_ceiling(thread_id, namespace, record.checkpoint_id)  # the ledger holds it
        try:
            complete = _complete(store, thread_id, namespace, record, blobs, encode_missing, was_alive)
            store.put_checkpoint(thread_id, namespace, record, complete, root)
        except CheckpointCapacityError as error:
            if error.limit in PER_ITEM_LIMITS and shared.oversize == "refuse":
                raise
            store.forget_refusal(record.checkpoint_id)
            return Fallback(error)
        # what the ledger replays: every value as stored, read back without expiring the thread (a clock past
        # its TTL made a read return nothing, and the checkpoint was flushed without its values)
        view = store.peek(thread_id, namespace, record.checkpoint_id)
        if view is None:  # an older id under rolling history pruned itself: it goes through instead
            return Fallback(None)
        shared.early.settled(thread_id, namespace, record.checkpoint_id)
        shared.marks.move(thread_id)
        item = DirtyCheckpoint(namespace, record, view.channel_values, {channel: version for channel, version in blobs})
        shared.dirty.add(thread_id, item, shared.clock())
        _note_checkpoint(shared, thread_id, namespace, record.checkpoint_id, was_alive, churn)
    return None


def back_put_writes(
    shared: Shared,
    thread_id: str,
    namespace: str,
    checkpoint_id: str,
    records: Sequence[WriteRecord],
    task_id: str,
    task_path: str,
    root: str | None,
) -> Fallback | None:
    """Write-back: the hot tier and the ledger take the writes; or why they must be written through instead
    (a store-wide refusal, or writes admitted before them with made-up indexes and paths).

    Raises:
        ThreadDeletedError, ValueError, CheckpointCapacityError (per item, with ``oversize="refuse"``): the
            writes are refused.

    Runtime complexity: that of ``Store.put_writes``.
    """
    store = shared.hot.store
    with store.exclusive():
        refuse_deleted(shared, thread_id, checkpoint_id)
        was_alive = alive(store, thread_id)
        store.forget_tombstone(thread_id)
        churn = store.pruned_count()
        if shared.residency.inexact and (thread_id, namespace, checkpoint_id) in shared.residency.inexact:
            return Fallback(None)  # through_put_writes leaves the thread out of memory
        early = not store.holds_checkpoint(thread_id, namespace, checkpoint_id)
        kept = _kept(shared, store, thread_id, namespace, checkpoint_id, records)
        try:
            if kept:
                store.put_writes(thread_id, namespace, checkpoint_id, kept, root)
        except CheckpointCapacityError as error:
            if error.limit in PER_ITEM_LIMITS and shared.oversize == "refuse":
                raise
            return Fallback(error)  # written through instead: through_put_writes counts them if early
        if early:
            shared.early.arrived(thread_id, namespace, checkpoint_id, len(kept))
        shared.marks.move(thread_id)
        if records:
            item = DirtyWrites(namespace, checkpoint_id, task_id, task_path, tuple(records), batch_bytes(records))
            shared.dirty.add(thread_id, item, shared.clock())
        _note_writes(shared, thread_id, was_alive, churn)
    return None


# --- what a stored write tells of the thread's hot copy ----------------------------------------------------------


def _note_checkpoint(
    shared: Shared, thread_id: str, namespace: str, checkpoint_id: str, was_alive: bool, churn: int
) -> None:
    """What a stored checkpoint tells about the thread's hot copy (lock held). Runtime complexity: amortized
    O(1)."""
    residency = shared.residency
    if not was_alive:
        residency.came_to_memory(thread_id, namespace, checkpoint_id)
        sweep(shared)
    elif shared.hot.store.pruned_count() != churn:
        residency.reset(thread_id, namespace, checkpoint_id)  # the write pruned the thread
    else:
        residency.stored_namespace(thread_id, namespace, checkpoint_id)


def _note_writes(shared: Shared, thread_id: str, was_alive: bool, churn: int) -> None:
    """What stored writes tell about the thread's hot copy (lock held). Runtime complexity: amortized O(1)."""
    if not was_alive:
        if shared.hot.store.last_used(thread_id) is not None:
            shared.residency.came_with_writes_only(thread_id)
            sweep(shared)
    elif shared.hot.store.pruned_count() != churn:
        shared.residency.forget(thread_id)  # the writes pruned namespaces: only the latest reads stay hot


# --- refusals before anything is written: deleted threads, per-item checks ----------------------------------


def refuse_deleted(shared: Shared, thread_id: str, continues: str | None) -> None:
    """Refuse, and count, a write continuing a thread deleted since (``DeletedThreads.refuse``), or writes
    the durable tier refused and which were dropped (``UnstorableThreads.refuse``).

    Raises:
        ThreadDeletedError: It continues the deleted thread.
        UnstorableWriteError: It continues dropped writes.

    Runtime complexity: O(1).
    """
    try:
        shared.deleted.refuse(thread_id, continues)
    except ThreadDeletedError:
        count_rejection(shared, "deleted_thread")
        raise
    try:
        shared.unstorable.refuse(thread_id, continues)
    except UnstorableWriteError:
        count_rejection(shared, "unstorable_thread")
        raise


def precheck_put(
    tiers: Tiers,
    thread_id: str,
    namespace: str,
    record: CheckpointRecord,
    blobs: dict[BlobKey, Blob],
    checkpoint: Checkpoint,
) -> None:
    """Refuse, before anything is written, a checkpoint the hot tier would refuse for itself alone:
    an invalid identifier, or (``oversize="refuse"``) a whole state over ``max_checkpoint_bytes``.

    Raises:
        ValueError: An identifier is invalid.
        CheckpointCapacityError: ``max_checkpoint_bytes``.

    Runtime complexity: O(channels), plus a hot read of the parent when a limit is set.
    """
    limits = tiers.config
    try:
        identifiers.check_identifier("thread_id", thread_id, limits)
        identifiers.check_namespace(namespace, limits)
        identifiers.check_identifier("checkpoint_id", record.checkpoint_id, limits)
        if record.parent_id is not None:
            identifiers.check_identifier("parent checkpoint_id", record.parent_id, limits)
        if record.run_id is not None:
            identifiers.check_identifier("metadata['run_id']", record.run_id, limits)
        channels: set[str] = set()
        identifiers.check_versions(channels, record.versions, limits)
        identifiers.check_blob_keys(blobs.keys(), limits)
        for channel in record.delta_channels:
            identifiers.admit_channel(channels, channel, limits)
    except ValueError:
        count_rejection(tiers.shared, "identifier")
        raise
    limit = limits.max_checkpoint_bytes
    if limit == math.inf or tiers.shared.oversize != "refuse":
        return  # oversize="durable": the durable tier takes it, and the thread stays out of memory
    size = added(record, blobs)
    missing = [key for key in record.blob_keys() if key not in blobs]
    if missing and size <= limit:
        size += _unchanged_bytes(tiers, thread_id, namespace, record.parent_id, missing, checkpoint)
    if size > limit:
        count_rejection(tiers.shared, "max_checkpoint_bytes")
        raise CheckpointCapacityError("max_checkpoint_bytes", limit, size, thread_id=thread_id)


def _unchanged_bytes(
    tiers: Tiers,
    thread_id: str,
    namespace: str,
    parent_id: str | None,
    keys: list[BlobKey],
    checkpoint: Checkpoint,
) -> int:
    """Bytes of the values a checkpoint keeps from its parent: from the hot copy of the parent, else measured.

    Runtime complexity: O(len(keys)), plus serializing the values the hot parent lacks.
    """
    store = tiers.shared.hot.store
    parent = None if parent_id is None else store.get(thread_id, namespace, parent_id)
    values = checkpoint.get("channel_values", {})
    size = 0
    for channel, version in keys:
        if parent is not None and parent.record.version_of(channel) == version:
            size += payload_size(parent.channel_values.get(channel))
        elif channel in values:
            size += len(tiers.serde.dumps_typed(values[channel])[1])
    return size


def precheck_writes(
    tiers: Tiers, thread_id: str, namespace: str, checkpoint_id: str, records: Sequence[WriteRecord], batch: int
) -> None:
    """Refuse, before anything is written, writes the hot tier would refuse for themselves alone.

    Raises:
        ValueError: An identifier is invalid.
        CheckpointCapacityError: ``max_pending_write_bytes`` (``oversize="refuse"``).

    Runtime complexity: O(len(records)).
    """
    limits = tiers.config
    try:
        identifiers.check_identifier("thread_id", thread_id, limits)
        identifiers.check_namespace(namespace, limits)
        identifiers.check_identifier("checkpoint_id", checkpoint_id, limits)
        channels: set[str] = set()
        for write in records:
            identifiers.check_identifier("task_id", write.task_id, limits)
            identifiers.check_text("task_path", write.task_path)
            if write.channel not in channels:
                identifiers.admit_channel(channels, write.channel, limits)
    except ValueError:
        count_rejection(tiers.shared, "identifier")
        raise
    if batch > limits.max_pending_write_bytes and tiers.shared.oversize == "refuse":
        count_rejection(tiers.shared, "max_pending_write_bytes")
        raise CheckpointCapacityError(
            "max_pending_write_bytes", limits.max_pending_write_bytes, batch, thread_id=thread_id
        )


# --- conditional writes (several processes, one durable tier) ---------------------------------------------------


def expected_newest(shared: Shared, thread_id: str, namespace: str, parent_id: str | None) -> str | None:
    """The newest checkpoint this process believes the namespace has: its hot latest when the hot tier holds the
    namespace (so that a deliberate fork from an older checkpoint is no conflict); else the greater of what it
    last wrote or read there (``conditional.KnownNewest``, kept when the thread left memory) and the put's parent.

    Runtime complexity: O(1).
    """
    store = shared.hot.store
    with store.exclusive():
        if alive(store, thread_id):
            newest = store.newest_id(thread_id, namespace)
            if newest is not None:
                return newest
    return shared.known_newest.expected(thread_id, namespace, parent_id)


def put_if_newest(
    tiers: Tiers, config: RunnableConfig, checkpoint: Checkpoint, metadata: Any, new_versions: ChannelVersions
) -> RunnableConfig:
    """The durable put of a write-through with ``processes="many"``: made only while the namespace's newest
    durable checkpoint is the one this process expects (``expected_newest``); on a conflict the thread's hot copy,
    stale, leaves memory, and the error goes to the caller, naming who wrote the newest it found.

    Raises:
        CheckpointConflictError: Another writer wrote the namespace since; nothing was written.

    Runtime complexity: the durable put plus its check (``tiered.conditional``); a conflict, one durable read more.
    """
    thread_id, namespace, parent_id = locate(config)
    expected = expected_newest(tiers.shared, thread_id, namespace, parent_id)
    try:
        with tiers.durable.health.counting():
            try:
                stored = conditional.put_if_newest(
                    tiers.durable.saver, config, checkpoint, metadata, new_versions, expected=expected
                )
            except conditional.CheckpointConflictError as conflict:
                if not _emptied_since(conflict, parent_id):
                    raise
                stored = conditional.put_if_newest(
                    tiers.durable.saver, config, checkpoint, metadata, new_versions, expected=None
                )
    except conditional.CheckpointConflictError as conflict:
        _drop_stale(tiers.shared, thread_id)
        raise _explained(conflict, _found_metadata(tiers, conflict)) from None
    tiers.shared.known_newest.note(thread_id, namespace, str(checkpoint["id"]))
    return stored


async def aput_if_newest(
    tiers: Tiers, config: RunnableConfig, checkpoint: Checkpoint, metadata: Any, new_versions: ChannelVersions
) -> RunnableConfig:
    """Async ``put_if_newest``: the durable saver's async side (a sync saver on the durable pool)."""
    thread_id, namespace, parent_id = locate(config)
    expected = expected_newest(tiers.shared, thread_id, namespace, parent_id)
    try:
        with tiers.durable.health.counting():
            try:
                stored = await conditional.aput_if_newest(
                    tiers.durable.saver, config, checkpoint, metadata, new_versions, expected=expected
                )
            except conditional.CheckpointConflictError as conflict:
                if not _emptied_since(conflict, parent_id):
                    raise
                stored = await conditional.aput_if_newest(
                    tiers.durable.saver, config, checkpoint, metadata, new_versions, expected=None
                )
    except conditional.CheckpointConflictError as conflict:
        _drop_stale(tiers.shared, thread_id)
        found = None
        if conflict.found is not None:
            with contextlib.suppress(Exception):  # the error is what matters: its details are the best we can
                found = await tiers.durable.aget_tuple(_found_config(conflict))
        raise _explained(conflict, None if found is None else found.metadata) from None
    tiers.shared.known_newest.note(thread_id, namespace, str(checkpoint["id"]))
    return stored


def _emptied_since(conflict: conditional.CheckpointConflictError, parent_id: str | None) -> bool:
    """Whether a conflicting put with no parent (a new run on the namespace) found it emptied since this process
    last wrote or read it (another process deleted the thread): a fresh start, tried again expecting it empty.
    Runtime complexity: O(1)."""
    return parent_id is None and conflict.found is None and conflict.expected is not None


def _found_config(conflict: conditional.CheckpointConflictError) -> RunnableConfig:
    return stored_config(conflict.thread_id, conflict.checkpoint_ns, conflict.found or "")


def _found_metadata(tiers: Tiers, conflict: conditional.CheckpointConflictError) -> Any:
    """The metadata of the newest checkpoint a conflict found (who wrote it), or None. Runtime complexity: one
    durable read, on the conflict's path only."""
    if conflict.found is None:
        return None
    with contextlib.suppress(Exception):  # the error is what matters: its details are the best we can read
        found = tiers.durable.get_tuple(_found_config(conflict))
        return None if found is None else found.metadata
    return None


def _explained(conflict: conditional.CheckpointConflictError, metadata: Any) -> conditional.CheckpointConflictError:
    """The conflict again, naming who wrote the newest checkpoint it found. Runtime complexity: O(1)."""
    return conditional.CheckpointConflictError(
        conflict.thread_id,
        conflict.checkpoint_ns,
        conflict.expected,
        conflict.found,
        checkpoint_id=conflict.checkpoint_id,
        found_metadata=metadata,
    )


def _drop_stale(shared: Shared, thread_id: str) -> None:
    """A conflict showed the thread's hot copy stale: it leaves memory, so the caller's next read is fresh."""
    store = shared.hot.store
    with store.exclusive():
        shared.marks.move(thread_id)
        shared.residency.forget(thread_id)
        store.delete_thread(thread_id)
        shared.counters.conflicts += 1
    shared.known_newest.forget(thread_id)  # moved on by another writer: what it knew is stale


# --- small pieces of the write paths -----------------------------------------------------------------------------


def added(record: CheckpointRecord, blobs: Mapping[BlobKey, Blob]) -> int:
    """Bytes a put adds: its checkpoint, metadata and new values (the engine's count). Runtime complexity:
    O(len(blobs))."""
    return record.nbytes + sum(payload_size(blob) for blob in blobs.values())


def batch_bytes(records: Sequence[WriteRecord]) -> int:
    """Bytes of a batch of writes: values and task paths (the engine's count for max_pending_write_bytes).

    Runtime complexity: O(len(records)).
    """
    return sum(len(write.value_data) + len(write.task_path) for write in records)


def writes_location(config: RunnableConfig) -> tuple[str, str, str]:
    """The thread, namespace and checkpoint a ``put_writes`` config names.

    Raises:
        ValueError: An identifier is invalid, or the checkpoint id is missing.

    Runtime complexity: O(1).
    """
    thread_id, namespace, checkpoint_id = locate(config)
    if checkpoint_id is None:
        raise InvalidArgumentError("put_writes needs config['configurable']['checkpoint_id']")
    return thread_id, namespace, checkpoint_id


def stored_config(thread_id: str, namespace: str, checkpoint_id: str) -> RunnableConfig:
    """The config a ``put`` returns for the checkpoint it stored. Runtime complexity: O(1)."""
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": namespace, "checkpoint_id": checkpoint_id}}
