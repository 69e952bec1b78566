"""Bounded mode: tiny limits, so eviction, expiry and rejection happen on most steps.

A shadow stock ``InMemorySaver`` receives every operation our saver accepted.
After every step:

* the engine's ``check()`` passes (totals equal a recount, limits hold);
* every thread is either exactly what the shadow holds, pending writes compared
  by value, or entirely absent (evicted or expired whole, never in part);
* LRU order is modelled: an operation that uses a thread moves it to the most
  recently used end and leaves the others in order; the threads an operation
  evicts are the least recently used ones it may evict (never the threads it
  writes or copies from), and no more than it needed: putting back the last one
  evicted would break a limit;
* a rejected operation left the store exactly as before;
* ancestry holds: a stored checkpoint's parent is stored in the same thread and
  namespace unless ``delete_for_runs`` or ``prune`` removed it, and a deletion
  never changes a surviving checkpoint's delta-channel history;
* deleting every thread brings every counter and byte total back to zero.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from langgraph.checkpoint.memory import InMemorySaver as StockSaver

from langgraph.checkpoint.bounded import BoundedInMemorySaver, InMemoryCheckpointConfig
from langgraph.checkpoint.bounded.engine import KIB, CheckpointCapacityError
from tests.conftest import FakeClock
from tests.contract.test_model_oracle import grouped
from tests.support import strategies as S
from tests.support.helpers import config, fingerprint

LIMITS = InMemoryCheckpointConfig(
    idle_ttl_seconds=300,
    max_threads=3,
    max_namespaces_per_thread=2,
    max_checkpoints_per_thread=4,
    max_checkpoint_bytes=3 * KIB,
    max_pending_write_bytes=4 * KIB,
    max_total_bytes=6 * KIB,
)
PAYLOADS = st.one_of(S.values, S.big_values)
NAMESPACES = ("", "sub:1|inner:2", "sub:3")
DELTA = "messages"  # the channel metadata marks as a DeltaChannel


class BoundedInvariants(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.ours = BoundedInMemorySaver(config=LIMITS, clock=self.clock)
        self.shadow = StockSaver()
        self.detached: dict[tuple[str, str], set[str]] = defaultdict(set)
        self.counter = 0
        self.rejections = 0
        self.evicted_total = 0

    # --- helpers -------------------------------------------------------------------------

    def stored_ids(self, thread: str, namespace: str) -> list[str]:
        return [t.checkpoint["id"] for t in self.ours.list(config(thread, namespace))]

    def attempt(self, action: Any, on_success: Any, uses: tuple[str, ...] = ()) -> None:
        """Run an operation; on success mirror it into the shadow and check what it did to the LRU
        order, on rejection prove nothing changed.

        ``uses`` are the threads the operation uses, in order: a successful
        operation moves them to the most recently used end and never evicts them.
        """
        before = fingerprint(self.ours.store)
        lru_before = self.ours.store.thread_ids()
        sizes = {thread: self.ours.export_thread(thread).nbytes for thread in lru_before}
        due = self.due(lru_before)
        try:
            action(self.ours)
        except CheckpointCapacityError as error:
            assert fingerprint(self.ours.store) == before, f"rejected {error.limit} changed the store"
            self.rejections += 1
            return
        self.check_lru(lru_before, sizes, due, uses)
        on_success(self.shadow)

    def due(self, threads: list[str]) -> set[str]:
        """Threads whose idle time has reached the TTL: expiry may remove them at any operation."""
        now, ttl = self.clock(), self.ours.config.idle_ttl_seconds
        return {thread for thread in threads if now - self.ours.store.last_used(thread) >= ttl}

    def check_lru(self, lru_before: list[str], sizes: dict[str, int], due: set[str], uses: tuple[str, ...]) -> None:
        lru_after = self.ours.store.thread_ids()
        present = set(lru_after)
        expected = [thread for thread in lru_before if thread in present and thread not in uses]
        expected += [thread for thread in dict.fromkeys(uses) if thread in present]
        assert lru_after == expected, f"LRU order {lru_after}, expected {expected}"
        candidates = [thread for thread in lru_before if thread not in due and thread not in uses]
        evicted = [thread for thread in candidates if thread not in present]
        assert evicted == candidates[: len(evicted)], f"evicted {evicted}, not the least recently used of {candidates}"
        if evicted:
            stats = self.ours.stats()
            last = evicted[-1]
            assert stats.total_bytes + sizes[last] > LIMITS.max_total_bytes or stats.threads + 1 > LIMITS.max_threads, (
                f"evicted {last} without need"
            )
        self.evicted_total += len(evicted)

    def protected_histories(self, threads: list[str]) -> dict[tuple[str, str, str], Any]:
        """Delta history of the marked channel wherever a read would rebuild it from ancestors."""
        histories = {}
        for thread in threads:
            for tup in self.ours.list({"configurable": {"thread_id": thread}}):
                marked = DELTA in tup.metadata.get("counters_since_delta_snapshot", {})
                unseeded = DELTA in tup.checkpoint["channel_versions"] and DELTA not in tup.checkpoint["channel_values"]
                if marked and unseeded:
                    key = (thread, tup.config["configurable"]["checkpoint_ns"], tup.checkpoint["id"])
                    histories[key] = self.ours.get_delta_channel_history(config=tup.config, channels=[DELTA])
        return histories

    def remove_from_shadow(self, thread: str) -> None:
        self.shadow.delete_thread(thread)
        for key in [key for key in self.detached if key[0] == thread]:
            del self.detached[key]

    def sync_shadow_removals(self, threads: list[str]) -> None:
        """After prune, delete_for_runs or a put that pruned, drop from the shadow what our saver removed:
        checkpoints (with their writes), and namespaces it removed whole (with writes to unstored ids)."""
        for thread in threads:
            export = self.ours.export_thread(thread)
            kept = set(export.namespaces) if export is not None else set()
            for key in [key for key in self.shadow.writes if key[0] == thread and key[1] not in kept]:
                del self.shadow.writes[key]
            for namespace, checkpoints in list(self.shadow.storage.get(thread, {}).items()):
                kept = set(self.stored_ids(thread, namespace))
                for checkpoint_id in [c for c in checkpoints if c not in kept]:
                    del checkpoints[checkpoint_id]
                    self.shadow.writes.pop((thread, namespace, checkpoint_id), None)
                    self.detached[(thread, namespace)].add(checkpoint_id)

    # --- rules -------------------------------------------------------------------------------

    @rule(
        data=st.data(),
        thread=S.thread_ids,
        namespace=S.namespaces,
        changed=st.dictionaries(S.channels, PAYLOADS, max_size=2),
        run_id=S.run_ids,
        mark_delta=st.booleans(),
    )
    def put(self, data, thread, namespace, changed, run_id, mark_delta):
        stored = self.stored_ids(thread, namespace)
        parent = data.draw(st.sampled_from(stored)) if stored and data.draw(st.booleans()) else None
        values = dict(changed)
        if mark_delta:
            values.pop(DELTA, None)  # stored empty: rebuilt from ancestors' writes
        self.put_checkpoint(thread, namespace, parent, values, list(changed), run_id, mark_delta)

    @rule(thread=S.thread_ids, namespace=S.namespaces, value=S.values, run_id=S.run_ids, snapshot=st.booleans())
    def delta_step(self, thread, namespace, value, run_id, snapshot):
        """What a DeltaChannel super-step stores: a task's write to the channel under the
        latest checkpoint, then a child that stores the channel empty (or a snapshot)."""
        stored = self.stored_ids(thread, namespace)
        if not stored:
            return
        parent = stored[0]
        write = (config(thread, namespace, parent), [(DELTA, value)], f"task-{self.counter}", "~__pregel_pull, n")
        self.attempt(lambda s: s.put_writes(*write), lambda s: s.put_writes(*write), uses=(thread,))
        if parent in self.stored_ids(thread, namespace):
            values = {DELTA: ["snapshot", value]} if snapshot else {}
            self.put_checkpoint(thread, namespace, parent, values, [DELTA], run_id, mark_delta=not snapshot)

    def put_checkpoint(
        self,
        thread: str,
        namespace: str,
        parent: str | None,
        values: dict[str, Any],
        changed: list[str],
        run_id: str,
        mark_delta: bool,
    ) -> None:
        parent_versions = {}
        if parent is not None:
            parent_versions = self.ours.get_tuple(config(thread, namespace, parent)).checkpoint["channel_versions"]
        self.counter += 1
        new_versions = {channel: f"{self.counter:032}.0" for channel in changed}
        checkpoint = {
            "v": 4,
            "id": f"1ef{self.counter:06d}",
            "ts": "2026-11-29T00:00:00+00:00",
            "channel_values": values,
            "channel_versions": {**parent_versions, **new_versions},
            "versions_seen": {},
            "updated_channels": sorted(new_versions),
        }
        metadata: dict[str, Any] = {"source": "loop", "step": self.counter, "parents": {}, "run_id": run_id}
        if mark_delta:
            metadata["counters_since_delta_snapshot"] = {DELTA: [1, 1]}
        args = (config(thread, namespace, parent), checkpoint, metadata, new_versions)
        config_ = self.ours.config
        rolling = "prune_oldest" in (config_.on_checkpoint_limit, config_.on_namespace_limit)
        before = self.protected_histories([thread]) if rolling else {}

        def mirror(shadow: StockSaver) -> None:
            shadow.put(*args)
            if rolling:  # the put may have pruned the thread's oldest checkpoints or namespaces
                self.sync_shadow_removals([thread])
                self.assert_histories_kept(before)

        self.attempt(lambda s: s.put(*args), mirror, uses=(thread,))

    @rule(
        data=st.data(),
        thread=S.thread_ids,
        namespace=S.namespaces,
        writes=st.lists(st.tuples(st.one_of(S.channels, S.special_channels), PAYLOADS), min_size=1, max_size=3),
        task_id=S.task_ids,
        task_path=S.task_paths,
    )
    def put_writes(self, data, thread, namespace, writes, task_id, task_path):
        stored = self.stored_ids(thread, namespace)
        checkpoint_id = data.draw(st.sampled_from(stored)) if stored else "1ef-pending"
        args = (config(thread, namespace, checkpoint_id), writes, task_id, task_path)

        def mirror(shadow: StockSaver) -> None:
            shadow.put_writes(*args)
            if self.ours.config.on_namespace_limit == "prune_oldest":  # a new namespace may have pruned others
                self.sync_shadow_removals([thread])

        self.attempt(lambda s: s.put_writes(*args), mirror, uses=(thread,))

    @rule(thread=S.thread_ids, namespace=S.namespaces)
    def read(self, thread, namespace):
        self.ours.purge_expired()  # what is due goes first, so that the read below may only touch
        before = fingerprint(self.ours.store)
        lru_before = self.ours.store.thread_ids()
        tup = self.ours.get_tuple(config(thread, namespace))
        if tup is None:
            assert fingerprint(self.ours.store) == before, "a read miss changed the store"
        else:
            assert self.ours.store.thread_ids() == [t for t in lru_before if t != thread] + [thread]

    @rule(seconds=st.sampled_from([1, 10, 100, 301]))
    def time_passes(self, seconds):
        self.clock.advance(seconds)

    @rule()
    def purge_expired(self):
        self.ours.purge_expired()

    @rule(thread=S.thread_ids)
    def delete_thread(self, thread):
        self.ours.delete_thread(thread)
        self.remove_from_shadow(thread)

    @rule(runs=st.lists(S.run_ids, min_size=1, max_size=2, unique=True))
    def delete_for_runs(self, runs):
        threads = list(self.ours.store.thread_ids())
        before = self.protected_histories(threads)
        self.ours.delete_for_runs(runs)
        self.sync_shadow_removals(threads)
        self.assert_histories_kept(before)

    @rule(
        threads=st.lists(S.thread_ids, min_size=1, max_size=2, unique=True),
        strategy=st.sampled_from(["delete", "keep_latest", "keep_last"]),
        keep_last=st.integers(1, 3),
    )
    def prune(self, threads, strategy, keep_last):
        kept = 1 if strategy == "keep_latest" else keep_last
        newest = {(t, ns): ids[:kept] for t in threads for ns in NAMESPACES if (ids := self.stored_ids(t, ns))}
        before = self.protected_histories(threads)
        if strategy == "keep_last":
            self.ours.prune(threads, strategy="keep_last", keep_last=keep_last)
        else:
            self.ours.prune(threads, strategy=strategy)
        if strategy == "delete":
            for thread in threads:
                self.remove_from_shadow(thread)
            return
        self.sync_shadow_removals(threads)
        for (thread, namespace), checkpoint_ids in newest.items():
            assert self.stored_ids(thread, namespace)[: len(checkpoint_ids)] == checkpoint_ids, "prune lost a newest"
        self.assert_histories_kept(before)

    @rule(source=S.thread_ids, destination=S.thread_ids)
    def copy_thread(self, source, destination):
        target = destination
        if source == target:
            return

        def mirror(shadow: StockSaver) -> None:
            for namespace, checkpoints in shadow.storage.get(source, {}).items():
                shadow.storage[target][namespace].update(checkpoints)
            for (thread, namespace, checkpoint_id), writes in list(shadow.writes.items()):
                if thread == source:
                    shadow.writes[(target, namespace, checkpoint_id)] = {
                        **shadow.writes.get((target, namespace, checkpoint_id), {}),
                        **writes,
                    }
            for (thread, namespace, channel, version), blob in list(shadow.blobs.items()):
                if thread == source:
                    shadow.blobs[(target, namespace, channel, version)] = blob
            for namespace, removed in list(self.detached.items()):
                if namespace[0] == source:
                    self.detached[(target, namespace[1])] |= removed

        live = source in self.ours.store.thread_ids() and source not in self.due([source])
        self.attempt(lambda s: s.copy_thread(source, target), mirror, uses=(target, source) if live else ())

    @precondition(lambda self: self.counter > 0)
    @rule(roll=st.integers(min_value=0, max_value=9))
    def delete_everything(self, roll):
        if roll != 9:
            return
        for thread in list(self.ours.store.thread_ids()):
            self.ours.delete_thread(thread)
            self.remove_from_shadow(thread)
        stats = self.ours.stats()
        assert (stats.threads, stats.namespaces, stats.checkpoints, stats.pending_writes) == (0, 0, 0, 0)
        assert (stats.blobs, stats.total_bytes) == (0, 0)

    # --- invariants ----------------------------------------------------------------------------

    def assert_histories_kept(self, before: dict[tuple[str, str, str], Any]) -> None:
        for (thread, namespace, checkpoint_id), history in before.items():
            if checkpoint_id in self.stored_ids(thread, namespace):
                after = self.ours.get_delta_channel_history(
                    config=config(thread, namespace, checkpoint_id), channels=[DELTA]
                )
                assert after == history, f"a deletion changed the delta history of {checkpoint_id}"

    @invariant()
    def engine_is_consistent(self):
        # Expiry is due as soon as time passes; carry it out now so that the
        # next step starts with nothing pending (reads below would expire too).
        self.ours.purge_expired()
        self.ours.check()

    @invariant()
    def each_thread_is_whole_or_absent(self):
        present = set(self.ours.store.thread_ids())
        for thread in list(self.shadow.storage) + [key[0] for key in self.shadow.writes]:
            thread_config = {"configurable": {"thread_id": thread}}
            if thread not in present:
                assert list(self.ours.list(thread_config)) == []
                self.remove_from_shadow(thread)
                continue
            assert grouped(self.ours.list(thread_config)) == grouped(self.shadow.list(thread_config))
            export = self.ours.export_thread(thread)
            for namespace in NAMESPACES:
                space = export.namespaces.get(namespace)
                ours = {
                    (w.task_id, w.idx): (w.channel, self.ours.serde.loads_typed(w.value), w.task_path)
                    for w in (space.writes.get("1ef-pending", ()) if space else ())
                }
                shadow = {
                    key: (channel, self.shadow.serde.loads_typed(value), path)
                    for key, (_, channel, value, path) in self.shadow.writes.get(
                        (thread, namespace, "1ef-pending"), {}
                    ).items()
                }
                assert ours == shadow, f"pending writes of {thread}/{namespace} differ"

    @invariant()
    def every_eviction_was_seen(self):
        assert self.ours.stats().evicted_threads == self.evicted_total

    @invariant()
    def ancestry_holds(self):
        for thread in self.ours.store.thread_ids():
            for tup in self.ours.list({"configurable": {"thread_id": thread}}):
                if tup.parent_config is None:
                    continue
                namespace = tup.config["configurable"]["checkpoint_ns"]
                parent_id = tup.parent_config["configurable"]["checkpoint_id"]
                stored = self.ours.get_tuple(tup.parent_config) is not None
                assert stored or parent_id in self.detached[(thread, namespace)], (
                    f"{thread}/{namespace}/{tup.checkpoint['id']} lost its parent {parent_id}"
                )

    def teardown(self):
        for thread in list(self.ours.store.thread_ids()):
            self.ours.delete_thread(thread)
        stats = self.ours.stats()
        assert (stats.threads, stats.checkpoints, stats.pending_writes, stats.blobs, stats.total_bytes) == (
            0,
            0,
            0,
            0,
            0,
        )


TestBoundedInvariants = BoundedInvariants.TestCase


ROLLING_LIMITS = InMemoryCheckpointConfig(
    **{
        **vars(LIMITS),
        "on_checkpoint_limit": "prune_oldest",
        "max_total_bytes": 64 * KIB,  # room enough that threads live long enough to reach the checkpoint limit
        "idle_ttl_seconds": 10**6,
        "max_threads": 4,
        "max_checkpoints_per_thread": 2,
    }
)


class RollingHistoryInvariants(BoundedInvariants):
    """The same machine with ``on_checkpoint_limit="prune_oldest"``: puts over the limit prune."""

    def __init__(self) -> None:
        super().__init__()
        self.ours = BoundedInMemorySaver(config=ROLLING_LIMITS, clock=self.clock)


TestRollingHistoryInvariants = RollingHistoryInvariants.TestCase


NAMESPACE_LIMITS = InMemoryCheckpointConfig(
    **{
        **vars(ROLLING_LIMITS),
        "on_namespace_limit": "prune_oldest",
        "max_checkpoints_per_thread": 6,
        "idle_ttl_seconds": 10**6,
    }
)


class NamespacePruningInvariants(BoundedInvariants):
    """The same machine with both rolling policies (two namespaces per thread, three in play): a write
    to a third namespace removes a completed one whole, or is refused."""

    def __init__(self) -> None:
        super().__init__()
        self.ours = BoundedInMemorySaver(config=NAMESPACE_LIMITS, clock=self.clock)

    @rule(thread=S.thread_ids, value=S.values, run_id=S.run_ids)
    def subgraph_call(self, thread, value, run_id):
        """What a node that calls a subgraph stores: a root checkpoint, then the subgraph's first
        checkpoint under a namespace of its own."""
        stored = self.stored_ids(thread, "")
        self.put_checkpoint(thread, "", stored[0] if stored else None, {"count": value}, ["count"], run_id, False)
        self.put_checkpoint(thread, f"node:{self.counter}", None, {"count": value}, ["count"], run_id, False)

    @invariant()
    def pruning_happens(self):
        stats = self.ours.stats()
        assert stats.namespaces <= 2 * stats.threads


TestNamespacePruningInvariants = NamespacePruningInvariants.TestCase
