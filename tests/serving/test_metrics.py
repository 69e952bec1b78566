"""langgraph.checkpoint.bounded.metrics: what a scrape shows, under Prometheus names, and registration rules."""

from __future__ import annotations

import math
import re
from dataclasses import fields
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from langgraph.checkpoint.bounded import BoundedInMemorySaver, CheckpointCapacityError, InMemoryCheckpointConfig
from langgraph.checkpoint.bounded.metrics import (
    PREFIX,
    RETENTION_METRICS,
    SAVER_METRICS,
    STATS_NOT_EXPORTED,
    TIERED_METRICS,
    SaverCollector,
    register_metrics,
    unregister_metrics,
)
from langgraph.checkpoint.bounded.saver import SaverStats
from langgraph.checkpoint.bounded.tiered import TieredSaver
from tests.conftest import FakeClock
from tests.support.durable_savers import sqlite_durable
from tests.support.helpers import put


def scraped(saver: BoundedInMemorySaver | TieredSaver) -> CollectorRegistry:
    registry = CollectorRegistry()
    register_metrics(saver, registry)
    return registry


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(PREFIX + name, labels)


def test_a_scrape_shows_what_the_store_holds_and_what_its_limits_did() -> None:
    clock = FakeClock()

    def failing_hook(dropped: object, export: object) -> None:
        raise RuntimeError("archive down")

    saver = BoundedInMemorySaver(
        config=InMemoryCheckpointConfig(
            max_threads=2,
            max_checkpoint_bytes=1_000,
            idle_ttl_seconds=60,
            max_checkpoints_per_thread=10,
            on_checkpoint_limit="prune_oldest",
            on_evict=failing_hook,
        ),
        clock=clock,
    )
    registry = scraped(saver)
    for thread_id in ("a", "b", "c"):  # c evicts a
        put(saver, thread_id, {"n": 1})
    with pytest.raises(CheckpointCapacityError):
        put(saver, "b", {"big": "x" * 2_000})
    parent = None
    for step in range(12):  # two over the limit: the oldest go
        parent = put(saver, "c", {"step": step}, parent=parent, version=f"v{step}")
    clock.advance(61)
    saver.purge_expired()  # b and c expire

    stats = saver.stats()
    assert value(registry, "threads") == stats.threads == 0
    assert value(registry, "checkpoints") == stats.checkpoints
    assert value(registry, "evictions_total", reason="max_threads") == 1
    assert value(registry, "evictions_total", reason="max_total_bytes") == 0
    assert value(registry, "rejections_total", limit="max_checkpoint_bytes") == 1
    assert value(registry, "expired_threads_total") == 2
    assert value(registry, "pruned_checkpoints_total") == stats.pruned_checkpoints > 0
    assert value(registry, "drop_hook_errors_total") == 3
    assert value(registry, "dropped_thread_records") == 3
    assert value(registry, "dropped_thread_record_bytes") == stats.dropped_thread_record_bytes > 0


def test_a_scrape_follows_the_store_without_touching_the_write_path() -> None:
    saver = BoundedInMemorySaver()
    registry = scraped(saver)
    assert value(registry, "threads") == 0
    put(saver, "t", {"doc": "x" * 100})
    assert value(registry, "threads") == 1
    assert value(registry, "total_bytes") == saver.stats().total_bytes > 100
    assert "put" not in vars(saver)  # no method of the saver was wrapped


def test_every_numeric_setting_is_a_gauge_named_as_the_field() -> None:
    config = InMemoryCheckpointConfig(max_threads=7, max_total_bytes=math.inf, idle_ttl_seconds=90.5)
    registry = scraped(BoundedInMemorySaver(config=config))
    for field in fields(config):
        setting = getattr(config, field.name)
        if isinstance(setting, (int, float)) and not isinstance(setting, bool):
            assert value(registry, field.name) == setting, field.name
    assert "langgraph_checkpoint_bounded_max_total_bytes +Inf" in generate_latest(registry).decode()


class FixedStats:
    """A saver whose stats() returns given numbers."""

    def __init__(self, stats: SaverStats) -> None:
        self._stats = stats
        self.config = InMemoryCheckpointConfig()
        self.store = object()

    def stats(self) -> SaverStats:
        return self._stats


def test_every_stats_field_is_exported_or_said_not_to_be() -> None:
    # Each numeric field gets a distinct odd number; each must appear as a sample value.
    numbers = {field.name: 1_001 + 2 * index for index, field in enumerate(fields(SaverStats))}
    stats = SaverStats(**{**numbers, "rejections": {"max_threads": numbers["rejections"]}})
    registry = CollectorRegistry()
    registry.register(SaverCollector(FixedStats(stats)))  # type: ignore[arg-type]
    exported = {
        sample.value
        for family in text_string_to_metric_families(generate_latest(registry).decode())
        for sample in family.samples
    }
    missing = [name for name, number in numbers.items() if number not in exported and name not in STATS_NOT_EXPORTED]
    assert missing == [], "add a metric line to SaverCollector.collect for each"
    assert set(STATS_NOT_EXPORTED) <= set(numbers)


def test_names_follow_prometheus_conventions() -> None:
    saver = BoundedInMemorySaver(config=InMemoryCheckpointConfig(max_threads=1))
    put(saver, "a", {"n": 1})
    put(saver, "b", {"n": 1})
    families = list(text_string_to_metric_families(generate_latest(scraped(saver)).decode()))
    assert families and all(family.name.startswith(PREFIX) for family in families)
    for family in families:
        assert family.documentation
        for sample in family.samples:
            if family.type == "counter":
                assert sample.name.endswith("_total")
            else:
                assert not sample.name.endswith("_total")


def test_registering_the_same_saver_twice_is_harmless() -> None:
    saver = BoundedInMemorySaver()
    registry = CollectorRegistry()
    first = register_metrics(saver, registry)
    assert register_metrics(saver, registry) is first
    assert register_metrics(saver.with_allowlist([("a", "B")]), registry) is first  # a copy sharing the store
    put(saver, "t", {"n": 1})
    assert registry.get_sample_value(PREFIX + "threads") == 1


def test_a_second_saver_needs_a_registry_of_its_own() -> None:
    registry = CollectorRegistry()
    first, second = BoundedInMemorySaver(), BoundedInMemorySaver()
    register_metrics(first, registry)
    with pytest.raises(ValueError, match="registry of its own"):
        register_metrics(second, registry)
    register_metrics(second, CollectorRegistry())
    assert unregister_metrics(second, registry) is False
    assert unregister_metrics(first, registry) is True
    register_metrics(second, registry)
    put(second, "t", {"n": 1})
    assert registry.get_sample_value(PREFIX + "threads") == 1


REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "metrics.md"
DOCUMENTED_ROW = re.compile(r"^\| `(?P<name>" + PREFIX + r"[a-z_<>]+)(?:\{[a-z_,]+\})?` \| (?P<kind>gauge|counter) \|")


def documented_metrics() -> dict[str, str]:
    """The metric tables of docs/reference/metrics.md: family name (a counter's without ``_total``) to type."""
    documented: dict[str, str] = {}
    for line in REFERENCE.read_text().splitlines():
        row = DOCUMENTED_ROW.match(line)
        if row:
            name = row["name"].removesuffix("_total") if row["kind"] == "counter" else row["name"]
            assert name not in documented, f"{name} is documented twice"
            documented[name] = row["kind"]
    return documented


def test_the_reference_documents_every_metric_exported_and_nothing_else(tmp_path: Path) -> None:
    saver = TieredSaver(sqlite_durable(tmp_path / "m.db"))  # the tiered saver exports every table's metrics
    try:
        families = list(text_string_to_metric_families(generate_latest(scraped(saver)).decode()))
    finally:
        saver.close()
    settings = {PREFIX + field.name for field in fields(saver.config)}
    exported = {family.name: family.type for family in families if family.name not in settings}
    documented = documented_metrics()
    assert documented.pop(PREFIX + "<field>") == "gauge"  # the settings' row stands for one gauge per field
    assert exported == documented  # same names, same types: a new row in a table needs its line in the reference
    tables = {PREFIX + row.name: row.kind for row in (*SAVER_METRICS, *TIERED_METRICS, *RETENTION_METRICS)}
    assert tables.items() <= exported.items()
