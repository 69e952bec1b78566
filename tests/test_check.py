"""``check()`` catches every invariant it claims to verify: each test breaks exactly one and expects its name."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from engine import Store, StoreLimits
from engine.dropped import DroppedThread
from engine.records import CheckpointRecord, WriteRecord
from tests.conftest import FakeClock


def stocked() -> Store:
    """Two threads, two namespaces, writes, blobs, runs and a dropped-thread record."""
    clock = FakeClock()
    store = Store(StoreLimits(max_threads=2, max_total_bytes=100_000), clock=clock)
    for thread in ("gone", "a", "b"):
        clock.advance(1)
        for number, namespace in enumerate(("", "sub:1")):
            record = CheckpointRecord.of(
                f"1ef-{number}", None, ("json", b"{}"), ("json", b"{}"), {"c": "v1"}, run_id="run-1"
            )
            store.put_checkpoint(thread, namespace, record, {("c", "v1"): ("json", b"value")})
            store.put_writes(thread, namespace, f"1ef-{number}", [WriteRecord.of("task", 0, "c", ("json", b"w"))])
    store.check()
    return store


def first_namespace(store: Store) -> Any:
    return next(iter(store._threads["a"].namespaces.values()))


def remember_past_capacity(store: Store) -> None:
    record = DroppedThread("extra", "max_threads", 2, 0.0, None)
    store._dropped._records["extra"] = record
    store._dropped.nbytes += record.nbytes
    store.limits = replace(store.limits, max_dropped_thread_records=1)


CORRUPTIONS: dict[str, Callable[[Store], None]] = {
    "LRU key": lambda s: setattr(s._threads["a"], "thread_id", "other"),
    "out of LRU order": lambda s: setattr(s._threads["b"], "last_used", 0.0),
    "is empty": lambda s: s._threads["a"].namespaces.clear(),
    "checkpoint ids are out of order": lambda s: first_namespace(s).checkpoints._ids.insert(0, "zzz"),
    "is filed under": lambda s: first_namespace(s).checkpoints._records.__setitem__(
        "1ef-0", first_namespace(s).checkpoints._records["1ef-0"]._replace(checkpoint_id="1ef-9")
    ),
    "an empty write set": lambda s: first_namespace(s).writes.__setitem__("1ef-0", {}),
    "write": lambda s: (
        first_namespace(s)
        .writes["1ef-0"]
        .__setitem__(("other-task", 0), first_namespace(s).writes["1ef-0"][("task", 0)])
    ),
    "totals drift": lambda s: setattr(s._threads["a"].usage, "nbytes", 1),
    "run counts drift": lambda s: s._threads["a"].runs.update({"run-1": 5}),
    "store totals drift": lambda s: setattr(s._usage, "checkpoints", 99),
    "run index drifts": lambda s: s._runs.setdefault("run-9", set()).add("a"),
    "exceeds max_namespaces_per_thread": lambda s: setattr(s, "limits", StoreLimits(max_namespaces_per_thread=1)),
    "exceeds max_checkpoints_per_thread": lambda s: setattr(s, "limits", StoreLimits(max_checkpoints_per_thread=1)),
    "max_threads exceeded": lambda s: setattr(s, "limits", StoreLimits(max_threads=1)),
    "too many dropped-thread records": lambda s: remember_past_capacity(s),
    "dropped-thread record bytes drift": lambda s: setattr(s._dropped, "nbytes", 0),
    "max_total_bytes exceeded": lambda s: setattr(s, "limits", StoreLimits(max_total_bytes=10)),
}


@pytest.mark.parametrize("invariant", list(CORRUPTIONS))
def test_check_names_the_invariant_that_was_broken(invariant: str) -> None:
    store = stocked()
    CORRUPTIONS[invariant](store)
    with pytest.raises(AssertionError, match=invariant):
        store.check()


def test_the_stocked_store_exercises_every_structure() -> None:
    store = stocked()
    stats = store.stats()
    assert (stats.threads, stats.namespaces, stats.checkpoints, stats.pending_writes, stats.blobs) == (2, 4, 4, 4, 4)
    assert stats.dropped_thread_records == 1 and isinstance(store._dropped.get("gone"), DroppedThread)
