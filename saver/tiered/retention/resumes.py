"""A resume of a thread retention deleted while it waited at an interrupt: refused before anything is stored.

LangGraph starts a thread it finds no checkpoint for afresh, even for
``Command(resume=...)`` (``saver.interrupts`` says what it sends then): the
answer as a pending write to ``__resume__``, and an ``input`` checkpoint with no
parent holding the ``Command``, in either order. ``TieredSaver``'s ``put`` and
``put_writes`` ask here first, for those two writes alone (``resumes_lost``):

* a thread whose root checkpoint the hot tier holds is not lost (no durable call);
* otherwise, the durable tier is asked (SQLite and PostgreSQL: one read of
  ``bounded_retention_removed``, and, when it has a row for the thread, whether
  the thread holds a checkpoint: ``SqlDialect.find_removal``), and this process's
  tombstone is read (``coordination.DeletedThreads``: a thread it deleted while it
  waited, over any saver);
* a thread holding no checkpoint that retention deleted while it waited:
  ``InterruptLostError``, naming the thread and the policy's field, its value and
  when; the write is refused, nothing is stored;
* a thread that holds a checkpoint again (a new run started it afresh, in any
  process): its row goes (``SqlDialect.forget_removal``), and its own interrupts
  resume as any thread's.

Under ``durability="async"`` LangGraph runs on after the refusal, and sends the
writes of the steps it runs (never their checkpoints: it sends those in a chain
the refusal broke): those are refused too (``DeletedThreads.refuse_run``), until
a run of the thread reads it (``run_starts``: a new run reads before it writes).
Those that came while the durable tier was asked are removed by the refusal, with
the thread's gate held alone, in one transaction that checks the thread still
holds no checkpoint (``SqlDialect.forget_orphans``), and the hot tier forgets the
thread, keeping a tombstone that says why (``dropped_thread``).

Under ``durability="exit"`` LangGraph sends the saver neither write, only what a
new run sends when the run ends: the resume cannot be told from a new run, and
starts the thread afresh, as on the durable saver alone. Other writes never
come here: they pay nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint, CheckpointMetadata

from ...engine import WriteRecord
from ...interrupts import ANSWER_CHANNELS, InterruptLostError, resumes_input, starts_run
from ..backends import dialect_of, kind_of, run_async, run_sync
from ..backends.base import Kind, Plan
from ..backends.sql import SqlDialect
from ..coordination import Deletion
from ..read_through import Plan as DurablePlan
from ..read_through import arun_plan, durable_step, run_plan
from ..removal import forget_deleted
from ..state import Tiers, alive, count_rejection
from .waiting import Removal

__all__ = ["answers", "aresumes_lost", "resumes_lost", "run_starts", "starts_afresh"]

logger = logging.getLogger("langgraph.checkpoint.bounded.tiered")

T = TypeVar("T")


def answers(records: Sequence[WriteRecord]) -> bool:
    """Whether a batch of pending writes answers an interrupt (a ``__resume__`` write). Runtime complexity:
    O(len(records))."""
    return any(record.channel in ANSWER_CHANNELS for record in records)


def starts_afresh(parent_id: str | None, checkpoint: Checkpoint, metadata: CheckpointMetadata) -> bool:
    """Whether a put is the ``input`` checkpoint of a resume LangGraph started afresh (no parent, a ``Command``
    with a ``resume`` in its input). Runtime complexity: O(1) unless it has no parent and is an input."""
    return (
        parent_id is None
        and isinstance(checkpoint, Mapping)
        and isinstance(metadata, Mapping)
        and resumes_input(checkpoint, metadata)
    )


def resumes_lost(tiers: Tiers, thread_id: str, checkpoint_id: str, *, log: bool) -> None:
    """Refuse a resume of a thread retention deleted while it waited, which holds no checkpoint since.

    Raises:
        InterruptLostError: It was; nothing was stored (logged as a warning too with ``log``).

    Runtime complexity: up to three indexed reads of the durable tier (SQL savers; a thread the hot tier holds
    too: another process may have deleted it), or one ``list(limit=1)`` for a thread this process deleted and
    does not hold (other savers); a refusal
    adds one transaction (``SqlDialect.forget_orphans``), with the thread's gate held alone.
    """
    lost = run_plan(tiers, _found(tiers, thread_id))
    if lost is None:
        return
    refusal = _lost(tiers, lost[1], checkpoint_id, log=log)
    with tiers.shared.gates.alone(thread_id):  # the writes of the run already past their checks finish first
        run_plan(tiers, _refused(tiers, thread_id, *lost))
    raise refusal


async def aresumes_lost(tiers: Tiers, thread_id: str, checkpoint_id: str, *, log: bool) -> None:
    """Async ``resumes_lost``: the durable tier's async side (a sync saver's on the durable pool), the same
    plans (``_found``, ``_refused``). Runtime complexity: that of ``resumes_lost``."""
    lost = await arun_plan(tiers, _found(tiers, thread_id))
    if lost is None:
        return
    refusal = _lost(tiers, lost[1], checkpoint_id, log=log)
    async with tiers.shared.gates.aalone(thread_id):
        await arun_plan(tiers, _refused(tiers, thread_id, *lost))
    raise refusal


def _found(tiers: Tiers, thread_id: str) -> DurablePlan[tuple[_Known, Removal] | None]:
    """``resumes_lost``'s question, for both drivers (``run_plan``, ``arun_plan``): the removal a resume of the
    thread answers into, with what was asked, or None (it is not lost). Runtime complexity: its durable calls'."""
    known = _known(tiers, thread_id)
    if known is None:
        return None
    try:
        if known.sql is None:
            found, holds = None, bool((yield durable_step("list", _thread(thread_id), limit=1)))
        else:
            sql, remembered = known.sql, known.remembered is not None
            find = _sides(known.kind, lambda: sql.find_removal(thread_id, remembered))
            found, holds = yield durable_step("on_tables", *find)
            if holds and found is not None:
                forget = _sides(known.kind, lambda: sql.forget_removal(thread_id), transaction=True)
                yield durable_step("on_tables", *forget)
    except Exception:
        if known.hot_newest is None:
            raise
        return None  # a hot thread's answer does not wait on a durable tier that is down (see _known)
    removal = _lost_life(known, None if holds else found or known.remembered)
    return None if removal is None else (known, removal)


def _refused(tiers: Tiers, thread_id: str, known: _Known, removal: Removal) -> DurablePlan[None]:
    """After a refusal, with the thread's gate held alone: the writes of the refused run that came while the
    durable tier was asked go (SQL: in one transaction that checks the thread still holds no checkpoint; other
    savers: the thread, if it holds none), and the hot tier forgets it (``_forget``). Runtime complexity: one
    transaction, or a ``list(limit=1)`` and perhaps a deletion."""
    if known.sql is not None:
        sql = known.sql
        yield durable_step("on_tables", *_sides(known.kind, lambda: sql.forget_orphans(thread_id), transaction=True))
    elif not (yield durable_step("list", _thread(thread_id), limit=1)):
        yield durable_step("delete_thread", thread_id)
    _forget(tiers, removal)


def _lost_life(known: _Known, removal: Removal | None) -> Removal | None:
    """The removal a resume answers into, or None: none was found, or the hot tier holds a newer life of the
    thread (a new run this process started since, its checkpoints perhaps not flushed yet). Runtime complexity:
    O(1)."""
    if removal is None or known.hot_newest is None:
        return removal
    if removal.checkpoint_id is None or known.hot_newest > removal.checkpoint_id:
        return None
    return removal


def _forget(tiers: Tiers, removal: Removal) -> None:
    """After a refusal: what the hot tier and the ledger hold of the refused run goes, and the tombstone says why
    (this process's ``dropped_thread`` knows it now, if another process deleted the thread)."""
    why = Deletion(removal.limit, removal.limit_value, removal.removed_at, True)
    forget_deleted(tiers.shared, removal.thread_id, removal.checkpoint_id, why)


class _Known(NamedTuple):
    """What to ask the durable tier about a thread a resume answers.

    Attributes:
        remembered: This process's record of its deletion while it waited, or None.
        sql: The durable tier's SQL dialect (None: read through its API).
        kind: The durable saver's kind.
        hot_newest: The newest root checkpoint the hot tier holds of it (None: it holds none): a removal of an
            older life of the thread does not refuse a resume of this one.
    """

    remembered: Removal | None
    sql: SqlDialect | None
    kind: Kind
    hot_newest: str | None = None


def _known(tiers: Tiers, thread_id: str) -> _Known | None:
    """What to ask, or None: no record of it can exist (another saver than SQLite's or PostgreSQL's, and the hot
    tier holds the thread, or no deletion of it in this process).

    A thread the hot tier holds is asked about too, over SQL: another process may have deleted it past
    ``interrupted_ttl_seconds`` while this one kept its copy (the hot tier's idle TTL may be the longer); but not
    while the durable tier is known down, nor when the question fails: the hot copy answers then (write-back's
    flush finds a deleted parent later, and refuses it)."""
    shared = tiers.shared
    store = shared.hot.store
    with store.exclusive():
        # a checkpoint, not merely the thread: the writes of a refused run's first steps may be there already
        hot_newest = store.newest_id(thread_id, "") if alive(store, thread_id) else None
    record = shared.deleted.get(thread_id)
    remembered = None
    if record is not None and record.waiting:
        remembered = Removal(
            thread_id, record.deleted_at_wall, record.limit, record.limit_value, record.newest_checkpoint_id
        )
    kind = kind_of(tiers.durable.saver)
    sql = dialect_of(kind)
    if hot_newest is not None and (sql is None or tiers.durable.health.down):
        return None
    if sql is None and remembered is None:
        return None
    return _Known(remembered, sql, kind, hot_newest)


def _thread(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


def _sides(
    kind: Kind, plan: Callable[[], Plan[T]], *, transaction: bool = False
) -> tuple[Callable[[Any], T], Callable[[Any], Awaitable[T]]]:
    """A plan (made anew for each side) run on the sync or the async side of the durable saver."""
    return (
        lambda saver: run_sync(saver, kind, plan(), transaction=transaction),
        lambda saver: run_async(saver, kind, plan(), transaction=transaction),
    )


def run_starts(tiers: Tiers, config: RunnableConfig, thread_id: str, namespace: str, checkpoint_id: str | None) -> None:
    """A read: if it is a run's first of a thread whose refused resume's run is refused (``refuse_run``), the
    writes after it are the new run's own. Runtime complexity: O(1); nothing while no resume was refused."""
    deleted = tiers.shared.deleted
    if deleted.refused_runs and thread_id in deleted.refused_runs and starts_run(config, namespace, checkpoint_id):
        deleted.run_started(thread_id)


def _lost(tiers: Tiers, removal: Removal, checkpoint_id: str, *, log: bool) -> InterruptLostError:
    """The error of a refused resume, whose run is refused from now on (``DeletedThreads.refuse_run``); with
    ``log``, logged as a warning too: under ``durability="async"`` a run can end with an error of its own (a node
    that failed on the empty state first), and the refusal must still be seen. The refusal of the answer's write
    logs it, that of the ``input`` checkpoint does not."""
    deleted = tiers.shared.deleted
    seconds_ago = max(0.0, deleted.wall_clock() - removal.removed_at)
    count_rejection(tiers.shared, removal.limit)  # stats().rejections["interrupted_ttl_seconds"]
    message = (
        f"cannot resume thread {removal.thread_id!r}: retention deleted it from the durable tier at "
        f"{_utc(removal.removed_at)}, {seconds_ago:.3g} s before this resume, while it waited at an interrupt: it "
        f"had waited longer than RetentionPolicy({removal.limit}={_number(removal.limit_value)}), and the interrupt "
        f"the resume answers went with it. The answer (Command(resume=...)) was not applied: nothing was stored "
        f"for the thread. Start a new run on the thread (with input: it starts afresh), or raise {removal.limit} "
        f"(None, the default, keeps a waiting thread until it is answered)."
    )
    if log:
        logger.warning("%s", message)
    refusal = InterruptLostError(
        removal.limit,
        removal.limit_value,
        thread_id=removal.thread_id,
        checkpoint_id=checkpoint_id,
        seconds_ago=seconds_ago,
        dropped_at_wall=removal.removed_at,
        message=message,
    )
    deleted.refuse_run(removal.thread_id, checkpoint_id, refusal)  # the writes of the run LangGraph goes on with
    return refusal


def _number(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else f"{value:,}"


def _utc(seconds: float) -> str:
    try:
        return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, OSError, ValueError):  # a clock injected by a test may read anything
        return f"{seconds:g} s after the epoch"
