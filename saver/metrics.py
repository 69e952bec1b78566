"""Prometheus metrics of a saver, read from ``stats()`` and ``config`` when scraped.

```python
from langgraph.checkpoint.bounded import BoundedInMemorySaver
from langgraph.checkpoint.bounded.metrics import register_metrics

checkpointer = BoundedInMemorySaver()
register_metrics(checkpointer)  # the default registry: what prometheus_client.generate_latest() serves
```

Needs the ``metrics`` extra (``pip install langgraph-checkpoint-bounded[metrics]``). Nothing runs on
the write path: a scrape calls ``stats()`` (O(1)) and reads the config.

Every name starts with ``langgraph_checkpoint_bounded_``. What a scrape exports is declared once, in the
tables ``SAVER_METRICS`` (what the store holds and what its limits did: gauges, and counters since the saver was
created), ``TIERED_METRICS`` and ``RETENTION_METRICS`` (a ``TieredSaver``'s own, beside the same metrics for its
hot tier and ``tiered_info{write,coherence,durable}``), plus one gauge per numeric config field, named as the
field (``+Inf`` for a lifted limit). docs/reference/metrics.md lists them; a test keeps the two in step.

A registry exports one saver: its metric names carry no saver label. Registering the same saver
again (or a ``with_allowlist()`` copy of it, which shares its store) returns the collector already
registered; registering a different one raises ``ValueError``. Give a second saver a
``CollectorRegistry`` of its own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import fields
from typing import Any, Literal, NamedTuple
from weakref import WeakKeyDictionary

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import REGISTRY, Collector, CollectorRegistry

from .engine import InvalidArgumentError
from .saver import BoundedInMemorySaver
from .tiered import CheckpointTooLargeError, TieredSaver, TieredStats

__all__ = [
    "PREFIX",
    "Exported",
    "SAVER_METRICS",
    "TIERED_METRICS",
    "RETENTION_METRICS",
    "TIERED_PREFIX",
    "TIERED_STATS_NOT_EXPORTED",
    "RETENTION_PREFIX",
    "RETENTION_STATS_NOT_EXPORTED",
    "SaverCollector",
    "register_metrics",
    "unregister_metrics",
]

PREFIX = "langgraph_checkpoint_bounded_"
STATS_NOT_EXPORTED = {  # SaverStats fields with no metric of their own, and why
    "max_total_bytes": "the max_total_bytes gauge exports every configured limit",
    "max_memory_bytes": "the max_memory_bytes gauge exports every configured limit",
    "evicted_threads": "the sum of evictions_total over its reasons",
    "last_autosave_error": "text, not a number: autosave_failures_total counts, the log says what failed",
}
TIERED_PREFIX = PREFIX + "tiered_"
TIERED_STATS_NOT_EXPORTED = {  # TieredStats fields with no metric of their own, and why
    "hot": "the hot tier's counters are the saver's metrics above",
    "write": "a label of tiered_info",
    "coherence": "a label of tiered_info",
    "last_durable_error": "text, not a number: durable_errors_total counts, the log says what failed",
    "last_unstorable": "text, not a number: unstorable_threads_total counts, the log names each thread",
    "retention": "its fields are the tiered_retention_* metrics (RETENTION_STATS_NOT_EXPORTED)",
}
RETENTION_PREFIX = TIERED_PREFIX + "retention_"
RETENTION_STATS_NOT_EXPORTED = {  # RetentionStats fields with no metric of their own, and why
    "last_sweep_error": "text, not a number: tiered_retention_sweep_failures_total counts, the log says what failed",
}


class Exported(NamedTuple):
    """One metric a scrape exports: a row of the tables below, which docs/reference/metrics.md repeats.

    Attributes:
        name: The name after ``PREFIX`` (a counter's samples add ``_total``).
        kind: ``"gauge"`` or ``"counter"``.
        help: The metric's one-line documentation.
        read: The stats field it reads, or a function of the stats object.
        label: For a labelled counter, the label whose values ``read``'s mapping keys are.
    """

    name: str
    kind: Literal["gauge", "counter"]
    help: str
    read: str | Callable[[Any], float | Mapping[str, float]]
    label: str = ""


GAUGE: Literal["gauge"] = "gauge"
COUNTER: Literal["counter"] = "counter"

SAVER_METRICS: tuple[Exported, ...] = (  # read from SaverStats (a TieredSaver's: its hot tier's)
    Exported("threads", GAUGE, "Threads stored.", "threads"),
    Exported("namespaces", GAUGE, "Namespaces stored, over all threads.", "namespaces"),
    Exported("checkpoints", GAUGE, "Checkpoints stored.", "checkpoints"),
    Exported("pending_writes", GAUGE, "Pending writes stored.", "pending_writes"),
    Exported("blobs", GAUGE, "Channel values stored.", "blobs"),
    Exported("total_bytes", GAUGE, "Serialized payload bytes stored, as max_total_bytes counts them.", "total_bytes"),
    Exported(
        "memory_bytes", GAUGE, "Estimated heap the store holds: payload plus its objects' overhead.", "memory_bytes"
    ),
    Exported("dropped_thread_records", GAUGE, "Evicted or expired threads remembered.", "dropped_thread_records"),
    Exported("dropped_thread_record_bytes", GAUGE, "Bytes those records hold.", "dropped_thread_record_bytes"),
    Exported(
        "refused_checkpoint_records",
        GAUGE,
        "Checkpoints whose put was refused, remembered so that their late writes are refused.",
        "refused_checkpoint_records",
    ),
    Exported(
        "parked_write_records",
        GAUGE,
        "Checkpoints of dropped threads whose pending writes wait aside for their put.",
        "parked_write_records",
    ),
    Exported("queued_drops", GAUGE, "Dropped threads waiting for the on_evict hook.", "queued_drops"),
    Exported("queued_drop_bytes", GAUGE, "Heap the exports waiting for the hook hold.", "queued_drop_bytes"),
    Exported(
        "evictions",
        COUNTER,
        "Threads evicted whole, by the limit that evicted them.",
        lambda stats: {
            "max_threads": stats.evicted_for_threads,
            "max_total_bytes": stats.evicted_for_bytes,
            "max_memory_bytes": stats.evicted_for_memory,
        },
        label="reason",
    ),
    Exported("expired_threads", COUNTER, "Threads removed after idle_ttl_seconds unused.", "expired_threads"),
    Exported("rejections", COUNTER, "Operations rejected, by the limit they would exceed.", "rejections", "limit"),
    Exported("pruned_checkpoints", COUNTER, "Oldest checkpoints dropped by prune_oldest.", "pruned_checkpoints"),
    Exported(
        "pruned_namespaces", COUNTER, "Completed subgraph namespaces dropped by prune_oldest.", "pruned_namespaces"
    ),
    Exported("drop_hook_errors", COUNTER, "Exceptions raised by the on_evict hook.", "drop_hook_errors"),
    Exported("autosave_failures", COUNTER, "Autosaves that failed (logged; close() raises).", "autosave_failures"),
    Exported(
        "expiry_sweep_failures", COUNTER, "Background expiry sweeps that failed (logged).", "expiry_sweep_failures"
    ),
)

TIERED_METRICS: tuple[Exported, ...] = (  # read from TieredStats; tiered_info is written apart (its labels)
    Exported("tiered_hits", COUNTER, "Reads the hot tier answered.", "hits"),
    Exported(
        "tiered_misses", COUNTER, "Reads that went to the durable tier (once per key, however many waited).", "misses"
    ),
    Exported(
        "tiered_flight_waits", COUNTER, "Reads that waited for another caller's read of the same key.", "flight_waits"
    ),
    Exported("tiered_admissions", COUNTER, "Checkpoints a read brought into the hot tier.", "admissions"),
    Exported(
        "tiered_left_out",
        COUNTER,
        "Hot writes a store-wide limit refused: the thread left memory, durable.",
        "left_out",
    ),
    Exported(
        "tiered_conflicts", COUNTER, "Conditional puts refused: another process wrote the namespace since.", "conflicts"
    ),
    Exported("tiered_oversize", COUNTER, "Writes past a per-item limit stored in the durable tier alone.", "oversize"),
    Exported("tiered_dirty_threads", GAUGE, "Threads with unflushed writes (write-back).", "dirty_threads"),
    Exported("tiered_dirty_bytes", GAUGE, "Bytes of unflushed writes (write-back).", "dirty_bytes"),
    Exported("tiered_max_dirty_bytes", GAUGE, "The bound on tiered_dirty_bytes.", "max_dirty_bytes"),
    Exported(
        "tiered_oldest_dirty_seconds", GAUGE, "How long the oldest unflushed write has waited.", "oldest_dirty_seconds"
    ),
    Exported("tiered_max_dirty_seconds", GAUGE, "The bound on tiered_oldest_dirty_seconds.", "max_dirty_seconds"),
    Exported("tiered_flushes", COUNTER, "Flushes of a thread that wrote to the durable tier.", "flushes"),
    Exported("tiered_flushed_writes", COUNTER, "Checkpoints and write batches flushed.", "flushed_writes"),
    Exported("tiered_flush_seconds", COUNTER, "Time spent flushing.", "flush_seconds"),
    Exported("tiered_flush_failures", COUNTER, "Flushes the durable tier failed.", "flush_failures"),
    Exported("tiered_spills", COUNTER, "Threads evicted with unflushed writes, flushed then.", "spills"),
    Exported("tiered_spill_seconds", COUNTER, "Time spent flushing evicted threads.", "spill_seconds"),
    Exported(
        "tiered_backpressure_waits",
        COUNTER,
        "Write-back writes that waited for a flush (max_dirty_bytes).",
        "backpressure_waits",
    ),
    Exported("tiered_backpressure_seconds", COUNTER, "Time writes waited for room.", "backpressure_seconds"),
    Exported("tiered_durable_calls", COUNTER, "Calls made to the durable saver.", "durable_calls"),
    Exported("tiered_durable_errors", COUNTER, "Calls to the durable saver that raised.", "durable_errors"),
    Exported("tiered_validations", COUNTER, "Coherence checks made (WriteThrough(processes='many')).", "validations"),
    Exported("tiered_stale", COUNTER, "Coherence checks that found the hot copy stale.", "stale"),
    Exported("tiered_validation_seconds", COUNTER, "Time spent on coherence checks.", "validation_seconds"),
    Exported("tiered_deleted_thread_records", GAUGE, "Deleted threads remembered.", "deleted_thread_records"),
    Exported(
        "tiered_unstorable_threads",
        COUNTER,
        "Threads whose unflushed writes the durable tier kept refusing: dropped, and logged.",
        "unstorable_threads",
    ),
    Exported("tiered_unstorable_writes", COUNTER, "Unflushed writes dropped so.", "unstorable_writes"),
    Exported("tiered_rejections", COUNTER, "Writes refused before the durable write, by limit.", "rejections", "limit"),
    Exported(
        "tiered_checkpoints_too_large",
        COUNTER,
        "Puts refused for passing the write policy's max_checkpoint_bytes (CheckpointTooLargeError).",
        lambda stats: stats.rejections.get(CheckpointTooLargeError.rejection, 0),
    ),
)

RETENTION_METRICS: tuple[Exported, ...] = (  # read from TieredStats.retention (RetentionStats)
    Exported("tiered_retention_sweeps", COUNTER, "Retention passes run (background and sweep()).", "sweeps"),
    Exported("tiered_retention_sweep_seconds", COUNTER, "Time spent in retention passes.", "sweep_seconds"),
    Exported(
        "tiered_retention_sweep_failures",
        COUNTER,
        "Retention passes the durable tier failed, plus threads whose removal failed.",
        "sweep_failures",
    ),
    Exported(
        "tiered_retention_deleted_threads",
        COUNTER,
        "Threads retention deleted whole (idle past the TTL).",
        "deleted_threads",
    ),
    Exported(
        "tiered_retention_pruned_threads",
        COUNTER,
        "Threads retention pruned to their newest checkpoints.",
        "pruned_threads",
    ),
    Exported("tiered_retention_checkpoints", COUNTER, "Checkpoints retention removed.", "checkpoints"),
    Exported("tiered_retention_writes", COUNTER, "Pending writes retention removed with them.", "writes"),
    Exported("tiered_retention_nbytes", COUNTER, "Bytes retention reclaimed in the durable database.", "nbytes"),
    Exported("tiered_retention_due_threads", GAUGE, "Threads found due and not yet swept.", "due_threads"),
    Exported(
        "tiered_retention_over_bytes_threads",
        GAUGE,
        "Threads the last retention pass left over max_thread_bytes.",
        "over_bytes_threads",
    ),
)


class SaverCollector(Collector):
    """Reads a saver's ``stats()`` and ``config`` at every scrape.

    Args:
        saver: The saver whose counters it exports.
    """

    def __init__(self, saver: BoundedInMemorySaver | TieredSaver) -> None:
        self.saver = saver

    def collect(self) -> Iterator[Metric]:
        """The metric families of one scrape. Runtime complexity: O(metrics + config fields + limits that rejected)."""
        observed = self.saver.stats()
        if isinstance(observed, TieredStats):
            yield _tiered_info(observed, self.saver)
            yield from _families(TIERED_METRICS, observed)
            yield from _families(RETENTION_METRICS, observed.retention)
            stats = observed.hot
        else:
            stats = observed
        yield from _families(SAVER_METRICS, stats)
        yield from self._settings()

    def _settings(self) -> Iterable[Metric]:
        config = self.saver.config
        for field in fields(config):
            value = getattr(config, field.name)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                yield GaugeMetricFamily(
                    PREFIX + field.name, f"Configured {field.name} (InMemoryCheckpointConfig).", value
                )


def _tiered_info(stats: TieredStats, saver: BoundedInMemorySaver | TieredSaver) -> Metric:
    """``tiered_info{write,coherence,durable}``: always 1, its labels say how the tiered saver runs."""
    durable = type(saver.durable).__name__ if isinstance(saver, TieredSaver) else ""
    info = GaugeMetricFamily(
        TIERED_PREFIX + "info",
        "The tiered saver's write mode, coherence and durable saver.",
        labels=["write", "coherence", "durable"],
    )
    info.add_metric([stats.write, stats.coherence, durable], 1)
    return info


def _families(table: tuple[Exported, ...], stats: object) -> Iterator[Metric]:
    """One family per row of ``table``, read from ``stats``. Runtime complexity: O(rows + label values)."""
    for row in table:
        value = getattr(stats, row.read) if isinstance(row.read, str) else row.read(stats)
        if isinstance(value, Mapping):  # a labelled counter: one sample per label value
            family = CounterMetricFamily(PREFIX + row.name, row.help, labels=[row.label])
            for label_value, count in sorted(value.items()):
                family.add_metric([label_value], count)
            yield family
        else:
            number = float(value)  # a row without a label reads one number
            family_type = CounterMetricFamily if row.kind == COUNTER else GaugeMetricFamily  # a counter adds _total
            yield family_type(PREFIX + row.name, row.help, value=number)


_registered: WeakKeyDictionary[CollectorRegistry, SaverCollector] = WeakKeyDictionary()
_registered_lock = threading.Lock()


def register_metrics(
    saver: BoundedInMemorySaver | TieredSaver, registry: CollectorRegistry | None = None
) -> SaverCollector:
    """Export a saver's metrics from ``registry`` (default: ``prometheus_client.REGISTRY``).

    Registering the same saver again returns the collector already registered.

    Raises:
        ValueError: The registry already exports another saver.

    Runtime complexity: O(1) (the registry may scrape once to learn the metric names).
    """
    registry = REGISTRY if registry is None else registry
    with _registered_lock:
        existing = _registered.get(registry)
        if existing is not None:
            if _store_of(existing.saver) is _store_of(saver):
                return existing
            raise InvalidArgumentError(
                "this registry already exports the metrics of another saver, under the same names: give the "
                "second saver a registry of its own (register_metrics(saver, CollectorRegistry())), or "
                "unregister_metrics() the first"
            )
        collector = SaverCollector(saver)
        registry.register(collector)
        _registered[registry] = collector
        return collector


def unregister_metrics(saver: BoundedInMemorySaver | TieredSaver, registry: CollectorRegistry | None = None) -> bool:
    """Stop exporting a saver's metrics from ``registry``; return whether they were registered.

    Runtime complexity: O(1).
    """
    registry = REGISTRY if registry is None else registry
    with _registered_lock:
        existing = _registered.get(registry)
        if existing is None or _store_of(existing.saver) is not _store_of(saver):
            return False
        registry.unregister(existing)
        del _registered[registry]
        return True


def _store_of(saver: BoundedInMemorySaver | TieredSaver) -> object:
    """The engine store a saver reads (one for a ``TieredSaver`` and its ``with_allowlist()`` copies).
    Runtime complexity: O(1)."""
    return saver._store if isinstance(saver, TieredSaver) else saver.store
