"""``tiered.py`` keeps working under ``make bench``: one short round of every saver and operation.

The figures to quote come from ``python benchmarks/tiered.py`` (15 rounds and more); here the rounds
are short, so their ratios are recorded (``extra_info``) but not judged.
"""

from __future__ import annotations

import pytest
from tiered import APART_RATIOS, RATIOS, ServerUnavailable, measure, measure_apart, postgres, table


def _record(benchmark, summary) -> None:
    for what, ratio in summary["ratios"].items():
        benchmark.extra_info[what] = round(ratio["median"], 3)
    assert all(value > 0 for value in summary["medians"].values())


def test_one_short_round_over_sqlite(benchmark) -> None:
    benchmark.group = "tiered: one short round, SQLite tier"
    benchmark.extra_info["saver"] = "ratio"
    summary = benchmark.pedantic(lambda: measure(None, 1, turns=2, reads=20, cold=2), rounds=1, iterations=1)
    _record(benchmark, summary)
    assert "tiered-sqlite-through" in table(summary)
    assert {"hot get_tuple (SQLite tier) / ours", "write-through turn / SqliteSaver"} <= set(summary["ratios"])


def test_one_short_round_over_postgres(benchmark) -> None:
    benchmark.group = "tiered: one short round, PostgreSQL tier"
    benchmark.extra_info["saver"] = "ratio"
    try:
        server = postgres(fsync=False)
        conninfo = server.__enter__()
    except ServerUnavailable as error:
        pytest.skip(f"NO POSTGRESQL SERVER COULD BE STARTED, the tiered benchmark over it did not run: {error}")
    try:
        summary = benchmark.pedantic(lambda: measure(conninfo, 1, turns=2, reads=20, cold=2), rounds=1, iterations=1)
        apart = measure_apart(conninfo, 1, seconds=0.1, reads=20, pause=0.001)
    finally:
        server.__exit__(None, None, None)
    _record(benchmark, summary)
    _record(benchmark, apart)
    assert {what for what, *_ in RATIOS} == set(summary["ratios"])
    assert {what for what, *_ in APART_RATIOS} == set(apart["ratios"])
    assert apart["counters"]["tiered-sqlite-back"]["turns"] > 0 and apart["counters"]["tiered-pg-back"]["turns"] > 0
