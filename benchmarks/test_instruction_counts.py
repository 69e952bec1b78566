"""The valgrind-counted workloads run in CI too (without valgrind), so that they cannot rot."""

from __future__ import annotations

import pytest
from instruction_counts import KINDS, work


@pytest.mark.parametrize("kind", KINDS)
def test_workers_do_what_they_count(kind):
    hot = {"configurable": {"thread_id": "hot", "checkpoint_ns": ""}}
    assert len(list(work(kind, "put", 3).list(hot))) == 3
    assert list(work(kind, "put", 3, run=False).list(hot)) == []  # the baseline run only sets up
    saver = work(kind, "put_writes", 3)
    stored = saver.get_tuple({"configurable": {"thread_id": "thread-1", "checkpoint_ns": ""}})
    assert {task_id for task_id, _, _ in stored.pending_writes} >= {"task-x-0", "task-x-1", "task-x-2"}
    assert work(kind, "get_tuple", 1).get_tuple(hot) is None
