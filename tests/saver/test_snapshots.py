"""save / load / autosave / inspect: the store survives a restart, or says why not."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from langgraph.checkpoint.bounded import BoundedInMemorySaver, InMemoryCheckpointConfig, SnapshotError
from langgraph.checkpoint.bounded.snapshot import MAGIC
from tests.conftest import FakeClock
from tests.support.graphs import Runner, approval_graph, interrupt_and_resume
from tests.support.helpers import config, put


def everything(saver: BoundedInMemorySaver) -> Any:
    return [
        (t.config, t.checkpoint, t.metadata, t.parent_config, t.pending_writes)
        for thread_id in sorted(saver.store.thread_ids())
        for t in saver.list({"configurable": {"thread_id": thread_id}})
    ]


def stocked(clock: FakeClock) -> BoundedInMemorySaver:
    saver = BoundedInMemorySaver(clock=clock)
    asyncio.run(interrupt_and_resume(Runner(approval_graph(saver, {}), use_async=False, durability="sync")))
    for index in range(3):
        clock.advance(10)
        parent = put(saver, f"t{index}", {"doc": f"d{index}", "n": index}, version=f"{index}")
        saver.put_writes(parent, [("n", index + 1), ("__interrupt__", "wait")], "task", "~__pregel_pull, n")
        put(saver, f"t{index}", {"sub": index}, namespace="sub:1", version="s")
    clock.advance(5)
    return saver


def test_a_restored_store_answers_as_before_with_its_lru_order_and_ages(tmp_path: Path) -> None:
    clock = FakeClock()
    saver = stocked(clock)
    path = tmp_path / "store.snapshot"
    assert saver.save(path) == 4
    order, expected = saver.store.thread_ids(), everything(saver)
    restored = BoundedInMemorySaver.load(path, clock=clock)
    assert restored.store.thread_ids() == order  # least recently used first
    assert restored.load_report.loaded == order
    assert restored.stats().total_bytes == saver.stats().total_bytes
    clock.advance(4 * 3600 - 21)  # idle at the save: approval 35 s, t0 25 s, t1 15 s, t2 5 s
    assert restored.purge_expired() == 2 and restored.store.thread_ids() == ["t1", "t2"]
    restored.check()
    assert everything(BoundedInMemorySaver.load(path)) == expected


def test_loading_applies_the_current_limits_and_says_what_it_dropped(tmp_path: Path) -> None:
    clock = FakeClock()
    saver = stocked(clock)
    path = tmp_path / "store.snapshot"
    saver.save(path)
    tight = InMemoryCheckpointConfig(max_threads=2, idle_ttl_seconds=20, max_checkpoints_per_thread=12)
    restored = BoundedInMemorySaver.load(path, config=tight, clock=clock)
    report = restored.load_report
    assert report.expired == ["approval", "t0"]  # idle 35 s and 25 s at the save
    assert report.evicted == [] and report.loaded == ["t1", "t2"]
    smaller = InMemoryCheckpointConfig(max_threads=1, max_checkpoints_per_thread=3)
    restored = BoundedInMemorySaver.load(path, config=smaller, clock=clock)
    assert restored.load_report.loaded == ["t2"] and restored.load_report.evicted == ["t0", "t1"]
    assert "max_checkpoints_per_thread" in restored.load_report.rejected["approval"]
    restored.check()


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda data: b"PK\x03\x04 a zip file" + data[20:], "not a langgraph-checkpoint-bounded snapshot"),
        (lambda data: data[: len(data) // 2], "checksum"),
        (lambda data: data[:-1] + bytes([data[-1] ^ 1]), "checksum"),
        (lambda data: MAGIC + b"\x07" + data[len(MAGIC) + 1 :], "version 7"),
        (lambda data: data[:10], "too short"),
    ],
    ids=["foreign", "truncated", "bit flip", "future version", "header only"],
)
def test_a_damaged_file_gets_a_clear_error_and_loads_nothing(tmp_path: Path, damage, message) -> None:
    path = tmp_path / "store.snapshot"
    stocked(FakeClock()).save(path)
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(SnapshotError, match=message):
        BoundedInMemorySaver.load(path)


def test_saving_replaces_the_file_atomically(tmp_path: Path) -> None:
    path = tmp_path / "store.snapshot"
    saver = stocked(FakeClock())
    saver.save(path)
    put(saver, "late", {"a": 1})
    saver.save(path)
    assert "late" in BoundedInMemorySaver.load(path).store.thread_ids()
    assert [p.name for p in tmp_path.iterdir()] == ["store.snapshot"]  # no temporary file left


def test_a_snapshot_copies_only_the_threads_changed_since_the_previous_one() -> None:
    saver = stocked(FakeClock())
    first, _ = saver.store.snapshot()
    put(saver, "t1", {"more": 1}, namespace="sub:2")
    saver.get_tuple(config("t0"))  # a read changes the age and order, not the records
    second, _ = saver.store.snapshot()
    exports_before = {export.thread_id: export for export, _ in first}
    exports_after = {export.thread_id: export for export, _ in second}
    assert exports_after["t0"] is exports_before["t0"] and exports_after["t2"] is exports_before["t2"]
    assert exports_after["t1"] is not exports_before["t1"] and "sub:2" in exports_after["t1"].namespaces
    assert [export.thread_id for export, _ in second][-1] == "t0"


def test_autosave_writes_on_close_and_restores(tmp_path: Path) -> None:
    path = tmp_path / "auto.snapshot"
    settings = InMemoryCheckpointConfig(autosave_path=str(path), autosave_interval_seconds=3600)
    with BoundedInMemorySaver(config=settings) as saver:
        put(saver, "kept", {"a": 1})
        assert not path.exists()  # the interval has not passed
    restored = BoundedInMemorySaver.load(path, config=InMemoryCheckpointConfig())
    assert restored.store.thread_ids() == ["kept"]


CONSOLE_SCRIPT = Path(sys.executable).parent / "langgraph-bounded"  # installed with the package


def test_inspect_prints_what_a_snapshot_holds(tmp_path: Path) -> None:
    path = tmp_path / "store.snapshot"
    stocked(FakeClock()).save(path)
    for command in ([sys.executable, "-m", "langgraph.checkpoint.bounded"], [str(CONSOLE_SCRIPT)]):
        shown = subprocess.run([*command, "inspect", str(path), "--top", "2"], capture_output=True, text=True)
        assert shown.returncode == 0, shown.stderr
        assert (
            "threads      4" in shown.stdout and "top 2 threads by bytes" in shown.stdout and "approval" in shown.stdout
        )
    path.write_bytes(b"garbage")
    for command in ([sys.executable, "-m", "langgraph.checkpoint.bounded"], [str(CONSOLE_SCRIPT)]):
        shown = subprocess.run([*command, "inspect", str(path)], capture_output=True, text=True)
        assert shown.returncode == 1 and "not a langgraph-checkpoint-bounded snapshot" in shown.stderr


def test_the_command_shows_its_help_and_version() -> None:
    from langgraph.checkpoint.bounded import __version__

    shown = subprocess.run([str(CONSOLE_SCRIPT), "--help"], capture_output=True, text=True)
    assert shown.returncode == 0 and "usage: langgraph-bounded" in shown.stdout and "inspect" in shown.stdout
    shown = subprocess.run([str(CONSOLE_SCRIPT), "--version"], capture_output=True, text=True)
    assert shown.stdout.strip() == f"langgraph-bounded {__version__}"


def test_an_import_backdated_past_the_thread_used_before_it_keeps_lru_order_and_expires() -> None:
    clock = FakeClock()
    saver = BoundedInMemorySaver(config=InMemoryCheckpointConfig(idle_ttl_seconds=100), clock=clock)
    put(saver, "a", {"n": 1})
    exported = saver.export_thread("a")
    saver.delete_thread("a")
    put(saver, "b", {"n": 2})
    clock.advance(10)
    saver.store.import_thread(exported, idle_seconds=95)  # idler than "b": as idle as "b" instead
    saver.store.check()
    assert saver.store.thread_ids() == ["b", "a"]
    assert saver.store.last_used("a") == saver.store.last_used("b")
    clock.advance(91)  # both idle for 101 s
    assert saver.purge_expired() == 2
    assert saver.store.thread_ids() == []


def test_the_snapshot_cache_holds_stored_threads_only_however_many_came_and_went() -> None:
    """After one save, churn through many threads: the change set and the cached exports stay within the
    threads stored (the ones dropped since are forgotten when they leave, not pinned until the next save)."""
    saver = BoundedInMemorySaver(config=InMemoryCheckpointConfig(max_threads=100))
    for index in range(100):
        put(saver, f"first-{index}", {"a": index})
    saver.store.snapshot()
    for index in range(5_000):
        put(saver, f"churn-{index}", {"a": index})
    store = saver.store
    assert store.changed is not None and store.exports is not None
    assert len(store.changed) <= 100 and len(store.exports) <= 100
    assert set(store.changed) <= set(store.threads) and set(store.exports) <= set(store.threads)
    saver.check()
