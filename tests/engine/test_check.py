"""``check()`` catches every invariant it claims to verify: each test breaks exactly one and expects its name.

Every name in ``engine.check.INVARIANTS`` has a corruption here (a test makes
sure of it), and so does each rule of ``Thread.check``, ``Namespace.check`` and
``Tombstones.check``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from langgraph.checkpoint.bounded.engine import Store, StoreLimits
from langgraph.checkpoint.bounded.engine.check import INVARIANTS
from langgraph.checkpoint.bounded.engine.records import CheckpointRecord, WriteRecord
from langgraph.checkpoint.bounded.engine.tombstones import DroppedThread
from tests.conftest import FakeClock


def stocked() -> Store:
    """Two threads of two namespaces each, with writes, blobs, runs, a tombstone and a snapshot cache."""
    clock = FakeClock()
    store = Store(StoreLimits(max_threads=2, max_total_bytes=100_000), clock=clock, on_drop=lambda d, e: None)
    for thread in ("gone", "a", "b"):
        clock.advance(1)
        for number, namespace in enumerate(("", "sub:1")):
            record = CheckpointRecord.of(
                f"1ef-{number}", None, ("json", b"{}"), ("json", b"{}"), {"c": "v1"}, run_id="run-1"
            )
            store.put_checkpoint(thread, namespace, record, {("c", "v1"): ("json", b"value")})
            store.put_writes(thread, namespace, f"1ef-{number}", [WriteRecord.of("task", 0, "c", ("json", b"w"))])
    store.announcements.deliver()
    store.snapshot()
    store.check()
    return store


def space(store: Store) -> Any:
    return store.threads["a"].namespaces[""]


def remember_past_capacity(store: Store) -> None:
    record = DroppedThread("extra", "max_threads", 2, 0.0, None, 0.0)
    store.tombstones.records["extra"] = record
    store.tombstones.nbytes += record.nbytes
    store.tombstones.capacity = 1


def misfiled_record(store: Store) -> None:
    records = space(store).records
    records["1ef-0"] = records["1ef-0"]._replace(checkpoint_id="1ef-00")


def _misfiled_tombstone(store: Store) -> None:
    store.tombstones.records["other"] = store.tombstones.records.pop("gone")


def misfiled_write(store: Store) -> None:
    writes = space(store).writes["1ef-0"]
    writes[("other-task", 0)] = writes.pop(("task", 0))


CORRUPTIONS: dict[str, tuple[str, Callable[[Store], None]]] = {
    # name -> (the message check() must start with, how to break it)
    "lru keys": ("lru keys", lambda s: setattr(s.threads["a"], "thread_id", "other")),
    "lru order": ("lru order", lambda s: setattr(s.threads["b"], "last_used", 0.0)),
    "empty thread": ("empty thread", lambda s: s.threads["a"].namespaces.clear()),
    "thread: totals": ("thread: 'a': totals drift", lambda s: setattr(s.threads["a"], "nbytes", 1)),
    "thread: runs": ("thread: 'a': runs drift", lambda s: s.threads["a"].runs.add("run-9")),
    "thread: empty namespace": ("thread: 'a': namespace '': namespace is empty", lambda s: _empty(space(s))),
    "thread: id order": (
        "thread: 'a': namespace '': checkpoint ids are out of order",
        lambda s: space(s).ids.insert(0, "zzz"),
    ),
    "thread: ids and records": (
        "thread: 'a': namespace '': the sorted ids and the records disagree",
        lambda s: space(s).ids.append("zzz"),
    ),
    "thread: misfiled record": ("thread: 'a': namespace '': checkpoint '1ef-00' is filed", misfiled_record),
    "thread: empty write set": (
        "thread: 'a': namespace '': an empty write set",
        lambda s: space(s).writes.__setitem__("1ef-9", {}),
    ),
    "thread: misfiled write": ("thread: 'a': namespace '': write", misfiled_write),
    "store totals": ("store totals", lambda s: setattr(s, "checkpoints", 99)),
    "run index": ("run index", lambda s: s.runs.setdefault("run-9", set()).add("a")),
    "next expiry": ("next expiry", lambda s: setattr(s, "next_expiry", 10**9)),
    "tombstones: capacity": ("tombstones: tombstones: 2 tombstones kept", remember_past_capacity),
    "tombstones: bytes": (
        "tombstones: tombstones: tombstone bytes drift",
        lambda s: setattr(s.tombstones, "nbytes", 0),
    ),
    "tombstones: misfiled": ("tombstones: tombstones: tombstone filed under another key", _misfiled_tombstone),
    "tombstones: refused checkpoints": (
        "tombstones: refused checkpoints: tombstone bytes drift",
        lambda s: setattr(s.refusals, "nbytes", 5),
    ),
    "announcements": ("announcements: queued without a hook", lambda s: _queue_without_hook(s)),
    "announcements: queued bytes": (
        "announcements: queued_bytes is 7",
        lambda s: setattr(s.announcements, "queued_bytes", 7),
    ),
    "snapshot cache": ("snapshot cache: exports", lambda s: s.exports.__setitem__("ghost", s.exports["a"])),
    "snapshot cache: change set": ("snapshot cache: the change set", lambda s: s.changed.add("ghost")),
    "memory: a thread": (
        "memory: thread 'a' keeps",
        lambda s: setattr(s.threads["a"], "variable_overhead", s.threads["a"].variable_overhead + 1),
    ),
    "memory: the store": (
        "memory: the store keeps",
        lambda s: setattr(s, "variable_overhead", s.variable_overhead + 1),
    ),
    "limits: memory": ("limits: max_memory_bytes exceeded", lambda s: _limit(s, max_memory_bytes=1_000)),
    "known channels": ("known channels", lambda s: s.known_channels.add("bad\x00name")),
    "limits: namespaces": (
        "limits: thread 'a' exceeds max_namespaces_per_thread",
        lambda s: _limit(s, max_namespaces_per_thread=1),
    ),
    "limits: checkpoints": (
        "limits: thread 'a' exceeds max_checkpoints_per_thread",
        lambda s: _limit(s, max_checkpoints_per_thread=1),
    ),
    "limits: threads": ("limits: max_threads exceeded", lambda s: _limit(s, max_threads=1)),
    "limits: bytes": ("limits: max_total_bytes exceeded", lambda s: _limit(s, max_total_bytes=10)),
}


def _empty(namespace: Any) -> None:
    namespace.records.clear()
    namespace.ids.clear()
    namespace.writes.clear()
    namespace.blobs.clear()


def _queue_without_hook(store: Store) -> None:
    store.announcements.hook = None
    store.announcements.queue_drop(DroppedThread("x", "max_threads", 1, 0.0, None, 0.0), None, 0)  # type: ignore[arg-type]


def _limit(store: Store, **limits: float) -> None:
    store.limits = replace(store.limits, **limits)


@pytest.mark.parametrize("case", list(CORRUPTIONS))
def test_check_names_the_invariant_that_was_broken(case: str) -> None:
    store = stocked()
    message, corrupt = CORRUPTIONS[case]
    corrupt(store)
    with pytest.raises(AssertionError) as info:
        store.check()
    assert str(info.value).startswith(message), f"{case}: check() said {info.value}"


def test_every_named_invariant_has_a_corruption() -> None:
    broken = {message.split(":")[0] for message, _ in CORRUPTIONS.values()}
    assert broken == set(INVARIANTS)


def test_the_stocked_store_exercises_every_structure() -> None:
    store = stocked()
    stats = store.stats()
    assert (stats.threads, stats.namespaces, stats.checkpoints, stats.pending_writes, stats.blobs) == (2, 4, 4, 4, 4)
    assert stats.dropped_thread_records == 1 and "gone" in store.tombstones.records
    assert store.exports is not None and set(store.exports) == {"a", "b"}
