"""Realistic checkpoints and the savers the benchmarks compare.

A checkpoint carries three channels of 1-4 KB (a message list, a document, a
small counter) with the stock version format, a parent link, and two writes
per task, as a chat graph's super-step would store them.
"""

from __future__ import annotations

import inspect
import math
import random
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.memory import InMemorySaver as StockSaver
from langgraph.checkpoint.sqlite import SqliteSaver

from langgraph.checkpoint.bounded import BoundedInMemorySaver, InMemoryCheckpointConfig
from langgraph.checkpoint.bounded.engine import StoreLimits

UNBOUNDED = InMemoryCheckpointConfig(**vars(StoreLimits.unbounded()))


def require_this_checkout() -> None:
    """Ours must come from the checkout these benchmarks belong to (not another checkout that an
    editable install points to, nor an installed copy), and the stock saver must be LangGraph's."""
    checkout = Path(__file__).resolve().parent.parent
    ours = Path(inspect.getfile(BoundedInMemorySaver)).resolve()
    if not ours.is_relative_to(checkout):
        raise RuntimeError(f"the benchmarks in {checkout} would measure {ours}: install this checkout (make install)")
    if StockSaver.__module__ != "langgraph.checkpoint.memory" or issubclass(StockSaver, BoundedInMemorySaver):
        raise RuntimeError(f"the stock saver is {StockSaver.__module__}.{StockSaver.__qualname__}, not LangGraph's")


require_this_checkout()  # every benchmark imports this module


def bounded() -> BaseCheckpointSaver:
    """Ours, with every limit lifted so that the benchmark measures the engine, not evictions."""
    return BoundedInMemorySaver(config=UNBOUNDED)


def sqlite_memory() -> BaseCheckpointSaver:
    return SqliteSaver(sqlite3.connect(":memory:", check_same_thread=False))


SAVERS: dict[str, Callable[[], BaseCheckpointSaver]] = {
    "bounded": bounded,
    "stock": StockSaver,
    "sqlite": sqlite_memory,
}
IN_MEMORY = ["bounded", "stock"]


_LETTERS = random.Random(1)  # one generator: a fresh Random(1) per character made the corpus one letter repeated
CORPUS = "".join(_LETTERS.choice("abcdefghijklmnopqrstuvwxyz     ") for _ in range(65_536))


def text(size: int, rng: random.Random) -> str:
    """``size`` characters of text, a random slice of a fixed corpus."""
    start = rng.randrange(len(CORPUS) - size)
    return CORPUS[start : start + size]


def message_list(size: int, rng: random.Random) -> list[dict[str, str]]:
    """About ``size`` bytes of chat messages."""
    messages, total = [], 0
    while total < size:
        content = text(rng.randint(80, 240), rng)
        messages.append({"role": rng.choice(["user", "assistant"]), "content": content})
        total += len(content) + 30
    return messages


@dataclass
class ThreadWriter:
    """Appends checkpoints to one thread the way a compiled graph does."""

    saver: BaseCheckpointSaver
    thread_id: str
    namespace: str = ""
    rng: random.Random = field(default_factory=lambda: random.Random(7))
    parent: dict[str, Any] | None = None
    versions: dict[str, Any] = field(default_factory=dict)
    step: int = 0

    def next_checkpoint(self) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]:
        """(config, checkpoint, metadata, new_versions) for the next put."""
        values = {
            "messages": message_list(self.rng.randint(1_000, 4_000), self.rng),
            "document": text(self.rng.randint(1_000, 2_000), self.rng),
            "step": self.step,
        }
        new_versions = {k: self.saver.get_next_version(self.versions.get(k), None) for k in values}
        versions = {**self.versions, **new_versions}
        checkpoint = {
            "v": 4,
            "id": str(uuid6(clock_seq=self.step)),
            "ts": "2026-11-29T00:00:00+00:00",
            "channel_values": values,
            "channel_versions": versions,
            "versions_seen": {"agent": dict(self.versions)},
            "updated_channels": sorted(values),
        }
        configurable = {"thread_id": self.thread_id, "checkpoint_ns": self.namespace}
        if self.parent is not None:
            configurable["checkpoint_id"] = self.parent["configurable"]["checkpoint_id"]
        metadata = {"source": "loop", "step": self.step, "parents": {}, "run_id": f"run-{self.step // 10}"}
        return {"configurable": configurable}, checkpoint, metadata, new_versions

    def commit(self, stored: dict[str, Any], new_versions: dict[str, Any]) -> None:
        self.parent = stored
        self.versions = {**self.versions, **new_versions}
        self.step += 1

    def prepare(self) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]:
        """The next put's arguments, advancing as if it were stored, without storing it."""
        args = self.next_checkpoint()
        self.commit({"configurable": {**args[0]["configurable"], "checkpoint_id": args[1]["id"]}}, args[3])
        return args

    def advance(self) -> dict[str, Any]:
        """Put the next checkpoint and its task's two writes; return the stored config."""
        config, checkpoint, metadata, new_versions = self.next_checkpoint()
        stored = self.saver.put(config, checkpoint, metadata, new_versions)
        self.saver.put_writes(stored, task_writes(self.rng, self.step), f"task-{self.step}", "~__pregel_pull, agent")
        self.commit(stored, new_versions)
        return stored


def task_writes(rng: random.Random, step: int) -> list[tuple[str, Any]]:
    """Two writes per task: a new message and a counter."""
    return [("messages", message_list(rng.randint(300, 1_000), rng)), ("step", step + 1)]


def fill(saver: BaseCheckpointSaver, threads: int, checkpoints: int, prefix: str = "thread") -> list[ThreadWriter]:
    """Store ``threads`` threads of ``checkpoints`` checkpoints each."""
    writers = [ThreadWriter(saver, f"{prefix}-{index}") for index in range(threads)]
    for writer in writers:
        for _ in range(checkpoints):
            writer.advance()
    return writers


def fill_cheap(saver: BaseCheckpointSaver, threads: int, prefix: str = "bulk") -> None:
    """Many small single-checkpoint threads, fast to create, for store-size scaling."""
    for index in range(threads):
        checkpoint = {
            "v": 4,
            "id": str(uuid6(clock_seq=index)),
            "ts": "2026-11-29T00:00:00+00:00",
            "channel_values": {"messages": [{"role": "user", "content": "hi"}], "step": index},
            "channel_versions": {"messages": "1.0", "step": "1.0"},
            "versions_seen": {},
            "updated_channels": ["messages", "step"],
        }
        config = {"configurable": {"thread_id": f"{prefix}-{index}", "checkpoint_ns": ""}}
        stored = saver.put(config, checkpoint, {"source": "loop", "step": 0}, {"messages": "1.0", "step": "1.0"})
        saver.put_writes(stored, [("messages", "x"), ("step", 1)], "task")


def victim_setup(saver: BaseCheckpointSaver, checkpoints: int) -> Callable[[], tuple[tuple[str], dict]]:
    """A pytest-benchmark ``setup`` that stores a fresh thread for each round to delete."""
    victims = iter(range(10**9))

    def setup() -> tuple[tuple[str], dict]:
        writer = ThreadWriter(saver, f"victim-{next(victims)}")
        for _ in range(checkpoints):
            writer.advance()
        return (writer.thread_id,), {}

    return setup


Batch = Callable[[], float]  # runs one batch, returns seconds per call


def timed_batch(call: Callable[[], object], size: int) -> Batch:
    """A batch of ``size`` calls of ``call``, timed: it returns the seconds per call."""

    def run() -> float:
        start = time.perf_counter()
        for _ in range(size):
            call()
        return (time.perf_counter() - start) / size

    return run


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def fmt_ratio(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.2f}x"
