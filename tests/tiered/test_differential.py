"""A random differential: ``TieredSaver`` over a SQLite file answers every read as a plain ``SqliteSaver`` fed the
same operations does, in both write modes, with a hot tier of one thread (threads leave memory all the time).

A hypothesis state machine (the deterministic ``ci`` profile in CI, ``make soak`` for long runs) puts checkpoints
(new threads and namespaces, children of the latest, forks from older ones, ids below the latest as a clock
stepped back would make, an id put twice), pending writes (regular and special channels, mixed batches, task
paths, repeated ``(task_id, idx)``), deletes threads (again and again, and by ``prune(strategy="delete")``),
copies threads, prunes them (``keep_latest``, ``keep_last``), continues ids deleted or pruned since, evicts,
flushes, and compares ``get_tuple`` (latest and by id) and ``list`` (with ``before``, ``limit`` and metadata
filters) with the reference after every step.

"The durable saver alone" is ``SqliteSaver`` with what it lacks done through its own API or tables, as a user
of it alone would, written here independently of the tiered saver's code:

* ``copy_thread`` (it has none): every checkpoint of the source, oldest first, put again under the target with
  its parent link and its pending writes, task by task (``put_again``);
* ``prune(strategy="keep_latest")`` (it has none): the thread rewritten through the API, as the tiered saver
  documents for a saver without ``prune``: read whole, deleted, each namespace's newest checkpoint put back
  with its writes, its parent link cleared when the parent went (``rewrite``);
* ``prune(strategy="keep_last")``: the rows of each namespace's older checkpoints and of their writes deleted
  from its tables, a kept checkpoint whose parent went left with no parent (``remove_rows``: the retention
  guide's rule). The metadata here has no ``parents`` and no ``DeltaChannel`` counts, so neither the subgraph
  call rule nor kept ancestors apply;
* ``prune(strategy="delete")``: ``delete_thread`` of each.

The one intended difference: a write continuing a thread deleted since (its parent, or the checkpoint its
pending writes go to, at or below the greatest id the thread held when deleted) is refused
(``ThreadDeletedError``) where the plain saver brings the thread back; the machine checks the refusal is right
and leaves the reference alone. A copy into the deleted thread that copies something writes it again on purpose,
and ends the refusal (the plain saver's answers again); a copy of an empty or deleted source copies nothing and
leaves the thread deleted, so its late writes are still refused.
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
from langgraph.checkpoint.base import CheckpointTuple
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


def put_again(saver: SqliteSaver, item: CheckpointTuple, thread: str) -> None:
    """Put a checkpoint as a read returned it (values, metadata, parent link, pending writes task by task) into
    ``thread`` through the saver's API: the test's own emulation of ``copy_thread`` and of a rewrite."""
    located = item.config["configurable"]
    target = config(thread, located["checkpoint_ns"], None)
    if item.parent_config is not None:
        target["configurable"]["checkpoint_id"] = item.parent_config["configurable"]["checkpoint_id"]
    versions = item.checkpoint["channel_versions"]
    kept = {channel: versions[channel] for channel in item.checkpoint["channel_values"] if channel in versions}
    stored = saver.put(target, item.checkpoint, item.metadata, kept)
    tasks: dict[str, list[tuple[str, Any]]] = {}
    for task_id, channel, value in item.pending_writes or []:
        tasks.setdefault(task_id, []).append((channel, value))
    for task_id, writes in tasks.items():
        saver.put_writes(stored, writes, task_id)


def rewrite(saver: SqliteSaver, thread: str, kept: dict[tuple[str, str], list[str]]) -> None:
    """Rewrite a thread keeping the ``kept`` ids of each namespace: read it whole, delete it, put back what is kept,
    oldest first, each whose parent went with none (what a prune through the API does; nothing when all is kept)."""
    everything = list(saver.list({"configurable": {"thread_id": thread}}))
    keep = {(namespace, cid) for (_, namespace), ids in kept.items() for cid in ids}
    survivors = [item for item in reversed(everything) if location(item.config) in keep]
    if len(survivors) == len(everything):
        return
    saver.delete_thread(thread)
    for item in survivors:
        if item.parent_config is not None and location(item.parent_config) not in keep:
            item = item._replace(parent_config=None)
        put_again(saver, item, thread)


def location(located: Any) -> tuple[str, str]:
    return (located["configurable"]["checkpoint_ns"], located["configurable"]["checkpoint_id"])


def remove_rows(saver: SqliteSaver, thread: str, gone: dict[str, list[str]]) -> None:
    """Delete these checkpoints' rows and their writes' rows from a ``SqliteSaver``'s tables; a checkpoint whose
    parent went is left with no parent (the retention guide's rule, as ``PostgresSaver.prune`` leaves it); and, as a
    prune collects them, the thread's write rows whose checkpoint is gone and sorts below its namespace's newest."""
    saver.setup()
    with saver.lock, saver.conn:
        for namespace, ids in gone.items():
            rows = [(thread, namespace, cid) for cid in ids]
            for table in ("checkpoints", "writes"):
                saver.conn.executemany(
                    f"DELETE FROM {table} WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?", rows
                )
            saver.conn.executemany(
                "UPDATE checkpoints SET parent_checkpoint_id = NULL "
                "WHERE thread_id = ? AND checkpoint_ns = ? AND parent_checkpoint_id = ?",
                rows,
            )
        saver.conn.execute(
            "DELETE FROM writes WHERE thread_id = ? AND NOT EXISTS (SELECT 1 FROM checkpoints c WHERE "
            "c.thread_id = writes.thread_id AND c.checkpoint_ns = writes.checkpoint_ns "
            "AND c.checkpoint_id = writes.checkpoint_id) AND checkpoint_id < (SELECT max(c.checkpoint_id) "
            "FROM checkpoints c WHERE c.thread_id = writes.thread_id AND c.checkpoint_ns = writes.checkpoint_ns)",
            (thread,),
        )


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
        self.old: dict[tuple[str, str], list[str]] = defaultdict(list)  # ids deleted or pruned since
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

    @rule(data=st.data(), values=st.dictionaries(S.channels, S.scalars, max_size=3), metadata=METADATA)
    def put_same_id_again(self, data: Any, values: dict[str, Any], metadata: Any) -> None:
        """A checkpoint id put twice (a retried put, a copy back): the reference replaces the checkpoint and keeps
        its pending writes."""
        located = [key for key, ids in self.ids.items() if ids]
        if not located:
            return
        thread, namespace = data.draw(st.sampled_from(located))
        existing = self.ids[(thread, namespace)]
        checkpoint_id = data.draw(st.sampled_from(existing))
        parent = data.draw(st.sampled_from([None, *[cid for cid in existing if cid < checkpoint_id]]))
        self.clock += 1
        versions = dict.fromkeys(values, f"{self.clock:032}.0")
        checkpoint = make_checkpoint(values, versions, checkpoint_id)
        self.put_both(config(thread, namespace, parent), checkpoint, metadata, versions)

    @rule(
        data=st.data(),
        values=st.dictionaries(S.channels, S.scalars, max_size=3),
        metadata=METADATA,
        writes=WRITES,
        task_id=S.task_ids,
    )
    def continue_old_id(
        self, data: Any, values: dict[str, Any], metadata: Any, writes: list[tuple[str, Any]], task_id: str
    ) -> None:
        """A put or writes continuing an id deleted or pruned since (a late run): refused while the thread's
        tombstone covers it, else taken as the reference takes it (a copy into the thread revived it). Under
        write-back only the writes: a put continuing a checkpoint the durable tier no longer holds is refused at its
        flush (the tiered-storage guide's late flushes; ``test_differences`` pins it), where the plain saver takes
        it."""
        located = [key for key, ids in self.old.items() if ids]
        if not located:
            return
        thread, namespace = data.draw(st.sampled_from(located))
        old_id = data.draw(st.sampled_from(self.old[(thread, namespace)]))
        if self.write == "back" or data.draw(st.booleans()):
            target = config(thread, namespace, old_id)
            if self.continues_deleted(thread, old_id):
                with pytest.raises(ThreadDeletedError):
                    self.tiered.put_writes(target, writes, task_id)
                return
            self.tiered.put_writes(target, writes, task_id)
            self.reference.put_writes(target, writes, task_id)
            return
        checkpoint_id = self.new_id(False)
        versions = dict.fromkeys(values, f"{self.clock:032}.0")
        checkpoint = make_checkpoint(values, versions, checkpoint_id)
        if self.put_both(config(thread, namespace, old_id), checkpoint, metadata, versions):
            self.ids[(thread, namespace)].append(checkpoint_id)

    def put_both(self, located: Any, checkpoint: Any, metadata: Any, versions: dict[str, str]) -> bool:
        """Put in both, or check the tiered saver refuses a put continuing a deleted thread; return if put."""
        thread, parent = located["configurable"]["thread_id"], located["configurable"].get("checkpoint_id")
        if self.continues_deleted(thread, parent):
            with pytest.raises(ThreadDeletedError):
                self.tiered.put(located, checkpoint, dict(metadata), versions)
            return False
        self.tiered.put(located, checkpoint, dict(metadata), versions)
        self.reference.put(located, checkpoint, dict(metadata), versions)
        return True

    @rule(thread=THREADS)
    def delete_thread(self, thread: str) -> None:
        self.tiered.delete_thread(thread)
        self.reference.delete_thread(thread)
        self.deleted_in_model(thread)

    def deleted_in_model(self, thread: str) -> None:
        """The thread's ids become ids of a deleted life; its tombstone holds the greatest it ever held."""
        held = [cid for (t, _), ids in self.ids.items() if t == thread for cid in ids]
        if held:
            self.deleted[thread] = max([*held, self.deleted.get(thread, "")])
        for key in [key for key in self.ids if key[0] == thread]:
            self.old[key].extend(self.ids.pop(key))

    @rule(threads=st.sets(THREADS, min_size=1, max_size=2))
    def prune_delete(self, threads: set[str]) -> None:
        """``prune(strategy="delete")`` is ``delete_thread`` of each: the reference deletes them."""
        self.tiered.prune(sorted(threads), strategy="delete")
        for thread in sorted(threads):
            self.reference.delete_thread(thread)
            self.deleted_in_model(thread)

    @rule(source=THREADS, into=THREADS)
    def copy_thread(self, source: str, into: str) -> None:
        target = into
        """``copy_thread``: the reference (which has none) gets every checkpoint of the source, oldest first, with
        its writes, put again under the target through its own API; a copy of something revives a deleted target.
        """
        self.tiered.copy_thread(source, target)
        if source == target:
            return
        for item in reversed(list(self.reference.list({"configurable": {"thread_id": source}}))):
            put_again(self.reference, item, target)
        copied = False
        for (thread, namespace), ids in list(self.ids.items()):
            if thread == source and ids:
                copied = True
                into = self.ids[(target, namespace)]
                into.extend(cid for cid in ids if cid not in into)
        if copied:
            self.deleted.pop(target, None)

    @rule(threads=st.sets(THREADS, min_size=1, max_size=2))
    def prune_keep_latest(self, threads: set[str]) -> None:
        """``prune(strategy="keep_latest")``: SQLite has none, so the durable tier is rewritten through its API
        (deleted, then each namespace's newest checkpoint put back with its writes, its parent link cleared when
        the parent went); the reference is rewritten the same way by ``rewrite``."""
        self.tiered.prune(sorted(threads), strategy="keep_latest")
        for thread in sorted(threads):
            self.pruned_in_model(thread, 1)
            rewrite(self.reference, thread, {key: ids for key, ids in self.ids.items() if key[0] == thread})

    @rule(threads=st.sets(THREADS, min_size=1, max_size=2), keep_last=st.integers(min_value=1, max_value=3))
    def prune_keep_last(self, threads: set[str], keep_last: int) -> None:
        """``prune(strategy="keep_last")``: one transaction removes the rows of each namespace's older checkpoints
        and their writes, nothing else; the reference loses the same rows (``remove_rows``). The metadata here has no
        ``parents`` and no ``DeltaChannel`` counts, so neither the subgraph-call rule nor the ancestors apply."""
        self.tiered.prune(sorted(threads), strategy="keep_last", keep_last=keep_last)
        for thread in sorted(threads):
            gone = self.pruned_in_model(thread, keep_last)
            remove_rows(self.reference, thread, gone)

    def pruned_in_model(self, thread: str, keep_last: int) -> dict[str, list[str]]:
        """Each namespace of the thread keeps its ``keep_last`` greatest ids; return the others, by namespace."""
        gone: dict[str, list[str]] = {}
        for (t, namespace), ids in self.ids.items():
            if t == thread and len(ids) > keep_last:
                kept = sorted(ids)[-keep_last:]
                gone[namespace] = [cid for cid in ids if cid not in kept]
                self.old[(t, namespace)].extend(gone[namespace])
                ids[:] = [cid for cid in ids if cid in kept]
        return gone

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
        for (thread, namespace), ids in [*self.ids.items(), *self.old.items()]:
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
