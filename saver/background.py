"""Work a saver does on its own, in a daemon thread: autosaves and the expiry sweep.

A job holds its saver weakly: a saver dropped without ``close()`` is freed, and
its thread stops at the next tick instead of keeping it alive forever. Every
run that fails is logged and counted in the job's ``JobHealth``, which the
saver's ``stats()`` reports, so a failing autosave is seen, not only logged.
"""

from __future__ import annotations

import logging
import threading
import weakref
from abc import abstractmethod
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from dataclasses import dataclass
from types import TracebackType
from typing import Generic, Self, TypeVar

logger = logging.getLogger(__name__)

__all__ = ["JobHealth", "Periodic", "Resumable"]

Owner = TypeVar("Owner")


@dataclass
class JobHealth:
    """How a periodic job has fared since the saver was created (over every close and resume).

    Attributes:
        runs: Runs that completed.
        failures: Runs that raised (logged).
        last_error: The last failure, as ``ExceptionType: message``, or None.
    """

    runs: int = 0
    failures: int = 0
    last_error: str | None = None

    def failed(self, error: BaseException) -> None:
        """Count a failure and keep its description. Runtime complexity: O(1)."""
        self.failures += 1
        self.last_error = f"{type(error).__name__}: {error}"


class Periodic(Generic[Owner]):
    """Calls ``job(owner)`` every ``interval`` seconds until stopped.

    A failing run is logged, counted in ``health`` and tried again at the next
    interval; it never reaches the saver's callers. A last run on stopping is the
    caller's to make (``close()`` saves once more itself). With an infinite
    interval no thread runs; so too past ``threading.TIMEOUT_MAX`` (about 292
    years), which no wait accepts. The owner is held weakly: once it is garbage,
    the thread stops.

    Args:
        owner: The object the job works on (the saver).
        job: What to run, given the owner.
        interval: Seconds between runs.
        name: The thread's name, and the job's in logs.
        health: Where runs and failures are counted.
    """

    def __init__(
        self,
        owner: Owner,
        job: Callable[[Owner], object],
        interval: float,
        name: str,
        *,
        health: JobHealth,
    ) -> None:
        self._owner = weakref.ref(owner)
        self._job = job
        self._interval = interval
        self._name = name
        self.health = health
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if interval <= threading.TIMEOUT_MAX:  # math.inf included: never reached, so no thread
            weakref.finalize(owner, self._stop.set)  # a saver dropped without close(): the thread ends now
            self._thread = threading.Thread(target=self._run, name=name, daemon=True)
            self._thread.start()

    @property
    def running(self) -> bool:
        """Whether the thread runs (false once stopped, or once the owner is garbage)."""
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            owner = self._owner()
            if owner is None:
                return
            try:
                self._job(owner)
                self.health.runs += 1
            except Exception as error:
                logger.exception("%s failed; trying again in %s s", self._name, self._interval)
                self.health.failed(error)
            del owner  # not held while waiting

    def stop(self) -> None:
        """Stop the thread, once the run under way (if any) has finished.

        Runtime complexity: at most the run under way.
        """
        if self._stop.is_set():
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


class Resumable(AbstractContextManager["Resumable"], AbstractAsyncContextManager["Resumable"]):
    """A saver as a context manager, sync and async: entering (re)starts its background work, leaving closes it.

    ``close()`` stops the work and ``resume()`` starts it again, so a saver closed
    once and entered again works as new (its periodic jobs run). Leaving on an
    exception, a failing ``close()`` is logged (and counted by the saver), and
    the exception of the body goes on, not the close's. Subclasses
    define ``resume``, ``close`` and ``aclose``; both savers share this one protocol.
    """

    @abstractmethod
    def resume(self) -> None:
        """Start the background work ``close()`` stopped."""
        raise NotImplementedError

    @abstractmethod
    def close(self) -> None:
        """Stop the background work and finish what it owes."""
        raise NotImplementedError

    @abstractmethod
    async def aclose(self) -> None:
        """``close()`` for async callers."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        """Enter, (re)starting the background work ``close()`` stopped (``resume``). Runtime complexity: O(1)."""
        self.resume()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Leave: ``close()``. If it fails while the body raised, the failure is logged and the body's exception
        goes on (``_passed_over``). Runtime complexity: that of ``close``."""
        try:
            self.close()
        except Exception as error:
            if not self._passed_over(error, exc_value):
                raise

    async def __aenter__(self) -> Self:
        """Enter, (re)starting the background work ``aclose()`` stopped (``resume``). Runtime complexity: O(1)."""
        self.resume()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """``__exit__`` for ``async with``: awaits ``aclose()``. Runtime complexity: that of ``aclose``."""
        try:
            await self.aclose()
        except Exception as error:
            if not self._passed_over(error, exc_value):
                raise

    def _passed_over(self, error: Exception, exc_value: BaseException | None) -> bool:
        """Whether a close that failed with ``error`` is logged and passed over: leaving on the body's exception
        (``exc_value``), which goes on, as a failed close must not take its place. Runtime complexity: O(1)."""
        if exc_value is None:
            return False
        logger.warning("closing %r while leaving on %s failed: %r", self, type(exc_value).__name__, error)
        return True
