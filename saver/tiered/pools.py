"""The tiered saver's own worker threads, so that it never hands work to an event loop's default executor.

A loop's default executor belongs to everyone on the loop: LangGraph, the
durable saver itself (``AsyncPostgresSaver.aput`` serializes its values there
with ``asyncio.to_thread``), the application. Work the tiered saver parked
there could wait for work queued behind it: a flush that calls an async
durable saver through its loop and waits, while the saver's ``aput`` waits for
a worker; a job waiting on a thread's gate while the coroutine holding the gate
needs a worker to let it go. Once every worker waits, nothing moves (20
concurrent ``ainvoke`` over ``AsyncPostgresSaver`` with write-back hung so).

So the tiered saver keeps two pools of its own, one per kind of work, and the
async paths await durable calls natively wherever the durable saver has an
async side:

* ``durable_pool``: a sync durable saver's calls made by async callers, and
  nothing else. None of its jobs waits on a gate, a flight or the ledger of
  unflushed writes, so each finishes whatever else is waiting.
* ``jobs_pool``: blocking work of the tiered saver itself for async callers:
  serializing or deserializing large values, stopping background threads, and
  the cold operations (copies, prunes, run deletions) whose emulation calls
  the durable saver's sync side. Its jobs may wait on gates and on the ledger,
  but only for holders already running (a coroutine awaiting the durable tier,
  another thread, another running job), never for a job queued behind them,
  so a full pool slows callers down and never deadlocks.

Both are made on first use, shared by every saver and event loop of the
process, start threads as calls need them (at most ``POOL_WORKERS`` each), and
are made anew in a child process made by ``fork`` (the parent's threads do not
exist there).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

__all__ = ["POOL_WORKERS", "durable_pool", "in_durable_pool", "in_jobs_pool", "jobs_pool"]

POOL_WORKERS = min(32, (os.cpu_count() or 1) + 4)
"""Threads of each pool at most (the size of a default executor)."""

T = TypeVar("T")

_pools: dict[str, ThreadPoolExecutor] = {}
_lock = threading.Lock()


def _pool(name: str) -> ThreadPoolExecutor:
    pool = _pools.get(name)
    if pool is not None:
        return pool
    with _lock:
        pool = _pools.get(name)
        if pool is None:
            pool = _pools[name] = ThreadPoolExecutor(max_workers=POOL_WORKERS, thread_name_prefix=f"tiered-{name}")
        return pool


def durable_pool() -> ThreadPoolExecutor:
    """The process's pool for a sync durable saver's calls made by async callers.

    Invariant: only durable saver calls run on it, and none of them waits on the tiered saver's gates,
    flights or ledger. Runtime complexity: O(1).
    """
    return _pool("durable")


def jobs_pool() -> ThreadPoolExecutor:
    """The process's pool for the tiered saver's own blocking work for async callers.

    Invariant: a job waits only for holders already running, never for a job queued on this pool.
    Runtime complexity: O(1).
    """
    return _pool("jobs")


def _forget_pools_after_fork() -> None:
    """In a forked child: the parent's pools have no threads here; the next call makes new ones."""
    global _lock
    _pools.clear()
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_pools_after_fork)


async def _run_in(pool: ThreadPoolExecutor, call: Callable[[], T]) -> T:
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(pool, functools.partial(contextvars.copy_context().run, call))


async def in_durable_pool(call: Callable[[], T]) -> T:
    """Run a sync durable call in ``durable_pool`` and await it, in the caller's context (as ``asyncio.to_thread``).

    Runtime complexity: the call's, plus a thread hop.
    """
    return await _run_in(durable_pool(), call)


async def in_jobs_pool(call: Callable[[], T]) -> T:
    """Run the tiered saver's own blocking work in ``jobs_pool`` and await it, in the caller's context.

    Runtime complexity: the call's, plus a thread hop.
    """
    return await _run_in(jobs_pool(), call)
