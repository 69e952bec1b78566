"""Handing dropped threads to ``on_evict`` without blocking an event loop.

The engine queues each thread it evicts or expires (``engine.hooks``); the
saver method whose call dropped it delivers the queue once the engine has
released its lock, one announcement at a time, in drop order. Every method that
can drop threads is wrapped by ``announces`` (sync) or ``announces_async``
(async): that is the one place delivery happens, but for one deliberate copy:
``put`` and ``put_writes`` wrap their bodies by hand, with positional
arguments, which costs half of what ``announces``' ``*args`` and ``**kwargs``
do on every write (tests/saver/test_hot_path_copies.py keeps the copy agreeing). An async method that runs a
sync body calls the body unwrapped (``unannounced``), so the sync delivery never
runs on its event loop:

* from a sync method, in the calling thread (an ``async def`` hook, or an
  awaitable a sync hook returns, runs to completion on an event loop of its own);
* from an async method, a sync hook runs in a worker thread, so a slow hook
  (a synchronous write to an archive) never stalls the event loop (an
  awaitable it returns runs to completion there), and an ``async def`` hook is
  awaited on the caller's loop.

Either way the caller delivers the queue, or leaves it to a delivery already
under way (which announces its drops too), so a slow hook slows the callers
that drop threads. A sync call made on a running event loop never waits for
another delivery's turn (that would block the loop it runs on), but past
``hooks.QUEUE_BOUND`` queued drops it waits for room, unless the delivery under
way is its own loop's. Hook errors of any kind, a cancelled caller's interrupted
hook included, are logged and counted in ``stats().drop_hook_errors``; drops a
cancelled caller left queued go with the next delivery, ``close()`` at the latest.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, TypeVar, cast

from .engine import Announcements, Store, delivering

__all__ = [
    "TURN_WAIT_SECONDS",
    "HoldsStore",
    "announces",
    "announces_async",
    "deliver",
    "deliver_async",
    "is_async_hook",
    "unannounced",
]

TURN_WAIT_SECONDS = 0.001
"""How often an async delivery looks again for its turn while another delivery is under way."""


def is_async_hook(hook: object) -> bool:
    """Whether calling ``hook`` returns a coroutine (``async def``, a partial of one, or an async ``__call__``)."""
    call = type(hook).__call__ if callable(hook) else None  # an object whose __call__ is async
    return inspect.iscoroutinefunction(hook) or inspect.iscoroutinefunction(call)


class HoldsStore(Protocol):
    """What a method ``announces`` wraps belongs to: an object with the engine's store."""

    store: Store


Method = TypeVar("Method", bound=Callable[..., Any])


def announces(method: Method) -> Method:
    """Wrap a sync method (or generator method) so that, once it returns (or the generator
    closes), the threads its call dropped are delivered (``deliver``).

    The wrapper is the method's one extra frame; the wrapped body stays reachable
    through ``unannounced``. Runtime complexity: the hook's, per thread announced.
    """
    if inspect.isgeneratorfunction(method):

        @functools.wraps(method)
        def generator(self: HoldsStore, *args: Any, **kwargs: Any) -> Iterator[Any]:
            try:
                yield from method(self, *args, **kwargs)
            finally:  # also when the caller stops early
                if self.store.announcements.queue:
                    deliver(self.store.announcements)

        return cast(Method, generator)

    @functools.wraps(method)
    def call(self: HoldsStore, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        finally:
            if self.store.announcements.queue:
                deliver(self.store.announcements)

    return cast(Method, call)


def announces_async(method: Method) -> Method:
    """Wrap an async method (or async generator method) so that the threads its call dropped are
    delivered without blocking the event loop (``deliver_async``).

    Runtime complexity: the hook's, per thread announced.
    """
    if inspect.isasyncgenfunction(method):

        @functools.wraps(method)
        async def generator(self: HoldsStore, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            try:
                async for item in method(self, *args, **kwargs):
                    yield item
            finally:  # also when the caller stops early
                if self.store.announcements.queue:
                    await deliver_async(self.store.announcements)

        return cast(Method, generator)

    @functools.wraps(method)
    async def call(self: HoldsStore, *args: Any, **kwargs: Any) -> Any:
        try:
            return await method(self, *args, **kwargs)
        finally:
            if self.store.announcements.queue:
                await deliver_async(self.store.announcements)

    return cast(Method, call)


def unannounced(method: Method) -> Method:
    """The body of a method ``announces`` wrapped, which delivers nothing: for an async twin that
    runs the sync body and delivers asynchronously itself. Runtime complexity: O(1)."""
    return cast(Method, method.__dict__["__wrapped__"])  # set by functools.wraps


def deliver(announcements: Announcements) -> None:
    """Deliver from a sync caller, in its thread; an awaitable a hook returns is run to completion.

    Runtime complexity: the hook's, per thread announced.
    """
    hook = announcements.hook
    if hook is None:
        return
    on_a_loop = _running_loop() is not None  # waiting for the turn here would block that loop's delivery
    announcements.deliver(lambda record, export: _settle(hook(record, export)), wait=not on_a_loop)


async def deliver_async(announcements: Announcements) -> None:
    """Deliver from an async caller without blocking its loop: a sync hook runs in a worker thread
    (an awaitable it returns is run to completion there), an ``async def`` hook is awaited here.

    Runtime complexity: the hook's, per thread announced.
    """
    hook = announcements.hook
    if hook is None:
        return
    if not is_async_hook(hook):
        await asyncio.to_thread(announcements.deliver, lambda record, export: _settle(hook(record, export)))
        return
    if delivering.get():
        return  # the hook itself dropped more: the delivery under way announces them
    turn = announcements.turn
    while announcements.queue:
        if not turn.acquire(blocking=False):
            await asyncio.sleep(TURN_WAIT_SECONDS)  # another delivery is under way and may announce ours
            continue
        announcements.turn_holder = threading.get_ident()  # a sync call on this loop must not wait for it
        token = delivering.set(True)
        try:
            while (queued := announcements.take()) is not None:
                try:
                    await cast(Awaitable[object], hook(queued.record, queued.export))
                except (asyncio.CancelledError, KeyboardInterrupt, SystemExit):
                    announcements.failed(queued.record)  # counted, not lost silently; then the caller stops
                    raise
                except BaseException:
                    announcements.failed(queued.record)
        finally:
            delivering.reset(token)
            announcements.release_turn()


def _settle(result: object) -> None:
    """Run to completion what a hook returned, if it is awaitable (a sync hook returning a coroutine)."""
    if inspect.isawaitable(result):
        _run_to_completion(result)


def _run_to_completion(coroutine: Awaitable[object]) -> object:
    """Run an ``async def`` hook's coroutine from sync code: here if no loop runs in this
    thread, else on a loop of its own in a helper thread (this thread's loop is blocked anyway)."""
    if _running_loop() is None:
        return asyncio.run(_as_coroutine(coroutine))
    context = contextvars.copy_context()  # the delivery under way: a hook that re-enters the saver leaves its drops
    with ThreadPoolExecutor(1, thread_name_prefix="on-evict") as helper:
        return helper.submit(context.run, asyncio.run, _as_coroutine(coroutine)).result()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


async def _as_coroutine(awaitable: Awaitable[object]) -> object:
    return await awaitable
