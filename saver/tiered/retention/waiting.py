"""A thread waiting at an ``interrupt()``: how an idle deletion finds it, keeps it, and records the deletion that
takes it anyway, so that a resume of it is refused in any process over the same database.

A thread waits when its newest checkpoint of the root namespace holds a pending
write to LangGraph's ``__interrupt__`` channel: LangGraph writes one there for
every interrupt, a subgraph's too (the subgraph's call is a task of the root
checkpoint), and the answer's run puts a newer checkpoint. Static breakpoints
(``interrupt_before``, ``interrupt_after``) write none: they are not seen as
waiting (``strategy="keep_latest"`` keeps them resumable).

An idle deletion (``IdleDeletion``: ``strategy="delete"``) asks, inside the
transaction that deletes (``SqlDialect.waiting``), so that a thread that started waiting
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

The statements are the SQL backends' (``backends/sql.py``'s ``SqlDialect``: ``waiting``, ``record_removal``,
``find_removal``, ``forget_removal``, ``forget_orphans``); this module holds the rule and the API's side.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from langgraph.checkpoint.base import CheckpointTuple

from ...locations import configurable
from ..backends.base import INTERRUPT_CHANNEL, REMOVED_TABLE, Removal
from ..coordination import Deletion
from .ids import checkpoint_id_at
from .policy import RetentionPolicy

__all__ = [
    "INTERRUPT_CHANNEL",
    "REMOVED_TABLE",
    "IdleDeletion",
    "Removal",
    "waiting_among",
]


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
        """The reason a deletion under this rule gives (a waiting thread: ``interrupted_ttl_seconds``). Runtime
        complexity: O(1)."""
        if waited:
            assert self.interrupted_ttl_seconds is not None
            return Deletion("interrupted_ttl_seconds", self.interrupted_ttl_seconds, self.now, True)
        return Deletion("idle_ttl_seconds", self.idle_ttl_seconds, self.now, False)

    def removal(self, thread_id: str, newest: str | None) -> Removal:
        """The row recording the deletion of a waiting thread. Runtime complexity: O(1)."""
        assert self.interrupted_ttl_seconds is not None
        return Removal(thread_id, self.now, "interrupted_ttl_seconds", self.interrupted_ttl_seconds, newest)


# --- any other saver: through its API ----------------------------------------------------------------------------


def waiting_among(everything: Sequence[CheckpointTuple]) -> bool:
    """Whether the newest root checkpoint among a thread's checkpoints (read through the API, pending writes
    included) holds an ``__interrupt__`` write. Runtime complexity: O(len(everything))."""
    roots = [item for item in everything if not configurable(item.config).get("checkpoint_ns")]
    if not roots:
        return False
    newest = max(roots, key=lambda item: str(configurable(item.config)["checkpoint_id"]))
    return any(write[1] == INTERRUPT_CHANNEL for write in newest.pending_writes or ())
