"""Whatever the saver accepts round-trips: a snapshot, an export and a copy give the same answers.

Hypothesis drives ``put`` and ``put_writes`` with arbitrary text (lone surrogates, control
characters, any script) for ids, namespaces, channels, task ids and paths, versions of every kind
(text, ints past 64 bits, NaN and infinite floats), run ids and DeltaChannel counters of any type.
Each call is either refused (``ValueError`` or ``CheckpointCapacityError``, changing nothing) or
accepted. Then ``save``/``load``, ``export_thread``/``import_thread`` and ``copy_thread`` must
each give the same ``get_tuple`` and ``list`` answers as the store the calls built.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from langgraph.checkpoint.base import CheckpointTuple

from langgraph.checkpoint.bounded import BoundedInMemorySaver, CheckpointCapacityError, InMemoryCheckpointConfig
from tests.support.helpers import config, make_checkpoint

text = st.one_of(st.sampled_from(["a", "b", "node:1", "é", "x" * 300]), st.text(max_size=12))
version = st.one_of(
    st.text(max_size=8),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["1.0", "2.0", "00000000000000000000000000000001.5"]),
)
run_id = st.one_of(st.none(), text, st.integers(min_value=-(2**80), max_value=2**80), st.uuids())
counters = st.one_of(
    st.none(),
    st.dictionaries(st.one_of(text, st.integers()), st.integers(0, 3), max_size=3),
    st.lists(st.one_of(text, st.integers()), max_size=3),
)
value = st.one_of(st.none(), st.integers(-(2**40), 2**40), text, st.lists(st.integers(0, 9), max_size=3))

put_call = st.fixed_dictionaries(
    {
        "kind": st.just("put"),
        "thread": text,
        "namespace": st.one_of(st.just(""), text),
        "values": st.dictionaries(text, value, max_size=3),
        "versions": st.lists(version, min_size=3, max_size=3),
        "run_id": run_id,
        "counters": counters,
        "parent": st.booleans(),
    }
)
writes_call = st.fixed_dictionaries(
    {
        "kind": st.just("writes"),
        "thread": text,
        "namespace": st.one_of(st.just(""), text),
        "writes": st.lists(st.tuples(text, value), max_size=3),
        "task_id": text,
        "task_path": st.one_of(st.just(""), text),
        "previous": st.booleans(),
    }
)


def apply(saver: BoundedInMemorySaver, calls: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Run the calls, keeping the refused ones out; return the (thread, namespace) locations written."""
    stored: dict[tuple[str, str], list[str]] = {}
    for call in calls:
        location = (call["thread"], call["namespace"])
        ids = stored.setdefault(location, [])
        try:
            if call["kind"] == "put":
                channels = list(call["values"])
                versions = dict(zip(channels, call["versions"], strict=False))
                checkpoint = make_checkpoint(call["values"], versions)
                metadata: dict[str, Any] = {"source": "loop", "step": len(ids)}
                if call["run_id"] is not None:
                    metadata["run_id"] = call["run_id"]
                if call["counters"] is not None:
                    metadata["counters_since_delta_snapshot"] = call["counters"]
                parent = ids[-1] if call["parent"] and ids else None
                saver.put(config(call["thread"], call["namespace"], parent), checkpoint, metadata, versions)
                ids.append(checkpoint["id"])
            else:
                target = ids[-1] if call["previous"] and ids else make_checkpoint()["id"]
                saver.put_writes(
                    config(call["thread"], call["namespace"], target),
                    call["writes"],
                    call["task_id"],
                    call["task_path"],
                )
        except (ValueError, TypeError, CheckpointCapacityError):
            pass  # refused (TypeError: the serializer's refusal of a value): changes nothing, as other suites check
    saver.check()
    threads = saver.store.threads
    return [
        (thread_id, name)
        for thread_id, name in stored
        if thread_id in threads and name in threads[thread_id].namespaces
    ]


def answers(saver: BoundedInMemorySaver, thread_id: str, namespace: str) -> Any:
    """What a reader sees of one location: its latest tuple and its whole listing, thread ids left out."""
    latest = saver.get_tuple(config(thread_id, namespace))
    listed = list(saver.list(config(thread_id, namespace)))
    return without_thread(latest), [without_thread(item) for item in listed]


def without_thread(item: CheckpointTuple | None) -> Any:
    if item is None:
        return None
    located = {k: v for k, v in item.config["configurable"].items() if k != "thread_id"}
    return located, item.checkpoint, item.metadata, item.pending_writes


CONFIG = InMemoryCheckpointConfig(max_checkpoint_bytes=64 * 1024)


@given(calls=st.lists(st.one_of(put_call, writes_call), min_size=1, max_size=12))
def test_accepted_writes_round_trip_through_a_snapshot_an_export_and_a_copy(
    calls: list[dict[str, Any]], tmp_path_factory: Any
) -> None:
    saver = BoundedInMemorySaver(config=CONFIG)
    locations = apply(saver, calls)
    path: Path = tmp_path_factory.mktemp("round-trip") / "state.snapshot"
    saver.save(path)
    restored = BoundedInMemorySaver.load(path, config=CONFIG)
    imported = BoundedInMemorySaver(config=CONFIG)
    for thread_id in {thread_id for thread_id, _ in locations}:
        export = saver.export_thread(thread_id)
        assert export is not None
        imported.import_thread(export)
        saver.copy_thread(thread_id, thread_id + "-copy")
    for thread_id, namespace in locations:
        expected = answers(saver, thread_id, namespace)
        assert answers(restored, thread_id, namespace) == expected
        assert answers(imported, thread_id, namespace) == expected
        assert answers(saver, thread_id + "-copy", namespace) == expected
    restored.check()
    imported.check()
