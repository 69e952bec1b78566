"""Compression on and off, side by side, in the durable tier and in memory (issue 35, item 4).

Usage: ``python benchmarks/bytes.py [--quick] [--threads N] [--turns N] [--kinds SQLite PostgreSQL] [--output DIR]``
(``make bench-compression`` runs it after ``compression.py``; a few minutes at the defaults). Writes
``{BYTES.md,bytes.json}`` to ``DIR`` (``benchmarks/results/compression`` unless given).

Workloads, each a graph's turns on ``threads`` threads of ``turns`` turns:

* ``retention chat``: the retention benchmark's tool-calling chat (``test_graph.build``: 7 new messages a turn
  whose text is random letters of a fixed corpus, about 1 KB a turn);
* ``English chat``: the same shape with English-like text (``compression.sentence``): what chat text is like;
* ``tool outputs + images``: the same shape whose tool returns an 8 KB English-like document every turn and,
  every other turn, a 24 KB PNG-sized base64 image (random bytes: images do not compress).

Savers, per backend (SQLite: ``SqliteSaver`` on a file of its own; PostgreSQL: ``PostgresSaver`` on a database of
its own of a throwaway PostgreSQL 15, ``tiered.postgres``, ``fsync`` on), each with compression off (the default
serializer) and on (``CompressingSerializer()`` as the durable saver's ``serde``, its defaults):

* ``plain``: the durable saver alone;
* ``tiered``: ``TieredSaver`` over it, write-through (both tiers store what the serializer wrote).

Interleaving: a step is one turn of one thread on every saver of the backend, one after the other, the order
rotating step to step (the machine is shared: a slow phase hits every saver of the step). A turn's time and this
process's CPU time (``time.process_time``: the client, and SQLite, whose work is in-process; PostgreSQL's server
is not counted) are taken around each ``invoke``. The latency ratio on/off is per step, reported as the median
with quartiles. After the last step: rows (``count(*)`` of the tables) and bytes on disk (SQLite: the file after
``VACUUM``, WAL checkpointed; PostgreSQL: ``pg_total_relation_size`` of the three tables, heap, TOAST and
indexes, whose TOAST already compresses values over about 2 KB with pglz).

The memory saver: ``BoundedInMemorySaver`` with one ``max_total_bytes`` budget, compression off and on; threads
of each workload run one after the other until ``2 * threads`` more have been evicted; what it held then
(threads, ``total_bytes``) is reported.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from base64 import b64encode
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import _messages_delta_reducer, add_messages

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # the benchmarks' helpers, when imported from elsewhere

from compression import sentence  # noqa: E402
from concurrency import Database  # noqa: E402
from retention import commit, machine, sqlite_size  # noqa: E402
from test_graph import Chat, compile_chat  # noqa: E402
from test_graph import build as build_retention_chat  # noqa: E402
from tiered import ServerUnavailable, postgres, postgres_saver  # noqa: E402

from langgraph.checkpoint.bounded import (  # noqa: E402
    BoundedInMemorySaver,
    CompressingSerializer,
    InMemoryCheckpointConfig,
    TieredSaver,
    WriteBack,
)

OUTPUT = HERE / "results" / "compression"
USER_MESSAGE = {"messages": [{"role": "user", "content": "hi"}]}
HOT = InMemoryCheckpointConfig(max_threads=10_000, max_total_bytes=1 << 30, max_checkpoint_bytes=8 << 20)
MEMORY_BUDGETS = {
    "retention chat": 4 << 20,
    "English chat": 4 << 20,
    "agent chat": 4 << 20,
    "agent chat, DeltaChannel": 1 << 20,
    "tool outputs + images": 16 << 20,
}
"""The memory saver's ``max_total_bytes`` for threads of 8 turns; longer threads get it scaled (``budget``)."""
LINEAR = {"agent chat, DeltaChannel"}  # a thread's bytes grow with its turns, not their square


def budget(workload: str, turns: int) -> int:
    """The byte budget for threads of ``turns`` turns: a thread's bytes grow with the square of its turns (each
    checkpoint holds every message so far; with its turns under ``DeltaChannel``), so the budget holds about as
    many threads whatever their length."""
    return int(MEMORY_BUDGETS[workload] * max(1.0, (turns / 8) ** (1 if workload in LINEAR else 2)))


def english(rng: random.Random, size: int) -> str:
    """About ``size`` characters of English-like text."""
    parts: list[str] = []
    total = 0
    while total < size:
        parts.append(sentence(rng, rng.randint(6, 18)))
        total += len(parts[-1]) + 1
    return " ".join(parts)


def build_chat(checkpointer: Any, *, heavy: bool) -> Any:
    """The retention chat's shape (agent, tools, agent's answer; 7 new messages a turn) with English-like text;
    ``heavy``: the tool returns an 8 KB document every turn and a 24 KB base64 image every other turn."""
    rng = random.Random(3)

    def say(size: int) -> dict[str, str]:
        return {"role": "assistant", "content": english(rng, size)}

    def agent(state: Chat) -> dict[str, Any]:
        calls = state.get("calls", 0) + 1
        if calls % 2:  # thinks, then asks for a tool
            return {"messages": [say(200), say(200), {"role": "assistant", "content": "", "tool_call": "search"}],
                    "calls": calls}  # fmt: skip
        return {"messages": [say(200), say(200)], "calls": calls}

    def tools(state: Chat) -> dict[str, Any]:
        if not heavy:
            return {"messages": [{"role": "tool", "content": "42"}]}
        found: list[Any] = [{"role": "tool", "content": english(rng, 8 << 10)}]
        if state.get("calls", 0) % 4 == 1:
            image = b64encode(rng.randbytes(18 << 10)).decode()  # 24 KB of base64
            found.append({"role": "tool", "content": [{"type": "image", "source_type": "base64", "data": image}]})
        return {"messages": found}

    return compile_chat(checkpointer, agent, tools)


class AgentChat(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


class DeltaAgentChat(TypedDict):
    messages: Annotated[list[AnyMessage], DeltaChannel(_messages_delta_reducer)]


def build_agent_chat(checkpointer: Any, *, delta: bool = False) -> Any:
    """A tool-calling agent's thread as ``MessagesState`` stores it: LangChain messages through ``add_messages``
    (which gives each message a uuid4 id), English-like text. A turn: the user's question, the model's reply
    asking for a tool (with the ``tool_calls``, ``response_metadata`` and ``usage_metadata`` a chat model
    returns), the tool's result, the model's answer: four messages, about 1.8 KB of text.

    ``delta``: the same messages in LangGraph's ``DeltaChannel`` (beta) with its messages reducer, which stores
    each step's new messages rather than the whole list (and the whole list every 100 updates); its reducer
    gives no ids, so the nodes do."""
    rng = random.Random(3)

    def ids() -> str | None:
        return str(uuid.UUID(int=rng.getrandbits(128), version=4)) if delta else None

    def model_reply(text: str, calls: list[dict[str, Any]]) -> AIMessage:
        usage = {"input_tokens": rng.randint(200, 8000), "output_tokens": rng.randint(20, 600)}
        return AIMessage(
            text,
            id=ids(),
            tool_calls=calls,
            response_metadata={
                "model_name": "gpt-4o-2024-08-06",
                "finish_reason": "tool_calls" if calls else "stop",
                "system_fingerprint": f"fp_{rng.getrandbits(40):010x}",
                "id": f"chatcmpl-{rng.getrandbits(116):029x}",
            },
            usage_metadata={**usage, "total_tokens": usage["input_tokens"] + usage["output_tokens"]},
        )

    def agent(state: dict[str, Any]) -> dict[str, Any]:  # not AgentChat: its channel would clash with the delta's
        last = state["messages"][-1]
        if isinstance(last, ToolMessage):
            return {"messages": [model_reply(english(rng, 700), [])]}
        call = {"name": "search", "args": {"query": english(rng, 60)}, "id": f"call_{rng.getrandbits(120):030x}"}
        return {"messages": [model_reply(english(rng, 200), [call])]}

    def tools(state: dict[str, Any]) -> dict[str, Any]:
        call = state["messages"][-1].tool_calls[0]
        return {"messages": [ToolMessage(english(rng, 700), tool_call_id=call["id"], name=call["name"], id=ids())]}

    builder = StateGraph(DeltaAgentChat if delta else AgentChat)
    builder.add_node("agent", agent)
    builder.add_node("tools", tools)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", lambda s: "tools" if s["messages"][-1].tool_calls else END, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)


WORKLOADS: dict[str, Callable[[Any], Any]] = {
    "retention chat": build_retention_chat,
    "English chat": lambda saver: build_chat(saver, heavy=False),
    "agent chat": build_agent_chat,
    "agent chat, DeltaChannel": lambda saver: build_agent_chat(saver, delta=True),
    "tool outputs + images": lambda saver: build_chat(saver, heavy=True),
}
SAVERS = ("plain, off", "plain, on", "tiered, off", "tiered, on", "write less, on")
WRITE_LESS = "write less, on"  # write-back, persist="latest", flushed after every turn; compared with "tiered, off"


def config(thread: int) -> dict[str, Any]:
    return {"configurable": {"thread_id": f"thread-{thread:04d}"}}


def serde(name: str) -> CompressingSerializer | None:
    return CompressingSerializer() if name.endswith(", on") else None


# --- the durable tier ------------------------------------------------------------------------------------------


class Backend:
    """One saver's durable side: SQLite (a file) or PostgreSQL (a database), with its size after the run."""

    def __init__(self, kind: str, name: str, folder: Path, server: str | None, serial: int) -> None:
        self.kind = kind
        if kind == "SQLite":
            from langgraph.checkpoint.sqlite import SqliteSaver

            self.path = folder / f"{serial}.sqlite"
            self.saver: Any = SqliteSaver(sqlite3.connect(self.path, check_same_thread=False), serde=serde(name))
            self.database: Database | None = None
        else:
            assert server is not None
            self.database = Database(server, f"bytes_{serial}")
            self.saver = postgres_saver(self.database.conninfo, serde=serde(name))

    def size(self) -> dict[str, int]:
        if self.database is not None:
            found = self.database.size()
            with self.saver.conn.cursor() as cursor:
                values = [cursor.execute(query).fetchone() for query in VALUE_BYTES]
            self.saver.conn.close()
            self.database.drop()
            return {
                "rows": found["rows"],
                "disk_bytes": found["disk_bytes"],
                "row_bytes": found["row_bytes"],
                "serialized_value_bytes": sum(int(next(iter(row.values())) or 0) for row in values[:2]),
                "stored_value_bytes": sum(int(next(iter(row.values())) or 0) for row in values[2:]),
            }
        connection = self.saver.conn
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        connection.execute("VACUUM")
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        found = sqlite_size(self.path)(False)
        connection.close()
        return {"rows": found["checkpoints"] + found["writes"], "disk_bytes": found["disk_bytes"]}


VALUE_BYTES = [
    f"SELECT sum({measure}(blob)) FROM {table}"
    for measure in ("octet_length", "pg_column_size")
    for table in ("checkpoint_blobs", "checkpoint_writes")
]
"""PostgreSQL's serialized values (blobs and writes): their length as the serializer wrote them
(``octet_length``) and as stored (``pg_column_size``, after TOAST's pglz)."""


def tiered_or_plain(name: str, durable: Any) -> Any:
    """The saver ``name`` runs: the durable saver alone, ``TieredSaver`` write-through over it, or write-back
    with ``persist="latest"`` (flushed by the caller after every turn)."""
    if name.startswith("plain"):
        return durable
    if name == WRITE_LESS:
        return TieredSaver(durable, config=HOT, write=WriteBack(persist="latest", flush_interval_seconds=math.inf))
    return TieredSaver(durable, config=HOT)


def durable_run(kind: str, workload: str, threads: int, turns: int, server: str | None) -> dict[str, Any]:
    """Every saver of one backend through one workload, step by step, the order rotating."""
    folder = Path(tempfile.mkdtemp(prefix="bytes-"))
    backends = {name: Backend(kind, name, folder, server, serial) for serial, name in enumerate(SAVERS)}
    savers = {name: tiered_or_plain(name, backend.saver) for name, backend in backends.items()}
    apps = {name: WORKLOADS[workload](saver) for name, saver in savers.items()}
    times: dict[str, list[float]] = {name: [] for name in SAVERS}
    cpu: dict[str, float] = dict.fromkeys(SAVERS, 0.0)
    step = 0
    for _ in range(turns):
        for thread in range(threads):
            rotation = step % len(SAVERS)
            for name in SAVERS[rotation:] + SAVERS[:rotation]:
                began_cpu, began = time.process_time(), time.perf_counter()
                apps[name].invoke(USER_MESSAGE, config(thread))
                if name == WRITE_LESS:
                    savers[name].flush()  # each turn made durable: the turn's cost counts its flush
                times[name].append(time.perf_counter() - began)
                cpu[name] += time.process_time() - began_cpu
            step += 1
    found: dict[str, Any] = {}
    for name in SAVERS:
        if isinstance(savers[name], TieredSaver):
            savers[name].close()
        found[name] = {
            **backends[name].size(),
            "turn_ms_median": statistics.median(times[name]) * 1000,
            "turn_ms_mean": statistics.fmean(times[name]) * 1000,
            "cpu_ms_per_turn": cpu[name] / len(times[name]) * 1000,
        }
    for side in ("plain", "tiered"):
        ratios = [on / off for on, off in zip(times[f"{side}, on"], times[f"{side}, off"], strict=True)]
        quartiles = statistics.quantiles(ratios, n=4)
        found[f"{side} latency on/off"] = [statistics.median(ratios), quartiles[0], quartiles[2], len(ratios)]
    return found


# --- the memory saver ------------------------------------------------------------------------------------------


def memory_turns(workload: str, threads: int, turns: int) -> dict[str, Any]:
    """The memory saver's turns, compression off and on, interleaved as ``durable_run`` interleaves (no eviction:
    a budget of 1 GiB): per-step on/off ratios, and CPU per turn."""
    apps = {
        name: WORKLOADS[workload](BoundedInMemorySaver(config=HOT, serde=serde(f", {name}"))) for name in ("off", "on")
    }
    times: dict[str, list[float]] = {"off": [], "on": []}
    cpu = {"off": 0.0, "on": 0.0}
    for step in range(turns * threads):
        for name in ("off", "on") if step % 2 else ("on", "off"):
            began_cpu, began = time.process_time(), time.perf_counter()
            apps[name].invoke(USER_MESSAGE, config(step % threads))
            times[name].append(time.perf_counter() - began)
            cpu[name] += time.process_time() - began_cpu
    ratios = [on / off for on, off in zip(times["on"], times["off"], strict=True)]
    quartiles = statistics.quantiles(ratios, n=4)
    return {
        "latency on/off": [statistics.median(ratios), quartiles[0], quartiles[2], len(ratios)],
        "mean on/off": statistics.fmean(times["on"]) / statistics.fmean(times["off"]),
        "cpu_ms_per_turn": {name: cpu[name] / len(times[name]) * 1000 for name in cpu},
    }


def memory_run(workload: str, threads: int, turns: int) -> dict[str, Any]:
    """Threads one after the other under one ``max_total_bytes``, off and on; what each held at the end."""
    found: dict[str, Any] = {}
    for name in ("off", "on"):
        limits = InMemoryCheckpointConfig(max_threads=1_000_000, max_total_bytes=budget(workload, turns))
        saver = BoundedInMemorySaver(config=limits, serde=serde(f", {name}"))
        app = WORKLOADS[workload](saver)
        thread = 0
        while saver.stats().evicted_threads < 2 * threads and thread < 5_000:
            for _ in range(turns):
                app.invoke(USER_MESSAGE, config(thread))
            thread += 1
        stats = saver.stats()
        found[name] = {"threads": stats.threads, "total_bytes": stats.total_bytes, "written": thread}
    found["turns"] = memory_turns(workload, threads, turns)
    return found


# --- the report ------------------------------------------------------------------------------------------------


def mib(value: float) -> str:
    return f"{value / (1 << 20):.2f} MiB"


def delta_verdicts(results: dict[str, Any]) -> list[str]:
    """The agent chat under ``DeltaChannel`` against the same chat storing its whole list: bytes, and turns."""
    whole, delta = "agent chat", "agent chat, DeltaChannel"
    found: list[str] = []
    for kind, by_workload in results["durable"].items():
        if whole in by_workload and delta in by_workload:
            for name in ("plain, off", "plain, on"):
                a, b = by_workload[whole][name], by_workload[delta][name]
                found.append(
                    f"{kind}, {name}: `DeltaChannel` stored the agent chat in "
                    f"{a['disk_bytes'] / max(b['disk_bytes'], 1):.1f}x fewer bytes on disk than the whole list, "
                    f"CPU per turn {b['cpu_ms_per_turn'] / a['cpu_ms_per_turn']:.2f}x (the two workloads ran one "
                    "after the other, not interleaved: a rough figure)"
                )
    memory = results["memory"]
    if whole in memory and delta in memory:
        for name in ("off", "on"):
            per_thread = {
                w: memory[w][name]["total_bytes"] / max(memory[w][name]["threads"], 1) for w in (whole, delta)
            }
            cpu = {w: memory[w]["turns"]["cpu_ms_per_turn"][name] for w in (whole, delta)}
            found.append(
                f"memory saver, compression {name}: `DeltaChannel` held a thread in "
                f"{per_thread[whole] / per_thread[delta]:.1f}x fewer bytes than the whole list, CPU per turn "
                f"{cpu[delta] / cpu[whole]:.2f}x (not interleaved: a rough figure)"
            )
    return found


def report(results: dict[str, Any], output: Path | None) -> str:
    shape = results["shape"]
    lines = [
        f"# Compression on and off: bytes, rows and turns, {results['date']}",
        "",
        f"`{results['command']}` ({results['elapsed'] / 60:.1f} minutes), at commit {results['commit']}. Machine: "
        f"{results['machine']}. Load average (1 min) at the start and end: {results['load'][0]:.1f} / "
        f"{results['load'][1]:.1f} (a shared machine: other work may have run beside it).",
        "",
        "## How it was measured",
        "",
        f"* Workloads: {shape['threads']} threads x {shape['turns']} turns of each of: **retention chat** (the "
        "retention benchmark's tool-calling chat, `benchmarks/test_graph.py`: 7 new messages a turn of random "
        "letters); **English chat** (the same shape, English-like text from `compression.sentence`, the messages "
        "plain dicts); **agent chat** (`MessagesState`'s shape: LangChain messages through `add_messages`, with "
        "uuid ids, tool calls, response and usage metadata, English-like text; 4 messages a turn); **agent chat, "
        "DeltaChannel** (the same messages in LangGraph's `DeltaChannel` (beta), which stores each step's new "
        "messages and the whole list every 100 updates); **tool outputs "
        "+ images** (the English chat, the tool returning an 8 KB English-like document every turn and a 24 KB "
        "base64 image of random bytes every other turn).",
        "* Savers, per backend, compression off (the default serializer) and on (`CompressingSerializer()`, its "
        "defaults, as the durable saver's `serde`): the durable saver alone (`plain`) and `TieredSaver` over it "
        "(`tiered`, write-through), and `write less, on`: `TieredSaver` write-back with "
        '`WriteBack(persist="latest")` and compression, flushed after every turn (the flush in the turn\'s time), '
        "its bytes compared with `tiered, off` (what a tiered user stores today). SQLite: `SqliteSaver`, a file "
        "each. PostgreSQL 15: `PostgresSaver`, a database each, loopback, `fsync` on.",
        "* One run, interleaved: each step is one turn of one thread on every saver of the backend, the order "
        "rotating step to step; a turn's time and this process's CPU time around each `invoke` (SQLite's work is "
        "in-process; PostgreSQL's server CPU is not counted). Latency on/off: the median of the per-step ratios, "
        "with quartiles.",
        "* Bytes on disk after the run: SQLite, the file after `VACUUM` (WAL checkpointed); PostgreSQL, "
        "`pg_total_relation_size` of the three tables (heap, TOAST, indexes; note that TOAST already compresses "
        "values over about 2 KB with pglz, so compression-off rows there are partly compressed), and **row bytes**, "
        "the sum of `pg_column_size` of the rows (the data alone, without pages and indexes). Rows: `count(*)`.",
        "* The memory saver: `BoundedInMemorySaver(max_total_bytes=...)` (for threads of 8 turns 4 MiB for the "
        "chats, 16 MiB for tool outputs + images, 1 MiB for the DeltaChannel chat; scaled by (turns / 8)^2 for longer "
        "threads, linearly for the DeltaChannel chat), threads of "
        f"{shape['turns']} turns one after the other until {2 * shape['threads']} were evicted; the threads it held "
        "then. Its turns: the same workload again on two savers (off, on) with room for every thread, interleaved "
        "as above (each step one turn of one thread on both, the order alternating).",
        "",
    ]
    verdicts: list[str] = []
    for kind, by_workload in results["durable"].items():
        lines += [
            f"## {kind}",
            "",
            "| workload | saver | rows | bytes on disk | on/off bytes | row bytes | turn median | turn mean "
            "| CPU/turn |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for workload, found in by_workload.items():
            for name in SAVERS:
                one = found[name]
                off = found["tiered, off" if name == WRITE_LESS else name.replace(", on", ", off")]
                saving = off["disk_bytes"] / one["disk_bytes"] if one["disk_bytes"] else float("nan")
                row_bytes = mib(one["row_bytes"]) if "row_bytes" in one else "-"
                lines.append(
                    f"| {workload} | {name} | {one['rows']:,} | {mib(one['disk_bytes'])} | "
                    + (f"{saving:.2f}x fewer" if name.endswith("on") else "")
                    + f" | {row_bytes} | {one['turn_ms_median']:.2f} ms | {one['turn_ms_mean']:.2f} ms | "
                    f"{one['cpu_ms_per_turn']:.2f} ms |"
                )
            if "serialized_value_bytes" in found["plain, off"]:
                off, on = found["plain, off"], found["plain, on"]
                verdicts.append(
                    f"{kind}, {workload}, plain: the values (blobs and writes) as the serializer wrote them, off "
                    f"{mib(off['serialized_value_bytes'])}, on {mib(on['serialized_value_bytes'])} "
                    f"({off['serialized_value_bytes'] / max(on['serialized_value_bytes'], 1):.2f}x fewer); as stored, "
                    f"after TOAST: off {mib(off['stored_value_bytes'])} (pglz: "
                    f"{off['serialized_value_bytes'] / max(off['stored_value_bytes'], 1):.2f}x), on "
                    f"{mib(on['stored_value_bytes'])}"
                )
            latest, everything = found[WRITE_LESS], found["tiered, off"]
            verdicts.append(
                f"{kind}, {workload}, write less + compression: {everything['disk_bytes'] / latest['disk_bytes']:.2f}x "
                f"fewer bytes on disk than `tiered, off`, {everything['rows'] / max(latest['rows'], 1):.1f}x fewer rows"
            )
            for side in ("plain", "tiered"):
                ratio, low, high, steps = found[f"{side} latency on/off"]
                off, on = found[f"{side}, off"], found[f"{side}, on"]
                saving = off["disk_bytes"] / on["disk_bytes"]
                mean = on["turn_ms_mean"] / off["turn_ms_mean"]
                cpu = on["cpu_ms_per_turn"] / off["cpu_ms_per_turn"]
                verdicts.append(
                    f"{kind}, {workload}, {side}: {saving:.2f}x fewer bytes on disk (target >= 3x on text-heavy "
                    f"state: **{'holds' if saving >= 3 else 'does not hold'}**); a turn on/off: median of the "
                    f"per-step ratios {ratio:.3f} ({low:.3f}-{high:.3f}, {steps} steps), mean turns {mean:.3f}, CPU "
                    f"per turn {cpu:.3f} (target <= 1.05 by the median and the mean: "
                    f"**{'holds' if max(ratio, mean) <= 1.05 else 'does not hold'}**)"
                )
        lines.append("")
    lines += [
        "## The memory saver under one byte budget",
        "",
        "| workload | threads held, off | on | total_bytes off | on | threads written | turn on/off, median "
        "(quartiles) | mean | CPU/turn off | on |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for workload, found in results["memory"].items():
        turns = found["turns"]
        ratio, low, high, _ = turns["latency on/off"]
        cpu = turns["cpu_ms_per_turn"]
        lines.append(
            f"| {workload} | {found['off']['threads']} | {found['on']['threads']} | {mib(found['off']['total_bytes'])} "
            f"| {mib(found['on']['total_bytes'])} | {found['off']['written']} / {found['on']['written']} "
            f"| {ratio:.3f} ({low:.3f}-{high:.3f}) | {turns['mean on/off']:.3f} | {cpu['off']:.2f} ms "
            f"| {cpu['on']:.2f} ms |"
        )
        verdicts.append(
            f"memory saver, {workload}: {found['on']['threads'] / max(found['off']['threads'], 1):.2f}x the threads "
            f"under {budget(workload, results['shape']['turns']) >> 20} MiB; a turn on/off: median of the per-step "
            f"ratios {ratio:.3f}, mean turns {turns['mean on/off']:.3f}, CPU per turn {cpu['on'] / cpu['off']:.3f} "
            f"(target <= 1.05: **{'holds' if max(ratio, turns['mean on/off']) <= 1.05 else 'does not hold'}**)"
        )
    verdicts += delta_verdicts(results)
    lines += ["", "## The issue's targets, as measured", "", *(f"* {line}" for line in verdicts), ""]
    lines += [
        "## Notes on the workloads",
        "",
        "* The **retention chat**'s text is not what chat text is like: random letters and spaces of "
        "`benchmarks/workload.py`'s corpus (about 4.9 bits a character: no compressor halves it much). It is "
        "measured because the issue names it; the **English chat** (same shape, English-like text) is the "
        "text-heavy figure to read. (Before commit 98446c0 that corpus was one letter repeated, a bug: earlier "
        "runs' retention-chat ratios overstate compression.)",
        "* SQLite: `SqliteSaver` stores each checkpoint with its channel values in one value, compressed as one "
        "(3.1x smaller for the English chat, 3.3x for the agent chat); the file shrinks less than those values do: "
        "its indexes, metadata, page slack (a value's last overflow page is partly empty) and pending writes "
        "(single messages, under `CompressingSerializer`'s default 1 KB threshold) stay as they are. The English "
        "chat's messages are plain dicts of words drawn at random from a 100-word vocabulary; the agent chat's are "
        "LangChain messages, whose repeated structure compresses further (`RESULTS.md`: 4.2x at 64 messages). "
        "Under `TieredSaver`, the row is spliced from the hot tier's compressed values (their zstd frames kept, "
        "`tiered/backends/spliced.py`): nothing is compressed twice.",
        "* PostgreSQL: `PostgresSaver` stores each channel's value in `checkpoint_blobs`, which PostgreSQL's TOAST "
        "already compresses (pglz) once a row passes about 2 KB, so compression off is not uncompressed there: "
        "the targets' lines give the values' bytes as the serializer wrote them, where zstd makes them about 3x "
        "smaller, and as stored, where pglz had already made them 2.8-2.9x smaller.",
        "* The memory saver's turn has no I/O to save: what compression costs it is the whole message list "
        "compressed again at every step (measured by replaying a run's calls on one thread: about 3 ns a byte "
        "here, against 5-8 ns to serialize it). Over SQLite the smaller rows pay back most of that in writing.",
        "* A turn's time on this shared machine varies far more from turn to turn than the 5% target (see the "
        "quartiles); CPU per turn is the steadier figure of what compression adds.",
        "",
    ]
    text = "\n".join(lines) + "\n"
    if output is not None:
        (output / "BYTES.md").write_text(text)
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="3 threads x 4 turns, a smoke test")
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--kinds", nargs="*", default=["SQLite", "PostgreSQL"], choices=["SQLite", "PostgreSQL"])
    parser.add_argument("--workloads", nargs="*", default=list(WORKLOADS), choices=list(WORKLOADS))
    parser.add_argument("--output", type=Path, default=OUTPUT)
    arguments = parser.parse_args()
    threads, turns = (3, 4) if arguments.quick else (arguments.threads, arguments.turns)
    started, load = time.perf_counter(), [os.getloadavg()[0]]
    durable: dict[str, dict[str, Any]] = {}
    for kind in arguments.kinds:
        try:
            with postgres(fsync=True) if kind == "PostgreSQL" else nullcontext() as server:
                for workload in arguments.workloads:
                    print(f"{kind}: {workload}", flush=True)
                    durable.setdefault(kind, {})[workload] = durable_run(kind, workload, threads, turns, server)
        except ServerUnavailable as error:
            print(f"NO POSTGRESQL SERVER COULD BE STARTED ({error}): PostgreSQL not measured")
    memory = {}
    for workload in arguments.workloads:
        print(f"memory saver: {workload}", flush=True)
        memory[workload] = memory_run(workload, threads, turns)
    load.append(os.getloadavg()[0])
    results = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": " ".join(["python benchmarks/bytes.py", *sys.argv[1:]]),
        "machine": machine(),
        "commit": commit(),
        "load": load,
        "shape": {"threads": threads, "turns": turns},
        "elapsed": time.perf_counter() - started,
        "durable": durable,
        "memory": memory,
    }
    arguments.output.mkdir(parents=True, exist_ok=True)
    (arguments.output / "bytes.json").write_text(json.dumps(results, indent=1))
    print(report(results, arguments.output))


if __name__ == "__main__":
    main()
