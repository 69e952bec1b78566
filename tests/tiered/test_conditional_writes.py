"""``TieredSaver(write=WriteThrough(processes="many"))``: several processes writing one durable tier never fork a
thread in silence.

LangGraph has no per-thread lock: two processes running one thread each read its newest checkpoint and put a
child of it, and both puts succeeded (out of 50 racing updates, 28-46 were kept, with the durable savers alone
too). With ``processes="many"`` a put whose namespace another process wrote since this one last read or wrote
it raises ``CheckpointConflictError`` naming the thread, writes nothing, and its stale hot copy leaves memory, so
that the retry reads the newest. The primitive is ``saver/tiered/conditional.py`` (test_conditional_puts.py); here it is
the tiered saver, with real graphs, and two OS processes racing invokes.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import operator
import traceback
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver as StockSaver

from langgraph.checkpoint.bounded import (
    CheckpointConflictError,
    InMemoryCheckpointConfig,
    InvalidArgumentError,
    TieredSaver,
    WriteBack,
    WriteThrough,
)
from tests.support.durable_savers import PostgresCluster, cluster_fixture, sqlite_durable
from tests.support.graphs import linear
from tests.support.helpers import config, make_checkpoint

UPDATES_PER_PROCESS = 25
DEADLINE = 120.0


cluster = cluster_fixture("the conditional tiered tests")


def open_durable(database: str, where: str) -> Any:
    if database == "sqlite":
        import sqlite3

        from langgraph.checkpoint.sqlite import SqliteSaver

        return SqliteSaver(sqlite3.connect(where, check_same_thread=False, timeout=30))
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg import Connection
    from psycopg.rows import dict_row

    return PostgresSaver(Connection.connect(where, autocommit=True, prepare_threshold=0, row_factory=dict_row))


def two_processes(where: str) -> tuple[TieredSaver, TieredSaver]:
    """Two processes' savers over one SQLite file, both checking their puts: ``here`` keeps one thread in memory
    (another conversation pushes a thread out), ``there`` the default."""
    many = WriteThrough(processes="many")
    here = TieredSaver(open_durable("sqlite", where), write=many, config=InMemoryCheckpointConfig(max_threads=1))
    return here, TieredSaver(open_durable("sqlite", where), write=many)


def where_for(database: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if database == "sqlite":
        return str(tmp_path / "durable.sqlite")
    cluster: PostgresCluster = request.getfixturevalue("cluster")
    return cluster.conninfo


def child_of(saver: TieredSaver, thread_id: str, value: int) -> Any:
    """Read the thread's newest checkpoint and put a child of it holding ``value``."""
    found = saver.get_tuple(config(thread_id))
    parent = None if found is None else found.config["configurable"]["checkpoint_id"]
    version = f"{value:032}.0"
    checkpoint = make_checkpoint({"x": value}, {"x": version})
    return config(thread_id, "", parent), checkpoint, {"step": value}, {"x": version}


def chain_of(durable: Any, thread_id: str) -> tuple[list[Any], int]:
    """The thread's checkpoints' values newest first, and how many checkpoints share a parent with another."""
    items = list(durable.list(config(thread_id)))
    parents = [item.parent_config["configurable"]["checkpoint_id"] if item.parent_config else None for item in items]
    return [item.checkpoint["channel_values"]["x"] for item in items], len(parents) - len(set(parents))


# --- the lost update, deterministic ---------------------------------------------------------------------------------


@pytest.mark.parametrize("database", ["sqlite", "postgres"])
def test_a_put_from_a_stale_read_conflicts_instead_of_forking(
    database: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    where = where_for(database, request, tmp_path)
    first, second = (TieredSaver(open_durable(database, where), write=WriteThrough(processes="many")) for _ in range(2))
    thread_id = f"race-{database}"
    first.put(*child_of(first, thread_id, 1))
    stale = child_of(second, thread_id, 2)  # the second process reads the newest...
    first.put(*child_of(first, thread_id, 3))  # ...the first writes meanwhile...
    with pytest.raises(CheckpointConflictError, match=repr(thread_id)):
        second.put(*stale)  # ...and the second's put from what it read is refused: written nowhere
    assert second.stats().conflicts == 1
    assert second._store.last_used(thread_id) is None  # its stale hot copy left memory
    second.put(*child_of(second, thread_id, 4))  # the retry reads the newest, and goes on from it
    values, forks = chain_of(open_durable(database, where), thread_id)
    assert values == [4, 3, 1] and forks == 0


@pytest.mark.parametrize("database", ["sqlite", "postgres"])
def test_without_the_guard_the_same_interleaving_forks_the_thread(
    database: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    where = where_for(database, request, tmp_path)
    first, second = (TieredSaver(open_durable(database, where)) for _ in range(2))
    thread_id = f"unguarded-{database}"
    first.put(*child_of(first, thread_id, 1))
    stale = child_of(second, thread_id, 2)
    first.put(*child_of(first, thread_id, 3))
    second.put(*stale)  # accepted: 2 and 3 are both children of 1, and one of them is off the newest chain
    values, forks = chain_of(open_durable(database, where), thread_id)
    assert forks == 1 and sorted(values) == [1, 2, 3]


def test_a_deliberate_fork_from_an_older_checkpoint_is_no_conflict(tmp_path: Path) -> None:
    """Time travel: a put whose parent is older than the newest, from a process holding the newest."""
    tiered = TieredSaver(sqlite_durable(tmp_path / "durable.sqlite"), write=WriteThrough(processes="many"))
    first = tiered.put(*child_of(tiered, "t", 1))
    tiered.put(*child_of(tiered, "t", 2))
    version = f"{9:032}.0"
    tiered.put(first, make_checkpoint({"x": 9}, {"x": version}), {"step": 9}, {"x": version})
    assert tiered.get_tuple(config("t")).checkpoint["channel_values"]["x"] == 9  # type: ignore[union-attr]


def test_async_puts_conflict_too(tmp_path: Path) -> None:
    where = str(tmp_path / "durable.sqlite")
    first, second = (TieredSaver(open_durable("sqlite", where), write=WriteThrough(processes="many")) for _ in range(2))

    async def main() -> None:
        await first.aput(*child_of(first, "t", 1))
        stale = child_of(second, "t", 2)
        await first.aput(*child_of(first, "t", 3))
        with pytest.raises(CheckpointConflictError):
            await second.aput(*stale)

    asyncio.run(main())
    assert chain_of(open_durable("sqlite", where), "t") == ([3, 1], 0)


def test_several_processes_are_checked_naming_why(tmp_path: Path) -> None:
    with pytest.raises(
        InvalidArgumentError, match=r"WriteThrough\(processes='many'\): InMemorySaver offers no atomic check-and-put"
    ):
        TieredSaver(StockSaver(), write=WriteThrough(processes="many"))
    with pytest.raises(InvalidArgumentError, match=r"processes must be one of \('one', 'many'\), got 'yes'"):
        WriteThrough(processes="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError):  # write-back with several processes cannot be written
        WriteBack(processes="many")  # type: ignore[call-arg]
    saver = TieredSaver(sqlite_durable(tmp_path / "d.sqlite"), write=WriteThrough(processes="many"))
    assert saver.processes == "many" and saver.write == WriteThrough(processes="many")


# --- two OS processes racing invokes of one thread ------------------------------------------------------------------


class Count(TypedDict):
    count: Annotated[int, operator.add]


def counter(checkpointer: Any) -> Any:
    builder = linear(Count, {"tick": lambda state: {"count": 0}})
    return builder.compile(checkpointer=checkpointer)


def racing_invokes(database: str, where: str, thread_id: str, start: Any, results: Any, use_async: bool) -> None:
    """Add one to the thread's count 25 times, retrying each invoke that conflicts; report how many were
    acknowledged and how many conflicted. Runs in a spawned process."""
    try:
        tiered = TieredSaver(open_durable(database, where), write=WriteThrough(processes="many"))
        app = counter(tiered)
        thread = {"configurable": {"thread_id": thread_id}}
        app.get_state(thread)  # connected before the race starts
        start.wait(DEADLINE)
        acknowledged = conflicts = 0
        for _ in range(UPDATES_PER_PROCESS):
            while True:
                try:
                    if use_async:
                        asyncio.run(app.ainvoke({"count": 1}, thread, durability="exit"))
                    else:
                        app.invoke({"count": 1}, thread, durability="exit")
                except CheckpointConflictError:
                    conflicts += 1
                    continue
                acknowledged += 1
                break
        results.put(("ok", acknowledged, conflicts))
    except BaseException:
        results.put(("error", traceback.format_exc(), 0))


@pytest.mark.parametrize("database", ["sqlite", "postgres"])
def test_two_processes_racing_invokes_lose_nothing_acknowledged(
    database: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Each process adds one to a counter 25 times through ``invoke`` (one sync, one async), each read fresh
    (``processes="many"``): the count ends at 50, on one linear chain of checkpoints.

    ``durability="exit"`` makes each run one put, so a run lands whole or conflicts whole. With a checkpoint per
    step, a conflict at a later step leaves the run's earlier steps in the thread (still one chain): retrying
    the whole run blindly would then count its input twice, so an application re-reads the state first."""
    where = where_for(database, request, tmp_path)
    if database == "sqlite":
        open_durable(database, where).setup()
    thread_id = f"counter-{database}"
    context = multiprocessing.get_context("spawn")
    start, results = context.Barrier(2), context.Queue()
    workers = [
        context.Process(target=racing_invokes, args=(database, where, thread_id, start, results, use_async))
        for use_async in (False, True)
    ]
    for worker in workers:
        worker.start()
    reports = [results.get(timeout=DEADLINE * 4) for _ in workers]
    for worker in workers:
        worker.join(DEADLINE)
    assert all(report[0] == "ok" for report in reports), [report[1] for report in reports if report[0] != "ok"]
    assert sum(report[1] for report in reports) == 2 * UPDATES_PER_PROCESS
    durable = open_durable(database, where)
    state = counter(durable).get_state({"configurable": {"thread_id": thread_id}})
    assert state.values["count"] == 2 * UPDATES_PER_PROCESS  # every acknowledged update is in it
    items = list(durable.list(config(thread_id)))
    parents = [item.parent_config["configurable"]["checkpoint_id"] for item in items if item.parent_config]
    assert len(parents) == len(set(parents)), "two checkpoints share a parent: the thread forked"


# --- a fork once the thread left the hot tier (issue 32, finding 3) ---------------------------------------------


@pytest.mark.parametrize("use_async", [False, True])
def test_a_fork_of_a_thread_no_longer_hot_is_no_conflict(tmp_path: Path, use_async: bool) -> None:
    """Time travel from an older checkpoint after another conversation pushed the thread out of a one-thread
    hot tier: the process's own last write is still what it expects, so the fork is stored, not refused."""
    tiered = TieredSaver(
        sqlite_durable(tmp_path / "durable.sqlite"),
        write=WriteThrough(processes="many"),
        config=InMemoryCheckpointConfig(max_threads=1),
    )
    first = tiered.put(*child_of(tiered, "t", 1))
    tiered.put(*child_of(tiered, "t", 2))
    assert tiered.get_tuple(first) is not None  # the user reads the older checkpoint...
    tiered.put(*child_of(tiered, "other", 7))  # ...another conversation pushes "t" out of memory...
    assert tiered._store.last_used("t") is None
    version = f"{9:032}.0"
    fork = (first, make_checkpoint({"x": 9}, {"x": version}), {"step": 9}, {"x": version})
    if use_async:
        asyncio.run(tiered.aput(*fork))  # ...and forks from it: no other writer exists, so no conflict
    else:
        tiered.put(*fork)
    assert tiered.stats().conflicts == 0
    values, forks = chain_of(open_durable("sqlite", str(tmp_path / "durable.sqlite")), "t")
    assert values == [9, 2, 1] and forks == 1  # 9 and 2 are both children of 1: the fork the user asked for


def test_a_fork_after_reading_another_process_write_is_no_conflict(tmp_path: Path) -> None:
    """What this process read counts as known too: a thread another process moved on, read here, then pushed
    out of memory, forks here without a conflict."""
    where = str(tmp_path / "durable.sqlite")
    here, there = two_processes(where)
    first = here.put(*child_of(here, "t", 1))
    here.put(*child_of(here, "other", 7))  # "t" leaves this process's memory
    there.put(*child_of(there, "t", 2))  # another process moves "t" on
    assert here.get_tuple(config("t")).checkpoint["channel_values"]["x"] == 2  # type: ignore[union-attr]
    here.put(*child_of(here, "other", 8))  # and "t" leaves memory again
    version = f"{9:032}.0"
    here.put(first, make_checkpoint({"x": 9}, {"x": version}), {"step": 9}, {"x": version})
    assert here.stats().conflicts == 0


def test_a_real_conflict_names_the_newest_found_and_who_can_have_written_it(tmp_path: Path) -> None:
    where = str(tmp_path / "durable.sqlite")
    here, there = two_processes(where)
    first = here.put(*child_of(here, "t", 1))
    here.put(*child_of(here, "other", 7))  # "t" leaves memory
    written = there.put(*child_of(there, "t", 2))  # another process writes it, and this one never read that
    version = f"{9:032}.0"
    with pytest.raises(CheckpointConflictError) as raised:
        here.put(first, make_checkpoint({"x": 9}, {"x": version}), {"step": 9}, {"x": version})
    message = str(raised.value)
    assert written["configurable"]["checkpoint_id"] in message  # the newest it found
    assert "another process" in message and "written at" in message  # who, and when (the id's time)
    assert raised.value.found == written["configurable"]["checkpoint_id"]


@pytest.mark.parametrize("use_async", [False, True])
def test_time_travel_with_a_small_hot_tier_is_never_refused(
    tmp_path: Path, use_async: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reporter's run: time travel (``invoke(None, older_config)``) while another conversation of the same
    process pushes the thread out of a one-thread hot tier between the fork's read of the older checkpoint and
    its put, conditional writes on: no run is refused, and each fork lands."""
    tiered = TieredSaver(
        sqlite_durable(tmp_path / "durable.sqlite"),
        write=WriteThrough(processes="many"),
        config=InMemoryCheckpointConfig(max_threads=1),
    )
    app = counter(tiered)
    pushing: list[str] = []
    get_tuple, aget_tuple = tiered.get_tuple, tiered.aget_tuple

    def push_out(config: Any) -> None:
        if pushing and config["configurable"]["thread_id"] != pushing[0]:  # a read of the fork: another
            # conversation takes the one hot place right after it
            tiered.put(*child_of(tiered, pushing[0], len(pushing)))
            pushing.append(pushing[0])

    def reading(config: Any) -> Any:
        found = get_tuple(config)
        push_out(config)
        return found

    async def areading(config: Any) -> Any:
        found = await aget_tuple(config)
        push_out(config)
        return found

    monkeypatch.setattr(tiered, "get_tuple", reading)
    monkeypatch.setattr(tiered, "aget_tuple", areading)

    async def travel(thread_id: str) -> None:
        settings = {"configurable": {"thread_id": thread_id}}
        for _ in range(3):
            await app.ainvoke({"count": 1}, settings) if use_async else app.invoke({"count": 1}, settings)
        history = list(app.get_state_history(settings))
        older = [state for state in history if state.next][-1].config  # the first input, its step not yet run
        pushing.append(f"{thread_id}-meanwhile")
        await app.ainvoke(None, older) if use_async else app.invoke(None, older)
        assert len(pushing) > 2  # the other conversation ran after each of the fork's reads (LangGraph makes two)
        pushing.clear()
        forked = app.get_state(settings)
        assert forked.values == {"count": 1} and forked.config != history[0].config  # the fork, newest now

    async def main() -> None:
        for thread_id in ("a", "b", "c"):
            await travel(thread_id)

    asyncio.run(main())
    assert tiered.stats().conflicts == 0


def test_a_new_run_on_a_thread_another_process_deleted_is_no_conflict(tmp_path: Path) -> None:
    """What this process knew of a thread does not make a fresh start on it a conflict once another process
    deleted it; a fork from one of its old checkpoints is one (the thread it continues is gone)."""
    where = str(tmp_path / "durable.sqlite")
    here, there = two_processes(where)
    first = here.put(*child_of(here, "t", 1))
    here.put(*child_of(here, "other", 7))  # "t" leaves this process's memory
    there.delete_thread("t")
    version = f"{9:032}.0"
    here.put(config("t"), make_checkpoint({"x": 1}, {"x": version}), {"step": 1}, {"x": version})  # a new run
    assert chain_of(open_durable("sqlite", where), "t") == ([1], 0)
    there.delete_thread("t")
    here.put(*child_of(here, "other", 8))  # "t" leaves this process's memory again
    with pytest.raises(CheckpointConflictError, match="found none"):
        here.put(first, make_checkpoint({"x": 9}, {"x": version}), {"step": 9}, {"x": version})


def test_a_continuation_after_another_process_removed_the_newest_is_no_conflict(tmp_path: Path) -> None:
    """Another process's ``delete_for_runs`` takes the newest checkpoint away; this process reads the thread again
    (its newest is older now), the thread leaves memory, and a put continuing what it read is no conflict. A stale
    put's conflict says checkpoints were removed, not that the thread moved on."""
    where = str(tmp_path / "durable.sqlite")
    here, there = two_processes(where)
    version = f"{1:032}.0"
    stale = {}
    for thread_id in ("t", "u"):
        first = here.put(
            config(thread_id), make_checkpoint({"x": 1}, {"x": version}), {"run_id": f"{thread_id}-1"}, {"x": version}
        )
        second = here.put(
            first, make_checkpoint({"x": 2}, {"x": version}), {"run_id": f"{thread_id}-2"}, {"x": version}
        )
        stale[thread_id] = (first, second)
    here.put(*child_of(here, "other", 7))  # both leave this process's memory; it knows their newest is the second
    there.delete_for_runs(["t-2", "u-2"])
    assert here.get_tuple(config("t")).checkpoint["channel_values"]["x"] == 1  # type: ignore[union-attr]
    here.put(*child_of(here, "other", 9))  # read, then out of memory again
    first, _ = stale["t"]
    here.put(first, make_checkpoint({"x": 3}, {"x": version}), {"step": 3}, {"x": version})  # continues its read
    assert here.stats().conflicts == 0
    _, second = stale["u"]  # never read again: a put continuing the removed checkpoint conflicts, saying so
    with pytest.raises(CheckpointConflictError, match="older than expected: checkpoints were removed"):
        here.put(second, make_checkpoint({"x": 8}, {"x": version}), {"step": 8}, {"x": version})
