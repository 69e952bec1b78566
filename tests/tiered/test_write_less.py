"""Write-back's ``persist="latest"`` (issue 34, item 4): a flush writes each namespace's newest checkpoint and
what a resume, an interrupt or a ``DeltaChannel`` needs, not every intermediate one; what it writes stays
readable by the plain durable saver (no parent that is not there), sync and async, SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any

import pytest
from langgraph.types import Command

from langgraph.checkpoint.bounded import InvalidArgumentError, TieredSaver, WriteBack
from tests.support.durable_savers import clean, cluster_fixture, postgres_saver, sqlite_durable
from tests.support.graphs import approval_graph, chat_graph, delta_graph, describe, thread

TURNS = 5

cluster = cluster_fixture("the write-less tests over PostgreSQL")
EVERY_SIDE = pytest.mark.parametrize(
    ("backend", "use_async"),
    [(backend, use_async) for backend in ("sqlite", "postgres") for use_async in (False, True)],
    ids=lambda value: {False: "sync", True: "async"}.get(value, value),
)


def durable_of(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    if backend == "sqlite":
        return sqlite_durable(tmp_path / "durable.sqlite")
    conninfo = request.getfixturevalue("cluster").conninfo
    clean(conninfo)
    return postgres_saver(conninfo)


def saver(durable: Any, persist: str) -> TieredSaver:
    return TieredSaver(durable, write=WriteBack(flush_interval_seconds=math.inf, persist=persist))  # type: ignore[arg-type]


def invoke(app: Any, value: Any, name: str, use_async: bool) -> Any:
    if use_async:
        return asyncio.run(app.ainvoke(value, thread(name)))
    return app.invoke(value, thread(name))


def flush(tiered: TieredSaver, use_async: bool) -> None:
    if use_async:
        asyncio.run(tiered.aflush())
    else:
        tiered.flush()


def assert_no_missing_parent(durable: Any, name: str) -> list[Any]:
    """Every checkpoint the durable saver lists names a parent it holds, or none; the list."""
    listed = list(durable.list(thread(name)))
    held = {item.config["configurable"]["checkpoint_id"] for item in listed}
    for item in listed:
        parent = item.parent_config
        assert parent is None or parent["configurable"]["checkpoint_id"] in held, "a parent that is not there"
    return listed


def test_persist_is_checked() -> None:
    with pytest.raises(InvalidArgumentError, match="persist must be one of"):
        WriteBack(persist="newest")  # type: ignore[arg-type]
    assert WriteBack().persist == "all"


@EVERY_SIDE
def test_a_flush_writes_the_newest_checkpoint_readable_by_the_plain_saver(
    tmp_path: Path, request: pytest.FixtureRequest, backend: str, use_async: bool
) -> None:
    """Five chat turns (agent, tool, final), flushed at the end: "all" writes every step's checkpoint; "latest"
    writes the newest one, which the plain durable saver reads as the graph's state, with no missing parent,
    and the skipped ones leave the ledger unwritten."""
    durable = durable_of(backend, tmp_path, request)
    tiered = saver(durable, "latest")
    app = chat_graph(tiered, {})
    for turn in range(TURNS):
        invoke(app, {"messages": [f"user {turn}"]}, "chat", use_async)
    state = describe(app.get_state(thread("chat")))
    state["has_parent"] = False  # its ancestors were skipped: written with no parent, never a missing one
    flush(tiered, use_async)
    assert tiered.stats().dirty_threads == 0 and tiered._shared.dirty.skipped > 0
    listed = assert_no_missing_parent(durable, "chat")
    assert len(listed) == 1  # one flush: the newest checkpoint alone
    assert describe(chat_graph(durable, {}).get_state(thread("chat"))) == state
    tiered.close()
    tiered.check()


@EVERY_SIDE
def test_flushes_between_turns_keep_a_chain_and_an_interrupt_resumes_from_the_durable_tier(
    tmp_path: Path, request: pytest.FixtureRequest, backend: str, use_async: bool
) -> None:
    """A flush after each turn writes each turn's newest checkpoint, chained to the one before; a thread waiting
    at an interrupt keeps its interrupt (the pending writes of its newest checkpoint), and another saver over
    the durable tier resumes it as the stock saver would."""
    durable = durable_of(backend, tmp_path, request)
    tiered = saver(durable, "latest")
    app = approval_graph(tiered, {})
    for turn in range(2):
        invoke(app, {"messages": [f"turn {turn}"]}, "waits", use_async)
        flush(tiered, use_async)
        invoke(app, Command(resume=f"answer {turn}"), "waits", use_async)
        flush(tiered, use_async)
    waiting = invoke(app, {"messages": ["last"]}, "waits", use_async)
    assert "__interrupt__" in waiting
    flush(tiered, use_async)
    listed = assert_no_missing_parent(durable, "waits")
    assert 2 < len(listed) < 15  # a checkpoint a flush, not one a step
    cold = approval_graph(TieredSaver(durable), {})
    assert describe(cold.get_state(thread("waits"))) == describe(app.get_state(thread("waits")))
    done = cold.invoke(Command(resume="yes"), thread("waits"))
    assert done["messages"][-1] == "done: yes"
    tiered.close()


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_a_thread_using_a_delta_channel_is_written_whole(tmp_path: Path, use_async: bool) -> None:
    """A DeltaChannel value is rebuilt from its ancestors' writes: such a thread is written whole."""
    durable = sqlite_durable(tmp_path / "durable.sqlite")
    every, latest = saver(durable, "all"), None
    app = delta_graph(every, {})
    for turn in range(4):
        invoke(app, {"items": [f"user {turn}"]}, "delta", use_async)
    flush(every, use_async)
    whole = len(list(durable.list(thread("delta"))))
    latest = saver(sqlite_durable(tmp_path / "latest.sqlite"), "latest")
    app = delta_graph(latest, {})
    for turn in range(4):
        invoke(app, {"items": [f"user {turn}"]}, "delta", use_async)
    flush(latest, use_async)
    assert len(list(latest.durable.list(thread("delta")))) == whole
    assert latest._shared.dirty.skipped == 0
    every.close()
    latest.close()


def test_pending_writes_flushed_before_their_checkpoint_pin_it(tmp_path: Path) -> None:
    """Writes that came before their checkpoint's put, flushed first, pin that checkpoint: a later flush does not
    skip it, so no write row is left without its checkpoint."""
    from tests.support.helpers import config, make_checkpoint

    durable = sqlite_durable(tmp_path / "durable.sqlite")
    tiered = saver(durable, "latest")
    first = tiered.put(config("t"), make_checkpoint({"n": 0}, {"n": 1}), {}, {"n": 1})
    tiered.flush()
    middle = make_checkpoint({"n": 1}, {"n": 2})
    tiered.put_writes(config("t", "", middle["id"]), [("n", 9)], "early")  # before its checkpoint's put
    tiered.flush()
    stored = tiered.put(first, middle, {}, {"n": 2})
    tiered.put(stored, make_checkpoint({"n": 2}, {"n": 3}), {}, {"n": 3})
    tiered.flush()
    ids = {item.config["configurable"]["checkpoint_id"] for item in durable.list(config("t"))}
    assert middle["id"] in ids and len(ids) == 3
    assert_no_missing_parent(durable, "t")
    tiered.close()
    tiered.check()
