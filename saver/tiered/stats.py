"""What a ``TieredSaver`` counts: ``TieredStats``, the answer of ``stats()``, and the counters behind it;
retention's ``SweepReport`` (one pass) and ``RetentionStats`` (``stats().retention``).

The counters are plain fields changed in place by the paths that count them
(hits and misses, admissions, flushes and spills, coherence checks,
rejections), each change made with the hot store's lock held; ``stats()`` reads
them all under that lock into one frozen ``TieredStats``.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from ..engine import render_rows, size_text
from ..saver import SaverStats
from .settings import Coherence, WriteMode

__all__ = ["Counters", "RetentionStats", "RetentionTotals", "SweepReport", "TieredStats"]


@dataclass(frozen=True)
class SweepReport:
    """What one sweep pass (or ``prune``) removed from both tiers, and what it left due.

    Attributes:
        deleted_threads: Threads deleted whole (idle past the TTL, ``strategy="delete"``).
        pruned_threads: Threads that kept their newest checkpoints and lost older ones (``keep_latest`` for
            idle threads, ``keep_last`` for long ones).
        checkpoints: Checkpoints removed.
        writes: Pending writes removed with them.
        nbytes: Bytes of the rows removed, as the durable database measures them (SQLite: payload lengths;
            PostgreSQL: ``pg_column_size``; 0 for other savers, which cannot tell).
        due: Threads found due and not swept: past the pass's bound (``max_threads_per_sweep``), in use
            now, or failed; the next pass takes them first.
        in_use: Of those, threads skipped because they are in use in this process (a write under way or
            unflushed, or a read within the TTL).
        failures: Threads whose removal the durable tier failed (each left as it was, in one transaction).
        seconds: How long the pass took.
        over_bytes: Threads left over ``max_thread_bytes`` (their newest checkpoints alone pass it), logged.
    """

    deleted_threads: int = 0
    pruned_threads: int = 0
    checkpoints: int = 0
    writes: int = 0
    nbytes: int = 0
    due: int = 0
    in_use: int = 0
    failures: int = 0
    seconds: float = 0.0
    over_bytes: int = 0

    def __str__(self) -> str:
        return (
            f"{self.deleted_threads:,} threads deleted, {self.pruned_threads:,} pruned: {self.checkpoints:,} "
            f"checkpoints, {self.writes:,} writes, {size_text(self.nbytes)} removed in {self.seconds:.3g} s; "
            f"{self.due:,} due ({self.in_use:,} in use), {self.failures:,} failed"
            + (f", {self.over_bytes:,} over max_thread_bytes" if self.over_bytes else "")
        )


@dataclass(frozen=True)
class RetentionStats:
    """What retention removed over the saver's life, and what is due now.

    Attributes:
        sweeps: Passes run (background and ``sweep()``).
        sweep_seconds: Time spent in passes, in all.
        sweep_failures: Passes the durable tier failed, plus threads whose removal failed.
        last_sweep_error: The last such failure, as ``ExceptionType: message``, or None.
        deleted_threads: Threads deleted whole.
        pruned_threads: Threads pruned (by a pass or by ``prune(strategy="keep_last")``).
        checkpoints: Checkpoints removed.
        writes: Pending writes removed.
        nbytes: Bytes reclaimed in the durable database (SQLite and PostgreSQL).
        due_threads: Threads the last pass found due and left for the next (0 before any pass).
        over_bytes_threads: Threads the last pass left over ``max_thread_bytes`` (0 before any pass).
    """

    sweeps: int = 0
    sweep_seconds: float = 0.0
    sweep_failures: int = 0
    last_sweep_error: str | None = None
    deleted_threads: int = 0
    pruned_threads: int = 0
    checkpoints: int = 0
    writes: int = 0
    nbytes: int = 0
    due_threads: int = 0
    over_bytes_threads: int = 0

    def rows(self) -> list[tuple[str, str]]:
        """The stats as two labelled lines: the passes, then what they removed."""
        last = f" (last: {self.last_sweep_error})" if self.last_sweep_error else ""
        return [
            (
                "retention",
                f"{self.sweeps:,} sweeps ({self.sweep_seconds:.3g} s), {self.sweep_failures:,} failed{last}; "
                f"{self.due_threads:,} threads due, {self.over_bytes_threads:,} over max_thread_bytes",
            ),
            (
                "reclaimed",
                f"{self.deleted_threads:,} threads deleted, {self.pruned_threads:,} pruned; "
                f"{self.checkpoints:,} checkpoints, {self.writes:,} writes, {size_text(self.nbytes)}",
            ),
        ]

    def __str__(self) -> str:
        return "; ".join(f"{label} {text}" for label, text in self.rows())


@dataclass
class RetentionTotals:
    """The counters behind ``RetentionStats``, changed under their own lock (passes are rare and never hold
    the hot store's lock across the durable tier)."""

    stats: RetentionStats = field(default_factory=RetentionStats)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, report: SweepReport, *, sweep: bool, error: str | None = None) -> None:
        """Add what a pass (``sweep=True``) or a prune removed. Runtime complexity: O(1)."""
        with self.lock:
            s = self.stats
            self.stats = RetentionStats(
                sweeps=s.sweeps + sweep,
                sweep_seconds=s.sweep_seconds + (report.seconds if sweep else 0.0),
                sweep_failures=s.sweep_failures + report.failures + (error is not None),
                last_sweep_error=error or s.last_sweep_error,
                deleted_threads=s.deleted_threads + report.deleted_threads,
                pruned_threads=s.pruned_threads + report.pruned_threads,
                checkpoints=s.checkpoints + report.checkpoints,
                writes=s.writes + report.writes,
                nbytes=s.nbytes + report.nbytes,
                due_threads=report.due if sweep else s.due_threads,
                over_bytes_threads=report.over_bytes if sweep else s.over_bytes_threads,
            )

    def note_error(self, error: str) -> None:
        """Remember a thread's failed removal as the last error. Runtime complexity: O(1)."""
        with self.lock:
            self.stats = replace(self.stats, last_sweep_error=error)


@dataclass(frozen=True)
class TieredStats:
    """What the tiered saver holds and did, at one instant.

    Attributes:
        hot: The hot tier's own counters (``SaverStats``): threads, bytes, evictions...
        write: ``"through"`` or ``"back"``.
        coherence: ``"sticky"`` or ``"validate"`` (``WriteThrough(processes="many")``: fresh reads).
        hits: Reads the hot tier answered.
        misses: Reads that went to the durable tier (one per key, however many callers waited).
        flight_waits: Callers that waited for another caller's read of the same key.
        admissions: Checkpoints a read brought into the hot tier.
        left_out: Hot writes a store-wide limit refused: the thread left memory, still durable.
        conflicts: Conditional puts refused because another process wrote the namespace since
            (``processes="many"``: ``CheckpointConflictError``; the thread left memory).
        oversize: Writes past ``max_checkpoint_bytes`` or ``max_pending_write_bytes`` stored in the durable
            tier alone (``oversize="durable"``): the thread left memory, still durable.
        dirty_threads: Threads with unflushed writes (write-back).
        dirty_bytes: What the unflushed writes keep alive (each value once per thread).
        max_dirty_bytes: The bound on ``dirty_bytes``.
        oldest_dirty_seconds: How long the oldest unflushed write has waited (0 with none).
        max_dirty_seconds: The bound on it (plus the backlog's flush time) while the durable tier takes writes.
        flushes: Flushes of a thread that wrote something to the durable tier.
        flushed_writes: Checkpoints and write batches flushed.
        flush_seconds: Time spent flushing, in all.
        flush_failures: Flushes the durable tier failed (the writes stay in memory).
        spills: Threads evicted from the hot tier with unflushed writes, flushed then.
        spill_seconds: Time spent flushing them.
        backpressure_waits: Write-back writes that waited for a flush to fit under ``max_dirty_bytes``
            (the durable tier takes writes slower than they come).
        backpressure_seconds: Time those writes waited, in all.
        durable_calls: Calls made to the durable saver.
        durable_errors: Calls that raised.
        last_durable_error: The last of them, as ``ExceptionType: message``, or None.
        validations: Coherence checks made (``WriteThrough(processes="many")``).
        stale: Checks that found the hot copy stale (it was dropped and read again).
        validation_seconds: Time spent on coherence checks, in all.
        deleted_thread_records: Deleted threads remembered so that their late writes are refused.
        unstorable_threads: Threads whose unflushed writes the durable tier kept refusing while it took the
            others': their writes were dropped (logged with the thread id), what continues them is refused.
        unstorable_writes: The checkpoints and write batches dropped so.
        last_unstorable: The last such thread, the checkpoint its drop began at and the durable failure, or None.
        rejections: Writes refused before the durable write, by limit (and ``deleted_thread``).
        retention: What retention removed from both tiers (``RetentionPolicy``'s sweeps and
            ``prune(strategy="keep_last")``), and what is due.
    """

    hot: SaverStats
    write: WriteMode
    coherence: Coherence
    hits: int
    misses: int
    flight_waits: int
    admissions: int
    left_out: int
    conflicts: int
    oversize: int
    dirty_threads: int
    dirty_bytes: int
    max_dirty_bytes: float
    oldest_dirty_seconds: float
    max_dirty_seconds: float
    flushes: int
    flushed_writes: int
    flush_seconds: float
    flush_failures: int
    spills: int
    spill_seconds: float
    backpressure_waits: int
    backpressure_seconds: float
    durable_calls: int
    durable_errors: int
    last_durable_error: str | None
    validations: int
    stale: int
    validation_seconds: float
    deleted_thread_records: int
    unstorable_threads: int
    unstorable_writes: int
    last_unstorable: str | None
    rejections: Mapping[str, int] = field(default_factory=dict)
    retention: RetentionStats = field(default_factory=RetentionStats)

    def __str__(self) -> str:
        """The readable form: the tiered saver's lines, then the hot tier's, indented (``repr()`` keeps the
        dataclass's one-line form). Runtime complexity: O(L) for L limits that rejected something.
        """
        last = f" (last: {self.last_durable_error})" if self.last_durable_error else ""
        rows = [
            ("tiers", f"write={self.write}, coherence={self.coherence}"),
            (
                "reads",
                f"{self.hits:,} hits, {self.misses:,} misses, {self.flight_waits:,} waits on another's miss, "
                f"{self.admissions:,} admissions",
            ),
            (
                "dirty",
                f"{self.dirty_threads:,} threads, {size_text(self.dirty_bytes)} of max_dirty_bytes "
                f"{size_text(self.max_dirty_bytes)}",
            ),
            (
                "dirty age",
                f"the oldest {self.oldest_dirty_seconds:.3g} s of max_dirty_seconds {self.max_dirty_seconds:.3g}",
            ),
            (
                "flushes",
                f"{self.flushes:,} ({self.flushed_writes:,} writes, {self.flush_seconds:.3g} s), "
                f"{self.flush_failures:,} failed; {self.spills:,} spills ({self.spill_seconds:.3g} s)",
            ),
            ("backpressure", f"{self.backpressure_waits:,} waits ({self.backpressure_seconds:.3g} s)"),
            ("durable", f"{self.durable_calls:,} calls, {self.durable_errors:,} errors{last}"),
            (
                "coherence",
                f"{self.validations:,} checks ({self.validation_seconds:.3g} s), {self.stale:,} stale",
            ),
            ("left out", f"{self.left_out:,} hot writes a store-wide limit refused (the thread left memory)"),
            ("oversize", f"{self.oversize:,} writes past a per-item limit, stored in the durable tier alone"),
            ("conflicts", f"{self.conflicts:,} conditional puts another process's write refused"),
            ("unstorable", f"{self.unstorable_threads:,} threads, {self.unstorable_writes:,} writes dropped"),
            *([("last unstorable", self.last_unstorable)] if self.last_unstorable else []),
            ("deleted", f"{self.deleted_thread_records:,} deleted threads remembered"),
            *self.retention.rows(),
            (
                "rejections",
                ", ".join(f"{count:,} for {limit}" for limit, count in sorted(self.rejections.items())) or "none",
            ),
        ]
        return f"{render_rows(rows)}\nhot tier:\n{render_rows(self.hot.rows(), indent='  ')}"


@dataclass
class Counters:
    """The tiered saver's own counters, each changed with the hot store's lock held."""

    hits: int = 0
    misses: int = 0
    flight_waits: int = 0
    admissions: int = 0
    left_out: int = 0
    conflicts: int = 0
    oversize: int = 0
    flushes: int = 0
    flushed_writes: int = 0
    flush_seconds: float = 0.0
    flush_failures: int = 0
    spills: int = 0
    spill_seconds: float = 0.0
    backpressure_waits: int = 0
    backpressure_seconds: float = 0.0
    validations: int = 0
    stale: int = 0
    validation_seconds: float = 0.0
    unstorable_threads: int = 0
    unstorable_writes: int = 0
    parent_checks: int = 0  # durable reads of a late flush's parent (flushing)
    rejections: Counter[str] = field(default_factory=Counter)
