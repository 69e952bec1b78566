"""The deliberate copies on the write path agree with the functions they copy.

Each copy is labelled where it stands ("the rule of identifiers.check_identifier, inline",
"locations.locate's fast path, inline"). Here the same identifiers, versions, limits and configs
go through every copy and through the original, and must be accepted or refused alike; and
``put`` and ``put_writes``, which deliver dropped threads as ``announcing.announces`` does but written
out by hand, deliver the same drops as their bodies under that wrapper.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from typing import Any

import pytest

from langgraph.checkpoint.bounded import (
    BoundedInMemorySaver,
    CheckpointCapacityError,
    InMemoryCheckpointConfig,
    announcing,
)
from langgraph.checkpoint.bounded.engine import CheckpointRecord, Store, StoreLimits, WriteRecord, identifiers
from langgraph.checkpoint.bounded.locations import locate
from tests.conftest import FakeClock
from tests.support.helpers import config, make_checkpoint


class Text(str):
    """A str subclass: the inline rule refuses it (its hash or comparison could be anything)."""


LIMITS = StoreLimits(max_identifier_length=8)
IDENTIFIERS: list[Any] = [
    "a",
    "12345678",  # at the length limit
    "123456789",  # one past it
    "",
    "tab\there",
    "new\nline",
    "\x00",
    "caf\u00e9",
    "\ud800",  # a lone surrogate
    " ",
    Text("sub"),
    7,
    None,
    b"bytes",
    1.5,
]


def check_identifier_accepts(value: Any) -> bool:
    """The original rule, with the inline copies' one addition: exactly ``str``."""
    try:
        identifiers.check_identifier("field", value, LIMITS)
    except ValueError:
        return False
    return type(value) is str


def accepted(call: Any) -> bool:
    try:
        call()
    except ValueError:
        return False
    return True


def record(checkpoint_id: Any, parent_id: Any = None, versions: dict[str, Any] | None = None) -> CheckpointRecord:
    return CheckpointRecord.of(checkpoint_id, parent_id, ("json", b"{}"), ("json", b"{}"), versions or {})


@pytest.mark.parametrize("value", IDENTIFIERS, ids=repr)
def test_a_new_checkpoint_id_is_checked_as_check_identifier_does(value: Any) -> None:
    store = Store(LIMITS)
    assert accepted(lambda: store.put_checkpoint("t", "", record(value), {})) == check_identifier_accepts(value)


@pytest.mark.parametrize("value", IDENTIFIERS, ids=repr)
def test_a_parent_id_is_checked_as_check_identifier_does(value: Any) -> None:
    store = Store(LIMITS)
    assert accepted(lambda: store.put_checkpoint("t", "", record("c1", value), {})) == (
        value is None or check_identifier_accepts(value)
    )


@pytest.mark.parametrize("value", IDENTIFIERS, ids=repr)
def test_a_writes_checkpoint_id_is_checked_as_check_identifier_does(value: Any) -> None:
    store = Store(LIMITS)
    write = WriteRecord.of("task", 0, "c", ("json", b"1"))
    assert accepted(lambda: store.put_writes("t", "", value, [write])) == check_identifier_accepts(value)


@pytest.mark.parametrize("value", IDENTIFIERS, ids=repr)
def test_a_task_id_is_checked_as_check_identifier_does(value: Any) -> None:
    store = Store(LIMITS)
    write = WriteRecord.of(value, 0, "c", ("json", b"1"))
    assert accepted(lambda: store.put_writes("t", "", "c1", [write])) == check_identifier_accepts(value)


NUMBERS: list[Any] = [
    3,
    -1,
    2.5,
    True,
    float("nan"),
    float("inf"),
    -float("inf"),
    2**64 - 1,
    2**64,
    -(2**63),
    -(2**63) - 1,
]


@pytest.mark.parametrize("value", [*IDENTIFIERS, *NUMBERS], ids=repr)
def test_a_new_blob_version_is_checked_as_check_version_does(value: Any) -> None:
    store = Store(LIMITS)
    expected = accepted(lambda: identifiers.check_version("c", value, LIMITS)) and type(value) in (str, int, float)
    new = record("c1", None, {"c": value}) if type(value) in (str, int, float) else record("c1")
    assert accepted(lambda: store.put_checkpoint("t", "", new, {("c", value): ("json", b"1")})) == expected


@pytest.mark.parametrize("value", [*IDENTIFIERS, *NUMBERS, "", "x" * 300], ids=repr)
def test_a_referenced_version_is_checked_as_check_record_version_does(value: Any) -> None:
    """A version the checkpoint references without a new value: the join-and-isprintable test is the rule."""
    store = Store(LIMITS)
    expected = accepted(lambda: identifiers.check_record_version("c", value))
    assert accepted(lambda: store.put_checkpoint("t", "", record("c1", None, {"c": value}), {})) == expected


@pytest.mark.parametrize("value", [*IDENTIFIERS, "path \u00e9", "~__pregel_pull, node"], ids=repr)
def test_a_task_path_is_checked_as_check_text_does(value: Any) -> None:
    store = Store(LIMITS)
    write = WriteRecord.of("task", 0, "c", ("json", b"1"), value)
    assert accepted(lambda: store.put_writes("t", "", "c1", [write])) == accepted(
        lambda: identifiers.check_text("task_path", value)
    )


@pytest.mark.parametrize("value", [*IDENTIFIERS, None], ids=repr)
def test_a_new_run_id_is_checked_as_check_identifier_does(value: Any) -> None:
    store = Store(LIMITS)
    new = CheckpointRecord.of("c1", None, ("json", b"{}"), ("json", b"{}"), {}, run_id=value)
    assert accepted(lambda: store.put_checkpoint("t", "", new, {})) == (
        value is None or check_identifier_accepts(value)
    )


SECTIONS: list[Any] = [
    {"thread_id": "t"},
    {"thread_id": "t", "checkpoint_ns": ""},
    {"thread_id": "t", "checkpoint_ns": "sub:1"},
    {"thread_id": "t", "checkpoint_id": ""},
    {"thread_id": "t", "checkpoint_id": None},
    {"thread_id": "t", "checkpoint_id": "1ef-parent"},
    {"thread_id": 7},
    {"thread_id": uuid.UUID(int=5)},
    {"thread_id": Text("t")},
    {"thread_id": None},
    {"thread_id": True},
    {"checkpoint_ns": ""},
    {"thread_id": "t", "checkpoint_ns": None},
    {"thread_id": "t", "checkpoint_ns": 5},
    {"thread_id": "t", "checkpoint_id": 5},
    {"thread_id": "t", "checkpoint_id": Text("1ef-parent")},
    OrderedDict(thread_id="t", checkpoint_id="1ef-parent"),
]
CONFIGS: list[Any] = [
    *({"configurable": section} for section in SECTIONS),
    OrderedDict(configurable={"thread_id": "t"}),
    {"configurable": None},
    {},
    None,
    "t",
]


def located(config: Any) -> tuple[str, str, str | None] | type[Exception]:
    """What ``locate`` finds (always exact ``str``s), or ValueError."""
    try:
        found = locate(config)
    except ValueError:
        return ValueError
    assert all(part is None or type(part) is str for part in found), found
    return found


@pytest.mark.parametrize("config", CONFIGS, ids=repr)
def test_put_locates_as_locate_does(config: Any) -> None:
    saver = BoundedInMemorySaver(config=InMemoryCheckpointConfig(max_threads=10))
    expected = located(config)
    checkpoint = make_checkpoint({"n": 1})
    try:
        stored = saver.put(config, checkpoint, {}, {})
    except ValueError:
        assert expected is ValueError
        return
    assert expected is not ValueError
    thread_id, namespace, parent_id = expected  # type: ignore[misc]
    assert stored["configurable"]["thread_id"] == thread_id and stored["configurable"]["checkpoint_ns"] == namespace
    (ref,) = saver.store.list(thread_id, namespace)
    assert ref.record.parent_id == parent_id


@pytest.mark.parametrize("config", CONFIGS, ids=repr)
def test_put_writes_locates_as_locate_does(config: Any) -> None:
    saver = BoundedInMemorySaver(config=InMemoryCheckpointConfig(max_threads=10))
    expected = located(config)
    try:
        saver.put_writes(config, [("c", 1)], "task")
    except ValueError:
        assert expected is ValueError or expected[2] is None  # type: ignore[index]  # writes need a checkpoint
        return
    assert expected is not ValueError
    thread_id, namespace, checkpoint_id = expected  # type: ignore[misc]
    assert set(saver.store.threads[thread_id].namespaces[namespace].writes) == {checkpoint_id}


def test_a_versions_tuple_of_odd_length_is_refused_as_check_versions_refuses_it() -> None:
    store = Store(LIMITS)
    store.put_checkpoint("t", "", record("c1", None, {"a": "1"}), {})  # "a" is a known channel from now on
    odd = record("c2")._replace(versions=("a", "b", "1"))
    with pytest.raises(ValueError, match="map each channel to one version"):
        store.put_checkpoint("t", "", odd, {})
    with pytest.raises(ValueError, match="map each channel to one version"):
        identifiers.check_versions(set(), ("a", "b", "1"), LIMITS)


def _config(thread_id: str, checkpoint_id: str | None = None) -> Any:
    return config(thread_id, "", checkpoint_id)


def _bodies_under_announces(saver: BoundedInMemorySaver) -> dict[str, Any]:
    """``put``'s and ``put_writes``' bodies under the generic wrapper their hand-written delivery copies."""
    return {
        "put": announcing.announces(BoundedInMemorySaver._put).__get__(saver),
        "put_writes": announcing.announces(BoundedInMemorySaver._put_writes).__get__(saver),
    }


@pytest.mark.parametrize("method", ["put", "put_writes"])
@pytest.mark.parametrize("size", [10, 5_000], ids=["stored", "refused"])
def test_put_and_put_writes_deliver_drops_as_announces_does(method: str, size: int) -> None:
    """Their delivery is ``announcing.announces`` written out by hand: the same drops reach the hook before the
    call returns or raises, with the same outcome, as through the generic wrapper."""
    outcomes = []
    for wrapped in (False, True):
        clock = FakeClock()
        delivered: list[str] = []
        saver = BoundedInMemorySaver(
            config=InMemoryCheckpointConfig(
                idle_ttl_seconds=10,
                max_checkpoint_bytes=1_000,
                max_pending_write_bytes=1_000,
                on_evict=lambda dropped, export, delivered=delivered: delivered.append(dropped.thread_id),
            ),
            clock=clock,
        )
        saver.put(_config("old"), make_checkpoint({"a": 1}, {"a": "1"}), {}, {"a": "1"})
        clock.advance(11)  # "old" is due: the next write expires it, whether or not that write is stored
        call = _bodies_under_announces(saver)[method] if wrapped else getattr(saver, method)
        arguments: tuple[Any, ...] = (
            (_config("new"), make_checkpoint({"a": "x" * size}, {"a": "1"}), {}, {"a": "1"})
            if method == "put"
            else (_config("new", "c1"), [("a", "x" * size)], "task")
        )
        try:
            call(*arguments)
            result = "stored"
        except CheckpointCapacityError as error:
            result = f"refused: {error.limit}"
        outcomes.append((result, list(delivered), saver.stats().threads))
    assert outcomes[0] == outcomes[1], outcomes
    assert outcomes[0][1] == ["old"], outcomes  # delivered before the call returned or raised
    limit = "max_checkpoint_bytes" if method == "put" else "max_pending_write_bytes"
    assert outcomes[0][0] == ("stored" if size == 10 else f"refused: {limit}")
