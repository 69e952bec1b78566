"""Turn a pytest-benchmark JSON file into a table of ratios and PNG plots.

Usage: ``python benchmarks/report.py RESULTS.json OUTPUT_DIR``. Writes
``OUTPUT_DIR/RESULTS.md`` (medians per saver, ratio ours/stock, machine and
versions) and one ``*.png`` per scaling curve. A ratio below 1 means ours is
faster.
"""

from __future__ import annotations

import json
import platform
import sys
from collections import defaultdict
from importlib import metadata
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

SCALING_MARK = " vs "  # groups named "<operation> vs <size axis>" are scaling curves
INTERLEAVED = "interleaved: "  # groups of test_interleaved.py: ratios measured in alternation
OURS, STOCK = "bounded", "stock"


def load(path: Path) -> list[dict[str, Any]]:
    return json.loads(path.read_text())["benchmarks"]


def micros(bench: dict[str, Any]) -> float:
    return bench["stats"]["median"] * 1e6


def saver_of(bench: dict[str, Any]) -> str:
    return str(bench["extra_info"].get("saver", "?"))


def human(value: float) -> str:
    return f"{value / 1000:,.2f} ms" if value >= 1000 else f"{value:,.1f} µs"


def versions() -> str:
    names = ["langgraph", "langgraph-checkpoint", "langgraph-checkpoint-sqlite", "ormsgpack"]
    found = []
    for name in names:
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            continue
    return ", ".join(found)


def table(benches: list[dict[str, Any]]) -> list[str]:
    by_group: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for bench in benches:
        if SCALING_MARK not in bench["group"] and not bench["group"].startswith(INTERLEAVED):
            by_group[bench["group"]][saver_of(bench)] = bench
    lines = [
        "| operation | ours (bounded) | stock InMemorySaver | SqliteSaver :memory: | ours / stock |",
        "|---|---|---|---|---|",
    ]
    for group in sorted(by_group):
        row = by_group[group]
        cells = [human(micros(row[k])) if k in row else "" for k in (OURS, STOCK, "sqlite")]
        ratio = f"{micros(row[OURS]) / micros(row[STOCK]):.2f}" if OURS in row and STOCK in row else ""
        for saver, bench in row.items():
            extra = {k: v for k, v in bench["extra_info"].items() if k not in {"saver", "size"}}
            if extra and saver in (OURS, STOCK):
                cells[0 if saver == OURS else 1] += " (" + ", ".join(f"{k}={_short(v)}" for k, v in extra.items()) + ")"
        lines.append(f"| {group} | {cells[0]} | {cells[1]} | {cells[2]} | {ratio} |")
    return lines


def interleaved(benches: list[dict[str, Any]]) -> list[str]:
    rows = sorted((b for b in benches if b["group"].startswith(INTERLEAVED)), key=lambda b: b["group"])
    if not rows:
        return []
    lines = [
        "## Ratios measured in alternation",
        "",
        "The savers hold the same store; each round times a batch on each in turn, the order rotating",
        "(`benchmarks/test_interleaved.py`). Times are medians; ratios are the median",
        "of the rounds' ratios to the stock saver, with quartiles.",
        "The floor is the stock saver plus the least bookkeeping any bounded saver needs",
        "(`benchmarks/floor_saver.py`): what being bounded costs at all, before any engine.",
        "",
        "| operation | ours | stock | floor | ours / stock | quartiles | floor / stock | quartiles |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for bench in rows:
        info = bench["extra_info"]
        cells = [
            bench["group"][len(INTERLEAVED) :],
            *(human(info[f"{kind}_us"]) for kind in ("bounded", "stock", "floor")),
        ]
        for kind in ("bounded", "floor"):
            cells += [
                f"{info[f'{kind}_ratio_median']:.2f}",
                f"{info[f'{kind}_ratio_q1']:.2f}-{info[f'{kind}_ratio_q3']:.2f}",
            ]
        lines.append(f"| {' | '.join(cells)} |")
    inside = [bench for bench in rows if "bounded_saver_us" in bench["extra_info"]]
    if inside:
        lines += [
            "",
            "The savers' own time inside the graph's turn (their methods timed; medians of the rounds):",
            "",
            "| operation | ours | stock | floor | ours / stock |",
            "|---|---|---|---|---|",
        ]
        for bench in inside:
            info = bench["extra_info"]
            times = [info[f"{kind}_saver_us"] for kind in ("bounded", "stock", "floor")]
            cells = [bench["group"][len(INTERLEAVED) :], *(human(t) for t in times), f"{times[0] / times[1]:.2f}"]
            lines.append(f"| {' | '.join(cells)} |")
    return [*lines, ""]


def _short(value: Any) -> str:
    return f"{value:,.0f}" if isinstance(value, float) and value > 100 else str(value)


def scaling(benches: list[dict[str, Any]], output: Path) -> list[str]:
    curves: dict[str, dict[str, list[tuple[int, float]]]] = defaultdict(lambda: defaultdict(list))
    for bench in benches:
        if SCALING_MARK in bench["group"]:
            curves[bench["group"]][saver_of(bench)].append((int(bench["extra_info"]["size"]), micros(bench)))
    lines = []
    for group, savers in sorted(curves.items()):
        figure, axes = plt.subplots(figsize=(6, 4))
        for saver, points in sorted(savers.items()):
            points.sort()
            axes.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=saver)
        axes.set_xscale("log")
        axes.set_yscale("log")
        axes.set_xlabel(group.split(SCALING_MARK)[1])
        axes.set_ylabel("median time per call (µs)")
        axes.set_title(group)
        axes.grid(True, which="both", alpha=0.3)
        axes.legend()
        name = group.replace(" ", "_").replace("(", "").replace(")", "").replace("=", "") + ".png"
        figure.tight_layout()
        figure.savefig(output / name, dpi=110)
        plt.close(figure)
        lines.append(f"### {group}\n\n![{group}]({name})\n")
        sizes = sorted({size for points in savers.values() for size, _ in points})
        lines.append("| size | " + " | ".join(sorted(savers)) + " | ours / stock |")
        lines.append("|---|" + "---|" * (len(savers) + 1))
        for size in sizes:
            values = {saver: dict(points).get(size) for saver, points in savers.items()}
            ratio = ""
            if values.get(OURS) and values.get(STOCK):
                ratio = f"{values[OURS] / values[STOCK]:.2f}"
            cells = " | ".join(human(values[s]) if values[s] else "" for s in sorted(savers))
            lines.append(f"| {size:,} | {cells} | {ratio} |")
        lines.append("")
    return lines


def main(results: Path, output: Path) -> None:
    output.mkdir(parents=True, exist_ok=True)
    benches = load(results)
    header = [
        "# Benchmark results",
        "",
        f"Machine: {platform.machine()}, {platform.processor() or 'unknown CPU'}, Python {platform.python_version()} "
        f"on {platform.system()}; {versions()}.",
        "Each number is the median of pytest-benchmark rounds; for every operation and size the savers run back to "
        "back in one session. Ratios are ours / stock: below 1 is faster.",
        "",
        "## Operations",
        "",
    ]
    body = header + table(benches) + [""] + interleaved(benches) + ["## Scaling", ""] + scaling(benches, output)
    (output / "RESULTS.md").write_text("\n".join(body) + "\n")
    print("\n".join(body))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
