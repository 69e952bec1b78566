"""One test per row of the contract's table; every rejection must change nothing."""

from __future__ import annotations

import math
import uuid

import pytest
from langgraph.checkpoint.memory import InMemorySaver as StockSaver

from langgraph.checkpoint.bounded import BoundedInMemorySaver, CheckpointCapacityError, InMemoryCheckpointConfig
from langgraph.checkpoint.bounded.engine import KIB
from tests.conftest import FakeClock, make_saver
from tests.support.helpers import config, fingerprint, make_checkpoint, put

BLOB = "x" * 1_000  # a channel value of about 1 KB once serialized


def rejected(saver: BoundedInMemorySaver, limit: str, action, *args, **kwargs) -> CheckpointCapacityError:
    """Run an action that must be rejected for ``limit``, and prove it changed nothing."""
    before = fingerprint(saver.store)
    rejections_before = saver.stats().rejections.get(limit, 0)
    with pytest.raises(CheckpointCapacityError) as info:
        action(*args, **kwargs)
    assert info.value.limit == limit
    assert fingerprint(saver.store) == before, "a rejected operation changed the store"
    assert saver.stats().rejections[limit] == rejections_before + 1
    saver.check()
    return info.value


# --- idle_ttl_seconds -----------------------------------------------------------------


def test_idle_threads_expire_whole_on_a_later_operation(clock: FakeClock) -> None:
    saver = make_saver(clock, idle_ttl_seconds=60)
    first = put(saver, "idle", {"a": 1})
    put(saver, "idle", {"a": 2}, parent=first, namespace="child:1")
    clock.advance(30)
    put(saver, "busy", {"a": 1})
    clock.advance(30)  # "idle" has now been unused for 60 s, "busy" for 30 s
    assert saver.get_tuple(config("busy")) is not None
    assert saver.get_tuple(config("idle")) is None
    assert saver.get_tuple(config("idle", "child:1")) is None
    stats = saver.stats()
    assert (stats.threads, stats.expired_threads) == (1, 1)
    saver.check()


def test_purge_expired_counts_and_reads_refresh_idle_time(clock: FakeClock) -> None:
    saver = make_saver(clock, idle_ttl_seconds=100)
    for name in ("a", "b", "c"):
        put(saver, name, {"v": name})
    clock.advance(90)
    assert saver.get_tuple(config("b")) is not None  # a read is a use
    clock.advance(20)
    assert saver.purge_expired() == 2
    assert [t.config["configurable"]["thread_id"] for t in saver.list(None)] == ["b"]
    clock.advance(100)
    assert saver.purge_expired() == 1
    assert saver.stats().expired_threads == 3
    assert saver.stats().total_bytes == 0
    saver.check()


# --- max_threads ------------------------------------------------------------------------


def test_a_new_thread_evicts_the_least_recently_used_whole(clock: FakeClock) -> None:
    saver = make_saver(clock, max_threads=2)
    put(saver, "old", {"a": 1}, namespace="")
    put(saver, "old", {"a": 1}, namespace="sub:1")
    put(saver, "recent", {"a": 1})
    saver.get_tuple(config("old"))  # "old" is now the most recently used
    put(saver, "new", {"a": 1})
    assert saver.get_tuple(config("recent")) is None
    assert saver.get_tuple(config("old")) is not None
    assert saver.get_tuple(config("old", "sub:1")) is not None
    stats = saver.stats()
    assert (stats.threads, stats.evicted_threads, stats.evicted_for_threads) == (2, 1, 1)
    saver.check()


def test_writes_to_a_new_thread_count_against_max_threads(clock: FakeClock) -> None:
    saver = make_saver(clock, max_threads=1)
    put(saver, "a", {"v": 1})
    saver.put_writes(config("b", checkpoint_id="x"), [("ch", 1)], "task")
    assert saver.stats().threads == 1
    assert saver.get_tuple(config("a")) is None
    saver.check()


# --- max_namespaces_per_thread -----------------------------------------------------------


def test_an_additional_namespace_is_rejected(clock: FakeClock) -> None:
    saver = make_saver(clock, max_namespaces_per_thread=2)
    put(saver, "t", {"a": 1}, namespace="")
    put(saver, "t", {"a": 1}, namespace="sub:1")
    error = rejected(saver, "max_namespaces_per_thread", put, saver, "t", {"a": 1}, namespace="sub:2")
    assert (error.limit_value, error.needed, error.thread_id) == (2, 3, "t")
    rejected(
        saver,
        "max_namespaces_per_thread",
        saver.put_writes,
        config("t", "sub:3", "some-checkpoint"),
        [("ch", 1)],
        "task",
    )
    put(saver, "t", {"a": 2}, namespace="sub:1")  # existing namespaces still take writes
    put(saver, "other", {"a": 1}, namespace="sub:9")  # the limit is per thread


# --- max_checkpoints_per_thread ------------------------------------------------------------


def test_an_additional_checkpoint_is_rejected_counting_all_namespaces(clock: FakeClock) -> None:
    saver = make_saver(clock, max_checkpoints_per_thread=3)
    parent = put(saver, "t", {"a": 1})
    parent = put(saver, "t", {"a": 2}, parent=parent)
    put(saver, "t", {"a": 1}, namespace="sub:1")
    error = rejected(saver, "max_checkpoints_per_thread", put, saver, "t", {"a": 3}, parent=parent)
    assert (error.limit_value, error.needed) == (3, 4)
    # storing an existing checkpoint again replaces it and is not "additional"
    latest = saver.get_tuple(parent)
    saver.put(config("t"), latest.checkpoint, latest.metadata, {})
    assert saver.stats().checkpoints == 3
    saver.check()


# --- max_checkpoint_bytes --------------------------------------------------------------------


def test_the_whole_state_of_a_checkpoint_counts_not_only_new_values(clock: FakeClock) -> None:
    saver = make_saver(clock, max_checkpoint_bytes=5 * KIB)
    base = make_checkpoint({"big": BLOB * 3, "small": 1})
    stored = saver.put(config("t"), base, {}, dict(base["channel_versions"]))
    # The next checkpoint changes only "small" but still references "big" (3 KB) and
    # adds a 3 KB "other": its state is over 5 KiB although its new values are 3 KB.
    follow = make_checkpoint({"big": BLOB * 3, "small": 2, "other": BLOB * 3}, {"big": 1, "small": 2, "other": 1})
    error = rejected(saver, "max_checkpoint_bytes", saver.put, stored, follow, {}, {"small": 2, "other": 1})
    assert error.needed > 6_000 and error.limit_value == 5 * KIB
    fine = make_checkpoint({"big": BLOB * 3, "small": 2}, {"big": 1, "small": 2})
    saver.put(stored, fine, {}, {"small": 2})
    saver.check()


# --- max_pending_write_bytes -----------------------------------------------------------------


def test_an_oversized_write_batch_is_rejected_before_anything_changes(clock: FakeClock) -> None:
    saver = make_saver(clock, max_pending_write_bytes=4 * KIB)
    stored = put(saver, "t", {"a": 1})
    saver.put_writes(stored, [("a", BLOB), ("b", BLOB)], "task-1")
    batch = [("a", BLOB), ("b", BLOB), ("c", BLOB), ("d", BLOB), ("e", BLOB)]
    error = rejected(saver, "max_pending_write_bytes", saver.put_writes, stored, batch, "task-2")
    assert error.needed > 5_000
    # nor on a thread that does not exist yet
    rejected(saver, "max_pending_write_bytes", saver.put_writes, config("new", checkpoint_id="c"), batch, "task")
    assert len(saver.get_tuple(stored).pending_writes) == 2


# --- max_total_bytes ----------------------------------------------------------------------------


def test_total_bytes_evict_least_recently_used_threads_first(clock: FakeClock) -> None:
    saver = make_saver(clock, max_total_bytes=10 * KIB)
    for name in ("a", "b", "c", "d"):
        put(saver, name, {"v": BLOB * 2})  # about 2 KB each
    saver.get_tuple(config("a"))
    put(saver, "e", {"v": BLOB * 4})  # needs about 4 KB more: evicts b and c, not a
    assert [saver.get_tuple(config(n)) is not None for n in "abcde"] == [True, False, False, True, True]
    stats = saver.stats()
    assert stats.evicted_for_bytes == 2 and stats.total_bytes <= 10 * KIB
    saver.check()


def test_a_thread_too_big_for_the_store_is_rejected_without_evicting_anyone(clock: FakeClock) -> None:
    saver = make_saver(clock, max_total_bytes=10 * KIB)
    for name in ("a", "b", "c"):
        put(saver, name, {"v": BLOB * 2})
    parent = put(saver, "grows", {"v": BLOB * 3})
    # "grows" holds 3 KB; another 8 KB could only fit if it evicted itself
    error = rejected(saver, "max_total_bytes", put, saver, "grows", {"w": BLOB * 8}, parent=parent)
    assert error.needed > 10 * KIB and error.thread_id == "grows"
    assert saver.stats().threads == 4


# --- max_identifier_length -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "make_call"),
    [
        ("thread_id", lambda s, long: put(s, long, {"a": 1})),
        ("checkpoint_ns segment", lambda s, long: put(s, "t", {"a": 1}, namespace=f"sub:{long}")),
        ("checkpoint_id", lambda s, long: s.put_writes(config("t", checkpoint_id=long), [("a", 1)], "task")),
        ("task_id", lambda s, long: s.put_writes(config("t", checkpoint_id="c"), [("a", 1)], long)),
        ("channel", lambda s, long: s.put_writes(config("t", checkpoint_id="c"), [(long, 1)], "task")),
        ("channel", lambda s, long: put(s, "t", {long: 1})),
    ],
)
def test_oversized_identifiers_are_rejected_naming_the_field(saver, field, make_call) -> None:
    put(saver, "t", {"a": 1})
    before = fingerprint(saver.store)
    with pytest.raises(ValueError, match=field) as info:
        make_call(saver, "x" * 10_000)
    assert "max_identifier_length" in str(info.value)
    assert fingerprint(saver.store) == before


@pytest.mark.parametrize("bad", ["", "tab\there", "nul\x00", "line\nbreak"])
def test_empty_and_unprintable_thread_ids_are_rejected(saver, bad) -> None:
    with pytest.raises(ValueError, match="thread_id"):
        put(saver, bad, {"a": 1})
    assert saver.stats().threads == 0


def test_deep_namespaces_apply_the_length_limit_per_segment(saver) -> None:
    segment = "node:" + str(uuid.uuid4())
    deep = "|".join([segment] * 20)  # 20 nested subgraphs, about 800 characters in all
    put(saver, "t", {"a": 1}, namespace=deep)
    assert saver.get_tuple(config("t", deep)) is not None
    too_deep = "|".join([segment] * 40)
    with pytest.raises(ValueError, match="max_namespace_depth"):
        put(saver, "t", {"a": 1}, namespace=too_deep)


# --- the error and the config ------------------------------------------------------------------------


def test_capacity_error_says_which_limit_its_value_and_the_need() -> None:
    error = CheckpointCapacityError("max_total_bytes", 1024, 4096, thread_id="t")
    assert (error.limit, error.limit_value, error.needed, error.thread_id) == ("max_total_bytes", 1024, 4096, "t")
    assert "max_total_bytes" in str(error) and "1,024" in str(error) and "4,096" in str(error)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_threads", 0),
        ("max_threads", -1),
        ("max_threads", True),
        ("max_threads", 2.5),
        ("max_total_bytes", math.nan),
        ("idle_ttl_seconds", 0),
        ("idle_ttl_seconds", math.nan),
        ("idle_ttl_seconds", "1h"),
        ("max_identifier_length", None),
    ],
)
def test_config_rejects_nonsense_naming_the_field(field, value) -> None:
    with pytest.raises(ValueError, match=field):
        InMemoryCheckpointConfig(**{field: value})


def test_config_is_frozen_and_accepts_infinity_to_lift_a_limit() -> None:
    config_ = InMemoryCheckpointConfig(max_threads=math.inf, idle_ttl_seconds=0.5)
    with pytest.raises(AttributeError):
        config_.max_threads = 3  # type: ignore[misc]
    assert InMemoryCheckpointConfig().max_total_bytes == 64 * 1024 * 1024


def test_defaults_are_the_reference_contract() -> None:
    defaults = InMemoryCheckpointConfig()
    assert (
        defaults.idle_ttl_seconds,
        defaults.max_threads,
        defaults.max_namespaces_per_thread,
        defaults.max_checkpoints_per_thread,
        defaults.max_checkpoint_bytes,
        defaults.max_pending_write_bytes,
        defaults.max_total_bytes,
        defaults.max_identifier_length,
    ) == (4 * 3600, 1000, 16, 1000, 1024**2, 512 * 1024, 64 * 1024**2, 256)


# --- reads never create ------------------------------------------------------------------------------


def test_reads_of_unknown_threads_create_nothing(saver) -> None:
    put(saver, "known", {"a": 1})
    before = fingerprint(saver.store)
    assert saver.get_tuple(config("unknown")) is None
    assert saver.get_tuple(config("known", "no-such-ns")) is None
    assert saver.get_tuple(config("known", checkpoint_id="no-such-id")) is None
    assert list(saver.list(config("unknown"))) == []
    assert saver.get_delta_channel_history(config=config("unknown"), channels=["a"]) == {"a": {"writes": []}}
    assert fingerprint(saver.store) == before
    stock = StockSaver()
    stock.get_tuple(config("unknown"))
    assert "unknown" in stock.storage  # the stock saver's read created an entry


def test_thread_ids_are_normalized_like_persistent_savers(saver) -> None:
    as_uuid = uuid.uuid4()
    put(saver, 7, {"a": 1})
    put(saver, as_uuid, {"a": 1})
    assert saver.get_tuple(config("7")).config["configurable"]["thread_id"] == "7"
    assert saver.get_tuple(config(str(as_uuid))) is not None
    for bad in (None, 1.5, b"bytes", ["list"], True):
        with pytest.raises(ValueError, match="thread_id"):
            saver.get_tuple(config(bad))


# --- expiry in the background ----------------------------------------------------------------------


def wait_for(condition, seconds: float = 10.0) -> bool:
    """Poll until ``condition()`` holds or the deadline passes (a deadline, not a timing)."""
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.005)
    return condition()


def test_a_background_sweep_removes_expired_threads_until_closed(clock: FakeClock) -> None:
    saver = BoundedInMemorySaver(
        config=InMemoryCheckpointConfig(idle_ttl_seconds=60, purge_interval_seconds=0.01), clock=clock
    )
    for name in ("a", "b", "c"):
        put(saver, name, {"v": 1})
    clock.advance(61)
    assert wait_for(lambda: saver.stats().expired_threads == 3), "the sweep never ran"
    saver.close()
    put(saver, "d", {"v": 1})
    clock.advance(61)
    assert not wait_for(lambda: saver.stats().expired_threads == 4, seconds=0.2), "the sweep outlived close()"
    saver.resume()
    saver.resume()  # idempotent: one sweep
    assert wait_for(lambda: saver.stats().expired_threads == 4)
    saver.close()
    saver.check()


def test_an_infinite_autosave_interval_saves_only_on_close(tmp_path) -> None:
    path = tmp_path / "store.snapshot"
    saver = BoundedInMemorySaver(
        config=InMemoryCheckpointConfig(autosave_path=str(path), autosave_interval_seconds=math.inf)
    )
    put(saver, "t", {"v": 1})
    assert not path.exists()
    saver.close()
    assert BoundedInMemorySaver.load(path).store.thread_ids() == ["t"]


@pytest.mark.parametrize("value", [0, -1, True, math.nan, "1s"])
def test_the_sweep_interval_is_validated(value) -> None:
    with pytest.raises(ValueError, match="purge_interval_seconds"):
        InMemoryCheckpointConfig(purge_interval_seconds=value)
