"""``make demo`` runs ``examples/demo.py``: CI runs it too, but a failure should show up in ``make test`` first."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.support.paths import ROOT

DEMO = ROOT / "examples" / "demo.py"


def test_the_demo_runs_and_shows_what_it_promises() -> None:
    finished = subprocess.run([sys.executable, str(DEMO)], capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stderr
    shown = finished.stdout
    evicted = re.search(r"^  evicted_threads +([\d,]+)$", shown, re.MULTILINE)
    assert evicted is not None and int(evicted.group(1).replace(",", "")) > 0, shown
    assert "was rejected" in shown
    expired = re.findall(r"^  expired_threads +([\d,]+)$", shown, re.MULTILINE)
    assert expired[0] == "0" and int(expired[-1].replace(",", "")) > 0, shown
    # Every counter is printed, including the ones that are not numbers (None until an autosave fails).
    assert re.search(r"^  last_autosave_error +None$", shown, re.MULTILINE), shown
