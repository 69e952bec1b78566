"""Memory per stored checkpoint, and how long the event loop stalls during a large aput."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage
from workload import IN_MEMORY, SAVERS, ThreadWriter, text

PROBE = Path(__file__).with_name("memory_probe.py")


@pytest.mark.parametrize("kind", IN_MEMORY)
def test_memory_per_checkpoint(benchmark, kind):
    """Heap and RSS per checkpoint, against its serialized payload (measured in a fresh process)."""
    benchmark.group = "memory: seconds to store 2,000 checkpoints (bytes per checkpoint in extra_info)"
    benchmark.extra_info["saver"] = kind

    def probe():
        output = subprocess.run(
            [sys.executable, str(PROBE), kind, "2000"], capture_output=True, text=True, check=True, timeout=600
        )
        return json.loads(output.stdout)

    result = benchmark.pedantic(probe, rounds=1, iterations=1)
    benchmark.extra_info.update(result)
    assert result["heap_per_checkpoint"] > 0


LARGE_MESSAGES = 2_500  # messages of 300 characters: a state of about 1 MB


@pytest.mark.parametrize("kind", IN_MEMORY)
def test_event_loop_stall_during_a_large_aput(benchmark, kind):
    """A ticker sleeping 1 ms records the longest gap it sees while aput stores a ~1 MB message list."""
    saver = SAVERS[kind]()
    benchmark.group = "aput of a ~1 MB checkpoint (longest event-loop stall in extra_info)"
    benchmark.extra_info["saver"] = kind
    writer = ThreadWriter(saver, "large")
    stalls: list[float] = []

    async def scenario(args):
        stop = asyncio.Event()
        longest = 0.0

        async def ticker():
            nonlocal longest
            last = time.perf_counter()
            while not stop.is_set():
                await asyncio.sleep(0.001)
                now = time.perf_counter()
                longest = max(longest, now - last)
                last = now

        task = asyncio.create_task(ticker())
        await asyncio.sleep(0.005)
        stored = await saver.aput(*args)
        await asyncio.sleep(0.005)
        stop.set()
        await task
        stalls.append(longest)
        return stored

    def setup():
        config, checkpoint, metadata, new_versions = writer.next_checkpoint()
        messages = [AIMessage(content=text(300, writer.rng)) for _ in range(LARGE_MESSAGES)]
        checkpoint["channel_values"]["messages"] = messages
        return ((config, checkpoint, metadata, new_versions),), {}

    benchmark.pedantic(lambda args: asyncio.run(scenario(args)), setup=setup, rounds=8)
    benchmark.extra_info["longest_stall_ms"] = round(max(stalls) * 1e3, 2)
    benchmark.extra_info["median_stall_ms"] = round(sorted(stalls)[len(stalls) // 2] * 1e3, 2)
