"""Oracle mode: with limits lifted, every answer equals the stock InMemorySaver's.

A hypothesis state machine drives both savers with the same random sequence of
puts (new threads and namespaces, forks from older checkpoints, re-puts of an
existing id, int and string versions, empty channel values), writes (regular
and special channels, repeated ``(task_id, idx)``, writes before their
checkpoint), reads, lists, deletions and delta-history walks.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from langgraph.checkpoint.memory import InMemorySaver as StockSaver

from langgraph.checkpoint.bounded import BoundedInMemorySaver, InMemoryCheckpointConfig
from langgraph.checkpoint.bounded.engine import StoreLimits
from tests.support import strategies as S
from tests.support.helpers import config

UNBOUNDED = InMemoryCheckpointConfig(**vars(StoreLimits.unbounded()))
CHECKPOINT_NUMBERS = st.integers(min_value=0, max_value=60)  # small, so ids get re-put and written to
WRITES = st.lists(st.tuples(st.one_of(S.channels, S.special_channels), S.values), min_size=1, max_size=3)


def summary(tup: Any) -> Any:
    if tup is None:
        return None
    return (tup.config, tup.checkpoint, tup.metadata, tup.parent_config, tup.pending_writes)


def grouped(tuples: Any) -> dict[tuple[str, str], list[Any]]:
    """List results per (thread, namespace), order kept: the savers may order threads
    and namespaces differently (the stock saver creates entries on reads)."""
    groups: dict[tuple[str, str], list[Any]] = defaultdict(list)
    for tup in tuples:
        configurable = tup.config["configurable"]
        groups[(configurable["thread_id"], configurable["checkpoint_ns"])].append(summary(tup))
    return dict(groups)


class SameAnswersAsStock(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.stock = StockSaver()
        self.ours = BoundedInMemorySaver(config=UNBOUNDED)
        self.ids: dict[tuple[str, str], list[str]] = defaultdict(list)
        self.versions: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.version_counter = 0

    def both(self, method: str, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        return getattr(self.stock, method)(*args, **kwargs), getattr(self.ours, method)(*args, **kwargs)

    def next_version(self, previous: Any, as_int: bool, suffix: float) -> Any:
        counter = int(str(previous).split(".")[0]) if previous is not None else 0
        return counter + 1 if as_int else f"{counter + 1:032}.{suffix:016}"

    @rule(
        data=st.data(),
        thread=S.thread_ids,
        namespace=S.namespaces,
        changed=st.dictionaries(S.channels, S.values, max_size=3),
        emptied=st.lists(S.channels, max_size=2, unique=True),
        int_versions=st.booleans(),
        suffix=st.floats(min_value=0, max_value=1),
        number=CHECKPOINT_NUMBERS,
        source=S.sources,
        step=st.integers(min_value=-1, max_value=6),
        run_id=S.run_ids,
        delta=st.lists(S.channels, max_size=2, unique=True),
    )
    def put(self, data, thread, namespace, changed, emptied, int_versions, suffix, number, source, step, run_id, delta):
        existing = self.ids[(thread, namespace)]
        checkpoint_id = f"1ef{number:05d}"
        # A parent's id is always older than its child's, as in LangGraph (ids are time-ordered): a
        # re-put never closes a cycle, which the stock saver's delta-history walk would follow forever.
        older = [candidate for candidate in existing if candidate < checkpoint_id]
        parent = data.draw(st.sampled_from(older)) if older and data.draw(st.booleans()) else None
        parent_versions = self.versions.get((thread, namespace, parent), {}) if parent else {}
        new_versions = {
            channel: self.next_version(parent_versions.get(channel), int_versions, suffix)
            for channel in [*changed, *emptied]
        }
        checkpoint = {
            "v": 4,
            "id": checkpoint_id,
            "ts": "2026-11-29T00:00:00+00:00",
            "channel_values": {c: v for c, v in changed.items() if c not in emptied},
            "channel_versions": {**parent_versions, **new_versions},
            "versions_seen": {"node": dict(parent_versions)},
            "updated_channels": sorted(new_versions),
        }
        metadata = {"source": source, "step": step, "parents": {}, "run_id": run_id}
        if delta:
            metadata["counters_since_delta_snapshot"] = {c: [1, 1] for c in delta}
        stock_config, our_config = self.both(
            "put", config(thread, namespace, parent), checkpoint, metadata, dict(new_versions)
        )
        assert stock_config == our_config
        if checkpoint_id not in existing:
            existing.append(checkpoint_id)
        self.versions[(thread, namespace, checkpoint_id)] = checkpoint["channel_versions"]

    def stored(self, data: Any) -> tuple[str, str, str]:
        thread, namespace = data.draw(st.sampled_from(sorted(key for key, ids in self.ids.items() if ids)))
        return thread, namespace, data.draw(st.sampled_from(self.ids[(thread, namespace)]))

    def has_checkpoints(self) -> bool:
        return any(self.ids.values())

    @precondition(has_checkpoints)
    @rule(data=st.data(), writes=WRITES, task_id=S.task_ids, task_path=S.task_paths)
    def put_writes_to_a_stored_checkpoint(self, data, writes, task_id, task_path):
        thread, namespace, checkpoint_id = self.stored(data)
        self.both("put_writes", config(thread, namespace, checkpoint_id), writes, task_id, task_path)

    @rule(
        thread=S.thread_ids,
        namespace=S.namespaces,
        writes=WRITES,
        task_id=S.task_ids,
        task_path=S.task_paths,
        number=CHECKPOINT_NUMBERS,
    )
    def put_writes_anywhere(self, thread, namespace, writes, task_id, task_path, number):
        """Writes to any id, often one whose checkpoint is not stored (yet)."""
        self.both("put_writes", config(thread, namespace, f"1ef{number:05d}"), writes, task_id, task_path)

    @precondition(has_checkpoints)
    @rule(data=st.data())
    def get_a_stored_checkpoint(self, data):
        stock, ours = self.both("get_tuple", config(*self.stored(data)))
        assert summary(ours) == summary(stock)

    @rule(data=st.data(), thread=S.thread_ids, namespace=S.namespaces, by_id=st.booleans())
    def get_tuple(self, data, thread, namespace, by_id):
        existing = self.ids[(thread, namespace)]
        checkpoint_id = data.draw(st.sampled_from(existing)) if by_id and existing else None
        stock, ours = self.both("get_tuple", config(thread, namespace, checkpoint_id))
        assert summary(ours) == summary(stock)

    @rule(
        data=st.data(),
        thread=st.one_of(st.none(), S.thread_ids),
        namespace=st.one_of(st.none(), S.namespaces),
        limit=st.one_of(st.none(), st.integers(min_value=0, max_value=4)),
        filter=st.one_of(
            st.none(),
            st.fixed_dictionaries({"source": S.sources}),
            st.fixed_dictionaries({"run_id": S.run_ids, "step": st.integers(min_value=-1, max_value=6)}),
        ),
        use_before=st.booleans(),
    )
    def list(self, data, thread, namespace, limit, filter, use_before):
        if thread is None:
            list_config = None
        else:
            configurable: dict[str, Any] = {"thread_id": thread}
            if namespace is not None:
                configurable["checkpoint_ns"] = namespace
            list_config = {"configurable": configurable}
        single_namespace = thread is not None and namespace is not None
        if not single_namespace:
            limit = None  # across namespaces, which ones a limit reaches depends on their order
        before = None
        all_ids = sorted({cid for ids in self.ids.values() for cid in ids})
        if use_before and all_ids:
            before = {"configurable": {"checkpoint_id": data.draw(st.sampled_from(all_ids))}}
        kwargs = {"filter": filter, "before": before, "limit": limit}
        stock = list(self.stock.list(list_config, **kwargs))
        ours = list(self.ours.list(list_config, **kwargs))
        assert grouped(ours) == grouped(stock)
        if single_namespace:
            assert [summary(t) for t in ours] == [summary(t) for t in stock]

    @rule(thread=S.thread_ids, roll=st.integers(min_value=0, max_value=3))
    def delete_thread(self, thread, roll):
        if roll != 3:
            return  # deletions are kept rare so that threads grow

        self.both("delete_thread", thread)
        for key in [key for key in self.ids if key[0] == thread]:
            del self.ids[key]

    @rule(
        data=st.data(),
        thread=S.thread_ids,
        namespace=S.namespaces,
        channels=st.lists(st.one_of(S.channels, S.special_channels), max_size=3),
        by_id=st.booleans(),
    )
    def delta_history(self, data, thread, namespace, channels, by_id):
        existing = self.ids[(thread, namespace)]
        checkpoint_id = data.draw(st.sampled_from(existing)) if by_id and existing else None
        cfg = config(thread, namespace, checkpoint_id)
        stock = self.stock.get_delta_channel_history(config=cfg, channels=channels)
        ours = self.ours.get_delta_channel_history(config=cfg, channels=channels)
        assert ours == stock

    @invariant()
    def engine_is_consistent(self):
        self.ours.check()


TestSameAnswersAsStock = SameAnswersAsStock.TestCase
