"""What a user reads of a saver: its stats (readable, and the tiered saver's without the hot tier's
internals), and the line a server logs at start-up with the limits that took effect."""

from __future__ import annotations

import logging

import pytest
from langgraph.checkpoint.memory import InMemorySaver as StockSaver

from langgraph.checkpoint.bounded import BoundedInMemorySaver, InMemoryCheckpointConfig, TieredSaver
from langgraph.checkpoint.bounded.serving import checkpointer, shared_saver
from tests.support.helpers import put


def a_saver_that_evicted() -> BoundedInMemorySaver:
    saver = BoundedInMemorySaver(config=InMemoryCheckpointConfig(max_threads=2, max_checkpoint_bytes=2_000))
    for thread_id in "abcd":
        put(saver, thread_id, {"text": "x" * 500})
    with pytest.raises(Exception, match="max_checkpoint_bytes"):
        put(saver, "e", {"text": "x" * 5_000})
    return saver


# --- TieredStats.hot: the hot tier's one-record tombstones are internal ----------------------------------------------


@pytest.mark.parametrize("write", ["through", "back"])
def test_the_tiered_stats_do_not_show_the_hot_tier_s_internal_tombstones(write: str) -> None:
    durable = StockSaver()
    with TieredSaver(durable, config=InMemoryCheckpointConfig(max_threads=1), write=write) as tiered:  # type: ignore[arg-type]
        for thread_id in "abc":
            put(tiered, thread_id, {"n": 1})  # type: ignore[arg-type]
        stats = tiered.stats()
        assert stats.hot.evicted_threads == 2 and stats.hot.threads == 1
        assert stats.hot.dropped_thread_records == 0 and stats.hot.dropped_thread_record_bytes == 0
        assert tiered._hot.stats().evicted_threads == 2  # the hot saver itself still counts what it did


# --- a readable form ------------------------------------------------------------------------------------------------


def test_the_stats_print_as_short_lines_that_say_what_each_number_is() -> None:
    stats = a_saver_that_evicted().stats()
    text = str(stats)
    lines = text.splitlines()
    assert len(lines) >= 8 and max(map(len, lines)) <= 100, text
    assert "2 threads: 2 namespaces, 2 checkpoints" in text
    assert "of max_total_bytes 64 MiB" in text and "max_memory_bytes none" in text
    assert "2 evicted (2 for max_threads), 0 expired" in text
    assert "2 dropped threads" in text and "1 for max_checkpoint_bytes" in text
    assert "0 autosave failures" in text
    assert repr(stats).startswith("SaverStats(threads=2,")  # the dataclass's own form stays


def test_the_tiered_stats_print_their_lines_then_the_hot_tier_s_indented() -> None:
    with TieredSaver(StockSaver(), config=InMemoryCheckpointConfig(max_threads=1)) as tiered:
        for thread_id in "ab":
            put(tiered, thread_id, {"n": 1})  # type: ignore[arg-type]
        text = str(tiered.stats())
    lines = text.splitlines()
    assert max(map(len, lines)) <= 100, text
    assert lines[0].split() == ["tiers", "write=through,", "coherence=sticky"]
    hot = lines[lines.index("hot tier:") + 1 :]
    assert hot and all(line.startswith("  ") for line in hot)
    assert any("1 evicted (1 for max_threads)" in line for line in hot)
    assert "durable" in text and "2 calls, 0 errors" in text


# --- the start-up line under the serving factory ---------------------------------------------------------------------


async def test_the_memory_saver_logs_the_limits_that_took_effect_at_start_up(
    environment: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    environment.setenv("BOUNDED_SAVER_MAX_THREADS", "500")
    environment.setenv("BOUNDED_SAVER_DROPPED_THREAD_QUARANTINE_SECONDS", "600")
    environment.setenv("BOUNDED_SAVER_SNAPSHOT_KEY", "a secret the log must not show")
    with caplog.at_level(logging.INFO, logger="langgraph.checkpoint.bounded.serving"):
        async with checkpointer() as saver:
            assert saver is shared_saver()
    lines = [record.getMessage() for record in caplog.records if "memory-only saver" in record.getMessage()]
    assert len(lines) == 1, caplog.text
    line = lines[0]
    for setting in (
        "max_threads=500",  # from the environment
        "dropped_thread_quarantine_seconds=600",
        "idle_ttl_seconds=14_400",  # defaults
        "max_total_bytes=67_108_864",
        "max_memory_bytes=inf",
        "eviction_grace_seconds=0",
        "snapshot_key=set",
    ):
        assert setting in line, (setting, line)
    assert "a secret" not in caplog.text
