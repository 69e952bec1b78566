"""Work a saver does on its own, in a daemon thread: autosaves and the expiry sweep."""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable

__all__ = [
    "Periodic",
]

logger = logging.getLogger(__name__)


class Periodic:
    """Calls ``job()`` every ``interval`` seconds until stopped, and once more when stopped if ``final``.

    A failing job is logged and tried again at the next interval; it never
    reaches the saver's callers. With an infinite interval no thread runs: only
    the final call happens.

    Args:
        job: What to run.
        interval: Seconds between runs.
        name: The thread's name, and the job's in logs.
        final: Run the job once more when stopped (a last autosave).
    """

    def __init__(self, job: Callable[[], object], interval: float, name: str, *, final: bool) -> None:
        self._job = job
        self._interval = interval
        self._name = name
        self._final = final
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if math.isfinite(interval):
            self._thread = threading.Thread(target=self._run, name=name, daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self._run_logged()

    def _run_logged(self) -> None:
        try:
            self._job()
        except Exception:
            logger.exception("%s failed; trying again in %s s", self._name, self._interval)

    def stop(self) -> None:
        """Stop the thread, then run the job once more if ``final``.

        Runtime complexity: up to two runs: the one under way, which the
        thread finishes first, and the final one.
        """
        if self._stop.is_set():
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._final:
            self._run_logged()
