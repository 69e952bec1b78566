"""The state a ``TieredSaver`` and its ``with_allowlist()`` copies share, and each copy's handle on it.

``Shared`` holds every piece of mutable state (the hot tier, the ledgers, the
counters, the background job), so that ``with_allowlist()``'s shallow copies
share it, as LangGraph requires. ``Tiers`` is one saver object's handle: the
shared state with that object's own durable tier and serializer (a copy's
allowlist differs). The paths of the tiered saver (``hot_reads``,
``read_through``, ``hot_writes``, ``flushing``,
``removal``) are plain functions of a ``Tiers``, or of a ``Shared``
where they need nothing else.

``read_stats`` reads the counters for ``stats()``; the helpers at the bottom read
the hot store for those paths, with its lock held.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol

from ..background import JobHealth, Periodic
from ..config import InMemoryCheckpointConfig
from ..engine import DroppedThread, Store, ThreadExport
from ..saver import BoundedInMemorySaver
from . import write_less
from .conditional import KnownNewest
from .coordination import DeletedThreads, Flights, ThreadGates, UnstorableThreads, WriteMarks
from .durable import DurableHealth, DurableTier
from .landing import Landings
from .residency import EarlyWrites, ResidencyLedger
from .settings import TTL_MARGIN_SECONDS, Coherence, Oversize, Settings, WriteBack, WriteMode, WriteThrough
from .stats import Counters, RetentionTotals, TieredStats
from .writeback import DirtyLedger

__all__ = ["Shared", "Tiers", "alive", "count_rejection", "read_stats", "sweep"]


class Shared:
    """Every piece of state a ``TieredSaver`` and its ``with_allowlist()`` copies share.

    Invariant: the hot store's lock guards ``residency``, ``early``, ``marks``
    and ``counters``; ``dirty`` and ``landings`` guard themselves; ``spill_requests`` is guarded by the
    hot store's lock too.
    """

    hot: BoundedInMemorySaver  # set once the hook exists: it is this object's on_hot_drop
    write_policy: WriteThrough | WriteBack  # set by TieredSaver: its per-put byte limit (storage.refuse_too_large)

    def __init__(self, settings: Settings, capacity: float, clock: Callable[[], float]) -> None:
        self.settings = settings
        self.write: WriteMode = settings.write
        self.coherence: Coherence = settings.coherence
        self.oversize: Oversize = settings.oversize
        self.conditional_writes = settings.conditional_writes
        self.max_dirty_bytes = settings.max_dirty_bytes
        self.max_dirty_seconds = settings.max_dirty_seconds
        self.clock = clock  # monotonic seconds: the hot tier's expiry and the age of unflushed writes
        self.first_write_wins = False  # the durable saver keeps a mixed batch's first write of a key (SQL savers)
        self.age_retry_at = 0.0  # a write found the durable tier down: until then no write tries it (flushing)
        self.unstorable = UnstorableThreads(capacity)
        self.residency = ResidencyLedger()
        self.early = EarlyWrites()
        self.dirty = DirtyLedger()
        if settings.persist == "latest":
            self.dirty.select = write_less.select  # a flush writes each namespace's newest checkpoint
        # Write-back's check of a late flush's parent (flushing): the newest checkpoint each (thread, namespace)
        # flushed last (guarded by dirty.lock, bounded).
        self.flushed_heads: OrderedDict[tuple[str, str], str] = OrderedDict()
        self.marks = WriteMarks()
        self.gates = ThreadGates()
        self.flights: Flights[Any] = Flights()
        self.deleted = DeletedThreads(capacity)
        self.known_newest = KnownNewest()  # conditional writes: each namespace's newest, kept out of memory too
        self.health = DurableHealth()
        self.landings = Landings()  # the durable puts under way: retention's discovery waits for them
        self.counters = Counters()
        self.spill_requests: set[str] = set()
        self.background: list[Periodic[Tiers]] = []
        self.flush_health = JobHealth()
        self.retention_totals = RetentionTotals()  # what retention removed: sweeps and keep_last prunes
        self.sweep_health = JobHealth()

    def on_hot_drop(self, dropped: DroppedThread, export: ThreadExport) -> None:
        """The hot tier evicted or expired a thread: forget what we knew of its copy and its tombstone
        (it is still durable: not a loss), and have its unflushed writes flushed now (write-back).

        Runtime complexity: O(1).
        """
        store = self.hot.store
        thread_id = dropped.thread_id
        with store.exclusive():
            if store.last_used(thread_id) is None:
                self.residency.forget_stored(thread_id)
                store.forget_tombstone(thread_id)
                self.dirty.forget_skipped(thread_id)  # persist="latest": no fork from a skipped checkpoint now
            if self.write == "back" and self.dirty.is_dirty(thread_id):
                self.spill_requests.add(thread_id)


@dataclass(frozen=True)
class Tiers:
    """One saver object's handle on the two tiers (a dataclass, not a tuple: the periodic flush holds it weakly).

    Attributes:
        shared: The state every copy of the saver shares.
        durable: This object's durable tier (its serializer's allowlist is this object's).
        serde: This object's serializer.
        config: The limits the saver was given (the per-item checks and the async offload threshold).
    """

    shared: Shared
    durable: DurableTier
    serde: SerializerProtocol
    config: InMemoryCheckpointConfig


def read_stats(shared: Shared) -> TieredStats:
    """The hot tier's counters and the tiered saver's own, the latter read in one hold of the hot store's lock.

    Runtime complexity: O(1) (plus one entry per limit that rejected something).
    """
    counters, health, dirty = shared.counters, shared.health, shared.dirty
    # The hot tier keeps a dropped thread's tombstone only between a drop and the next write (its capacity
    # of 1 is internal: the thread is durable, nothing is lost), so it remembers none a user can ask about.
    hot = replace(shared.hot.stats(), dropped_thread_records=0, dropped_thread_record_bytes=0)
    with shared.hot.store.exclusive():
        return TieredStats(
            hot=hot,
            write=shared.write,
            coherence=shared.coherence,
            hits=counters.hits,
            misses=counters.misses,
            flight_waits=counters.flight_waits,
            admissions=counters.admissions,
            left_out=counters.left_out,
            conflicts=counters.conflicts,
            oversize=counters.oversize,
            dirty_threads=len(dirty),
            dirty_bytes=dirty.nbytes,
            max_dirty_bytes=shared.max_dirty_bytes,
            oldest_dirty_seconds=max(0.0, shared.clock() - dirty.oldest_since()) if dirty.threads else 0.0,
            max_dirty_seconds=shared.max_dirty_seconds,
            flushes=counters.flushes,
            flushed_writes=counters.flushed_writes,
            flush_seconds=counters.flush_seconds,
            flush_failures=counters.flush_failures,
            spills=counters.spills,
            spill_seconds=counters.spill_seconds,
            backpressure_waits=counters.backpressure_waits,
            backpressure_seconds=counters.backpressure_seconds,
            durable_calls=health.calls,
            durable_errors=health.errors,
            last_durable_error=health.last_error,
            validations=counters.validations,
            stale=counters.stale,
            validation_seconds=counters.validation_seconds,
            deleted_thread_records=len(shared.deleted),
            unstorable_threads=counters.unstorable_threads,
            unstorable_writes=counters.unstorable_writes,
            last_unstorable=last_unstorable(shared),
            rejections=dict(counters.rejections),
            retention=shared.retention_totals.stats,
        )


def last_unstorable(shared: Shared) -> str | None:
    """The last thread whose unflushed writes were dropped, as ``thread 'id' at checkpoint 'id': error``.

    Runtime complexity: O(1).
    """
    unstorable = shared.unstorable
    with unstorable.lock:
        if not unstorable.records:
            return None
        record = next(reversed(unstorable.records.values()))
    return f"thread {record.thread_id!r} from checkpoint {record.first_dropped!r}: {record.error}"


# --- reading the hot store (lock held) ------------------------------------------------------------------------


def alive(store: Store, thread_id: str) -> bool:
    """Whether the thread is stored and not about to expire in the next operation (lock held).

    Runtime complexity: O(1).
    """
    last_used = store.last_used(thread_id)
    if last_used is None:
        return False
    return store.clock() - last_used < store.limits.idle_ttl_seconds - TTL_MARGIN_SECONDS


def sweep(shared: Shared) -> None:
    """Forget, now and then, what we knew of threads that left memory (lock held).

    Runtime complexity: amortized O(1) (``ResidencyLedger.sweep_if_due``).
    """
    store = shared.hot.store
    shared.residency.sweep_if_due(lambda thread_id: store.last_used(thread_id) is not None)


def count_rejection(shared: Shared, limit: str) -> None:
    """Count a write refused before the durable write, under the limit (or ``deleted_thread``) that refused it.

    Runtime complexity: O(1).
    """
    with shared.hot.store.exclusive():
        shared.counters.rejections[limit] += 1
