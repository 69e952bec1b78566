"""on_evict receives every dropped thread whole; export_thread / import_thread move threads."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

import pytest
from langgraph.types import Command

from langgraph.checkpoint.bounded import (
    BoundedInMemorySaver,
    CheckpointCapacityError,
    DroppedThread,
    InMemoryCheckpointConfig,
    ThreadExport,
)
from tests.conftest import FakeClock
from tests.support.graphs import Runner, approval_graph, delta_channel_conversation, delta_graph, interrupt_and_resume
from tests.support.helpers import SteppingClock, config, fingerprint, make_checkpoint, put, recording_hook


def snapshot(saver: BoundedInMemorySaver, thread_id: str) -> list[Any]:
    """Every checkpoint of a thread as get_tuple returns it, all namespaces."""
    return [
        (t.config, t.checkpoint, t.metadata, t.parent_config, t.pending_writes)
        for t in saver.list({"configurable": {"thread_id": thread_id}})
    ]


def filled(saver: BoundedInMemorySaver, thread_id: str) -> None:
    parent = put(saver, thread_id, {"a": 1, "doc": "x" * 100}, version="1")
    saver.put_writes(parent, [("a", 2), ("__error__", "boom")], "task-1", "~__pregel_pull, n")
    child = put(saver, thread_id, {"a": 2}, parent=parent, version="2")
    saver.put_writes(child, [("a", 3)], "task-2")
    put(saver, thread_id, {"b": "sub"}, namespace="sub:1", version="s")


def test_the_hook_gets_the_reason_and_a_complete_export_that_imports_back() -> None:
    received: list[tuple[DroppedThread, ThreadExport]] = []
    clock = FakeClock()
    saver = BoundedInMemorySaver(
        config=InMemoryCheckpointConfig(max_threads=1, on_evict=lambda d, e: received.append((d, e))), clock=clock
    )
    filled(saver, "archived")
    before = snapshot(saver, "archived")
    clock.advance(3)
    put(saver, "newcomer", {"a": 1})  # evicts "archived"
    [(dropped, export)] = received
    assert (dropped.thread_id, dropped.limit, dropped.dropped_at) == ("archived", "max_threads", clock.now)
    assert set(export.namespaces) == {"", "sub:1"} and export.checkpoint_count == 3
    restored = BoundedInMemorySaver()
    restored.import_thread(export)
    assert snapshot(restored, "archived") == before
    assert restored.stats().total_bytes == export.nbytes
    restored.check()


def test_expiry_calls_the_hook_too() -> None:
    received: list[DroppedThread] = []
    clock = FakeClock()
    saver = BoundedInMemorySaver(
        config=InMemoryCheckpointConfig(idle_ttl_seconds=10, on_evict=lambda d, e: received.append(d)), clock=clock
    )
    filled(saver, "idle")
    clock.advance(11)
    assert saver.purge_expired() == 1
    assert [(d.thread_id, d.limit) for d in received] == [("idle", "idle_ttl_seconds")]


def test_a_failing_hook_is_logged_counted_and_harmless(caplog) -> None:
    def broken(dropped: DroppedThread, export: ThreadExport) -> None:
        raise RuntimeError("archive is down")

    saver = BoundedInMemorySaver(config=InMemoryCheckpointConfig(max_threads=1, on_evict=broken))
    filled(saver, "first")
    with caplog.at_level(logging.ERROR):
        put(saver, "second", {"a": 1})  # the eviction's hook fails; the put still succeeds
    assert "archive is down" in caplog.text
    assert saver.stats().drop_hook_errors == 1
    assert saver.get_tuple(config("second")) is not None
    saver.check()


def test_the_hook_runs_outside_the_lock_and_may_use_the_saver() -> None:
    other_threads_got_in: list[bool] = []
    archive = BoundedInMemorySaver()

    def hook(dropped: DroppedThread, export: ThreadExport) -> None:
        # another OS thread can use the saver while the hook runs: the lock is not held
        probe = threading.Thread(target=lambda: other_threads_got_in.append(saver.stats().threads >= 0))
        probe.start()
        probe.join(timeout=10)
        archive.import_thread(export)
        saver.get_tuple(config(dropped.thread_id))  # re-entering the saver itself is fine too

    saver = BoundedInMemorySaver(config=InMemoryCheckpointConfig(max_threads=2, on_evict=hook))
    for name in ("a", "b", "c", "d"):
        filled(saver, name)
    assert other_threads_got_in == [True, True]
    assert sorted(archive.store.thread_ids()) == ["a", "b"]
    saver.check()
    archive.check()


def test_export_and_import_move_a_real_graph_thread_that_resumes() -> None:
    source = BoundedInMemorySaver()
    calls: dict[str, int] = {}
    app = approval_graph(source, calls)
    cfg = {"configurable": {"thread_id": "review"}}
    app.invoke({"messages": ["hi"]}, cfg)  # stops at the interrupt
    export = source.export_thread("review")
    target = BoundedInMemorySaver()
    target.import_thread(export, thread_id="moved")
    moved_app = approval_graph(target, calls)
    moved = {"configurable": {"thread_id": "moved"}}
    assert moved_app.get_state(moved).values == app.get_state(cfg).values
    assert moved_app.get_state(moved).next == ("ask",)
    assert moved_app.invoke(Command(resume="yes"), moved)["approved"] == "yes"
    assert len(list(moved_app.get_state_history(moved))) == len(list(app.get_state_history(cfg))) + 2


def test_a_delta_channel_thread_survives_the_move() -> None:
    source = BoundedInMemorySaver()
    runner = Runner(delta_graph(source, {}), use_async=False, durability="sync")
    asyncio.run(delta_channel_conversation(runner))
    target = BoundedInMemorySaver()
    target.import_thread(source.export_thread("delta"))
    moved = delta_graph(target, {})
    cfg = {"configurable": {"thread_id": "delta"}}
    assert [s.values for s in moved.get_state_history(cfg)] == [s.values for s in runner.app.get_state_history(cfg)]


def test_import_respects_the_limits_and_rejects_malformed_exports() -> None:
    source = BoundedInMemorySaver()
    filled(source, "big")
    export = source.export_thread("big")
    small = BoundedInMemorySaver(config=InMemoryCheckpointConfig(max_checkpoints_per_thread=2))
    put(small, "resident", {"a": 1})
    before = fingerprint(small.store)
    with pytest.raises(CheckpointCapacityError, match="max_checkpoints_per_thread"):
        small.import_thread(export)
    assert fingerprint(small.store) == before
    with pytest.raises(ValueError, match="ThreadExport"):
        small.import_thread({"thread_id": "x"})  # type: ignore[arg-type]
    forged = export._replace(thread_id="x" * 10_000)
    with pytest.raises(ValueError, match="thread_id"):
        small.import_thread(forged)
    bad_payload = export._replace(
        namespaces={"": export.namespaces[""]._replace(blobs={("a", "1"): ("msgpack", "not bytes")})}
    )
    with pytest.raises(ValueError, match="payload"):
        small.import_thread(bad_payload, thread_id="y")
    assert fingerprint(small.store) == before
    assert source.export_thread("missing") is None


def test_interrupted_runs_keep_their_interrupt_through_export() -> None:
    source = BoundedInMemorySaver()
    calls: dict[str, int] = {}
    asyncio.run(interrupt_and_resume(Runner(approval_graph(source, calls), use_async=False, durability="sync")))
    target = BoundedInMemorySaver()
    target.import_thread(source.export_thread("approval"))
    assert snapshot(target, "approval") == snapshot(source, "approval")


# --- hooks and event loops ------------------------------------------------------------------------

SLOW_HOOK_SECONDS = 0.2


async def longest_stall(during: Any) -> float:
    """The longest gap between ticks of a 1 ms ticker on this loop while ``during`` runs."""
    loop = asyncio.get_running_loop()
    gaps: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        last = loop.time()
        while not done.is_set():
            await asyncio.sleep(0.001)
            now = loop.time()
            gaps.append(now - last)
            last = now

    ticking = asyncio.create_task(ticker())
    await asyncio.sleep(0.01)
    try:
        await during
    finally:
        done.set()
        await ticking
    return max(gaps)


def test_a_slow_sync_hook_runs_off_the_event_loop_of_an_async_caller() -> None:
    hook_threads: list[str] = []

    def slow_archive(dropped: DroppedThread, export: ThreadExport) -> None:
        hook_threads.append(threading.current_thread().name)
        time.sleep(SLOW_HOOK_SECONDS)  # a synchronous write to an archive

    saver = BoundedInMemorySaver(config=InMemoryCheckpointConfig(max_threads=1, on_evict=slow_archive))
    filled(saver, "first")

    async def main() -> float:
        return await longest_stall(saver.aput(config("second"), make_checkpoint({"a": 1}), {}, {"a": 1}))

    stall = asyncio.run(main())
    assert hook_threads and hook_threads[0] != threading.main_thread().name, "the hook ran on the loop's thread"
    assert stall < SLOW_HOOK_SECONDS / 4, f"the loop stalled {stall * 1000:.0f} ms behind a {SLOW_HOOK_SECONDS}s hook"
    assert saver.stats().evicted_threads == 1 and saver.get_tuple(config("second")) is not None


def test_an_async_hook_is_awaited_on_the_callers_loop_before_the_call_returns() -> None:
    announced: list[tuple[str, bool]] = []

    async def archive(dropped: DroppedThread, export: ThreadExport) -> None:
        await asyncio.sleep(SLOW_HOOK_SECONDS)
        announced.append((dropped.thread_id, threading.current_thread() is threading.main_thread()))

    saver = BoundedInMemorySaver(config=InMemoryCheckpointConfig(max_threads=1, on_evict=archive))
    filled(saver, "first")

    async def main() -> float:
        async def evicting_put() -> None:
            await saver.aput(config("second"), make_checkpoint({"a": 1}), {}, {"a": 1})
            assert announced == [("first", True)], "aput returned before its announcement was made"

        return await longest_stall(evicting_put())

    assert asyncio.run(main()) < SLOW_HOOK_SECONDS / 4


def test_a_sync_caller_runs_an_async_hook_to_completion() -> None:
    announced: list[str] = []

    archive = recording_hook(announced)
    saver = BoundedInMemorySaver(config=InMemoryCheckpointConfig(max_threads=1, on_evict=archive))
    filled(saver, "first")
    put(saver, "second", {"a": 1})
    assert announced == ["first"]

    async def sync_call_inside_a_loop() -> None:
        put(saver, "third", {"a": 1})  # this thread's loop is busy: the hook gets a loop of its own

    asyncio.run(sync_call_inside_a_loop())
    assert announced == ["first", "second"]


@pytest.mark.parametrize("kind", ["sync hook", "async hook"])
def test_announcements_keep_drop_order_across_concurrent_async_callers(kind: str) -> None:
    times: list[float] = []

    def sync_hook(dropped: DroppedThread, export: ThreadExport) -> None:
        time.sleep(0.001)
        times.append(dropped.dropped_at)

    async def async_hook(dropped: DroppedThread, export: ThreadExport) -> None:
        await asyncio.sleep(0.001)
        times.append(dropped.dropped_at)

    hook = sync_hook if kind == "sync hook" else async_hook
    saver = BoundedInMemorySaver(config=InMemoryCheckpointConfig(max_threads=2, on_evict=hook), clock=SteppingClock())

    async def writer(index: int) -> None:
        for turn in range(10):
            await saver.aput(config(f"w{index}-{turn}"), make_checkpoint({"a": turn}), {}, {"a": turn})

    async def main() -> None:
        await asyncio.gather(*(writer(index) for index in range(8)))

    asyncio.run(main())
    assert len(times) == saver.stats().evicted_threads == 78
    assert times == sorted(times), "announcements out of drop order"
    saver.check()


def test_an_async_hook_that_fails_is_counted_not_raised() -> None:
    async def broken(dropped: DroppedThread, export: ThreadExport) -> None:
        raise RuntimeError("archive is down")

    saver = BoundedInMemorySaver(config=InMemoryCheckpointConfig(max_threads=1, on_evict=broken))
    filled(saver, "first")
    asyncio.run(saver.aput(config("second"), make_checkpoint({"a": 1}), {}, {"a": 1}))
    assert saver.stats().drop_hook_errors == 1 and saver.get_tuple(config("second")) is not None


def test_import_skips_empty_namespaces_and_refuses_a_write_index_that_is_not_an_int() -> None:
    from langgraph.checkpoint.bounded.engine import NamespaceExport, WriteRecord

    saver = BoundedInMemorySaver()
    saver.import_thread(ThreadExport("t", {"": NamespaceExport((), {}, {})}))
    assert saver.stats().threads == 0
    bad_write = WriteRecord("task", "0", "a", "msgpack", b"\x01", "")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="idx"):
        saver.import_thread(ThreadExport("t", {"": NamespaceExport((), {"c": (bad_write,)}, {})}))
    assert saver.stats().threads == 0
    saver.check()


def run_with_a_deadline(scenario: Any, seconds: float = 30.0) -> Any:
    """Run ``asyncio.run(scenario())`` in a thread and fail, instead of hanging, if it never ends."""
    outcome: list[Any] = []
    runner = threading.Thread(target=lambda: outcome.append(asyncio.run(scenario())), daemon=True)
    runner.start()
    runner.join(timeout=seconds)  # a guard against a hung test, not a timing
    assert outcome, "deadlocked"
    return outcome[0]


def put_for(saver: BoundedInMemorySaver, thread_id: str) -> Any:
    checkpoint = make_checkpoint({"a": 1})
    return saver.put(config(thread_id), checkpoint, {}, dict(checkpoint["channel_versions"]))


def test_a_sync_call_on_a_loop_does_not_wait_for_an_async_delivery_under_way() -> None:
    """The async delivery holds the turn while it awaits its hook; a sync call on the same loop must
    not block the loop waiting for it: it leaves its drop to that delivery."""
    announced: list[str] = []

    slow = recording_hook(announced, 0.05)
    saver = BoundedInMemorySaver(config=InMemoryCheckpointConfig(max_threads=1, on_evict=slow))

    async def scenario() -> list[str]:
        put_for(saver, "t0")
        checkpoint = make_checkpoint({"a": 1})
        evicting = asyncio.create_task(saver.aput(config("t1"), checkpoint, {}, dict(checkpoint["channel_versions"])))
        await asyncio.sleep(0.01)  # the task's delivery is now awaiting the hook
        put_for(saver, "t2")  # evicts t1 from the loop's own thread
        await evicting
        return announced

    assert run_with_a_deadline(scenario) == ["t0", "t1"]


def test_an_async_hook_may_write_through_the_saver_from_a_sync_call_on_a_loop() -> None:
    announced: list[str] = []

    async def archive(dropped: DroppedThread, export: ThreadExport) -> None:
        announced.append(dropped.thread_id)
        if dropped.thread_id == "t0":
            checkpoint = make_checkpoint({"a": 1})
            await saver.aput(config("archive"), checkpoint, {}, dict(checkpoint["channel_versions"]))  # evicts t1

    saver = BoundedInMemorySaver(config=InMemoryCheckpointConfig(max_threads=1, on_evict=archive))

    async def scenario() -> list[str]:
        put_for(saver, "t0")
        put_for(saver, "t1")  # a sync call on the loop's thread: the hook runs on a loop of its own
        return announced

    assert run_with_a_deadline(scenario) == ["t0", "t1"]


def test_a_caller_cancelled_during_its_async_hook_counts_the_announcement() -> None:
    async def slow(dropped: DroppedThread, export: ThreadExport) -> None:
        await asyncio.sleep(10)

    saver = BoundedInMemorySaver(config=InMemoryCheckpointConfig(max_threads=1, on_evict=slow))

    async def scenario() -> int:
        put_for(saver, "t0")
        checkpoint = make_checkpoint({"a": 1})
        task = asyncio.create_task(saver.aput(config("t1"), checkpoint, {}, dict(checkpoint["channel_versions"])))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return saver.stats().drop_hook_errors

    assert run_with_a_deadline(scenario) == 1


def test_a_list_left_unfinished_still_announces_what_its_read_expired() -> None:
    announced: list[str] = []
    clock = FakeClock()
    saver = BoundedInMemorySaver(
        config=InMemoryCheckpointConfig(idle_ttl_seconds=10, on_evict=lambda d, e: announced.append(d.thread_id)),
        clock=clock,
    )
    put(saver, "old", {"a": 1})
    clock.advance(5)
    put(saver, "live", {"a": 1})
    put(saver, "live", {"a": 2})
    clock.advance(6)  # "old" has expired, "live" has not
    listed = saver.list(config("live"))
    next(listed)
    listed.close()  # the caller stops early
    assert announced == ["old"]


def test_a_drop_queued_while_a_delivery_ends_is_still_delivered() -> None:
    """A caller that does not wait for the turn (a sync call on a running loop) queues a drop just as the
    delivery under way finds the queue empty: that delivery looks again after releasing its turn."""
    from collections import deque

    from langgraph.checkpoint.bounded.engine.hooks import Announcements, QueuedDrop

    seen: list[object] = []
    announcements = Announcements(lambda record, export: seen.append(record))

    class RacingQueue(deque):
        armed = True

        def __bool__(self) -> bool:
            if not len(self) and RacingQueue.armed and seen:  # the delivery's last look at the queue
                RacingQueue.armed = False

                def late_caller() -> None:
                    self.append(QueuedDrop("late", None, 0))  # type: ignore[arg-type]
                    announcements.deliver(wait=False)  # the turn is held: returns at once

                caller = threading.Thread(target=late_caller)
                caller.start()
                caller.join()
                return False  # the delivery under way already saw an empty queue
            return bool(len(self))

    announcements.queue = RacingQueue([QueuedDrop("first", None, 0)])  # type: ignore[arg-type]
    announcements.deliver()
    assert seen == ["first", "late"]
    assert not announcements.queue
