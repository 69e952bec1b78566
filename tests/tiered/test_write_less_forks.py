"""``persist="latest"`` and forks: a checkpoint a flush skipped stays in the hot tier, so a fork from it (time
travel, ``update_state``) is acknowledged; its flush writes it rejoined to what is durable, whole, and the ledger's
memory of what it skipped is bounded (the thread's deletion, its leaving memory, ``SKIPPED_BOUND``)."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

import pytest

from langgraph.checkpoint.bounded import InMemoryCheckpointConfig, TieredSaver, UnstorableWriteError, WriteBack
from langgraph.checkpoint.bounded.tiered import group_commit, writeback
from tests.support.durable_savers import cluster_fixture, sqlite_durable
from tests.support.helpers import config, make_checkpoint
from tests.tiered.test_write_less import EVERY_SIDE, assert_no_missing_parent, durable_of, flush, saver

cluster = cluster_fixture("the write-less fork tests over PostgreSQL")


def put(
    tiered: TieredSaver,
    parent: Any,
    values: dict[str, Any],
    versions: dict[str, int],
    new: dict[str, int],
    use_async: bool,
) -> Any:
    checkpoint = make_checkpoint(values, versions)
    if use_async:
        return asyncio.run(tiered.aput(parent, checkpoint, {}, new))
    return tiered.put(parent, checkpoint, {}, new)


def chain(tiered: TieredSaver, use_async: bool, name: str = "t") -> list[Any]:
    """Three checkpoints of thread ``name``, each a new "doc" (a list: a blob over PostgreSQL) and "n"; then a
    flush, which skips the first two. Their configs."""
    configs, before = [config(name)], tiered._shared.dirty.skipped
    for step in (1, 2, 3):
        values, versions = {"doc": [f"doc {step}"] * 50, "n": [step]}, {"doc": step, "n": step}
        configs.append(put(tiered, configs[-1], values, versions, versions, use_async))
    flush(tiered, use_async)
    assert tiered._shared.dirty.skipped == before + 2
    return configs[1:]


@EVERY_SIDE
def test_a_fork_from_a_skipped_checkpoint_is_written_whole_under_what_is_durable(
    tmp_path: Path, request: pytest.FixtureRequest, backend: str, use_async: bool
) -> None:
    """A one-checkpoint flush of a fork from the skipped middle checkpoint: written with no parent (its ancestors
    were all skipped), with the "doc" value it kept unchanged, whose blob only the skipped checkpoint held."""
    durable = durable_of(backend, tmp_path, request)
    tiered = saver(durable, "latest")
    _, middle, _ = chain(tiered, use_async)
    fork = put(tiered, middle, {"doc": ["doc 2"] * 50, "n": [9]}, {"doc": 2, "n": 4}, {"n": 4}, use_async)
    flush(tiered, use_async)  # refused as orphaned before: its parent was never written
    assert tiered.stats().dirty_threads == 0
    stored = durable.get_tuple(fork)
    assert stored is not None and stored.parent_config is None
    assert stored.checkpoint["channel_values"] == {"doc": ["doc 2"] * 50, "n": [9]}
    assert len(assert_no_missing_parent(durable, "t")) == 2
    tiered.check()
    tiered.close()


def test_pending_writes_of_a_skipped_checkpoint_are_dropped(tmp_path: Path) -> None:
    """A fork's task writes on the skipped checkpoint it runs from: never written (their checkpoint never is),
    and they pin nothing."""
    durable = sqlite_durable(tmp_path / "durable.sqlite")
    tiered = saver(durable, "latest")
    _, middle, _ = chain(tiered, False)
    tiered.put_writes(middle, [("n", 7)], "task")
    put(tiered, middle, {"doc": ["doc 2"] * 50, "n": [7]}, {"doc": 2, "n": 4}, {"n": 4}, False)
    tiered.flush()
    assert tiered.stats().dirty_threads == 0
    assert durable.conn.execute("SELECT count(*) FROM writes").fetchone()[0] == 0
    assert not tiered._shared.dirty.pinned
    tiered.close()


def test_the_ledger_forgets_a_thread_deleted_or_gone_from_memory(tmp_path: Path) -> None:
    """Deleted, or evicted while clean: the thread's skipped checkpoints are forgotten; evicted with a fork from
    one unflushed: kept until that fork's flush has rejoined it, then forgotten."""
    tiered = TieredSaver(
        sqlite_durable(tmp_path / "durable.sqlite"),
        config=InMemoryCheckpointConfig(max_threads=1),
        write=WriteBack(flush_interval_seconds=float("inf"), persist="latest"),
    )
    ledger = tiered._shared.dirty
    chain(tiered, False)
    assert len(ledger.skipped_parents["t"]) == 2
    tiered.delete_thread("t")
    assert "t" not in ledger.skipped_parents
    chain(tiered, False)
    tiered.put(config("other"), make_checkpoint({"n": 1}), {}, {"n": 1})  # evicts "t" (clean)
    assert "t" not in ledger.skipped_parents
    _, middle, _ = chain(tiered, False, "u")
    fork = tiered.put(middle, make_checkpoint({"n": [9]}, {"n": 4}), {}, {"n": 4})
    tiered.put(config("other"), make_checkpoint({"n": 1}), {}, {"n": 1})  # evicts "u", dirty
    assert "u" in ledger.skipped_parents  # its fork still needs them
    ledger.check()
    tiered.flush()
    assert tiered.durable.get_tuple(fork) is not None
    assert "u" not in ledger.skipped_parents
    ledger.check()
    tiered.close()


def test_past_skipped_bound_a_fork_from_a_forgotten_checkpoint_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The documented fallback: the oldest skipped checkpoints past ``SKIPPED_BOUND`` are forgotten, and a fork
    from one is refused at its flush, as a fork from a parent another process deleted."""
    monkeypatch.setattr(writeback, "SKIPPED_BOUND", 1)
    tiered = saver(sqlite_durable(tmp_path / "durable.sqlite"), "latest")
    first, middle, _ = chain(tiered, False)
    assert list(tiered._shared.dirty.skipped_parents["t"]) == [("", middle["configurable"]["checkpoint_id"])]
    put(tiered, middle, {"doc": "x", "n": [5]}, {"doc": 4, "n": 4}, {"doc": 4, "n": 4}, False)
    tiered.flush()  # remembered: written
    put(tiered, first, {"doc": "y", "n": [6]}, {"doc": 5, "n": 5}, {"doc": 5, "n": 5}, False)
    with pytest.raises(UnstorableWriteError):
        tiered.flush()
    tiered.close()


@pytest.mark.parametrize("kind", ["postgres", "async_postgres"])
def test_a_rejoined_fork_flushed_by_group_commit_is_what_the_savers_own_put_stores(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The rejoined, whole checkpoints (the turn's last, then the fork) flushed by group commit leave the tables a
    flush through ``PostgresSaver.put`` leaves (the differential rules: blobs of the new versions it moves)."""
    from tests.tiered.test_group_commit import _durable, _rows, _where

    steps = [
        make_checkpoint({"doc": [f"doc {step}"] * 50, "n": [step]}, {"doc": step, "n": step}) for step in (1, 2, 3)
    ]
    fork = make_checkpoint({"doc": ["doc 2"] * 50, "n": [9]}, {"doc": 2, "n": 4})
    use_async = kind.startswith("async")

    async def call(tiered: TieredSaver, method: str, *arguments: Any) -> Any:
        if use_async:
            return await getattr(tiered, "a" + method)(*copy.deepcopy(arguments))
        return getattr(tiered, method)(*copy.deepcopy(arguments))

    async def written(where: str, through: bool) -> bool:
        async with _durable(kind, where, through=through) as durable:
            tiered = saver(durable, "latest")
            configs = [config("t")]
            for checkpoint in steps:
                configs.append(await call(tiered, "put", configs[-1], checkpoint, {}, checkpoint["channel_versions"]))
            await call(tiered, "flush")
            await call(tiered, "put", configs[2], fork, {}, {"n": 4})  # from the skipped middle one
            await call(tiered, "flush")
            assert tiered.stats().dirty_threads == 0 and tiered._shared.dirty.skipped == 2
            return group_commit.groupable(tiered._tiers.durable)

    rows, grouped = {}, {}
    for mode in ("batch", "api"):
        where = _where(kind, f"fork_{kind}_{mode}", tmp_path, request)
        grouped[mode] = asyncio.run(written(where, mode == "api"))
        rows[mode] = _rows(kind, where)
    assert grouped == {"batch": True, "api": False}
    assert len(rows["api"]["checkpoints"]) == 2 and rows["api"]["checkpoint_blobs"]
    for table in rows["api"]:
        assert rows["batch"][table] == rows["api"][table], table
