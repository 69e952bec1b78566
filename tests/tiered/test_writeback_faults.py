"""Write-back under faults and load: the crash window over a slow durable tier, no starved thread, no write
waiting on a tier that is down, a closed durable connection seen before exit, and a late flush under a deleted
parent refused.

Time is the saver's injected clock, advanced by the durable tier's own calls (``SlowClockedSqlite``): a bound is
checked in durable calls made, never in seconds slept.
"""

from __future__ import annotations

import asyncio
import math
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from langgraph.checkpoint.bounded import (
    CheckpointCapacityError,
    InMemoryCheckpointConfig,
    TieredSaver,
    UnstorableWriteError,
    WriteBack,
)
from langgraph.checkpoint.bounded.tiered import flushing
from langgraph.checkpoint.bounded.tiered.durable import DurableClosedError
from tests.support.durable_savers import ControlledSqlite, cluster_fixture, postgres_saver, sqlite_durable
from tests.support.helpers import config, make_checkpoint

CALL_SECONDS = 0.015
WRITE_SECONDS = 0.002
BOUND = 0.3


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "durable.sqlite"


class FakeClock:
    """Monotonic seconds that move only when told (thread-safe)."""

    def __init__(self) -> None:
        self.now = 1_000.0
        self.lock = threading.Lock()

    def __call__(self) -> float:
        with self.lock:
            return self.now

    def advance(self, seconds: float) -> None:
        with self.lock:
            self.now += seconds


class SlowClockedSqlite(ControlledSqlite):
    """A durable tier slower than the writes: each ``put`` and ``put_writes`` takes ``CALL_SECONDS`` of the clock."""

    def __init__(self, path: Path, clock: FakeClock) -> None:
        super().__init__(path)
        self.clock = clock
        self.probe: Any = None  # called at every call: what a kill -9 then would lose

    def put(self, *args: Any) -> Any:
        self.clock.advance(CALL_SECONDS)
        if self.probe is not None:
            self.probe()
        return super().put(*args)

    def put_writes(self, *args: Any, **kwargs: Any) -> None:
        self.clock.advance(CALL_SECONDS)
        if self.probe is not None:
            self.probe()
        super().put_writes(*args, **kwargs)


def turn_args(thread_id: str, parent: str | None, step: int) -> tuple[Any, ...]:
    checkpoint = make_checkpoint({"n": step}, {"n": step + 1})
    return config(thread_id, "", parent), checkpoint, {"step": step}, {"n": step + 1}


def put_turn(tiered: TieredSaver, thread_id: str, parent: str | None, step: int, clock: FakeClock | None = None) -> str:
    if clock is not None:
        clock.advance(WRITE_SECONDS)  # the writer's own work: the writes outrun the tier
    stored = tiered.put(*turn_args(thread_id, parent, step))
    tiered.put_writes(stored, [("n", step + 1)], f"task-{step}")
    return str(stored["configurable"]["checkpoint_id"])


async def aput_turn(
    tiered: TieredSaver, thread_id: str, parent: str | None, step: int, clock: FakeClock | None = None
) -> str:
    if clock is not None:
        clock.advance(WRITE_SECONDS)
    stored = await tiered.aput(*turn_args(thread_id, parent, step))
    await tiered.aput_writes(stored, [("n", step + 1)], f"task-{step}")
    return str(stored["configurable"]["checkpoint_id"])


def oldest_ages(tiered: TieredSaver, now: float) -> dict[str, float]:
    """Each dirty thread's oldest unflushed write's age (one in a flush under way included)."""
    ledger = tiered._shared.dirty
    with ledger.lock:
        return {thread_id: now - backlog.times[0] for thread_id, backlog in ledger.threads.items()}


# --- 32.4a / 36.3: the crash window over a slow tier, and no starved thread ------------------------------------------


WRITERS = 4
TURNS = 60
SLACK = (WRITERS + 1) * (2 * CALL_SECONDS + WRITE_SECONDS)  # writes that checked the bound while a call was under way


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_no_unflushed_write_outlives_max_dirty_seconds_over_a_slow_tier(db: Path, use_async: bool) -> None:
    """Four threads write back to back over a tier whose every call takes 15 ms (of the saver's clock): the
    oldest unflushed write reached 5-6 s with max_dirty_seconds=0.3, and one thread's backlog starved while the
    others were flushed. Now at every durable call (when a kill -9 could come) and after every acknowledged write,
    every thread's oldest unflushed write (one in a flush under way included) is within the bound, give or take
    the calls under way: the writers wait for the tier, and every thread is served."""
    clock = FakeClock()
    durable = SlowClockedSqlite(db, clock)
    tiered = TieredSaver(durable, write=WriteBack(flush_interval_seconds=BOUND, max_dirty_seconds=BOUND), clock=clock)
    tiered.close()  # the periodic flush is driven below, in rounds, not in seconds
    worst: dict[str, float] = {}
    lock = threading.Lock()
    done = threading.Event()

    def note() -> None:
        ages = oldest_ages(tiered, clock())
        with lock:
            for thread_id, age in ages.items():
                worst[thread_id] = max(worst.get(thread_id, 0.0), age)

    durable.probe = note

    def periodic() -> None:  # the periodic flush, every BOUND of the saver's clock
        due = clock() + BOUND
        while not done.is_set():
            if clock() >= due:
                flushing.flush_in_background(tiered._tiers)
                due = clock() + BOUND
            done.wait(0.001)

    if use_async:

        async def writer(index: int) -> None:
            parent = None
            for step in range(TURNS):
                parent = await aput_turn(tiered, f"w-{index}", parent, step, clock)
                note()

        async def every() -> None:
            await asyncio.gather(*(writer(index) for index in range(WRITERS)))

        flusher = threading.Thread(target=periodic)
        flusher.start()
        try:
            asyncio.run(every())
        finally:
            done.set()
            flusher.join()
    else:

        def sync_writer(index: int) -> None:
            parent = None
            for step in range(TURNS):
                parent = put_turn(tiered, f"w-{index}", parent, step, clock)
                note()

        threads = [threading.Thread(target=sync_writer, args=(index,)) for index in range(WRITERS)]
        threads.append(threading.Thread(target=periodic))
        for thread in threads:
            thread.start()
        for thread in threads[:-1]:
            thread.join()
        done.set()
        threads[-1].join()
    assert sorted(worst) == [f"w-{index}" for index in range(WRITERS)]
    assert max(worst.values()) <= BOUND + SLACK, f"oldest unflushed writes per thread: {worst}"
    tiered.flush()
    tiered.check()
    for index in range(WRITERS):
        stored = sqlite_durable(db).get_tuple(config(f"w-{index}"))
        assert stored is not None and stored.checkpoint["channel_values"]["n"] == TURNS - 1


def test_a_waiting_writer_waits_for_the_flush_under_way_instead_of_flushing(db: Path) -> None:
    """A write finding the oldest unflushed write in a flush under way waits for that flush (on the ledger's
    condition): it starts no flush of its own over every dirty thread."""
    clock = FakeClock()
    durable = ControlledSqlite(db)
    tiered = TieredSaver(durable, write=WriteBack(flush_interval_seconds=BOUND, max_dirty_seconds=BOUND), clock=clock)
    tiered.close()
    put_turn(tiered, "a", None, 0)
    durable.close_gate("put")
    flusher = threading.Thread(target=tiered.flush)
    flusher.start()
    assert durable.entered.wait(10)  # the flush of a holds its first put
    clock.advance(1.0)  # a's writes are past the bound now
    acknowledged = threading.Event()

    def write() -> None:
        put_turn(tiered, "b", None, 0)
        acknowledged.set()

    writer = threading.Thread(target=write)
    writer.start()
    assert not acknowledged.wait(0.2)  # it waits: a's writes, in the flush under way, are past the bound
    assert durable.calls["put"] == 1  # and it made no durable call of its own
    durable.gate.set()
    writer.join(10)
    flusher.join(10)
    assert acknowledged.is_set()
    assert sqlite_durable(db).get_tuple(config("a")) is not None


# --- 32.4b: an outage never makes a put wait on the durable tier ----------------------------------------------------


def outage_saver(db: Path, max_dirty_bytes: float = math.inf) -> tuple[ControlledSqlite, TieredSaver]:
    durable = ControlledSqlite(db)
    tiered = TieredSaver(
        durable,
        config=InMemoryCheckpointConfig(max_threads=1),  # each new thread evicts the last: a spill
        write=WriteBack(flush_interval_seconds=3_600, max_dirty_bytes=max_dirty_bytes),
    )
    return durable, tiered


def find_down(tiered: TieredSaver) -> None:
    """The periodic flush runs while the tier fails: it finds it down (the job logs the failure)."""
    with pytest.raises(sqlite3.OperationalError):
        flushing.flush_in_background(tiered._tiers)
    assert tiered._tiers.durable.health.down


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_puts_on_threads_that_are_not_hot_do_not_wait_on_a_tier_that_is_down(db: Path, use_async: bool) -> None:
    """During an outage, write-back puts on threads that were not hot each waited the pool's timeout (the spill of
    the thread they evicted called the durable tier) and were then acknowledged. Once a call found the tier
    down, no put calls it; the periodic flush finds it back."""
    durable, tiered = outage_saver(db)
    put_turn(tiered, "t-0", None, 0)
    durable.failing = True
    put_turn(tiered, "t-1", None, 0)  # evicts t-0: no flush in the writer, its writes wait for the flusher
    assert sum(durable.calls.values()) == 0
    find_down(tiered)
    calls = sum(durable.calls.values())
    assert calls >= 1
    for index in range(2, 8):
        if use_async:
            asyncio.run(aput_turn(tiered, f"t-{index}", None, 0))
        else:
            put_turn(tiered, f"t-{index}", None, 0)
    assert sum(durable.calls.values()) == calls  # not one call: nothing waited on the tier
    assert tiered.stats().dirty_threads == 8
    durable.failing = False
    flushing.flush_in_background(tiered._tiers)  # the periodic flush: the tier is back
    assert tiered.stats().dirty_threads == 0
    put_turn(tiered, "t-8", None, 0)
    tiered.close()
    assert sqlite_durable(db).get_tuple(config("t-7")) is not None


def test_puts_do_not_wait_on_a_tier_that_hangs_once_known_down(db: Path) -> None:
    """A tier that fails, then hangs (a pool waiting for a server that does not answer): the puts that evict
    dirty threads go on without calling it; none waits."""
    durable, tiered = outage_saver(db)
    put_turn(tiered, "t-0", None, 0)
    durable.failing = True
    put_turn(tiered, "t-1", None, 0)
    find_down(tiered)
    durable.failing = False
    durable.close_gate("put", "put_writes", "get_tuple")  # any call now hangs
    calls = sum(durable.calls.values())

    def puts() -> None:
        for index in range(2, 6):
            put_turn(tiered, f"t-{index}", None, 0)

    writer = threading.Thread(target=puts)
    writer.start()
    writer.join(10)
    hung = writer.is_alive()
    durable.gate.set()
    writer.join()
    assert not hung and sum(durable.calls.values()) == calls
    flushing.flush_in_background(tiered._tiers)
    assert tiered.stats().dirty_threads == 0
    tiered.close()


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_a_tier_known_down_refuses_at_max_dirty_bytes_without_a_call(db: Path, use_async: bool) -> None:
    """While the tier is known down, a write that does not fit in max_dirty_bytes is refused at once, naming
    the durable failure, and nothing is written."""
    durable, tiered = outage_saver(db, max_dirty_bytes=2_000)
    put_turn(tiered, "t-0", None, 0)
    durable.failing = True
    put_turn(tiered, "t-1", None, 0)
    find_down(tiered)
    calls = sum(durable.calls.values())
    refused = None
    for index in range(2, 40):
        try:
            if use_async:
                asyncio.run(aput_turn(tiered, f"t-{index}", None, 0))
            else:
                put_turn(tiered, f"t-{index}", None, 0)
        except CheckpointCapacityError as error:
            refused = error
            break
    assert refused is not None and refused.limit == "max_dirty_bytes"
    assert "disk I/O error" in str(refused) and "nothing was changed" in str(refused)
    assert sum(durable.calls.values()) == calls
    durable.failing = False
    tiered.close()
    tiered.check()


# --- 32.4c: closing the durable connection first is an error the user sees ------------------------------------------


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_a_periodic_flush_finding_the_connection_closed_refuses_the_next_write(
    db: Path, request: pytest.FixtureRequest, backend: str, use_async: bool
) -> None:
    """The durable connection closed under the saver: the periodic flush fails (logged), and the next write-back
    write was acknowledged, to be lost at exit. Now it raises, naming the closed connection and what is stranded."""
    durable = durable_for(backend, db, request)
    closed: type[Exception] = sqlite3.ProgrammingError
    words = "closed database"
    if backend == "postgres":
        from psycopg import OperationalError

        closed, words = OperationalError, "the connection is closed"
    tiered = TieredSaver(durable, write=WriteBack(flush_interval_seconds=math.inf))
    parent = put_turn(tiered, "a", None, 0)
    durable.conn.close()
    with pytest.raises(closed):
        flushing.flush_in_background(tiered._tiers)
    before = tiered._store.export_thread("a")
    with pytest.raises(DurableClosedError) as refused:
        if use_async:
            asyncio.run(aput_turn(tiered, "a", parent, 1))
        else:
            put_turn(tiered, "a", parent, 1)
    message = str(refused.value)
    assert "thread 'a'" in message and words in message and "nothing was written" in message
    assert "2 unflushed writes of 1 threads ('a' (2))" in message
    assert tiered._store.export_thread("a") == before
    assert tiered.stats().rejections["durable_closed"] == 1
    with pytest.raises(closed):
        tiered.close()  # the last flush fails: close() raises
    tiered._shared.dirty.take("a")  # lost on purpose: not this test run's exit status


def test_leaving_a_saver_whose_last_flush_fails_raises(db: Path) -> None:
    durable = sqlite_durable(db)
    with pytest.raises(sqlite3.ProgrammingError), TieredSaver(durable, write="back") as tiered:
        put_turn(tiered, "a", None, 0)
        durable.conn.close()
    tiered._shared.dirty.take("a")  # lost on purpose: not this test run's exit status


EXITING = """
import sqlite3, sys
sys.path.insert(0, {root!r})
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.bounded import TieredSaver, WriteBack
from tests.support.helpers import config, make_checkpoint

durable = SqliteSaver(sqlite3.connect({db!r}, check_same_thread=False))
tiered = TieredSaver(durable, write=WriteBack(flush_interval_seconds=float("inf")))
stored = tiered.put(config("lost-thread"), make_checkpoint({{"n": 1}}), {{}}, {{"n": 1}})
tiered.put_writes(stored, [("n", 2)], "task")
{ending}
print("the program ended", flush=True)
"""


ENDINGS = {
    "closed-first": "durable.conn.close()",
    "clean": "pass",
    # the saver goes out of scope unclosed: its writes are flushed when it is collected, not lost in silence
    "collected": "import gc; del tiered; gc.collect(); import time; time.sleep(0.5)",
    # another process deletes the thread: the dropped late flush was logged when it was refused; nothing is lost
    # at exit, so the exit status is the program's own
    "deleted-elsewhere": (
        "tiered.flush()\n"
        "TieredSaver(SqliteSaver(sqlite3.connect({db!r}, check_same_thread=False))).delete_thread('lost-thread')\n"
        "tiered.put(config('lost-thread', '', stored['configurable']['checkpoint_id']), "
        "make_checkpoint({{'n': 3}}), {{}}, {{'n': 3}})"  # refused when flushed at exit
    ),
}


@pytest.mark.parametrize("ending", list(ENDINGS))
def test_unflushed_writes_lost_at_exit_end_the_process_with_an_error(db: Path, ending: str) -> None:
    """Closing the durable connection before the saver lost the unflushed writes at exit with status 0 after
    one logged traceback. Now the process ends with status 70, saying which threads lost how many writes; a
    clean exit still flushes them (status 0)."""
    root = str(Path(__file__).resolve().parents[2])
    script = EXITING.format(root=root, db=str(db), ending=ENDINGS[ending].format(db=str(db)))
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, timeout=120)
    assert "the program ended" in done.stdout, done.stderr
    if ending in ("clean", "collected"):
        assert done.returncode == 0, done.stderr
        assert sqlite_durable(db).get_tuple(config("lost-thread")) is not None
        if ending == "collected":
            assert "garbage-collected with" in done.stderr
        return
    if ending == "deleted-elsewhere":
        assert done.returncode == 0, done.stderr
        assert "a late flush under a deleted parent was refused" in done.stderr
        assert "could not be flushed" not in done.stderr
        return
    assert done.returncode == flushing.LOST_AT_EXIT_STATUS, done.stderr
    assert "could not be flushed" in done.stderr and "'lost-thread' (2)" in done.stderr
    assert "closed database" in done.stderr and "status 70" in done.stderr


# --- 36.4: a late flush under a deleted parent is refused --------------------------------------------------------


cluster = cluster_fixture("the write-back fault tests over PostgreSQL")


class WallClock:
    def __init__(self) -> None:
        self.now = time_now()

    def __call__(self) -> float:
        return self.now


def time_now() -> float:
    import time

    return time.time()


def durable_for(backend: str, db: Path, request: pytest.FixtureRequest) -> Any:
    if backend == "sqlite":
        return sqlite_durable(db)
    cluster = request.getfixturevalue("cluster")
    durable = postgres_saver(cluster.conninfo)
    with durable.conn.cursor() as cursor:
        for table in ("checkpoints", "checkpoint_writes", "checkpoint_blobs"):
            cursor.execute(f"DELETE FROM {table}")
    return durable


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("deleter", ["delete_thread", "retention"])
def test_a_late_flush_under_a_deleted_parent_is_refused(
    db: Path, request: pytest.FixtureRequest, backend: str, use_async: bool, deleter: str
) -> None:
    """An older process holds acknowledged, unflushed writes continuing a thread; a newer one deletes the thread
    (an idle deletion, or delete_thread): its in-transaction re-check cannot see the other's writes. The late
    flush landed as the child of a deleted parent. Now it is refused: nothing of it is written, its writes are
    dropped (counted, logged), and writes continuing them are refused naming the deletion."""
    from langgraph.checkpoint.bounded import RetentionPolicy, UnstorableWriteError

    wall = WallClock()
    policy = RetentionPolicy(idle_ttl_seconds=3_600, sweep_interval_seconds=math.inf)
    older = TieredSaver(
        durable_for(backend, db, request),
        write=WriteBack(flush_interval_seconds=math.inf),
        retention=policy if deleter == "retention" else None,
        wall_clock=wall,
    )
    parent = put_turn(older, "t", None, 0)
    older.flush()  # the parent is durable
    wall.now += 7_200  # the thread idles past the TTL, then the older process writes again, unflushed
    child = put_turn(older, "t", parent, 1)
    newer = TieredSaver(
        durable_for(backend, db, request)
        if backend == "sqlite"
        else postgres_saver(request.getfixturevalue("cluster").conninfo),
        retention=policy,
        wall_clock=wall,
    )
    if deleter == "retention":
        assert newer.sweep().deleted_threads == 1  # idle by what the durable tier holds
    else:
        newer.delete_thread("t")
    assert newer.get_tuple(config("t")) is None
    with pytest.raises(UnstorableWriteError, match="gone from the durable tier") as refused:
        if use_async:
            asyncio.run(older.aflush())
        else:
            older.flush()
    assert refused.value.thread_id == "t"
    assert newer.get_tuple(config("t")) is None  # nothing landed under the deleted parent
    assert list(newer.durable.list(config("t"))) == []
    stats = older.stats()
    assert stats.rejections["deleted_parent"] == 1 and stats.unstorable_writes == 2 and stats.dirty_threads == 0
    with pytest.raises(UnstorableWriteError, match="another process deleted the thread"):
        put_turn(older, "t", child, 2)  # continues what was dropped
    fresh = older.put(*turn_args("t", None, 0))  # a new run on the thread is not refused
    older.flush()
    assert (
        newer.durable.get_tuple(config("t")).config["configurable"]["checkpoint_id"]
        == fresh["configurable"]["checkpoint_id"]
    )
    older.check()


def test_every_flush_reads_back_the_checkpoint_it_continues_once(db: Path) -> None:
    """The parent check costs one durable read a flush, whatever this process knows: another process may have
    removed the parent since (no shortcut). A flush that starts the thread reads nothing."""
    from langgraph.checkpoint.bounded import RetentionPolicy

    durable = ControlledSqlite(db)
    policy = RetentionPolicy(idle_ttl_seconds=3_600, sweep_interval_seconds=math.inf)
    tiered = TieredSaver(durable, write=WriteBack(flush_interval_seconds=math.inf), retention=policy)
    parent = put_turn(tiered, "t", None, 0)
    tiered.flush()  # no parent: no check
    assert tiered._shared.counters.parent_checks == 0
    for step in range(1, 4):
        parent = put_turn(tiered, "t", parent, step)
        tiered.flush()
    assert tiered._shared.counters.parent_checks == 3 and durable.calls["get_tuple"] == 3


@pytest.mark.parametrize(
    "policy",
    [None, {"keep_last": 5}, {"idle_ttl_seconds": 3_600, "strategy": "keep_latest"}, {"idle_ttl_seconds": 3_600}],
    ids=["none", "keep_last", "keep_latest", "long_ttl"],
)
def test_a_late_flush_is_refused_whatever_this_process_retention_policy(db: Path, policy: Any) -> None:
    """Another process's ``delete_thread`` (or a shorter TTL) removes the thread while this one, whatever its own
    policy, holds a turn unflushed: the flush is refused, and the thread does not come back as an orphan."""
    from langgraph.checkpoint.bounded import RetentionPolicy

    retention = None if policy is None else RetentionPolicy(sweep_interval_seconds=math.inf, **policy)
    older = TieredSaver(sqlite_durable(db), write=WriteBack(flush_interval_seconds=math.inf), retention=retention)
    parent = put_turn(older, "t", None, 0)
    older.flush()
    put_turn(older, "t", parent, 1)  # acknowledged, unflushed
    newer = TieredSaver(sqlite_durable(db))
    newer.delete_thread("t")
    with pytest.raises(UnstorableWriteError, match="another process deleted the thread"):
        older.flush()
    assert newer.durable.get_tuple(config("t")) is None
    assert list(newer.durable.list(config("t"))) == []


def test_late_pending_writes_of_a_deleted_thread_leave_no_row(db: Path) -> None:
    """A flush holding only pending writes (an interrupt's, say) of a checkpoint this process flushed, after
    another process deleted the thread: refused, and no write row is left that no checkpoint holds."""
    import sqlite3

    older = TieredSaver(sqlite_durable(db), write=WriteBack(flush_interval_seconds=math.inf))
    stored = older.put(*turn_args("t", None, 0))
    older.flush()
    older.put_writes(stored, [("__interrupt__", "ask the human")], "task-x")  # acknowledged, unflushed
    TieredSaver(sqlite_durable(db)).delete_thread("t")
    with pytest.raises(UnstorableWriteError, match="another process deleted the thread"):
        older.flush()
    rows = sqlite3.connect(db).execute("SELECT count(*) FROM writes WHERE thread_id = 't'").fetchone()[0]
    assert rows == 0


def test_writes_that_come_before_their_checkpoints_put_are_not_taken_for_late_ones(db: Path) -> None:
    """LangGraph's sync engine may hand a checkpoint's pending writes over before the checkpoint's own put: a
    flush that takes them first must not find the checkpoint missing and drop the thread."""
    tiered = TieredSaver(sqlite_durable(db), write=WriteBack(flush_interval_seconds=math.inf))
    parent = put_turn(tiered, "t", None, 0)
    tiered.flush()
    args = turn_args("t", parent, 1)
    child = args[1]["id"]
    tiered.put_writes(config("t", "", child), [("n", 9)], "task-early")  # before the put of its checkpoint
    tiered.flush()
    tiered.put(*args)
    tiered.flush()
    found = tiered.durable.get_tuple(config("t"))
    assert found is not None and found.config["configurable"]["checkpoint_id"] == child
    assert [write[1:] for write in found.pending_writes or []] == [("n", 9)]


def test_only_a_connection_the_program_closed_counts_as_closed() -> None:
    """A server restart or a network failure (libpq: "server closed the connection unexpectedly") is an outage the
    tier comes back from, never ``DurableClosedError``; a connection or pool the program closed is."""
    import sqlite3

    from langgraph.checkpoint.bounded.tiered.durable import connection_closed

    class OperationalError(Exception):
        pass

    class PoolClosed(Exception):
        pass

    restart = OperationalError(
        "consuming input failed: server closed the connection unexpectedly\n\tThis probably means the server "
        "terminated abnormally before or while processing the request."
    )
    assert not connection_closed(restart)
    assert not connection_closed(OperationalError("connection to server on socket failed: No such file"))
    assert connection_closed(OperationalError("the connection is closed"))
    assert connection_closed(PoolClosed("the pool 'pool-1' is already closed"))
    closed = sqlite3.connect(":memory:")
    closed.close()
    with pytest.raises(sqlite3.ProgrammingError) as raised:
        closed.execute("SELECT 1")
    assert connection_closed(raised.value)
    assert not connection_closed(sqlite3.OperationalError("database is locked"))
