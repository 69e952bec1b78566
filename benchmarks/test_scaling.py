"""How costs grow with the store (threads) and with one thread (checkpoints).

Sizes marked slow run only in ``make bench-full``. The stock saver's
``delete_thread`` scans every write and blob of every thread, so at large
sizes it gets few rounds; its median is still measured, never extrapolated.
"""

from __future__ import annotations

import pytest
from workload import IN_MEMORY, SAVERS, ThreadWriter, fill, fill_cheap, victim_setup

from langgraph.checkpoint.bounded import BoundedInMemorySaver, InMemoryCheckpointConfig
from langgraph.checkpoint.bounded.engine import KIB

STORE_SIZES = [1_000, 10_000, pytest.param(100_000, marks=pytest.mark.slow)]
THREAD_LENGTHS = [10, 100, 1_000, pytest.param(10_000, marks=pytest.mark.slow)]

_stores: dict[tuple[str, int], object] = {}
_threads: dict[tuple[str, int], tuple[object, ThreadWriter]] = {}


def store_of(kind: str, threads: int):
    """A store of ``threads`` small threads, built once per session and size."""
    if (kind, threads) not in _stores:
        _stores.clear()  # keep one large store in memory at a time
        saver = SAVERS[kind]()
        fill_cheap(saver, threads)
        _stores[(kind, threads)] = saver
    return _stores[(kind, threads)]


def thread_of(kind: str, length: int):
    """One thread of ``length`` checkpoints, built once per session and size."""
    if (kind, length) not in _threads:
        _threads.clear()
        saver = SAVERS[kind]()
        writer = fill(saver, 1, length, prefix="long")[0]
        _threads[(kind, length)] = (saver, writer)
    return _threads[(kind, length)]


def label(benchmark, name: str, kind: str, size: int) -> None:
    benchmark.group = name
    benchmark.extra_info.update(saver=kind, size=size)


@pytest.mark.parametrize("threads", STORE_SIZES)
@pytest.mark.parametrize("kind", IN_MEMORY)
def test_put_as_the_store_grows(benchmark, threads, kind):
    saver = store_of(kind, threads)
    label(benchmark, "put vs threads in store", kind, threads)
    writer = ThreadWriter(saver, f"growing-{threads}")
    benchmark.pedantic(
        lambda *args: writer.commit(saver.put(*args), args[3]),
        setup=lambda: (writer.next_checkpoint(), {}),
        rounds=200,
    )


@pytest.mark.parametrize("threads", STORE_SIZES)
@pytest.mark.parametrize("kind", IN_MEMORY)
def test_list_with_a_filter_nothing_matches(benchmark, threads, kind):
    """list(None, filter=..., limit=1) with no match reads every checkpoint's metadata, in both savers."""
    saver = store_of(kind, threads)
    label(benchmark, "list(None, filter=<no match>, limit=1) vs threads in store", kind, threads)
    rounds = 3 if threads > 10_000 else 10
    found = benchmark.pedantic(lambda: list(saver.list(None, filter={"source": "nowhere"}, limit=1)), rounds=rounds)
    assert found == []


@pytest.mark.parametrize("threads", STORE_SIZES)
@pytest.mark.parametrize("kind", IN_MEMORY)
def test_delete_thread_as_the_store_grows(benchmark, threads, kind):
    saver = store_of(kind, threads)
    label(benchmark, "delete_thread vs threads in store", kind, threads)
    rounds = 10 if kind == "stock" and threads > 10_000 else 40
    benchmark.pedantic(saver.delete_thread, setup=victim_setup(saver, 3), rounds=rounds)


@pytest.mark.parametrize("length", THREAD_LENGTHS)
@pytest.mark.parametrize("kind", IN_MEMORY)
def test_get_tuple_latest_as_a_thread_grows(benchmark, length, kind):
    saver, _ = thread_of(kind, length)
    label(benchmark, "get_tuple latest vs thread length", kind, length)
    config = {"configurable": {"thread_id": "long-0", "checkpoint_ns": ""}}
    assert benchmark(saver.get_tuple, config) is not None


@pytest.mark.parametrize("length", THREAD_LENGTHS)
@pytest.mark.parametrize("kind", IN_MEMORY)
def test_list_limit_1_as_a_thread_grows(benchmark, length, kind):
    saver, _ = thread_of(kind, length)
    label(benchmark, "list(limit=1) vs thread length", kind, length)
    config = {"configurable": {"thread_id": "long-0", "checkpoint_ns": ""}}
    assert len(benchmark(lambda: list(saver.list(config, limit=1)))) == 1


@pytest.mark.parametrize("length", THREAD_LENGTHS)
@pytest.mark.parametrize("kind", IN_MEMORY)
def test_put_as_a_thread_grows(benchmark, length, kind):
    saver, writer = thread_of(kind, length)
    label(benchmark, "put vs thread length", kind, length)
    benchmark.pedantic(
        lambda *args: writer.commit(saver.put(*args), args[3]),
        setup=lambda: (writer.next_checkpoint(), {}),
        rounds=100,
    )


@pytest.mark.parametrize("cap", ["none", "max_threads", "max_total_bytes"])
def test_put_that_evicts_on_every_call(benchmark, cap):
    """Each put starts a new thread; at a cap it must first evict the oldest whole thread."""
    limits = {
        "none": {},
        "max_threads": {"max_threads": 100},
        "max_total_bytes": {"max_total_bytes": 600 * KIB, "max_threads": 10**9},
    }[cap]
    saver = BoundedInMemorySaver(config=InMemoryCheckpointConfig(**limits))
    fill(saver, 120, 1, prefix="warm")
    benchmark.group = f"put of a new thread, eviction cap={cap}"
    benchmark.extra_info["saver"] = "bounded"
    names = iter(range(10**9))

    def setup():
        writer = ThreadWriter(saver, f"new-{next(names)}")
        return (writer.next_checkpoint(),), {}

    benchmark.pedantic(lambda args: saver.put(*args), setup=setup, rounds=300)
    stats = saver.stats()
    assert (stats.evicted_threads > 0) == (cap != "none")
