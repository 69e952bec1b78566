"""``TieredSaver`` answers as the durable tier does, and never older than a write acknowledged before a read.

Races are played deterministically: ``ControlledSqlite`` (tests/support/durable_savers.py) holds a durable read
after it has read, until the test releases it, so a read that began before a write lands after it. Every
wait is on an event or a condition, never on time.
"""

from __future__ import annotations

import asyncio
import math
import threading
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver as StockSaver

from langgraph.checkpoint.bounded import InMemoryCheckpointConfig, TieredSaver, WriteBack, WriteThrough
from tests.support.durable_savers import ControlledSqlite, ForeignSaver, cluster_fixture, sqlite_durable
from tests.support.helpers import config, make_checkpoint
from tests.support.tiered import flight_waiters, put_chain, read_together, wait_until, write_mode

WAIT = 60.0
ONE_THREAD = InMemoryCheckpointConfig(max_threads=1)
MODES = {
    "through": WriteThrough(),
    "back": WriteBack(flush_interval_seconds=math.inf),
    "many": WriteThrough(processes="many"),
}


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "durable.sqlite"


def put_step(tiered: TieredSaver, thread_id: str, parent: dict[str, Any] | None, value: int) -> dict[str, Any]:
    parent_id = parent["configurable"]["checkpoint_id"] if parent else None
    version = f"{value:032}.0"
    checkpoint = make_checkpoint({"x": value}, {"x": version})
    return tiered.put(config(thread_id, "", parent_id), checkpoint, {"step": value}, {"x": version})  # type: ignore[return-value]


def newest_value(method: str, answer: Any) -> int:
    if method == "list":
        answer = answer[0]
    return int(answer.checkpoint["channel_values"]["x"])


# --- 1. read-your-writes: a read never joins a durable read that began before a write acknowledged to it ---------


@pytest.mark.parametrize("write", MODES.values(), ids=MODES.keys())
@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("method", ["get", "list"])
def test_a_read_never_answers_older_than_a_write_acknowledged_before_it_began(
    db: Path, method: str, use_async: bool, write: WriteThrough | WriteBack
) -> None:
    """A durable read of ``t`` begins (and reads checkpoint 1), a write of checkpoint 2 is acknowledged, ``t``
    leaves memory, then a second read begins: before the fix it joined the first read in flight and answered 1."""
    durable = ControlledSqlite(db)
    tiered = TieredSaver(durable, config=ONE_THREAD, write=write)
    first = put_step(tiered, "t", None, 1)
    put_step(tiered, "u", None, 1)  # t leaves memory
    tiered.flush()
    durable.held = {"get_tuple" if method == "get" else "list"}
    target = config("t")

    def read() -> Any:
        return tiered.get_tuple(target) if method == "get" else list(tiered.list(target))

    async def aread() -> Any:
        if method == "get":
            return await tiered.aget_tuple(target)
        return [item async for item in tiered.alist(target)]

    def write_then_evict() -> None:
        put_step(tiered, "t", first, 2)  # acknowledged from here on
        put_step(tiered, "u", None, 2)  # t leaves memory again (write-back: flushed as it goes)
        tiered.flush()

    if use_async:

        async def main() -> tuple[Any, Any]:
            early = asyncio.ensure_future(aread())
            while not durable.holding.is_set():
                await asyncio.sleep(0.001)
            write_then_evict()
            late = asyncio.ensure_future(aread())
            while not late.done() and flight_waiters(tiered) == 0:
                await asyncio.sleep(0.001)
            durable.release.set()
            return await early, await late

        early, late = asyncio.run(main())
    else:
        answers: dict[str, Any] = {}
        first_reader = threading.Thread(target=lambda: answers.__setitem__("early", read()))
        first_reader.start()
        assert durable.holding.wait(WAIT)
        write_then_evict()
        second_reader = threading.Thread(target=lambda: answers.__setitem__("late", read()))
        second_reader.start()
        wait_until(lambda: not second_reader.is_alive() or flight_waiters(tiered) > 0)
        durable.release.set()
        first_reader.join(WAIT)
        second_reader.join(WAIT)
        early, late = answers["early"], answers["late"]
    assert newest_value(method, early) in (1, 2)  # it began before the write: either answer is right
    assert newest_value(method, late) == 2, "a read answered older than a write acknowledged before it began"
    tiered.check()
    tiered.close()


def test_reads_that_begin_together_still_share_one_durable_read(db: Path) -> None:
    """Single flight still holds for reads with no write between them."""
    seed = TieredSaver(sqlite_durable(db))
    put_step(seed, "t", None, 1)
    durable = ControlledSqlite(db)
    tiered = TieredSaver(durable)
    answers = read_together(tiered, durable, lambda: tiered.get_tuple(config("t")), 4)
    assert durable.calls["get_tuple"] == 1 and len(answers) == 4


# --- 4. a deleted thread never comes back -------------------------------------------------------------------------


def tiered_saver(db: Path, write: str) -> Any:
    return TieredSaver(sqlite_durable(db), config=ONE_THREAD, write=write)


SAVERS = [
    pytest.param(tiered_saver, "through", id="through"),
    pytest.param(tiered_saver, "back", id="back"),
]


@pytest.mark.parametrize(("make", "write"), SAVERS)
@pytest.mark.parametrize("again", ["delete_thread", "copy_onto_itself", "adelete_thread"])
def test_a_deleted_thread_deleted_again_still_refuses_its_late_writes(
    db: Path, make: Any, write: str, again: str
) -> None:
    """A retried deletion (the thread already empty) or a copy of the thread onto itself replaced its tombstone
    with one that refused nothing, so a late write of the old run brought the thread back."""
    from langgraph.checkpoint.bounded import ThreadDeletedError

    saver = make(db, write)
    first = put_step(saver, "t", None, 1)
    second = put_step(saver, "t", first, 2)
    saver.delete_thread("t")
    if again == "delete_thread":
        saver.delete_thread("t")
    elif again == "adelete_thread":
        asyncio.run(saver.adelete_thread("t"))
    else:
        saver.copy_thread("t", "t")
    with pytest.raises(ThreadDeletedError):
        put_step(saver, "t", second, 3)  # the old run's next step
    with pytest.raises(ThreadDeletedError):
        saver.put_writes(second, [("x", 9)], "late-task")
    saver.flush()
    assert saver.get_tuple(config("t")) is None
    assert list(saver.list(config("t"))) == []
    fresh = put_step(saver, "t", None, 10)  # a new run on the id starts afresh
    assert saver.get_tuple(config("t")).config == fresh  # type: ignore[union-attr]


def test_a_copy_from_an_empty_thread_does_not_lift_a_tombstone(db: Path) -> None:
    from langgraph.checkpoint.bounded import ThreadDeletedError

    tiered = tiered_saver(db, "through")
    first = put_step(tiered, "t", None, 1)
    tiered.delete_thread("t")
    tiered.copy_thread("never-written", "t")
    with pytest.raises(ThreadDeletedError):
        put_step(tiered, "t", first, 2)
    source = put_step(tiered, "s", None, 5)
    tiered.copy_thread("s", "t")  # a real copy: t holds s's checkpoints now, and writes continuing them go on
    put_step(tiered, "t", source, 6)
    assert newest_value("get", tiered.get_tuple(config("t"))) == 6


# --- 8. checkpoint ids below the thread's latest (a clock behind, or stepped back) ----------------------------------


def put_with_id(saver: Any, thread_id: str, checkpoint_id: str, parent_id: str | None, value: int) -> None:
    version = f"{value:032}.0"
    checkpoint = make_checkpoint({"x": value}, {"x": version}, checkpoint_id=checkpoint_id)
    saver.put(config(thread_id, "", parent_id), checkpoint, {"step": value}, {"x": version})


def answers(saver: Any, thread_id: str, ids: list[str]) -> Any:
    """What every read of the thread answers: the latest, each checkpoint by id, the list, and pages before each id."""

    def shown(item: Any) -> Any:
        return (
            None if item is None else (item.config["configurable"]["checkpoint_id"], item.checkpoint["channel_values"])
        )

    return (
        shown(saver.get_tuple(config(thread_id))),
        [shown(saver.get_tuple(config(thread_id, "", checkpoint_id))) for checkpoint_id in ids],
        [shown(item) for item in saver.list(config(thread_id))],
        [[shown(item) for item in saver.list(config(thread_id), before=config(thread_id, "", cid))] for cid in ids],
        [shown(item) for item in saver.list(config(thread_id), limit=2)],
    )


@pytest.mark.parametrize("write", ["through", "back"])
def test_ids_below_the_latest_answer_as_the_durable_tier(db: Path, write: str) -> None:
    """A checkpoint whose id sorts below its parent's was made the hot latest of a thread that had left memory:
    'latest' answered it instead of the greatest id, and reads by id or before an id missed what the durable
    tier held between the two."""
    from langgraph.checkpoint.base.id import uuid6

    low, low2, mid, high = sorted(str(uuid6(clock_seq=-1)) for _ in range(4))
    tiered = TieredSaver(
        sqlite_durable(db), config=ONE_THREAD, write=write_mode(write, flush_interval_seconds=math.inf)
    )
    put_with_id(tiered, "t", mid, None, 1)
    put_with_id(tiered, "t", high, mid, 2)
    put_step(tiered, "u", None, 1)  # t leaves memory
    put_with_id(tiered, "t", low, high, 3)  # a clock stepped back: its id sorts below its parent's
    put_with_id(tiered, "t", low2, low, 4)  # and the next step's, made by the same clock
    ids = [low, low2, mid, high]
    tiered.flush()
    durable = sqlite_durable(db)
    expected = answers(durable, "t", ids)
    assert expected[0][0] == high  # the durable tier's latest is the greatest id
    assert answers(tiered, "t", ids) == expected
    assert answers(tiered, "t", ids) == expected  # and again, from what the reads admitted
    tiered.check()
    tiered.close()


@pytest.mark.parametrize("write", ["through", "back"])
def test_an_id_below_the_latest_of_a_hot_thread_keeps_the_greatest_as_latest(db: Path, write: str) -> None:
    from langgraph.checkpoint.base.id import uuid6

    low, high = sorted(str(uuid6(clock_seq=-1)) for _ in range(2))
    tiered = TieredSaver(sqlite_durable(db), write=write)
    put_with_id(tiered, "t", high, None, 1)
    put_with_id(tiered, "t", low, high, 2)
    tiered.flush()
    assert answers(tiered, "t", [low, high]) == answers(sqlite_durable(db), "t", [low, high])


# --- durable savers of every kind: SQLite, PostgreSQL, InMemorySaver, and one the tier knows nothing of --------------


postgres = cluster_fixture("the tiered consistency tests over PostgreSQL", name="postgres")


def make_durable(kind: str, db: Path, request: pytest.FixtureRequest) -> Any:
    if kind == "sqlite":
        return sqlite_durable(db)
    if kind == "memory":
        return StockSaver()
    if kind == "foreign":
        return ForeignSaver()
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg import Connection
    from psycopg.rows import dict_row

    cluster = request.getfixturevalue("postgres")
    saver = PostgresSaver(
        Connection.connect(cluster.conninfo, autocommit=True, prepare_threshold=0, row_factory=dict_row)
    )
    for thread_id in {item.config["configurable"]["thread_id"] for item in saver.list(None)}:
        saver.delete_thread(thread_id)
    return saver


DURABLE_KINDS = ["sqlite", "postgres", "memory", "foreign"]


def read_back(saver: Any, thread_id: str) -> Any:
    """Everything the reads answer of a thread: its latest tuple and its list (configs, checkpoints, metadata,
    parents, pending writes)."""
    item = saver.get_tuple(config(thread_id))
    latest = None if item is None else (item.config, item.metadata, item.pending_writes)
    return latest, [
        (item.config, item.metadata, item.parent_config, item.pending_writes) for item in saver.list(config(thread_id))
    ]


# --- 10. metadata and filters answer as the durable tier does, hot or not -------------------------------------------

TRICKY_METADATA: list[dict[Any, Any]] = [
    {"source": "loop", "step": 1, "labels": {1: "a", "nested": {"x": [1, 2.5, None, True]}}},
    {"source": "input", "step": -1, "score": 1e16, "ratio": 0.5, "flag": False, "name": "{not json}"},
    {"source": "loop", "step": 2, "tags": ["x", "y"], "user": "ÿ ünïcode", "none": None, "parents": {"": "p"}},
    {"source": "update", "step": 3, "flag": True, "count": 1, "dotted.key": "d", "tags": ["y"]},
]
TRICKY_FILTERS: list[dict[Any, Any]] = [
    {"source": "loop"},
    {"step": 1},
    {"step": 1.0},
    {"flag": True},
    {"flag": 1},
    {"count": True},
    {"none": None},
    {"missing": None},
    {"parents": {}},
    {"parents": {"": "p"}},
    {"labels": {"1": "a"}},
    {"tags": ["x"]},
    {"tags": ["x", "y"]},
    {"labels.1": "a"},
    {"dotted.key": "d"},
    {"bad key": 1},
    {"name": "{not json}"},
    {1: "a"},
    {"score": 1e16},
    {"score": 10_000_000_000_000_000},
]


def listed(saver: Any, thread_id: str, filter: dict[Any, Any]) -> Any:
    try:
        return [item.config["configurable"]["checkpoint_id"] for item in saver.list(config(thread_id), filter=filter)]
    except Exception as error:
        return type(error).__name__


@pytest.mark.parametrize("write", ["through", "back"])
@pytest.mark.parametrize("kind", DURABLE_KINDS)
def test_metadata_and_filters_answer_as_the_durable_tier_hot_or_not(
    db: Path, request: pytest.FixtureRequest, kind: str, write: str
) -> None:
    """Metadata with int keys read {1: 'a'} while hot and {'1': 'a'} once read back from SQLite, and filters on
    nested dicts, dotted keys, bad keys, {"parents": {}} or {"missing": None} answered otherwise than the durable
    tier: the hot tier now stores metadata as the durable saver reads it back, and applies a filter only where
    its semantics are the durable saver's (else it reads the durable tier)."""
    durable = make_durable(kind, db, request)
    tiered = TieredSaver(durable, config=ONE_THREAD, write=write_mode(write, flush_interval_seconds=math.inf))
    parent = None
    for step, metadata in enumerate(TRICKY_METADATA):
        version = f"{step + 1:032}.0"
        checkpoint = make_checkpoint({"x": step}, {"x": version})
        parent = tiered.put(
            config("t", "", parent["configurable"]["checkpoint_id"] if parent else None),
            checkpoint,
            metadata,
            {"x": version},
        )
    tiered.flush()
    expected = read_back(durable, "t")
    expected_lists = {repr(f): listed(durable, "t", f) for f in TRICKY_FILTERS}
    assert read_back(tiered, "t") == expected  # hot
    assert {repr(f): listed(tiered, "t", f) for f in TRICKY_FILTERS} == expected_lists
    put_step(tiered, "other", None, 1)  # t leaves memory
    tiered.flush()
    assert {repr(f): listed(tiered, "t", f) for f in TRICKY_FILTERS} == expected_lists  # read through
    assert read_back(tiered, "t") == expected  # read back, admitted
    assert read_back(tiered, "t") == expected  # hot again
    tiered.check()


@pytest.mark.parametrize("write", ["through", "back"])
@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_metadata_the_durable_tier_cannot_store_is_refused_before_it_is_acknowledged(
    db: Path, request: pytest.FixtureRequest, kind: str, write: str
) -> None:
    import datetime

    durable = make_durable(kind, db, request)
    tiered = TieredSaver(durable, write=write_mode(write, flush_interval_seconds=math.inf))
    stored = put_step(tiered, "t", None, 1)
    refused: list[dict[str, Any]] = [{"when": datetime.datetime(2026, 1, 1)}, {"blob": b"bytes"}, {"key": {(1, 2): 3}}]
    if kind == "postgres":
        refused += [{"nested": {"text": "a\x00b"}}, {"ratio": float("nan")}]  # SQLite's JSON text takes NaN
    for metadata in refused:
        checkpoint = make_checkpoint({"x": 2}, {"x": "2"})
        with pytest.raises(ValueError, match="metadata cannot be stored by the durable tier"):
            tiered.put(stored, checkpoint, metadata, {"x": "2"})
    tiered.flush()
    assert tiered.stats().flush_failures == 0 and tiered.stats().unstorable_threads == 0
    assert [item.checkpoint["channel_values"]["x"] for item in durable.list(config("t"))] == [1]
    assert newest_value("get", tiered.get_tuple(config("t"))) == 1


# --- 9. pending writes read back exactly as the durable tier holds them --------------------------------------------


def write_steps(saver: Any, stored: Any) -> list[tuple[Any, ...]]:
    """Writes on one checkpoint, made to tell task paths, indexes and special channels apart."""
    return [
        ("put_writes", stored, [("b", 1)], "task-b", "~z-path"),
        ("put_writes", stored, [("__interrupt__", "why?"), ("a", 1)], "task-a", "~a-path"),  # mixed: idx -3 and 1
        ("evict",),
        ("put_writes", stored, [("c", 1)], "task-c", "~m-path"),  # sorts between the two admitted tasks
        ("put_writes", stored, [("a", 2)], "task-a", "~a-path"),  # idx 0: a new row (a=1 has idx 1)
        ("put_writes", stored, [("__error__", "first")], "task-e", "~e-path"),
        ("evict",),
        ("put_writes", stored, [("__error__", "second")], "task-e", "~e-path"),  # replaces it
        ("put_writes", stored, [("b", 9)], "task-b", "~z-path"),  # a duplicate (task-b, 0): ignored
    ]


@pytest.mark.parametrize("write", ["through", "back"])
@pytest.mark.parametrize("kind", DURABLE_KINDS)
def test_pending_writes_read_back_as_the_durable_tier_holds_them(
    db: Path, request: pytest.FixtureRequest, kind: str, write: str
) -> None:
    """Admitted writes got made-up task paths and indexes, so once more writes landed on the same checkpoint the
    hot order differed from the durable one (['A', 'B'] against ['B', 'A']), and an index or a special channel in
    a mixed batch kept or dropped a later write otherwise."""
    durable = make_durable(kind, db, request)
    tiered = TieredSaver(durable, config=ONE_THREAD, write=write_mode(write, flush_interval_seconds=math.inf))
    stored = put_step(tiered, "t", None, 1)
    for step in write_steps(tiered, stored):
        if step[0] == "evict":
            put_step(tiered, "other", None, 1)
            tiered.flush()
            assert tiered.get_tuple(config("t")) is not None  # read back: admitted
            continue
        _, located, writes, task_id, task_path = step
        tiered.put_writes(located, writes, task_id, task_path)
        tiered.flush()
        assert read_back(tiered, "t") == read_back(durable, "t"), step
    tiered.check()


# --- 7. the coherence check sees a replaced pending write -----------------------------------------------------------


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_validate_sees_a_pending_write_another_process_replaced(
    db: Path, request: pytest.FixtureRequest, kind: str
) -> None:
    """Another process replaced an __error__ write (a retried task) or a __resume__ (a second Command(resume=...)),
    leaving the newest id and the write count unchanged: processes="many" (coherence="validate" then) kept serving
    the old value."""
    durable = make_durable(kind, db, request)
    reader = TieredSaver(durable, write=WriteThrough(processes="many"))
    writer = TieredSaver(durable)  # another process's hot tier over the same durable tier
    stored = put_step(writer, "t", None, 1)
    writer.put_writes(stored, [("__error__", "attempt 1")], "task-1")
    writer.put_writes(stored, [("__resume__", "yes")], "00000000-0000-0000-0000-000000000000")
    assert read_back(reader, "t") == read_back(durable, "t")  # now hot in the reader
    writer.put_writes(stored, [("__error__", "attempt 2")], "task-1")  # same count, same newest id
    assert reader.get_tuple(config("t")).pending_writes == durable.get_tuple(config("t")).pending_writes  # type: ignore[union-attr]
    writer.put_writes(stored, [("__resume__", "no")], "00000000-0000-0000-0000-000000000000")
    assert reader.get_tuple(config("t")).pending_writes == durable.get_tuple(config("t")).pending_writes  # type: ignore[union-attr]
    assert reader.stats().stale >= 2
    hits = reader.stats().hits
    assert reader.get_tuple(config("t")).pending_writes == durable.get_tuple(config("t")).pending_writes  # type: ignore[union-attr]
    assert reader.stats().hits == hits + 1  # unchanged since it was read back: served from memory


# --- a UI polling state while runs go on ----------------------------------------------------------------------------


@pytest.mark.parametrize("write", ["through", "back"])
@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_a_ui_polling_state_while_runs_go_on_never_makes_a_run_lose_a_step(
    db: Path, monkeypatch: pytest.MonkeyPatch, write: str, use_async: bool
) -> None:
    """Every scenario three copies at once over a hot tier of one thread, while another OS thread reads every
    thread's state as fast as it can (a UI polling get_state): each run answers as on the stock saver. Before the
    single-flight fix, a read that began before a run's write and landed after it was shared with the run's own
    next read, and a resumed approval lost its last step."""
    from tests.support import graphs
    from tests.support.tiered import INTERLEAVED_SCENARIOS, interleaved_thread, run, run_interleaved

    monkeypatch.setattr(graphs, "thread", interleaved_thread)
    expected = {
        name: run(name, StockSaver(), use_async=use_async, durability="async") for name in INTERLEAVED_SCENARIOS
    }
    tiered = TieredSaver(sqlite_durable(db), config=ONE_THREAD, write=write)
    done = threading.Event()
    polls = [0]

    def poll() -> None:
        while not done.wait(0.0005):  # a UI polls often, not in a busy loop that starves the runs of the GIL
            for name in INTERLEAVED_SCENARIOS:
                for copy in range(3):
                    tiered.get_tuple({"configurable": {"thread_id": f"{name}-{copy}"}})
                    polls[0] += 1

    poller = threading.Thread(target=poll)
    poller.start()
    try:
        found = run_interleaved(tiered, use_async=use_async, durability="async", copies=3)
    finally:
        done.set()
        poller.join(WAIT)
    assert polls[0] > 0
    for (name, copy), trace in sorted(found.items()):
        assert trace == expected[name], f"{name}, copy {copy}"
    tiered.flush()
    tiered.check()
    tiered.close()


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
async def test_a_list_of_a_thread_past_the_hot_ttl_reads_the_durable_tier(tmp_path: Path, use_async: bool) -> None:
    """The hot tier drops a thread past ``idle_ttl_seconds`` lazily, at its next use: a ``list()`` must not
    take that drop for the thread's history (it answered ``[]`` while the durable tier held it all)."""
    now = [0.0]
    saver = TieredSaver(
        sqlite_durable(tmp_path / "t.db"),
        config=InMemoryCheckpointConfig(idle_ttl_seconds=60),
        clock=lambda: now[0],
    )
    assert saver.get_tuple(config("t")) is None  # as a graph's first read: the hot tier then holds it whole
    written = put_chain(saver, "t", 3)
    now[0] += 61
    listed = [t async for t in saver.alist(config("t"))] if use_async else list(saver.list(config("t")))
    assert [t.config["configurable"]["checkpoint_id"] for t in listed] == [
        c["configurable"]["checkpoint_id"] for c in reversed(written)
    ]
