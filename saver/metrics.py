"""Prometheus metrics of a saver, read from ``stats()`` and ``config`` when scraped.

```python
from langgraph.checkpoint.bounded import BoundedInMemorySaver
from langgraph.checkpoint.bounded.metrics import register_metrics

checkpointer = BoundedInMemorySaver()
register_metrics(checkpointer)  # the default registry: what prometheus_client.generate_latest() serves
```

Needs the ``metrics`` extra (``pip install langgraph-checkpoint-bounded[metrics]``). Nothing runs on
the write path: a scrape calls ``stats()`` (O(1)) and reads the config.

Every name starts with ``langgraph_checkpoint_bounded_``:

- gauges of what the store holds: ``threads``, ``namespaces``, ``checkpoints``, ``pending_writes``,
  ``blobs``, ``total_bytes`` (counted serialized bytes), ``memory_bytes`` (the heap estimate),
  ``dropped_thread_records``, ``dropped_thread_record_bytes``, ``refused_checkpoint_records``,
  ``parked_write_records``, ``queued_drops`` and ``queued_drop_bytes`` (dropped threads waiting
  for the hook);
- one gauge per numeric config field, named as the field: ``max_threads``, ``max_total_bytes``,
  ``idle_ttl_seconds``... (``+Inf`` for a lifted limit);
- counters since the saver was created: ``evictions_total{reason=<limit>}``,
  ``expired_threads_total``, ``rejections_total{limit=<limit>}``, ``pruned_checkpoints_total``,
  ``pruned_namespaces_total`` and
  ``drop_hook_errors_total``.

A ``TieredSaver`` exports the same metrics for its hot tier, and ``tiered_*`` ones of its own
(``tiered_info{write,coherence,durable}``, hits, misses and admissions, write-back's flushes, spills,
backpressure waits and their seconds, dirty bytes, the durable tier's calls and errors, coherence checks).

A registry exports one saver: its metric names carry no saver label. Registering the same saver
again (or a ``with_allowlist()`` copy of it, which shares its store) returns the collector already
registered; registering a different one raises ``ValueError``. Give a second saver a
``CollectorRegistry`` of its own.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import fields
from weakref import WeakKeyDictionary

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import REGISTRY, Collector, CollectorRegistry

from .engine import InvalidArgumentError
from .saver import BoundedInMemorySaver
from .tiered import TieredSaver, TieredStats

__all__ = [
    "PREFIX",
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


class SaverCollector(Collector):
    """Reads a saver's ``stats()`` and ``config`` at every scrape.

    Args:
        saver: The saver whose counters it exports.
    """

    def __init__(self, saver: BoundedInMemorySaver | TieredSaver) -> None:
        self.saver = saver

    def collect(self) -> Iterator[Metric]:
        """The metric families of one scrape. Runtime complexity: O(config fields + limits that rejected)."""
        observed = self.saver.stats()
        if isinstance(observed, TieredStats):
            yield from _tiered(observed, self.saver)
            stats = observed.hot
        else:
            stats = observed
        yield _gauge("threads", "Threads stored.", stats.threads)
        yield _gauge("namespaces", "Namespaces stored, over all threads.", stats.namespaces)
        yield _gauge("checkpoints", "Checkpoints stored.", stats.checkpoints)
        yield _gauge("pending_writes", "Pending writes stored.", stats.pending_writes)
        yield _gauge("blobs", "Channel values stored.", stats.blobs)
        yield _gauge(
            "total_bytes", "Serialized payload bytes stored, as max_total_bytes counts them.", stats.total_bytes
        )
        yield _gauge(
            "memory_bytes", "Estimated heap the store holds: payload plus its objects' overhead.", stats.memory_bytes
        )
        yield _gauge("dropped_thread_records", "Evicted or expired threads remembered.", stats.dropped_thread_records)
        yield _gauge("dropped_thread_record_bytes", "Bytes those records hold.", stats.dropped_thread_record_bytes)
        yield _gauge(
            "refused_checkpoint_records",
            "Checkpoints whose put was refused, remembered so that their late writes are refused.",
            stats.refused_checkpoint_records,
        )
        yield _gauge(
            "parked_write_records",
            "Checkpoints of dropped threads whose pending writes wait aside for their put.",
            stats.parked_write_records,
        )
        yield _gauge("queued_drops", "Dropped threads waiting for the on_evict hook.", stats.queued_drops)
        yield _gauge("queued_drop_bytes", "Heap the exports waiting for the hook hold.", stats.queued_drop_bytes)
        yield _labelled_counter(
            "evictions",
            "Threads evicted whole, by the limit that evicted them.",
            "reason",
            {
                "max_threads": stats.evicted_for_threads,
                "max_total_bytes": stats.evicted_for_bytes,
                "max_memory_bytes": stats.evicted_for_memory,
            },
        )
        yield _counter("expired_threads", "Threads removed after idle_ttl_seconds unused.", stats.expired_threads)
        yield _labelled_counter(
            "rejections", "Operations rejected, by the limit they would exceed.", "limit", stats.rejections
        )
        yield _counter("pruned_checkpoints", "Oldest checkpoints dropped by prune_oldest.", stats.pruned_checkpoints)
        yield _counter(
            "pruned_namespaces", "Completed subgraph namespaces dropped by prune_oldest.", stats.pruned_namespaces
        )
        yield _counter("drop_hook_errors", "Exceptions raised by the on_evict hook.", stats.drop_hook_errors)
        yield _counter("autosave_failures", "Autosaves that failed (logged; close() raises).", stats.autosave_failures)
        yield _counter(
            "expiry_sweep_failures", "Background expiry sweeps that failed (logged).", stats.expiry_sweep_failures
        )
        yield from self._settings()

    def _settings(self) -> Iterable[Metric]:
        config = self.saver.config
        for field in fields(config):
            value = getattr(config, field.name)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                yield _gauge(field.name, f"Configured {field.name} (InMemoryCheckpointConfig).", value)


def _tiered(stats: TieredStats, saver: BoundedInMemorySaver | TieredSaver) -> Iterator[Metric]:
    """A tiered saver's own metrics: reads by tier, write-back's flushes and backlog, the durable tier's health."""
    durable = type(saver.durable).__name__ if isinstance(saver, TieredSaver) else ""
    info = GaugeMetricFamily(
        TIERED_PREFIX + "info",
        "The tiered saver's write mode, coherence and durable saver.",
        labels=["write", "coherence", "durable"],
    )
    info.add_metric([stats.write, stats.coherence, durable], 1)
    yield info
    yield _counter("tiered_hits", "Reads the hot tier answered.", stats.hits)
    yield _counter(
        "tiered_misses", "Reads that went to the durable tier (once per key, however many waited).", stats.misses
    )
    yield _counter(
        "tiered_flight_waits", "Reads that waited for another caller's read of the same key.", stats.flight_waits
    )
    yield _counter("tiered_admissions", "Checkpoints a read brought into the hot tier.", stats.admissions)
    yield _counter(
        "tiered_left_out", "Hot writes a store-wide limit refused: the thread left memory, durable.", stats.left_out
    )
    yield _counter(
        "tiered_conflicts", "Conditional puts refused: another process wrote the namespace since.", stats.conflicts
    )
    yield _counter("tiered_oversize", "Writes past a per-item limit stored in the durable tier alone.", stats.oversize)
    yield _gauge("tiered_dirty_threads", "Threads with unflushed writes (write-back).", stats.dirty_threads)
    yield _gauge("tiered_dirty_bytes", "Bytes of unflushed writes (write-back).", stats.dirty_bytes)
    yield _gauge("tiered_max_dirty_bytes", "The bound on tiered_dirty_bytes.", stats.max_dirty_bytes)
    yield _gauge(
        "tiered_oldest_dirty_seconds", "How long the oldest unflushed write has waited.", stats.oldest_dirty_seconds
    )
    yield _gauge("tiered_max_dirty_seconds", "The bound on tiered_oldest_dirty_seconds.", stats.max_dirty_seconds)
    yield _counter("tiered_flushes", "Flushes of a thread that wrote to the durable tier.", stats.flushes)
    yield _counter("tiered_flushed_writes", "Checkpoints and write batches flushed.", stats.flushed_writes)
    yield _counter("tiered_flush_seconds", "Time spent flushing.", stats.flush_seconds)
    yield _counter("tiered_flush_failures", "Flushes the durable tier failed.", stats.flush_failures)
    yield _counter("tiered_spills", "Threads evicted with unflushed writes, flushed then.", stats.spills)
    yield _counter("tiered_spill_seconds", "Time spent flushing evicted threads.", stats.spill_seconds)
    yield _counter(
        "tiered_backpressure_waits",
        "Write-back writes that waited for a flush (max_dirty_bytes).",
        stats.backpressure_waits,
    )
    yield _counter("tiered_backpressure_seconds", "Time writes waited for room.", stats.backpressure_seconds)
    yield _counter("tiered_durable_calls", "Calls made to the durable saver.", stats.durable_calls)
    yield _counter("tiered_durable_errors", "Calls to the durable saver that raised.", stats.durable_errors)
    yield _counter("tiered_validations", "Coherence checks made (coherence='validate').", stats.validations)
    yield _counter("tiered_stale", "Coherence checks that found the hot copy stale.", stats.stale)
    yield _counter("tiered_validation_seconds", "Time spent on coherence checks.", stats.validation_seconds)
    yield _gauge("tiered_deleted_thread_records", "Deleted threads remembered.", stats.deleted_thread_records)
    yield _counter(
        "tiered_unstorable_threads",
        "Threads whose unflushed writes the durable tier kept refusing: dropped, and logged.",
        stats.unstorable_threads,
    )
    yield _counter("tiered_unstorable_writes", "Unflushed writes dropped so.", stats.unstorable_writes)
    yield _labelled_counter(
        "tiered_rejections", "Writes refused before the durable write, by limit.", "limit", stats.rejections
    )
    kept = stats.retention
    yield _counter("tiered_retention_sweeps", "Retention passes run (background and sweep()).", kept.sweeps)
    yield _counter("tiered_retention_sweep_seconds", "Time spent in retention passes.", kept.sweep_seconds)
    yield _counter(
        "tiered_retention_sweep_failures",
        "Retention passes the durable tier failed, plus threads whose removal failed.",
        kept.sweep_failures,
    )
    yield _counter(
        "tiered_retention_deleted_threads", "Threads retention deleted whole (idle past the TTL).", kept.deleted_threads
    )
    yield _counter(
        "tiered_retention_pruned_threads", "Threads retention pruned to their newest checkpoints.", kept.pruned_threads
    )
    yield _counter("tiered_retention_checkpoints", "Checkpoints retention removed.", kept.checkpoints)
    yield _counter("tiered_retention_writes", "Pending writes retention removed with them.", kept.writes)
    yield _counter("tiered_retention_nbytes", "Bytes retention reclaimed in the durable database.", kept.nbytes)
    yield _gauge("tiered_retention_due_threads", "Threads found due and not yet swept.", kept.due_threads)


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(PREFIX + name, documentation, value=value)


def _counter(name: str, documentation: str, value: float) -> CounterMetricFamily:
    """A counter family of one value (exposed as ``<name>_total``)."""
    return CounterMetricFamily(PREFIX + name, documentation, value=value)


def _labelled_counter(name: str, documentation: str, label: str, counts: Mapping[str, float]) -> CounterMetricFamily:
    """A counter family with one value per label value (exposed as ``<name>_total``)."""
    family = CounterMetricFamily(PREFIX + name, documentation, labels=[label])
    for label_value, count in sorted(counts.items()):
        family.add_metric([label_value], count)
    return family


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
