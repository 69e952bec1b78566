"""Hardening: what the saver accepts it can save and restore; background work that is seen and bounded.

* inputs with no clear error before (a NaN or 2**70 version, a huge int thread id, ``writes=None``,
  odd ``list`` limits and ``get_delta_channel_history`` channels, ``get_next_version(1.5)``, config
  values that would overflow) now get a ``ValueError`` naming the field, and change nothing;
* writes that poisoned every later save (lone surrogates, mixed metadata keys) are refused;
* snapshots: temporary files a killed writer left are removed at the next save or load; ``inspect``
  turns an odd field into a one-line error;
* background work: autosave failures are counted and ``close()`` raises; a saver dropped without
  ``close()`` is freed and its thread ends; ``close()``/``resume()`` racing leave at most one job of each.
"""

from __future__ import annotations

import asyncio
import gc
import os
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path
from typing import Any

import ormsgpack
import pytest

from langgraph.checkpoint.bounded import BoundedInMemorySaver, InMemoryCheckpointConfig, SnapshotError
from langgraph.checkpoint.bounded import snapshot as snapshot_format
from tests.support.helpers import config, fingerprint, make_checkpoint, put

CONSOLE_SCRIPT = Path(sys.executable).parent / "langgraph-bounded"


def refused_naming(saver: BoundedInMemorySaver, field: str, call: Any) -> None:
    before = fingerprint(saver.store)
    with pytest.raises(ValueError, match=field):
        call()
    assert fingerprint(saver.store) == before


# --- inputs that get a clear error --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "message"),
    [(float("nan"), "must be a finite number"), (float("inf"), "must be a finite number"), (2**70, "71 bits")],
)
def test_a_version_that_cannot_round_trip_is_refused_naming_the_channel(version: Any, message: str) -> None:
    saver = BoundedInMemorySaver()
    checkpoint = make_checkpoint({"c": 1}, {"c": version})
    refused_naming(
        saver, f"version of channel 'c'.*{message}", lambda: saver.put(config("t"), checkpoint, {}, {"c": version})
    )


def test_a_huge_int_thread_id_is_refused_naming_the_field() -> None:
    saver = BoundedInMemorySaver()
    refused_naming(saver, "thread_id", lambda: saver.put(config(10**5000), make_checkpoint({"a": 1}), {}, {"a": 1}))
    refused_naming(saver, "thread_id", lambda: saver.get_tuple(config(10**5000)))


def test_writes_that_are_not_pairs_are_refused_naming_the_argument() -> None:
    saver = BoundedInMemorySaver()
    stored = put(saver, "t", {"a": 1})
    refused_naming(saver, "writes must be a sequence", lambda: saver.put_writes(stored, None, "task"))  # type: ignore[arg-type]
    refused_naming(saver, "writes must be a sequence", lambda: saver.put_writes(stored, "ab", "task"))  # type: ignore[arg-type]


@pytest.mark.parametrize("limit", ["3", 1.5, float("nan"), True, -1.0])
def test_an_odd_list_limit_is_refused_naming_it(limit: Any) -> None:
    saver = BoundedInMemorySaver()
    put(saver, "t", {"a": 1})
    with pytest.raises(ValueError, match="limit must be"):
        list(saver.list(config("t"), limit=limit))


def test_a_list_limit_of_zero_or_a_whole_number_is_fine() -> None:
    saver = BoundedInMemorySaver()
    for n in range(3):
        put(saver, "t", {"a": n}, version=f"{n + 1}.0")
    assert len(list(saver.list(config("t"), limit=2))) == 2
    assert list(saver.list(config("t"), limit=0)) == []


@pytest.mark.parametrize("channels", ["abc", [1], [None], ("a", b"b")])
def test_odd_delta_channels_are_refused_naming_them(channels: Any) -> None:
    saver = BoundedInMemorySaver()
    put(saver, "t", {"a": 1})
    with pytest.raises(ValueError, match="channels must be"):
        saver.get_delta_channel_history(config=config("t"), channels=channels)


@pytest.mark.parametrize(
    "current",
    [1.5, "not-a-version", "-3.x", b"1", float("nan"), 10**5000, True],
    ids=["float", "text", "negative", "bytes", "nan", "huge-int", "bool"],
)
def test_get_next_version_refuses_what_it_cannot_count_from(current: Any) -> None:
    with pytest.raises(ValueError, match="current version"):
        BoundedInMemorySaver().get_next_version(current, None)


def test_get_next_version_counts_from_the_stock_formats() -> None:
    saver = BoundedInMemorySaver()
    assert saver.get_next_version(None, None).startswith("0" * 31 + "1.")
    assert saver.get_next_version(41, None).startswith("0" * 30 + "42.")
    assert saver.get_next_version(
        saver.get_next_version("00000000000000000000000000000007.0123", None), None
    ).startswith("0" * 31 + "9.")


@pytest.mark.parametrize("field", ["idle_ttl_seconds", "autosave_interval_seconds", "purge_interval_seconds"])
def test_seconds_that_would_overflow_are_refused_at_construction(field: str) -> None:
    with pytest.raises(ValueError, match=field):
        InMemoryCheckpointConfig(**{field: 10**400})


def test_a_memory_limit_that_would_overflow_is_refused_at_construction() -> None:
    with pytest.raises(ValueError, match=r"max_memory_bytes .*math\.inf"):
        InMemoryCheckpointConfig(max_memory_bytes=10**400)


# --- what poisoned every later save ------------------------------------------------------------------------


def test_a_lone_surrogate_in_a_task_path_is_refused() -> None:
    saver = BoundedInMemorySaver()
    stored = put(saver, "t", {"a": 1})
    refused_naming(
        saver, "task_path holds a lone surrogate", lambda: saver.put_writes(stored, [("a", 1)], "task", "\ud800")
    )


def test_a_lone_surrogate_run_id_is_refused() -> None:
    saver = BoundedInMemorySaver()
    refused_naming(
        saver,
        r"metadata\['run_id'\]",
        lambda: saver.put(config("t"), make_checkpoint({"a": 1}), {"run_id": "\udcff"}, {"a": 1}),
    )


def test_mixed_delta_counter_keys_are_refused() -> None:
    saver = BoundedInMemorySaver()
    metadata = {"counters_since_delta_snapshot": {"a": 1, 2: 1}}
    refused_naming(
        saver,
        "counters_since_delta_snapshot",
        lambda: saver.put(config("t"), make_checkpoint({"a": 1}), metadata, {"a": 1}),
    )


def test_after_refusing_them_every_save_still_works(tmp_path: Path) -> None:
    saver = BoundedInMemorySaver()
    stored = put(
        saver, "t", {"a": "é"}, metadata={"run_id": "run-1", "note": "\udcff"}
    )  # a surrogate in metadata: serialized
    saver.put_writes(stored, [("a", "\udcff")], "task", "path é")
    for bad in (lambda: saver.put_writes(stored, [("a", 1)], "task", "\ud800"),):
        with pytest.raises(ValueError):
            bad()
    saver.save(tmp_path / "state.snapshot")
    restored = BoundedInMemorySaver.load(tmp_path / "state.snapshot")
    assert restored.get_tuple(config("t")) == saver.get_tuple(config("t"))


# --- snapshots ------------------------------------------------------------------------------------------------


def test_temporary_files_a_killed_writer_left_are_removed_at_the_next_save(tmp_path: Path) -> None:
    target = tmp_path / "state.snapshot"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)
    left = tmp_path / f".state.snapshot.{dead_pid}.abc123.tmp"  # a save killed mid-write, by a process now gone
    left.write_bytes(b"x" * 1000)
    live = tmp_path / f".state.snapshot.{os.getpid()}.def456.tmp"  # this process may be writing it
    live.write_bytes(b"y")
    old_unnamed = tmp_path / ".state.snapshot.q1w2e3.tmp"  # the naming before pids: stale once old
    old_unnamed.write_bytes(b"z")
    os.utime(old_unnamed, (time.time() - 3600, time.time() - 3600))
    fresh_unnamed = tmp_path / ".state.snapshot.r4t5y6.tmp"
    fresh_unnamed.write_bytes(b"z")
    other_target = tmp_path / f".other.snapshot.{dead_pid}.abc.tmp"
    other_target.write_bytes(b"o")
    # targets whose names extend this one's ("state.snapshot.20240101"): their writers' files are theirs
    extended = [
        tmp_path / f".state.snapshot.20240101.{dead_pid}.abc123.tmp",
        tmp_path / f".state.snapshot.{dead_pid + 1}.{dead_pid}.abc123.tmp",
        tmp_path / ".state.snapshot.20240101.q1w2e3.tmp",
    ]
    for path in extended:
        path.write_bytes(b"e")
        os.utime(path, (time.time() - 3600, time.time() - 3600))
    saver = BoundedInMemorySaver()
    put(saver, "t", {"a": 1})
    saver.save(target)
    assert not left.exists() and not old_unnamed.exists()
    assert live.exists() and fresh_unnamed.exists() and other_target.exists()
    assert all(path.exists() for path in extended)
    left.write_bytes(b"again")
    BoundedInMemorySaver.load(target)  # a load cleans up too
    assert not left.exists() and target.exists()


def test_a_killed_save_leaves_nothing_the_next_save_keeps(tmp_path: Path) -> None:
    target = tmp_path / "state.snapshot"
    script = (
        "import os, sys\n"
        "from langgraph.checkpoint.bounded import snapshot\n"
        "real_replace = os.replace\n"
        "os.replace = lambda *a: os.kill(os.getpid(), 9)  # killed between writing and renaming\n"
        f"snapshot.write_atomically({str(target)!r}, b'x' * 100_000)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == -9
    leftovers = list(tmp_path.glob(".state.snapshot.*.tmp"))
    assert len(leftovers) == 1 and not target.exists()
    BoundedInMemorySaver().save(target)
    assert list(tmp_path.glob(".state.snapshot.*.tmp")) == [] and target.exists()


def damaged(tmp_path: Path, saved_at: Any, idle: Any = 1.0) -> Path:
    """An unsigned snapshot whose body says ``saved_at`` and an idle time, with a valid checksum."""
    saver = BoundedInMemorySaver()
    put(saver, "t", {"a": 1})
    threads, _ = saver.store.snapshot()
    body = ormsgpack.packb({"saved_at": saved_at, "threads": [snapshot_format._thread(threads[0][0], idle)]})
    import hashlib

    data = snapshot_format.MAGIC + bytes([2, 0]) + hashlib.sha256(body).digest() + bytes(32) + body
    path = tmp_path / "damaged.snapshot"
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(("saved_at", "idle"), [(1e20, 1.0), (float("nan"), 1.0), (0.0, float("nan")), (0.0, -5.0)])
def test_inspect_and_load_turn_an_odd_field_into_one_line(tmp_path: Path, saved_at: Any, idle: Any) -> None:
    path = damaged(tmp_path, saved_at, idle)
    shown = subprocess.run([str(CONSOLE_SCRIPT), "inspect", str(path)], capture_output=True, text=True)
    assert shown.returncode == 1 and "Traceback" not in shown.stderr
    assert len(shown.stderr.strip().splitlines()) == 1 and "malformed" in shown.stderr
    with pytest.raises(SnapshotError, match="malformed"):
        BoundedInMemorySaver.load(path)


# --- background work ---------------------------------------------------------------------------------------------


def test_autosave_failures_are_counted_and_close_raises(tmp_path: Path) -> None:
    folder = tmp_path / "gone"
    folder.mkdir()
    saver = BoundedInMemorySaver(
        config=InMemoryCheckpointConfig(autosave_path=str(folder / "state.snapshot"), autosave_interval_seconds=0.02)
    )
    put(saver, "t", {"a": 1})
    folder.rmdir()  # every save fails from now on
    deadline = time.monotonic() + 10
    while saver.stats().autosave_failures < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    stats = saver.stats()
    assert stats.autosave_failures >= 2 and "FileNotFoundError" in (stats.last_autosave_error or "")
    with pytest.raises(FileNotFoundError):
        saver.close()  # the last save is tried, fails, and says so
    assert saver.stats().autosave_failures >= 3 and not saver._background
    from prometheus_client import CollectorRegistry, generate_latest

    from langgraph.checkpoint.bounded.metrics import register_metrics

    registry = CollectorRegistry()
    register_metrics(saver, registry)
    assert "langgraph_checkpoint_bounded_autosave_failures_total" in generate_latest(registry).decode()


def test_writes_after_close_reach_the_file_at_the_next_close(tmp_path: Path) -> None:
    """A second close() saves too: a process-wide saver written to after its server closed it, then closed at
    interpreter exit, kept those writes out of the file (found in review)."""
    path = tmp_path / "state.snapshot"
    saver = BoundedInMemorySaver(config=InMemoryCheckpointConfig(autosave_path=str(path), autosave_interval_seconds=60))
    put(saver, "before", {"a": 1})
    saver.close()
    put(saver, "after", {"a": 2})
    saver.close()
    restored = BoundedInMemorySaver.load(path)
    assert restored.store.thread_ids() == ["before", "after"]
    assert restored.get_tuple(config("after")) == saver.get_tuple(config("after"))


@pytest.mark.parametrize("side", ["sync", "async"])
def test_leaving_a_context_on_an_exception_keeps_that_exception_when_the_last_save_fails(
    tmp_path: Path, side: str
) -> None:
    folder = tmp_path / "gone"
    folder.mkdir()
    saver = BoundedInMemorySaver(
        config=InMemoryCheckpointConfig(autosave_path=str(folder / "state.snapshot"), autosave_interval_seconds=60)
    )

    async def leave_async() -> None:
        async with saver:
            folder.rmdir()
            raise KeyError("the application's own error")

    with pytest.raises(KeyError, match="the application's own error"):
        if side == "async":
            asyncio.run(leave_async())
        else:
            with saver:
                folder.rmdir()
                raise KeyError("the application's own error")
    assert saver.stats().autosave_failures == 1  # the failed last save is counted (and logged), not raised
    with pytest.raises(FileNotFoundError), saver:  # leaving without an exception, it raises as close() does
        pass


def test_a_copy_keeps_the_background_work_of_the_saver_it_came_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LangGraph's compile() under strict msgpack keeps only a with_allowlist() copy: the saver it came from
    was garbage, and its autosave stopped with it, silently (found in review)."""
    monkeypatch.setattr("langgraph.checkpoint.serde._msgpack.STRICT_MSGPACK_ENABLED", True)  # as the variable does
    path = tmp_path / "state.snapshot"
    original = BoundedInMemorySaver(
        config=InMemoryCheckpointConfig(autosave_path=str(path), autosave_interval_seconds=0.02)
    )
    copy = original.with_allowlist([("tests.saver.refusals.test_hardening", "Anything")])
    assert copy is not original
    del original
    gc.collect()
    put(copy, "t", {"a": 1})
    deadline = time.monotonic() + 10
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert path.exists() and copy.stats().autosave_failures == 0
    copy.close()
    assert BoundedInMemorySaver.load(path).store.thread_ids() == ["t"]


def test_a_saver_dropped_without_close_is_freed_and_its_threads_end() -> None:
    refs = []
    for _ in range(50):
        saver = BoundedInMemorySaver(config=InMemoryCheckpointConfig(purge_interval_seconds=0.01))
        refs.append(weakref.ref(saver))
        del saver
    gc.collect()
    assert all(ref() is None for ref in refs)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(t.name == "checkpoint-expiry-sweep" for t in threading.enumerate()):
        time.sleep(0.02)
    assert not any(t.name == "checkpoint-expiry-sweep" for t in threading.enumerate())


def test_close_and_resume_racing_leave_at_most_one_job_of_each_kind(tmp_path: Path) -> None:
    saver = BoundedInMemorySaver(
        config=InMemoryCheckpointConfig(
            autosave_path=str(tmp_path / "s.snapshot"), autosave_interval_seconds=60, purge_interval_seconds=60
        )
    )
    seen: list[int] = []
    stop = threading.Event()

    def toggle() -> None:
        while not stop.is_set():
            saver.close()
            saver.resume()
            seen.append(len(saver._background))

    workers = [threading.Thread(target=toggle) for _ in range(4)]
    for worker in workers:
        worker.start()
    for n in range(200):
        put(saver, f"t{n % 10}", {"a": n})
    stop.set()
    for worker in workers:
        worker.join(30)
    assert seen and max(seen) <= 2
    saver.close()
    assert saver._background == []


@pytest.mark.parametrize("interval", [threading.TIMEOUT_MAX * 2, 1e300])
def test_an_interval_no_wait_accepts_starts_no_thread_and_still_saves_on_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, interval: float
) -> None:
    """Past threading.TIMEOUT_MAX a wait raises OverflowError: the job's thread would die at its first wait,
    silently. Such an interval is never reached, so it is taken as infinite: no thread, the final save kept."""
    died: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda hook: died.append(hook.exc_value))
    before = threading.active_count()
    path = tmp_path / "far.snapshot"
    saver = BoundedInMemorySaver(
        config=InMemoryCheckpointConfig(
            autosave_path=str(path), autosave_interval_seconds=interval, purge_interval_seconds=interval
        )
    )
    assert threading.active_count() == before
    put(saver, "t")
    saver.close()
    assert BoundedInMemorySaver.load(path).get_tuple(config("t")) is not None
    assert died == []
