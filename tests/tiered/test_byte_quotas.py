"""Byte quotas in the durable tier (issue 35, part 3), over SQLite and PostgreSQL:

* ``RetentionPolicy(max_thread_bytes=...)``: a sweep prunes a thread written since the last pass, oldest
  checkpoints first, until it fits, keeping as many checkpoints as fit; never below what ``keep_last=1`` keeps
  (the newest, its pending writes, the ancestors a ``DeltaChannel`` needs, the subgraph call it waits in): such
  a thread stays over, counted and reported. A thread exactly at the bound is left alone.
* ``WriteThrough``/``WriteBack(max_checkpoint_bytes=...)``: a put past it raises ``CheckpointTooLargeError``
  naming the thread, the size and the limit, before anything is written to either tier; exactly the limit passes.
* Bad values are refused naming the field.
"""

from __future__ import annotations

import math
import sqlite3
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver as StockSaver
from langgraph.types import Command

from langgraph.checkpoint.bounded import (
    CheckpointTooLargeError,
    InvalidArgumentError,
    RetentionPolicy,
    TieredSaver,
    WriteBack,
    WriteThrough,
)
from langgraph.checkpoint.bounded.metrics import TIERED_METRICS
from tests.support.durable_savers import ForeignSaver, clean, cluster_fixture, postgres_saver, sqlite_durable
from tests.support.graphs import approval_graph, delta_graph, nested_graph, thread
from tests.support.helpers import config, make_checkpoint
from tests.tiered.test_async_durable import async_durable
from tests.tiered.test_retention import SMALL, Clock, dangling_parents, run_turns

cluster = cluster_fixture("the byte quota PostgreSQL tests")
KINDS = ["sqlite", "postgres"]


@contextmanager
def durable_of(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Any]:
    if kind == "sqlite":
        saver = sqlite_durable(tmp_path / "t.db")
        yield saver
        saver.conn.close()
        return
    running = request.getfixturevalue("cluster")
    clean(running.conninfo)
    saver = postgres_saver(running.conninfo)
    yield saver
    saver.conn.close()


def quota(durable: Any, max_thread_bytes: int, **settings: Any) -> TieredSaver:
    policy = RetentionPolicy(max_thread_bytes=max_thread_bytes, sweep_interval_seconds=math.inf, **settings)
    clock = Clock()
    return TieredSaver(durable, config=SMALL, retention=policy, clock=clock.monotonic, wall_clock=clock)


def durable_bytes(saver: TieredSaver, thread_id: str) -> int:
    return saver.thread_storage(thread_id).durable.total_bytes


# --- bad values ----------------------------------------------------------------------------------------------------


BAD = [0, -1, True, 1.5, "10", math.inf, None]


@pytest.mark.parametrize("value", BAD, ids=repr)
def test_a_bad_byte_bound_is_refused_naming_the_field(value: Any) -> None:
    settings = {"max_thread_bytes": value}
    if value is None:  # None is no bound; a policy with nothing else removes nothing
        with pytest.raises(InvalidArgumentError, match="removes nothing"):
            RetentionPolicy(**settings)
        return
    with pytest.raises(InvalidArgumentError, match="max_thread_bytes must be a whole number of bytes"):
        RetentionPolicy(**settings)
    for policy in (WriteThrough, WriteBack):
        with pytest.raises(InvalidArgumentError, match="max_checkpoint_bytes must be a whole number of bytes"):
            policy(max_checkpoint_bytes=value)


def test_the_smallest_bounds_are_taken() -> None:
    assert RetentionPolicy(max_thread_bytes=1).max_thread_bytes == 1
    assert WriteThrough(max_checkpoint_bytes=1).max_checkpoint_bytes == 1
    assert WriteBack(max_checkpoint_bytes=1).max_checkpoint_bytes == 1
    assert WriteThrough().max_checkpoint_bytes is None


@pytest.mark.parametrize("make", [StockSaver, ForeignSaver], ids=["InMemorySaver", "api-only"])
def test_max_thread_bytes_needs_a_saver_whose_tables_are_summed(make: Any) -> None:
    with warnings.catch_warnings(), pytest.raises(InvalidArgumentError, match="max_thread_bytes needs a SQLite"):
        warnings.simplefilter("ignore")  # InMemorySaver as a durable tier is warned about first
        TieredSaver(make(), retention=RetentionPolicy(max_thread_bytes=1000))


# --- the per-checkpoint limit --------------------------------------------------------------------------------------


def size_of_first_put(durable: Any) -> int:
    probe = TieredSaver(durable)
    probe.put(config("probe"), make_checkpoint({"a": "x" * 1000}), {}, {"a": 1})
    size = probe.thread_storage("probe").hot.total_bytes  # a first put: its checkpoint, metadata and value
    probe.delete_thread("probe")
    return size


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("write", ["through", "back"])
@pytest.mark.parametrize("kind", KINDS)
async def test_a_put_past_max_checkpoint_bytes_is_refused_before_anything_is_written(
    kind: str, write: str, use_async: bool, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    with durable_of(kind, tmp_path, request) as durable:
        size = size_of_first_put(durable)
        policy = WriteThrough if write == "through" else WriteBack
        for limit, refused in ((size, False), (size - 1, True)):
            saver = TieredSaver(durable, write=policy(max_checkpoint_bytes=limit))
            arguments = (config(f"t{limit}"), make_checkpoint({"a": "x" * 1000}), {}, {"a": 1})
            if not refused:
                await saver.aput(*arguments) if use_async else saver.put(*arguments)
                saver.flush()
                assert saver.thread_storage(f"t{limit}").durable.checkpoints == 1
                continue
            with pytest.raises(CheckpointTooLargeError) as error:
                await saver.aput(*arguments) if use_async else saver.put(*arguments)
            assert (error.value.thread_id, error.value.needed, error.value.limit_value) == (f"t{limit}", size, limit)
            assert (
                f"'t{limit}'" in str(error.value)
                and f"{size:,}" in str(error.value)
                and f"({limit:,})" in str(error.value)
            )
            assert isinstance(error.value, ValueError | Exception)
            saver.flush()
            report = saver.thread_storage(f"t{limit}")
            assert report.durable.rows == 0 and report.hot.rows == 0  # written nowhere
            assert f"t{limit}" not in saver._store.threads
            rejections = saver.stats().rejections
            assert rejections == {CheckpointTooLargeError.rejection: 1}
            (metric,) = [row for row in TIERED_METRICS if row.name == "tiered_checkpoints_too_large"]
            assert callable(metric.read) and metric.read(saver.stats()) == 1
            saver.close()


# --- max_thread_bytes ------------------------------------------------------------------------------------------------


def sqlite_checkpoint_sizes(path: Path, thread_id: str) -> dict[str, int]:
    """Each checkpoint's bytes in a SQLite file: its row and its pending writes (values are inline)."""
    with sqlite3.connect(path) as connection:
        sizes = {
            str(cid): int(n)
            for cid, n in connection.execute(
                "SELECT checkpoint_id, length(checkpoint) + length(metadata) FROM checkpoints WHERE thread_id = ?",
                (thread_id,),
            )
        }
        for cid, n in connection.execute(
            "SELECT checkpoint_id, sum(length(value)) FROM writes WHERE thread_id = ? GROUP BY checkpoint_id",
            (thread_id,),
        ):
            if cid in sizes:
                sizes[cid] += int(n)
    return sizes


@pytest.mark.parametrize("kind", KINDS)
def test_a_thread_is_pruned_oldest_first_until_it_fits_keeping_as_many_as_fit(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    with durable_of(kind, tmp_path, request) as durable:
        probe = TieredSaver(durable)
        run_turns(probe, ["long"], turns=5)
        total = durable_bytes(probe, "long")
        sizes = sqlite_checkpoint_sizes(tmp_path / "t.db", "long") if kind == "sqlite" else {}
        probe.close()

        at_bound = quota(durable, total)  # exactly the bound: nothing to do
        report = at_bound.sweep()
        assert (report.checkpoints, report.over_bytes) == (0, 0)
        at_bound.close()

        bound = total // 2
        saver = quota(durable, bound)
        app = run_turns(saver, [], turns=0)
        values = app.get_state(thread("long")).values
        report = saver.sweep()
        assert report.pruned_threads == 1 and report.over_bytes == 0 and report.checkpoints > 0
        after = durable_bytes(saver, "long")
        assert 0 < after <= bound
        assert app.get_state(thread("long")).values == values
        assert saver.stats().retention.over_bytes_threads == 0
        if kind == "sqlite":
            kept = {item.config["configurable"]["checkpoint_id"] for item in saver.durable.list(thread("long"))}
            newest_removed = max(set(sizes) - kept)
            assert after == sum(sizes[cid] for cid in kept)
            assert after + sizes[newest_removed] > bound  # one more (the next oldest) would not fit
            assert min(kept) > newest_removed  # the oldest went
            assert dangling_parents(tmp_path / "t.db") == []
        assert saver.sweep().checkpoints == 0  # nothing written since: nothing more to find
        saver.close()


def answer_then_wait(apps: tuple[Any, ...], thread_id: str) -> None:
    """Three turns each answered at their interrupt, then a fourth left waiting at it, on each app."""
    for each in apps:
        for turn in range(3):
            each.invoke({"messages": [f"go {turn}"]}, thread(thread_id))
            each.invoke(Command(resume=f"answer {turn}"), thread(thread_id))
        each.invoke({"messages": ["last"]}, thread(thread_id))


@pytest.mark.parametrize("kind", KINDS)
def test_a_waiting_thread_over_the_bound_keeps_its_newest_resumes_and_is_reported(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    with durable_of(kind, tmp_path, request) as durable:
        saver = quota(durable, 1)  # no thread fits one byte
        app, stock = approval_graph(saver, {}), approval_graph(StockSaver(), {})
        answer_then_wait((app, stock), "wait")  # waits at the interrupt
        report = saver.sweep()
        assert report.pruned_threads == 1 and report.over_bytes == 1
        assert saver.stats().retention.over_bytes_threads == 1
        storage = saver.thread_storage("wait").durable
        assert storage.checkpoints == 1 and storage.pending_writes >= 1  # the newest, with its interrupt
        assert app.invoke(Command(resume="end"), thread("wait")) == stock.invoke(Command(resume="end"), thread("wait"))
        saver.close()


def test_subgraph_calls_and_delta_channels_keep_what_they_need(tmp_path: Path) -> None:
    saver = quota(sqlite_durable(tmp_path / "t.db"), 1)
    calls: dict[str, int] = {}
    stock_calls: dict[str, int] = {}
    app, stock = nested_graph(saver, calls), nested_graph(StockSaver(), stock_calls)
    delta, stock_delta = delta_graph(saver, {}), delta_graph(StockSaver(), {})
    answer_then_wait((app, stock), "nested")  # waits inside the subgraph
    for turn in range(5):
        for each in (delta, stock_delta):
            each.invoke({"items": [f"user {turn}"]}, thread("delta"))
    report = saver.sweep()
    assert report.pruned_threads == 2 and report.over_bytes == 2
    assert saver.thread_storage("nested").durable.namespaces == 2  # the root, and the call it waits in
    ours, theirs = app.get_state(thread("nested"), subgraphs=True), stock.get_state(thread("nested"), subgraphs=True)
    assert (ours.values, ours.next) == (theirs.values, theirs.next)
    assert [i.value for i in ours.interrupts] == [i.value for i in theirs.interrupts] == ["inner?"]  # ids differ
    assert ours.tasks[0].state.values == theirs.tasks[0].state.values  # type: ignore[union-attr]
    assert app.invoke(Command(resume="end"), thread("nested")) == stock.invoke(Command(resume="end"), thread("nested"))
    assert calls == stock_calls
    assert delta.get_state(thread("delta")).values == stock_delta.get_state(thread("delta")).values
    delta.invoke({"items": ["after"]}, thread("delta"))
    stock_delta.invoke({"items": ["after"]}, thread("delta"))
    assert delta.get_state(thread("delta")).values == stock_delta.get_state(thread("delta")).values
    assert dangling_parents(tmp_path / "t.db") == []


@pytest.mark.parametrize("kind", KINDS)
async def test_asweep_over_the_async_savers(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    running = request.getfixturevalue("cluster") if kind == "postgres" else None
    async with async_durable(kind, tmp_path, running) as durable:
        probe = TieredSaver(durable)
        app = approval_graph(probe, {})
        for turn in range(4):
            await app.ainvoke({"messages": [f"draft {turn}"]}, thread("t"))
            await app.ainvoke(Command(resume=f"answer {turn}"), thread("t"))
        total = (await probe.athread_storage("t")).durable.total_bytes
        await probe.aclose()
        saver = quota(durable, total // 2)
        values = (await approval_graph(saver, {}).aget_state(thread("t"))).values
        report = await saver.asweep()
        assert report.pruned_threads == 1 and report.over_bytes == 0
        assert 0 < (await saver.athread_storage("t")).durable.total_bytes <= total // 2
        assert (await approval_graph(saver, {}).aget_state(thread("t"))).values == values
        await saver.aclose()


def test_keep_last_and_the_byte_bound_together_keep_the_fewer(tmp_path: Path) -> None:
    saver = quota(sqlite_durable(tmp_path / "t.db"), 10**9, keep_last=3)  # the bytes are no bound here
    run_turns(saver, ["long"], turns=3)
    saver.sweep()
    assert saver.thread_storage("long").durable.checkpoints == 3
