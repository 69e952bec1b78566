"""``TieredSaver``'s public face (issue 33): seven parameters, write-back's settings in ``WriteBack``, several
processes in ``WriteThrough(processes="many")``, internals private, and what a new user sets that means nothing
refused or warned about at construction, naming the field."""

from __future__ import annotations

import inspect
import math
import warnings
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver as StockSaver

from langgraph.checkpoint.bounded import (
    BoundedInMemorySaver,
    BoundedSaverError,
    InMemoryCheckpointConfig,
    InvalidArgumentError,
    RetentionPolicy,
    TieredSaver,
    WriteBack,
    WriteThrough,
)
from tests.support.durable_savers import sqlite_durable


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "durable.sqlite"


# --- the signature ---------------------------------------------------------------------------------------------------


def test_the_signature_is_seven_keywords_after_the_durable_saver() -> None:
    parameters = inspect.signature(TieredSaver).parameters
    assert list(parameters) == ["durable", "config", "write", "oversize", "retention", "clock", "wall_clock"]
    assert all(
        parameter.kind is inspect.Parameter.KEYWORD_ONLY for name, parameter in parameters.items() if name != "durable"
    )


def test_the_internals_are_off_the_public_face(db: Path) -> None:
    """``store``, ``hot`` and ``durable_sides`` were public "for metrics and tests"; ``coherence``,
    ``conditional_writes`` and ``flush_interval_seconds`` described arguments that are gone."""
    tiered = TieredSaver(sqlite_durable(db))
    for name in ("store", "hot", "durable_sides", "coherence", "conditional_writes", "flush_interval_seconds"):
        assert not hasattr(tiered, name), name
    assert tiered._store is tiered._hot.store and "sync" in tiered._durable_sides


@pytest.mark.parametrize(
    ("write", "policy", "processes"),
    [
        ("through", WriteThrough(), "one"),
        ("back", WriteBack(), "one"),
        (WriteBack(flush_interval_seconds=math.inf), WriteBack(flush_interval_seconds=math.inf), "one"),
        (WriteThrough(processes="many"), WriteThrough(processes="many"), "many"),
    ],
)
def test_write_takes_a_shorthand_or_a_policy(db: Path, write: object, policy: object, processes: str) -> None:
    tiered = TieredSaver(sqlite_durable(db), write=write)  # type: ignore[arg-type]
    assert tiered.write == policy and tiered.processes == processes
    assert repr(policy) in repr(tiered)


def test_write_back_settings_reach_the_paths(db: Path) -> None:
    tiered = TieredSaver(sqlite_durable(db), write=WriteBack(flush_interval_seconds=2.0, max_dirty_bytes=1_000))
    settings = tiered._shared.settings
    assert (settings.write, settings.flush_interval_seconds, settings.max_dirty_bytes) == ("back", 2.0, 1_000)
    assert settings.max_dirty_seconds == 2.0  # None: the flush interval
    tiered.close()
    many = TieredSaver(sqlite_durable(db), write=WriteThrough(processes="many"))._shared.settings
    assert (many.coherence, many.conditional_writes) == ("validate", True)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: WriteBack(flush_interval_seconds=0), "flush_interval_seconds must be a positive number"),
        (lambda: WriteBack(max_dirty_bytes=-1), "max_dirty_bytes must be a positive number"),
        (lambda: WriteBack(max_dirty_seconds=math.nan), "max_dirty_seconds must be a positive number"),
        (lambda: WriteBack(flush_interval_seconds=True), "flush_interval_seconds must be a positive number"),
        (lambda: WriteThrough(processes="several"), "processes must be one of ('one', 'many')"),
    ],
)
def test_write_policies_refuse_a_bad_value_naming_the_field(build: object, message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build()  # type: ignore[operator]


def test_write_back_settings_cannot_be_given_with_write_through(db: Path) -> None:
    """``TieredSaver(durable, flush_interval_seconds=...)`` with write-through was accepted and meant nothing."""
    with pytest.raises(TypeError):
        TieredSaver(sqlite_durable(db), flush_interval_seconds=0.5)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        WriteThrough(flush_interval_seconds=0.5)  # type: ignore[call-arg]


# --- what is not durable --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["bounded", "tiered"])
def test_a_saver_that_does_not_persist_is_refused_as_the_durable_tier(db: Path, kind: str) -> None:
    """A BoundedInMemorySaver evicts threads (a tiered saver over it lost them in silence); another TieredSaver
    holds each thread twice in memory. Both were accepted."""
    durable = BoundedInMemorySaver() if kind == "bounded" else TieredSaver(sqlite_durable(db))
    with pytest.raises(InvalidArgumentError, match=r"durable must be a saver that persists .*got a (Bounded|Tiered)"):
        TieredSaver(durable)


def test_langgraphs_in_memory_saver_as_the_durable_tier_is_warned_about() -> None:
    with pytest.warns(UserWarning, match="durable tier is an InMemorySaver: nothing survives the process"):
        TieredSaver(StockSaver())


# --- retention -----------------------------------------------------------------------------------------------------


def test_an_empty_retention_policy_is_refused() -> None:
    """``RetentionPolicy()`` was accepted and swept for nothing."""
    with pytest.raises(InvalidArgumentError, match=r"RetentionPolicy\(\) removes nothing: set idle_ttl_seconds"):
        RetentionPolicy()
    with pytest.raises(InvalidArgumentError, match="removes nothing"):
        RetentionPolicy(strategy="keep_latest", sweep_interval_seconds=60)
    assert RetentionPolicy(keep_last=5).keep_last == 5 and RetentionPolicy(idle_ttl_seconds=60).keep_last is None


def test_a_retention_ttl_shorter_than_the_hot_tiers_is_warned_about(db: Path) -> None:
    hot = InMemoryCheckpointConfig(idle_ttl_seconds=3_600)
    with pytest.warns(UserWarning, match=r"retention.idle_ttl_seconds=60 is shorter than config.idle_ttl_seconds=3600"):
        TieredSaver(sqlite_durable(db), config=hot, retention=RetentionPolicy(idle_ttl_seconds=60))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        TieredSaver(sqlite_durable(db), config=hot, retention=RetentionPolicy(idle_ttl_seconds=3_600))
        TieredSaver(sqlite_durable(db), config=hot, retention=RetentionPolicy(keep_last=5))


# --- byte limits no checkpoint fits in -------------------------------------------------------------------------------


@pytest.mark.parametrize("field", ["max_checkpoint_bytes", "max_total_bytes", "max_memory_bytes"])
def test_a_byte_limit_no_checkpoint_fits_in_is_refused(field: str) -> None:
    """``max_total_bytes=10`` was accepted, and every write was then refused."""
    with pytest.raises(InvalidArgumentError, match=f"{field} must be at least 128 bytes, got 10"):
        InMemoryCheckpointConfig(**{field: 10})
    assert getattr(InMemoryCheckpointConfig(**{field: 128}), field) == 128


def test_the_smallest_checkpoint_fits_the_minimum() -> None:
    """The minimum is below what an empty LangGraph checkpoint counts, so it refuses only what nothing fits in."""
    from langgraph.checkpoint.base import empty_checkpoint

    saver = BoundedInMemorySaver()
    saver.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, empty_checkpoint(), {}, {})
    assert saver.stats().total_bytes > 128


def test_every_refusal_here_is_one_except_away(db: Path) -> None:
    for build in (
        RetentionPolicy,
        lambda: WriteBack(flush_interval_seconds=-1),
        lambda: InMemoryCheckpointConfig(max_total_bytes=10),
        lambda: TieredSaver(BoundedInMemorySaver()),
        lambda: TieredSaver(sqlite_durable(db), write="sideways"),  # type: ignore[arg-type]
    ):
        with pytest.raises(BoundedSaverError):
            build()
