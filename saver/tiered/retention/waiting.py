"""A thread waiting at an ``interrupt()``: how an idle deletion finds it, keeps it, and records the deletion that
takes it anyway, so that a resume of it is refused in any process over the same database.

A thread waits when its newest checkpoint of the root namespace holds a pending
write to LangGraph's ``__interrupt__`` channel: LangGraph writes one there for
every interrupt, a subgraph's too (the subgraph's call is a task of the root
checkpoint), and the answer's run puts a newer checkpoint. Static breakpoints
(``interrupt_before``, ``interrupt_after``) write none: they are not seen as
waiting (``strategy="keep_latest"`` keeps them resumable).

An idle deletion (``IdleDeletion``: ``strategy="delete"``) asks, inside the
transaction that deletes (``waiting``), so that a thread that started waiting
since it was found idle is seen:

* a waiting thread idle for less than ``interrupted_ttl_seconds`` (or with no
  such TTL) is pruned as ``"keep_latest"`` prunes (``threads``): its newest
  checkpoint per namespace, that checkpoint's pending writes and the ancestors
  it needs stay, and its resume works;
* one idle for longer is deleted, and the same transaction writes a row of
  ``bounded_retention_removed`` (``record_removal``): the thread, when, and the
  policy's field and value. A resume of the thread, in any process, finds the
  row (``find_removal``) while the thread holds no checkpoint, and is refused
  (``resumes``). The table is created by the first such deletion, and bounded:
  each deletion that writes a row first deletes the rows older than
  ``interrupted_ttl_seconds`` (a resume later than that starts afresh, as on the
  durable saver alone).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from langgraph.checkpoint.base import CheckpointTuple

from ...locations import configurable
from ..coordination import Deletion
from .ids import checkpoint_id_at
from .policy import RetentionPolicy
from .storage import Plan, PostgresDialect, SqlDialect

__all__ = [
    "INTERRUPT_CHANNEL",
    "REMOVED_TABLE",
    "IdleDeletion",
    "Removal",
    "find_removal",
    "forget_orphans",
    "forget_removal",
    "record_removal",
    "waiting",
    "waiting_among",
]

INTERRUPT_CHANNEL = "__interrupt__"
"""LangGraph's channel for an interrupt's pending write (``langgraph.constants.INTERRUPT``)."""

REMOVED_TABLE = "bounded_retention_removed"
"""Retention's table of the threads it deleted while they waited at an interrupt, one row each."""
REMOVED_INDEX = "bounded_retention_removed_at"


@dataclass(frozen=True, slots=True)
class IdleDeletion:
    """What one sweep pass's idle deletions do with a thread, waiting or not.

    Attributes:
        idle_ttl_seconds: The policy's idle TTL.
        interrupted_ttl_seconds: The policy's TTL for waiting threads (None: they are never deleted).
        interrupted_before: The checkpoint id of ``now - interrupted_ttl_seconds`` (None: never).
        now: The pass's wall-clock time (seconds since the epoch): when its deletions happen.
    """

    idle_ttl_seconds: float
    interrupted_ttl_seconds: float | None
    interrupted_before: str | None
    now: float

    @classmethod
    def of(cls, policy: RetentionPolicy, now: float) -> IdleDeletion | None:
        """The rule of a pass at ``now``, or None when the policy deletes no idle thread. Runtime complexity: O(1)."""
        if policy.idle_ttl_seconds is None or policy.strategy != "delete":
            return None
        ttl = policy.interrupted_ttl_seconds
        before = None if ttl is None else checkpoint_id_at(now - ttl)
        return cls(policy.idle_ttl_seconds, ttl, before, now)

    def deletes_waiting(self, newest: str) -> bool:
        """Whether a waiting thread whose newest checkpoint is ``newest`` goes too. Runtime complexity: O(1)."""
        return self.interrupted_before is not None and newest < self.interrupted_before

    def why(self, waited: bool) -> Deletion:
        """The reason a deletion under this rule gives (a waiting thread: ``interrupted_ttl_seconds``)."""
        if waited:
            assert self.interrupted_ttl_seconds is not None
            return Deletion("interrupted_ttl_seconds", self.interrupted_ttl_seconds, self.now, True)
        return Deletion("idle_ttl_seconds", self.idle_ttl_seconds, self.now, False)

    def removal(self, thread_id: str, newest: str | None) -> Removal:
        """The row recording the deletion of a waiting thread. Runtime complexity: O(1)."""
        assert self.interrupted_ttl_seconds is not None
        return Removal(thread_id, self.now, "interrupted_ttl_seconds", self.interrupted_ttl_seconds, newest)


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


# --- inside the removal's transaction --------------------------------------------------------------------------


def waiting(sql: SqlDialect, thread_id: str) -> Plan[bool]:
    """Whether the thread's newest root checkpoint holds an ``__interrupt__`` write (two lookups of primary keys)."""
    rows = yield (
        sql.params(
            f"SELECT 1 FROM {sql.writes_table} WHERE thread_id = ? AND checkpoint_ns = '' AND channel = ? "
            "AND checkpoint_id = (SELECT max(checkpoint_id) FROM checkpoints WHERE thread_id = ? "
            "AND checkpoint_ns = '') LIMIT 1"
        ),
        (thread_id, INTERRUPT_CHANNEL, thread_id),
    )
    return bool(rows)


def record_removal(sql: SqlDialect, removal: Removal, forget_before: float) -> Plan[None]:
    """Write the row of a deleted waiting thread (created with its table the first time), after deleting the rows
    older than ``forget_before`` (seconds since the epoch): the table holds the deletions of one TTL at most."""
    real = "DOUBLE PRECISION" if isinstance(sql, PostgresDialect) else "REAL"
    if isinstance(sql, PostgresDialect):  # two first deletions at once must not both create the table
        yield "SELECT pg_advisory_xact_lock(hashtext(%s))", (f"bounded-retention:{REMOVED_TABLE}",)
    yield (
        f"CREATE TABLE IF NOT EXISTS {REMOVED_TABLE} (thread_id TEXT PRIMARY KEY, removed_at {real} NOT NULL, "
        f"policy_field TEXT NOT NULL, policy_value {real} NOT NULL, checkpoint_id TEXT)",
        (),
    )
    yield f"CREATE INDEX IF NOT EXISTS {REMOVED_INDEX} ON {REMOVED_TABLE} (removed_at)", ()
    yield sql.params(f"DELETE FROM {REMOVED_TABLE} WHERE removed_at < ?"), (forget_before,)
    yield (
        sql.params(
            f"INSERT INTO {REMOVED_TABLE} (thread_id, removed_at, policy_field, policy_value, checkpoint_id) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (thread_id) DO UPDATE SET removed_at = excluded.removed_at, "
            "policy_field = excluded.policy_field, policy_value = excluded.policy_value, "
            "checkpoint_id = excluded.checkpoint_id"
        ),
        (removal.thread_id, removal.removed_at, removal.limit, removal.limit_value, removal.checkpoint_id),
    )


# --- on a resume's path ----------------------------------------------------------------------------------------


def find_removal(sql: SqlDialect, thread_id: str, remembered: bool) -> Plan[tuple[Removal | None, bool]]:
    """The row of the thread, if any, and whether the thread holds a checkpoint (asked only when there is a row,
    or ``remembered``: this process deleted it while it waited). Read outside a transaction.

    Runtime complexity: up to three lookups of a primary key (or of the catalog).
    """
    if isinstance(sql, PostgresDialect):
        rows = yield "SELECT to_regclass(%s) IS NOT NULL", (REMOVED_TABLE,)
        exists = bool(rows and rows[0][0])
    else:
        rows = yield "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (REMOVED_TABLE,)
        exists = bool(rows)
    found = None
    if exists:
        rows = yield (
            sql.params(
                f"SELECT removed_at, policy_field, policy_value, checkpoint_id FROM {REMOVED_TABLE} WHERE thread_id = ?"
            ),
            (thread_id,),
        )
        if rows:
            removed_at, limit, value, checkpoint_id = rows[0]
            newest = None if checkpoint_id is None else str(checkpoint_id)
            found = Removal(thread_id, float(removed_at), str(limit), float(value), newest)
    if found is None and not remembered:
        return None, False
    rows = yield sql.params("SELECT 1 FROM checkpoints WHERE thread_id = ? LIMIT 1"), (thread_id,)
    return found, bool(rows)


def forget_removal(sql: SqlDialect, thread_id: str) -> Plan[None]:
    """Delete the thread's row (a new run started it again: its own interrupts resume as any thread's)."""
    yield sql.params(f"DELETE FROM {REMOVED_TABLE} WHERE thread_id = ?"), (thread_id,)


def forget_orphans(sql: SqlDialect, thread_id: str) -> Plan[None]:
    """Delete the thread's pending writes (and, PostgreSQL, values) if it holds no checkpoint: what a refused
    resume's run wrote before its refusal (in one transaction: a new run's first checkpoint keeps them)."""
    tables = [sql.writes_table, "checkpoint_blobs"] if isinstance(sql, PostgresDialect) else [sql.writes_table]
    for table in tables:
        yield (
            sql.params(
                f"DELETE FROM {table} WHERE thread_id = ? AND NOT EXISTS "
                "(SELECT 1 FROM checkpoints WHERE thread_id = ?)"
            ),
            (thread_id, thread_id),
        )


# --- any other saver: through its API ----------------------------------------------------------------------------


def waiting_among(everything: Sequence[CheckpointTuple]) -> bool:
    """Whether the newest root checkpoint among a thread's checkpoints (read through the API, pending writes
    included) holds an ``__interrupt__`` write. Runtime complexity: O(len(everything))."""
    roots = [item for item in everything if not configurable(item.config).get("checkpoint_ns")]
    if not roots:
        return False
    newest = max(roots, key=lambda item: str(configurable(item.config)["checkpoint_id"]))
    return any(write[1] == INTERRUPT_CHANNEL for write in newest.pending_writes or ())
