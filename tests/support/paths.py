"""Where things are, for tests that read or run files of the repository."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The repository's root folder."""

DATA = ROOT / "tests" / "data"
"""Files the tests read (snapshots made by older versions)."""
