"""Raw operations on realistic checkpoints, each saver against the same store shape."""

from __future__ import annotations

import asyncio

import pytest
from workload import IN_MEMORY, SAVERS, ThreadWriter, fill, task_writes, victim_setup

THREADS, CHECKPOINTS = 50, 20  # the store every read benchmark runs against


@pytest.fixture(params=list(SAVERS))
def stocked(request):
    saver = SAVERS[request.param]()
    writers = fill(saver, THREADS, CHECKPOINTS)
    return request.param, saver, writers


def group(benchmark, name: str, kind: str) -> None:
    benchmark.group = name
    benchmark.extra_info["saver"] = kind


def test_put(benchmark, stocked):
    kind, saver, writers = stocked
    group(benchmark, "put", kind)
    writer = writers[0]
    benchmark.pedantic(
        lambda *args: writer.commit(saver.put(*args), args[3]), setup=lambda: (writer.next_checkpoint(), {}), rounds=300
    )


def test_put_writes(benchmark, stocked):
    kind, saver, writers = stocked
    group(benchmark, "put_writes", kind)
    writer = writers[1]
    stored = writer.parent
    tasks = iter(range(10**9))
    writes = task_writes(writer.rng, 0)
    benchmark(lambda: saver.put_writes(stored, writes, f"task-{next(tasks)}", "~__pregel_pull, agent"))


def test_serialization_floor(benchmark, stocked):
    """The unavoidable cost: serializing what one put stores (checkpoint, metadata, values)."""
    kind, saver, writers = stocked
    group(benchmark, "serde floor of a put", kind)
    _, checkpoint, metadata, _ = writers[2].next_checkpoint()

    def serialize():
        for value in checkpoint["channel_values"].values():
            saver.serde.dumps_typed(value)
        skeleton = {k: v for k, v in checkpoint.items() if k != "channel_values"}
        saver.serde.dumps_typed(skeleton)
        saver.serde.dumps_typed(metadata)

    benchmark(serialize)


def test_get_tuple_latest(benchmark, stocked):
    kind, saver, _ = stocked
    group(benchmark, "get_tuple latest", kind)
    config = {"configurable": {"thread_id": "thread-3", "checkpoint_ns": ""}}
    assert benchmark(saver.get_tuple, config) is not None


def test_get_tuple_by_id(benchmark, stocked):
    kind, saver, writers = stocked
    group(benchmark, "get_tuple by id", kind)
    assert benchmark(saver.get_tuple, writers[4].parent) is not None


@pytest.mark.parametrize(
    ("name", "kwargs"),
    [
        ("list limit=10", {"limit": 10}),
        ("list filter", {"filter": {"run_id": "run-1"}}),
        ("list before", {"before": None, "limit": 5}),
    ],
)
def test_list(benchmark, stocked, name, kwargs):
    kind, saver, _ = stocked
    group(benchmark, name, kind)
    config = {"configurable": {"thread_id": "thread-5", "checkpoint_ns": ""}}
    if "before" in kwargs:
        middle = list(saver.list(config))[CHECKPOINTS // 2]
        kwargs = {**kwargs, "before": middle.config}
    result = benchmark(lambda: list(saver.list(config, **kwargs)))
    assert result


def test_delete_thread(benchmark, stocked):
    kind, saver, _ = stocked
    group(benchmark, "delete_thread", kind)
    benchmark.pedantic(saver.delete_thread, setup=victim_setup(saver, 5), rounds=30)


@pytest.mark.parametrize("kind", IN_MEMORY)
def test_aput(benchmark, kind):
    saver = SAVERS[kind]()
    group(benchmark, "aput", kind)
    writer = ThreadWriter(saver, "async")
    loop = asyncio.new_event_loop()

    def aput(*args):
        writer.commit(loop.run_until_complete(saver.aput(*args)), args[3])

    benchmark.pedantic(aput, setup=lambda: (writer.next_checkpoint(), {}), rounds=300)
    loop.close()


@pytest.mark.parametrize("kind", IN_MEMORY)
def test_aget_tuple(benchmark, kind):
    saver = SAVERS[kind]()
    fill(saver, 5, 10)
    group(benchmark, "aget_tuple latest", kind)
    loop = asyncio.new_event_loop()
    config = {"configurable": {"thread_id": "thread-1", "checkpoint_ns": ""}}
    assert benchmark(lambda: loop.run_until_complete(saver.aget_tuple(config))) is not None
    loop.close()


def test_stats(benchmark):
    saver = SAVERS["bounded"]()
    fill(saver, THREADS, 5)
    group(benchmark, "stats (ours only)", "bounded")
    assert benchmark(saver.stats).threads == THREADS
