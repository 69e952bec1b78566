"""``put_split.py`` keeps working: its halves store what a whole ``put`` stores."""

from __future__ import annotations

from put_split import one_round
from workload import SAVERS, ThreadWriter


def test_one_round_times_every_part_and_the_halves_store_every_checkpoint():
    writer = ThreadWriter(SAVERS["stock"](), "hot")
    calls = [writer.prepare() for _ in range(12)]
    timings, stored = one_round(calls, rotation=5)
    assert sorted(timings) == ["ours encode", "ours put", "ours store", "stock put", "stock serialization"]
    assert all(value > 0 for value in timings.values())
    assert stored.stats().checkpoints == 12  # the store half got every encoded call
    stored.check()
