"""Periodic snapshots in a background thread."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

logger = logging.getLogger(__name__)


class Autosaver:
    """Calls ``save()`` every ``interval`` seconds until stopped, and once more when stopped.

    A failed save is logged and retried at the next interval; it never reaches
    the callers of the saver. Writers are held up only while the store copies
    the threads changed since the previous save (``Store.snapshot``).
    """

    def __init__(self, save: Callable[[], object], interval: float) -> None:
        self._save = save
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="checkpoint-autosave", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self._save_logged()

    def _save_logged(self) -> None:
        try:
            self._save()
        except Exception:
            logger.exception("autosave failed; retrying in %s s", self._interval)

    def stop(self) -> None:
        """Stop the thread and save one last time. Runtime complexity: one save."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join()
        self._save_logged()
