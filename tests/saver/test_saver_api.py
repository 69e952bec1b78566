"""The saver's API in detail: stock-identical answers, ancestry-safe deletions,
shallow copies, serializers and async offloading."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.memory import InMemorySaver as StockSaver
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph.checkpoint.bounded import BoundedInMemorySaver
from langgraph.checkpoint.bounded.saver import LIST_BATCH
from tests.support.graphs import Runner, delta_channel_conversation, delta_graph, extend, linear
from tests.support.helpers import config, make_checkpoint, put

# --- answers equal to the stock saver's ---------------------------------------------------------


def both() -> list[Any]:
    return [StockSaver(), BoundedInMemorySaver()]


def drive(saver: Any) -> dict[str, Any]:
    """A fixed sequence of raw calls: parallel tasks, special channels, duplicates,
    writes before their checkpoint, two namespaces and a fork."""
    root = put(
        saver, "t", {"a": "A0", "b": "B0"}, metadata={"source": "input", "step": -1, "run_id": "r1"}, checkpoint_id="c1"
    )
    child = put(
        saver, "t", {"a": "A1"}, parent=root, metadata={"source": "loop", "step": 0, "run_id": "r1"}, checkpoint_id="c2"
    )
    saver.put_writes(child, [("a", "from-z"), ("b", "z2")], "task-z", "~__pregel_pull, zeta")
    saver.put_writes(child, [("a", "from-a")], "task-a", "~__pregel_pull, alpha")
    saver.put_writes(child, [("a", "ignored duplicate")], "task-a", "~__pregel_pull, alpha")
    saver.put_writes(child, [("__error__", "first error")], "task-q", "~__pregel_push, 0")
    saver.put_writes(child, [("__error__", "second error wins")], "task-q", "~__pregel_push, 0")
    saver.put_writes(child, [("a", "no path")], "task-0")
    early = config("t", "", "c4-not-yet-stored")
    saver.put_writes(early, [("a", "early")], "task-e")
    put(
        saver,
        "t",
        {"a": "sub"},
        namespace="sub:1",
        metadata={"source": "loop", "step": 1, "run_id": "r2"},
        checkpoint_id="s1",
    )
    fork = put(
        saver,
        "t",
        {"b": "B-fork"},
        parent=root,
        metadata={"source": "fork", "step": 1, "run_id": "r3"},
        checkpoint_id="c3",
    )
    saver.put_writes(fork, [("b", "after fork")], "task-f", "~__pregel_pull, f")
    return {"root": root, "child": child, "fork": fork, "early": early}


def observe(saver: Any, configs: dict[str, Any]) -> Any:
    def summary(tup: Any) -> Any:
        if tup is None:
            return None
        return (
            tup.config["configurable"],
            tup.checkpoint["channel_values"],
            tup.metadata,
            tup.parent_config,
            tup.pending_writes,
        )

    lists = {
        "all": [summary(t) for t in saver.list(None)],
        "thread, every namespace": [summary(t) for t in saver.list({"configurable": {"thread_id": "t"}})],
        "root only": [summary(t) for t in saver.list(config("t"))],
        "limit 2": [summary(t) for t in saver.list(config("t"), limit=2)],
        "limit 0": [summary(t) for t in saver.list(config("t"), limit=0)],
        "before fork": [summary(t) for t in saver.list(config("t"), before=configs["fork"])],
        "filter": [summary(t) for t in saver.list(None, filter={"run_id": "r1", "step": 0})],
        "by id": [summary(t) for t in saver.list(configs["child"])],
    }
    reads = {name: summary(saver.get_tuple(cfg)) for name, cfg in configs.items()}
    reads["latest"] = summary(saver.get_tuple(config("t")))
    reads["latest sub"] = summary(saver.get_tuple(config("t", "sub:1")))
    histories = {
        name: saver.get_delta_channel_history(config=cfg, channels=["a", "b", "never"]) for name, cfg in configs.items()
    }
    return lists, reads, histories


def test_raw_calls_give_the_stock_answers_including_write_order() -> None:
    stock, ours = both()
    expected = observe(stock, drive(stock))
    actual = observe(ours, drive(ours))
    assert actual == expected
    writes = actual[1]["child"][4]
    assert [w[0] for w in writes] == ["task-0", "task-a", "task-z", "task-z", "task-q"]
    assert ("task-q", "__error__", "second error wins") in writes
    ours.check()


def test_async_methods_give_the_same_answers_as_sync_ones() -> None:
    ours = BoundedInMemorySaver()
    configs = drive(ours)

    async def read() -> Any:
        tuples = [await ours.aget_tuple(cfg) for cfg in configs.values()]
        listed = [t async for t in ours.alist(None, filter={"run_id": "r1"})]
        history = await ours.aget_delta_channel_history(config=configs["fork"], channels=["a", "b"])
        return tuples, listed, history

    tuples, listed, history = asyncio.run(read())
    assert tuples == [ours.get_tuple(cfg) for cfg in configs.values()]
    assert listed == list(ours.list(None, filter={"run_id": "r1"}))
    assert history == ours.get_delta_channel_history(config=configs["fork"], channels=["a", "b"])


def test_reads_hand_out_fresh_objects() -> None:
    ours = BoundedInMemorySaver()
    stored = put(ours, "t", {"items": [1, 2]})
    first = ours.get_tuple(stored)
    first.checkpoint["channel_values"]["items"].append(3)
    assert ours.get_tuple(stored).checkpoint["channel_values"]["items"] == [1, 2]


def test_a_list_iterated_while_checkpoints_are_deleted_yields_whole_tuples_only() -> None:
    ours = BoundedInMemorySaver()
    parent = None
    steps = LIST_BATCH + 8
    for step in range(steps):
        parent = put(ours, "t", {"step": step}, parent=parent, version=step + 1)
    iterator = ours.list(config("t"))
    first = next(iterator)
    ours.prune(["t"], strategy="keep_latest")
    rest = list(iterator)
    assert first.checkpoint["channel_values"] == {"step": steps - 1}
    # The rest of the batch read with the first is yielded whole; the later checkpoints are gone.
    assert [t.checkpoint["channel_values"] for t in rest] == [{"step": s} for s in range(steps - 2, 7, -1)]
    assert all(t.parent_config is not None for t in rest)


# --- DeltaChannel-safe deletions ----------------------------------------------------------------


def delta_thread(ours: BoundedInMemorySaver) -> Runner:
    calls: dict[str, int] = {}
    runner = Runner(delta_graph(ours, calls), use_async=False, durability="sync", calls=calls)
    asyncio.run(delta_channel_conversation(runner))
    return runner


def test_prune_keep_latest_keeps_what_the_latest_delta_state_needs() -> None:
    ours = BoundedInMemorySaver()
    runner = delta_thread(ours)
    cfg = {"configurable": {"thread_id": "delta"}}
    before = runner.app.get_state(cfg).values
    count = ours.stats().checkpoints
    ours.prune(["delta"])
    assert 1 < ours.stats().checkpoints < count, "prune kept everything or cut the delta chain"
    assert runner.app.get_state(cfg).values == before
    ours.check()


class SlowSnapshotState(TypedDict, total=False):
    items: Annotated[list, DeltaChannel(extend, snapshot_frequency=4)]


def snapshot_every_two_runs_graph(checkpointer: BoundedInMemorySaver) -> Any:
    """Two updates per run (input and reply), so a snapshot lands every other run
    and a run's checkpoints rebuild from the previous run's writes."""
    builder = linear(SlowSnapshotState, {"reply": lambda state: {"items": [f"reply to {state['items'][-1]}"]}})
    return builder.compile(checkpointer=checkpointer)


def test_delete_for_runs_never_cuts_a_surviving_delta_chain() -> None:
    ours = BoundedInMemorySaver()
    app = snapshot_every_two_runs_graph(ours)
    for turn in range(5):
        app.invoke({"items": [f"user {turn}"]}, {"configurable": {"thread_id": "delta", "run_id": f"run-{turn}"}})
    cfg = {"configurable": {"thread_id": "delta"}}
    kept_runs = {"run-3", "run-4"}
    before = {
        s.config["configurable"]["checkpoint_id"]: s.values
        for s in app.get_state_history(cfg)
        if s.metadata["run_id"] in kept_runs
    }
    count = ours.stats().checkpoints
    ours.delete_for_runs(["run-0", "run-1", "run-2"])
    remaining = list(app.get_state_history(cfg))
    assert len(remaining) < count, "nothing was deleted"
    after = {
        s.config["configurable"]["checkpoint_id"]: s.values for s in remaining if s.metadata["run_id"] in kept_runs
    }
    assert after == before
    kept_ancestors = {s.metadata["run_id"] for s in remaining} - kept_runs
    assert kept_ancestors, "run-3's first checkpoints need writes of run-2 and they were not kept"
    ours.check()


def test_copy_thread_carries_the_whole_chain() -> None:
    ours = BoundedInMemorySaver()
    runner = delta_thread(ours)
    source, target = {"configurable": {"thread_id": "delta"}}, {"configurable": {"thread_id": "copy"}}
    ours.copy_thread("delta", "copy")
    assert runner.app.get_state(target).values == runner.app.get_state(source).values
    assert [s.values for s in runner.app.get_state_history(target)] == [
        s.values for s in runner.app.get_state_history(source)
    ]
    runner.app.invoke({"items": ["only on the copy"]}, target)
    assert "only on the copy" not in runner.app.get_state(source).values["items"]
    assert ours.stats().total_bytes > 0
    ours.check()


def test_delete_thread_and_prune_delete_free_every_byte() -> None:
    ours = BoundedInMemorySaver()
    delta_thread(ours)
    put(ours, "other", {"a": 1})
    ours.copy_thread("delta", "copy")
    ours.delete_thread("delta")
    ours.prune(["copy", "other"], strategy="delete")
    stats = ours.stats()
    assert (stats.threads, stats.checkpoints, stats.pending_writes, stats.blobs, stats.total_bytes) == (0, 0, 0, 0, 0)
    ours.check()


def test_prune_rejects_an_unknown_strategy() -> None:
    with pytest.raises(ValueError, match="strategy"):
        BoundedInMemorySaver().prune(["t"], strategy="keep_oldest")


# --- shallow copies and serializers -------------------------------------------------------------


def test_the_allowlist_copy_shares_the_store() -> None:
    ours = BoundedInMemorySaver(serde=JsonPlusSerializer(allowed_msgpack_modules=None))
    copy = ours.with_allowlist([("tests", "helpers", "Anything")])
    assert copy is not ours and copy.store is ours.store
    put(copy, "t", {"a": 1})
    assert ours.stats().checkpoints == 1 and ours.get_tuple(config("t")) is not None


STRICT_SCRIPT = """
import operator
from typing import Annotated, TypedDict
from langgraph.graph import StateGraph, START
from langgraph.checkpoint.bounded import BoundedInMemorySaver

class State(TypedDict):
    log: Annotated[list, operator.add]

builder = StateGraph(State)
builder.add_node("step", lambda s: {"log": ["x"]})
builder.add_edge(START, "step")
saver = BoundedInMemorySaver()
app = builder.compile(checkpointer=saver)
assert app.checkpointer is not saver, "compile() did not make its shallow copy"
for i in range(3):
    app.invoke({"log": [i]}, {"configurable": {"thread_id": f"t{i}"}})
assert app.checkpointer.stats() == saver.stats(), (app.checkpointer.stats(), saver.stats())
assert saver.stats().threads == 3 and saver.stats().total_bytes > 0
saver.check()
print("ok")
"""


def test_strict_msgpack_compile_copy_and_original_agree_on_every_counter() -> None:
    env = {**os.environ, "LANGGRAPH_STRICT_MSGPACK": "true"}
    result = subprocess.run(
        [sys.executable, "-c", STRICT_SCRIPT], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_an_encrypting_serializer_is_used_for_every_payload() -> None:
    serde = EncryptedSerializer.from_pycryptodome_aes(key=b"0123456789abcdef")
    ours = BoundedInMemorySaver(serde=serde)
    stored = put(ours, "t", {"secret": "plain text"})
    ours.put_writes(stored, [("secret", "also plain")], "task")
    view = ours.store.get("t", "")
    assert view is not None
    payloads = [view.record.checkpoint, view.record.metadata, *view.channel_values.values(), view.writes[0].value]
    assert all(type_tag.endswith("+aes") for type_tag, _ in payloads)
    assert all(b"plain" not in data for _, data in payloads)
    assert ours.get_tuple(stored).checkpoint["channel_values"] == {"secret": "plain text"}


def test_the_default_serializer_refuses_pickle_and_a_refused_value_stores_nothing() -> None:
    ours = BoundedInMemorySaver()
    assert isinstance(ours.serde, JsonPlusSerializer) and ours.serde.pickle_fallback is False
    with pytest.raises(TypeError):
        put(ours, "t", {"a": threading.Lock()})
    assert ours.stats().threads == 0


# --- async offloading --------------------------------------------------------------------------


class ThreadRecordingSerializer(JsonPlusSerializer):
    """Records which thread each (de)serialization ran in."""

    def __init__(self) -> None:
        super().__init__()
        self.dump_threads: list[str] = []
        self.load_threads: list[str] = []

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        self.dump_threads.append(threading.current_thread().name)
        return super().dumps_typed(obj)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        self.load_threads.append(threading.current_thread().name)
        return super().loads_typed(data)


@pytest.mark.parametrize(("size", "off_loop"), [(100, False), (300_000, True)])
def test_async_calls_move_only_large_payloads_off_the_event_loop(size: int, off_loop: bool) -> None:
    serde = ThreadRecordingSerializer()
    ours = BoundedInMemorySaver(serde=serde)
    checkpoint = make_checkpoint({"doc": "d" * size})

    async def scenario() -> str:
        stored = await ours.aput(config("t"), checkpoint, {}, dict(checkpoint["channel_versions"]))
        await ours.aput_writes(stored, [("doc", "w" * size)], "task")
        await ours.aget_tuple(stored)
        return threading.current_thread().name

    loop_thread = asyncio.run(scenario())
    used = set(serde.dump_threads + serde.load_threads)
    assert (used != {loop_thread}) is off_loop
    assert (loop_thread in used) is not off_loop


# --- small things users rely on -------------------------------------------------------------------


def test_next_version_has_the_stock_format_and_accepts_int_versions() -> None:
    ours = BoundedInMemorySaver()
    first = ours.get_next_version(None, None)
    assert first.startswith("0" * 31 + "1.") and len(first.split(".")[0]) == 32
    assert ours.get_next_version(first, None).startswith("0" * 31 + "2.")
    assert ours.get_next_version(41, None).startswith("0" * 30 + "42.")


def test_context_managers_return_the_saver() -> None:
    ours = BoundedInMemorySaver()
    with ours as entered:
        assert entered is ours

    async def enter() -> Any:
        async with ours as entered_async:
            return entered_async

    assert asyncio.run(enter()) is ours


def test_engine_limits_are_accepted_as_the_config() -> None:
    from langgraph.checkpoint.bounded.engine import StoreLimits

    ours = BoundedInMemorySaver(config=StoreLimits(max_threads=5))
    assert ours.config.max_threads == 5 and ours.config.async_offload_bytes == 64 * 1024
    assert asyncio.run(ours.aget_tuple(config("t"))) is None
    with pytest.raises(ValueError, match="InMemoryCheckpointConfig"):
        BoundedInMemorySaver(config={"max_threads": 5})  # type: ignore[arg-type]


# --- parent links that loop ----------------------------------------------------------------------


def test_walks_along_parent_links_stop_on_a_cycle() -> None:
    """LangGraph never makes a cycle (a parent's id is older than its child's), but a caller can:
    re-putting an id under a younger parent closes one. Every walk of parent links still ends."""
    saver = BoundedInMemorySaver()
    metadata = {"run_id": "r", "counters_since_delta_snapshot": {"d": [1, 1]}}

    def put_unseeded(checkpoint_id: str, parent_id: str | None) -> Any:
        checkpoint = make_checkpoint({}, {"d": checkpoint_id}, checkpoint_id)  # "d" has a version, no value
        return saver.put(config("t", "", parent_id), checkpoint, metadata, {"d": checkpoint_id})

    put_unseeded("1ef-a", None)
    put_unseeded("1ef-b", "1ef-a")
    saver.put_writes(config("t", "", "1ef-a"), [("d", "from a")], "task")
    saver.put_writes(config("t", "", "1ef-b"), [("d", "from b")], "task")
    put_unseeded("1ef-a", "1ef-b")  # a -> b -> a

    finished: list[str] = []

    def walks() -> None:
        try:
            history = saver.get_delta_channel_history(config=config("t", "", "1ef-a"), channels=["d"])
            saver.prune(["t"])
            saver.delete_for_runs(["r"])
            saver.check()
            finished.append(history)
        except BaseException as error:
            finished.append(error)

    walker = threading.Thread(target=walks, daemon=True)
    walker.start()
    walker.join(timeout=60)  # a guard against hanging CI, not a timing: the walks take milliseconds
    assert finished, "a walk along the cycle did not end"
    assert finished == [{"d": {"writes": [("task", "d", "from b")]}}]  # b's write; the loop back to a stops


def test_prune_takes_the_agent_servers_delete_all_and_an_empty_list() -> None:
    ours = BoundedInMemorySaver()
    put(ours, "a", {"x": 1})
    put(ours, "b", {"x": 1})
    before = ours.stats()
    ours.prune([])
    asyncio.run(ours.aprune([], strategy="delete_all"))
    assert ours.stats() == before
    asyncio.run(ours.aprune(["a"], strategy="delete_all"))
    assert ours.store.thread_ids() == ["b"]
    ours.prune(["b"], strategy="delete_all")
    assert ours.stats().threads == 0


def test_prune_and_delete_for_runs_recount_a_threads_runs_once_however_many_namespaces(monkeypatch) -> None:
    from langgraph.checkpoint.bounded.engine import CheckpointRecord, Store, StoreLimits
    from langgraph.checkpoint.bounded.engine.thread import Thread

    store = Store(StoreLimits.unbounded())
    for index in range(20):
        parent = None
        for step in range(5):
            checkpoint_id = f"{step:05d}"
            record = CheckpointRecord.of(
                checkpoint_id, parent, ("msgpack", b"x"), ("msgpack", b""), {}, run_id=f"run-{step}"
            )
            store.put_checkpoint("t", f"sub:{index}" if index else "", record, {})
            parent = checkpoint_id
    recounts = []
    recount_runs = Thread.recount_runs
    monkeypatch.setattr(Thread, "recount_runs", lambda thread: recounts.append(1) or recount_runs(thread))
    store.delete_runs(["run-0"])
    assert len(recounts) == 1
    monkeypatch.undo()  # check() recounts too
    store.check()  # the run index included
    monkeypatch.setattr(Thread, "recount_runs", lambda thread: recounts.append(1) or recount_runs(thread))
    store.prune(["t"], keep_last=1)
    assert len(recounts) == 2
    monkeypatch.undo()
    store.check()
    assert sorted(store.runs) == ["run-4"]


def test_listing_every_thread_with_a_filter_skips_a_thread_deleted_while_it_iterates() -> None:
    """``list(None, filter=...)`` matches a batch of threads at a time: a thread deleted before its batch is
    reached is not listed, and every tuple listed is whole."""
    saver = BoundedInMemorySaver()
    for index in range(300):
        put(saver, f"t{index:03d}", {"n": index}, metadata={"source": "loop", "step": index % 3})
    listing = saver.list(None, filter={"source": "loop"})
    first = next(listing)
    assert first.config["configurable"]["thread_id"] == "t000"
    saver.delete_thread("t250")  # in a batch the listing has not reached
    rest = [item.config["configurable"]["thread_id"] for item in listing]
    assert "t250" not in rest and len(rest) == 298 and rest == sorted(rest)
    assert [item.config["configurable"]["thread_id"] for item in saver.list(None, filter={"step": 1}, limit=2)] == [
        "t001",
        "t004",
    ]
