"""``kill -9`` in the middle of a retention sweep: every thread is left whole or pruned, never half-way.

The parent fills a SQLite file with threads of a chat graph, and notes each thread's checkpoints and
state. A child process sweeps the file with ``keep_last=2`` (its SQLite connection slowed down by a
progress handler, so that the sweep takes long enough to be cut), and is killed with SIGKILL at a
random moment after it starts; again and again, each child taking up where the last stopped. After
every kill, a fresh ``SqliteSaver`` reads the file: it passes SQLite's integrity check, no checkpoint
names a parent that is not there, every thread holds either all its checkpoints or exactly its newest
two, and every thread's state is what it was.
"""

from __future__ import annotations

import operator
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langgraph.checkpoint.sqlite import SqliteSaver

from tests.support.graphs import linear
from tests.support.paths import ROOT

THREADS = 120
TURNS = 3
KEEP_LAST = 2
KILLS = 6

CHILD = textwrap.dedent(
    """
    import math, sqlite3, sys, time
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.checkpoint.bounded import InMemoryCheckpointConfig, RetentionPolicy, TieredSaver

    connection = sqlite3.connect(sys.argv[1], check_same_thread=False)
    connection.set_progress_handler(lambda: time.sleep(0.0005) or 0, 200)  # slow: a kill lands mid-sweep
    saver = TieredSaver(
        SqliteSaver(connection),
        config=InMemoryCheckpointConfig(max_threads=2),
        retention=RetentionPolicy(keep_last=int(sys.argv[2]), sweep_interval_seconds=math.inf),
    )
    print("start", flush=True)
    report = saver.sweep()
    print("done", report.pruned_threads, flush=True)
    """
)


class Chat(TypedDict):
    messages: Annotated[list[str], operator.add]


def chat(checkpointer: Any) -> Any:
    builder = linear(
        Chat,
        {
            "think": lambda state: {"messages": [f"thought {len(state['messages'])}"]},
            "answer": lambda state: {"messages": [f"answer {len(state['messages'])}"]},
        },
    )
    return builder.compile(checkpointer=checkpointer)


def read_back(path: Path) -> tuple[dict[str, list[str]], dict[str, Any]]:
    """Each thread's checkpoint ids (newest first) and state, read by a new saver."""
    app = chat(SqliteSaver(sqlite3.connect(path, check_same_thread=False)))
    ids: dict[str, list[str]] = {}
    states: dict[str, Any] = {}
    for n in range(THREADS):
        config = {"configurable": {"thread_id": f"t{n}"}}
        ids[f"t{n}"] = [s.config["configurable"]["checkpoint_id"] for s in app.get_state_history(config)]
        states[f"t{n}"] = app.get_state(config).values
    return ids, states


def check_file(path: Path) -> None:
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        dangling = connection.execute(
            "SELECT c.thread_id, c.checkpoint_id FROM checkpoints c WHERE c.parent_checkpoint_id IS NOT NULL "
            "AND NOT EXISTS (SELECT 1 FROM checkpoints p WHERE p.thread_id = c.thread_id "
            "AND p.checkpoint_ns = c.checkpoint_ns AND p.checkpoint_id = c.parent_checkpoint_id)"
        ).fetchall()
        assert dangling == []


def test_a_kill_during_a_sweep_leaves_every_thread_whole_or_pruned(tmp_path: Path) -> None:
    path = tmp_path / "threads.db"
    filler = chat(SqliteSaver(sqlite3.connect(path, check_same_thread=False)))
    for n in range(THREADS):
        for turn in range(TURNS):
            filler.invoke({"messages": [f"user {turn}"]}, {"configurable": {"thread_id": f"t{n}"}})
    before_ids, before_states = read_back(path)
    rng = random.Random(28)
    cut_short = 0
    for _ in range(KILLS):
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(path), str(KEEP_LAST)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "start", child.stderr.read() if child.stderr else ""
        time.sleep(rng.uniform(0.01, 0.3))
        child.send_signal(signal.SIGKILL)
        out, _ = child.communicate(timeout=60)
        cut_short += "done" not in out
        check_file(path)
        ids, states = read_back(path)
        assert states == before_states
        for thread_id, kept in ids.items():
            assert kept in (before_ids[thread_id], before_ids[thread_id][:KEEP_LAST]), thread_id
    assert cut_short > 0, "no kill landed during a sweep: the test proved nothing"
    finish = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), str(KEEP_LAST)], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert "done" in finish.stdout, finish.stderr
    check_file(path)
    ids, states = read_back(path)
    assert states == before_states
    assert all(kept == before_ids[thread_id][:KEEP_LAST] for thread_id, kept in ids.items())
