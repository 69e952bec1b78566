"""A random differential: ``TieredSaver`` over a SQLite file answers every read as a plain ``SqliteSaver`` fed the
same writes does, in both write modes, with a hot tier of one thread (threads leave memory all the time).

A hypothesis state machine (the deterministic ``ci`` profile in CI, ``make soak`` for long runs) puts checkpoints
(new threads and namespaces, children of the latest, forks from older ones, ids below the latest as a clock
stepped back would make), pending writes (regular and special channels, mixed batches, task paths, repeated
``(task_id, idx)``), deletes threads (again and again), evicts, flushes, and compares ``get_tuple`` (latest and by
id) and ``list`` (with ``before``, ``limit`` and metadata filters) with the reference after every step.

The one intended difference: a write continuing a thread deleted since is refused (``ThreadDeletedError``) where
the plain saver brings the thread back; the machine checks the refusal is right and leaves the reference alone.
"""

from __future__ import annotations

import sqlite3
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from langgraph.checkpoint.sqlite import SqliteSaver

from langgraph.checkpoint.bounded import InMemoryCheckpointConfig, ThreadDeletedError, TieredSaver
from tests.support import strategies as S
from tests.support.helpers import config, make_checkpoint
from tests.support.tiered import write_mode

THREADS = st.sampled_from(["t1", "t2", "t3"])
NAMESPACES = st.sampled_from(["", "sub:1"])
METADATA = st.fixed_dictionaries(
    {"source": S.sources, "step": st.integers(min_value=-1, max_value=5)},
    optional={"user": st.sampled_from(["ann", "bob"]), "n": st.sampled_from([1, 2, 1.0, True]), "k": st.none()},
)
FILTERS = st.sampled_from(
    [None, {"source": "loop"}, {"step": 1}, {"user": "ann"}, {"n": 1}, {"n": True}, {"k": None}, {"source": "fork"}]
)
WRITES = st.lists(st.tuples(st.one_of(S.channels, S.special_channels), S.scalars), min_size=1, max_size=3)


def summary(item: Any) -> Any:
    if item is None:
        return None
    return (item.config, item.checkpoint, item.metadata, item.parent_config, item.pending_writes)


class TieredAnswersAsTheDurableSaver(RuleBasedStateMachine):
    write = "through"

    def __init__(self) -> None:
        super().__init__()
        self.folder = tempfile.TemporaryDirectory()
        folder = Path(self.folder.name)
        self.reference = SqliteSaver(sqlite3.connect(folder / "reference.sqlite", check_same_thread=False))
        durable = SqliteSaver(sqlite3.connect(folder / "durable.sqlite", check_same_thread=False))
        self.tiered = TieredSaver(
            durable,
            config=InMemoryCheckpointConfig(max_threads=1),
            write=write_mode(self.write, flush_interval_seconds=float("inf")),
        )
        self.ids: dict[tuple[str, str], list[str]] = defaultdict(list)
        self.deleted: dict[str, str] = {}  # thread to the greatest checkpoint id it held when deleted
        self.clock = 1_000_000

    def teardown(self) -> None:
        self.tiered.close()
        self.folder.cleanup()

    def new_id(self, below: bool) -> str:
        self.clock += 1
        return f"1f{self.clock - 2_000 if below else self.clock:010d}"

    def continues_deleted(self, thread: str, checkpoint_id: str | None) -> bool:
        newest = self.deleted.get(thread)
        return newest is not None and checkpoint_id is not None and checkpoint_id <= newest

    @rule(
        data=st.data(),
        thread=THREADS,
        namespace=NAMESPACES,
        values=st.dictionaries(S.channels, S.scalars, max_size=3),
        metadata=METADATA,
        below=st.booleans(),
    )
    def put(self, data: Any, thread: str, namespace: str, values: dict[str, Any], metadata: Any, below: bool) -> None:
        existing = self.ids[(thread, namespace)]
        parent = data.draw(st.sampled_from([None, *existing])) if existing else None
        checkpoint_id = self.new_id(below and parent is not None)
        version = f"{self.clock:032}.0"
        versions = dict.fromkeys(values, version)
        checkpoint = make_checkpoint(values, versions, checkpoint_id)
        located = config(thread, namespace, parent)
        if self.continues_deleted(thread, parent):
            with pytest.raises(ThreadDeletedError):
                self.tiered.put(located, checkpoint, dict(metadata), versions)
            return
        self.tiered.put(located, checkpoint, dict(metadata), versions)
        self.reference.put(located, checkpoint, dict(metadata), versions)
        existing.append(checkpoint_id)

    @rule(data=st.data(), writes=WRITES, task_id=S.task_ids, task_path=S.task_paths)
    def put_writes(self, data: Any, writes: list[tuple[str, Any]], task_id: str, task_path: str) -> None:
        located = [key for key, ids in self.ids.items() if ids]
        if not located:
            return
        thread, namespace = data.draw(st.sampled_from(located))
        checkpoint_id = data.draw(st.sampled_from(self.ids[(thread, namespace)]))
        target = config(thread, namespace, checkpoint_id)
        if self.continues_deleted(thread, checkpoint_id):
            with pytest.raises(ThreadDeletedError):
                self.tiered.put_writes(target, writes, task_id, task_path)
            return
        self.tiered.put_writes(target, writes, task_id, task_path)
        self.reference.put_writes(target, writes, task_id, task_path)

    @rule(thread=THREADS)
    def delete_thread(self, thread: str) -> None:
        held = [cid for (t, _), ids in self.ids.items() if t == thread for cid in ids]
        self.tiered.delete_thread(thread)
        self.reference.delete_thread(thread)
        if held:
            self.deleted[thread] = max([*held, self.deleted.get(thread, "")])
        for key in [key for key in self.ids if key[0] == thread]:
            del self.ids[key]

    @rule()
    def flush(self) -> None:
        self.tiered.flush()

    @rule(thread=THREADS)
    def read_latest(self, thread: str) -> None:
        """A read of a thread: it comes to memory (the other threads leave it, the hot tier holds one)."""
        for namespace in ("", "sub:1"):
            assert summary(self.tiered.get_tuple(config(thread, namespace))) == summary(
                self.reference.get_tuple(config(thread, namespace))
            )

    @rule(data=st.data(), limit=st.sampled_from([None, 1, 2]), filter=FILTERS, before=st.booleans())
    def list_one(self, data: Any, limit: int | None, filter: Any, before: bool) -> None:
        thread = data.draw(THREADS)
        namespace = data.draw(st.sampled_from([None, "", "sub:1"]))
        located = {"thread_id": thread} if namespace is None else {"thread_id": thread, "checkpoint_ns": namespace}
        ids = [cid for (t, _), values in self.ids.items() if t == thread for cid in values]
        cursor = config(thread, namespace or "", data.draw(st.sampled_from(ids))) if before and ids else None
        criteria = {"filter": filter, "before": cursor, "limit": limit}
        got = [summary(item) for item in self.tiered.list({"configurable": located}, **criteria)]
        assert got == [summary(item) for item in self.reference.list({"configurable": located}, **criteria)]

    @invariant()
    def every_checkpoint_reads_the_same_by_id(self) -> None:
        for (thread, namespace), ids in self.ids.items():
            for checkpoint_id in ids[-3:]:
                located = config(thread, namespace, checkpoint_id)
                assert summary(self.tiered.get_tuple(located)) == summary(self.reference.get_tuple(located))

    @invariant()
    def the_hot_tier_holds_together(self) -> None:
        self.tiered.check()


class WriteBackAnswersAsTheDurableSaver(TieredAnswersAsTheDurableSaver):
    write = "back"


TestWriteThrough = TieredAnswersAsTheDurableSaver.TestCase
TestWriteBack = WriteBackAnswersAsTheDurableSaver.TestCase
