"""What ``CompressingSerializer`` costs and saves, value size by value size: the numbers its default threshold
(``compression.DEFAULT_THRESHOLD_BYTES``) was chosen from.

For chat-shaped values (a ``messages`` channel of LangChain messages, English-like text, growing a message at a
time) and for random bytes (incompressible: base64 images, ciphertext), at each serialized size: the inner
serializer's ``dumps_typed`` and ``loads_typed`` times, and what ``CompressingSerializer`` adds to each (with zstd
and with zlib at level 1), and the stored size. Times are the median of interleaved rounds (the plain serializer,
then each codec, in turn, each round), per call, so a noisy machine moves them alike.

Run: ``make bench-compression`` (about a minute); writes ``benchmarks/results/compression/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph.checkpoint.bounded import CompressingSerializer

RESULTS = Path(__file__).parent / "results" / "compression"
VOCABULARY = (
    "the a to of and in is it you that for on with as be this are was can your at have or not by we an "
    "will from if but they so all more about which when what one there do out up time would like just "
    "how their tool call result weather forecast order refund account please thanks question answer "
    "assistant user conversation message summary document search query database error retry status "
    "update value"
)


def sentence(rng: random.Random, words: int) -> str:
    vocabulary = VOCABULARY.split()
    return " ".join(rng.choice(vocabulary) for _ in range(words)).capitalize() + "."


def chat(messages: int, seed: int = 7) -> list[Any]:
    rng = random.Random(seed)
    made: list[Any] = []
    for index in range(messages):
        text = " ".join(sentence(rng, rng.randint(6, 18)) for _ in range(rng.randint(1, 4)))
        made.append(HumanMessage(text, id=f"h{index}") if index % 2 == 0 else AIMessage(text, id=f"a{index}"))
    return made


def per_call(function: Callable[[], Any], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        function()
    return (time.perf_counter() - start) / calls


def measure(value: Any, rounds: int) -> dict[str, Any]:
    plain = JsonPlusSerializer(pickle_fallback=False)
    savers = {
        "zstd": CompressingSerializer(plain, threshold_bytes=0, codec="zstd"),
        "zlib": CompressingSerializer(plain, threshold_bytes=0, codec="zlib"),
    }
    tag, data = plain.dumps_typed(value)
    stored = {name: saver.dumps_typed(value) for name, saver in savers.items()}
    calls = max(1, 200_000 // max(len(data), 1))
    times: dict[str, list[float]] = {key: [] for key in ("dumps", "loads", *savers, *(f"{k} loads" for k in savers))}
    for _ in range(rounds):
        times["dumps"].append(per_call(lambda: plain.dumps_typed(value), calls))
        times["loads"].append(per_call(lambda: plain.loads_typed((tag, data)), calls))
        for name, saver in savers.items():
            times[name].append(per_call(lambda s=saver: s.dumps_typed(value), calls))
            pair = stored[name]
            times[f"{name} loads"].append(per_call(lambda s=saver, p=pair: s.loads_typed(p), calls))
    median = {key: statistics.median(values) for key, values in times.items()}
    return {
        "bytes": len(data),
        **{f"{name} bytes": len(pair[1]) for name, pair in stored.items()},
        **median,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="three rounds, fewer sizes")
    arguments = parser.parse_args()
    rounds = 3 if arguments.quick else arguments.rounds
    sizes = [1, 2, 4, 8, 16, 64, 256] if arguments.quick else [1, 2, 3, 4, 6, 8, 12, 16, 32, 64, 128, 256, 1024]
    rows: list[tuple[str, dict[str, Any]]] = []
    for messages in sizes:
        rows.append((f"chat, {messages} messages", measure(chat(messages), rounds)))
    rng = random.Random(11)
    for size in (256, 1024, 4096, 65536):
        rows.append((f"random bytes, {size}", measure(rng.randbytes(size), rounds)))
    lines = [
        "# CompressingSerializer: cost and size, value by value",
        "",
        f"Measured by `benchmarks/compression.py` ({rounds} interleaved rounds, median per call) on "
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}. Level 1 for both codecs.",
        "Times in microseconds; 'added' is what CompressingSerializer adds to the plain serializer's call.",
        "Whole graph turns, compression on and off over SQLite, PostgreSQL and the memory saver: "
        "[BYTES.md](BYTES.md) (`benchmarks/bytes.py`).",
        "",
        "| value | serialized bytes | zstd bytes | zlib bytes | dumps µs | zstd added µs | zlib added µs "
        "| loads µs | zstd loads added µs |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, row in rows:
        lines.append(
            f"| {name} | {row['bytes']:,} | {row['zstd bytes']:,} | {row['zlib bytes']:,} "
            f"| {row['dumps'] * 1e6:.1f} | {(row['zstd'] - row['dumps']) * 1e6:+.1f} "
            f"| {(row['zlib'] - row['dumps']) * 1e6:+.1f} | {row['loads'] * 1e6:.1f} "
            f"| {(row['zstd loads'] - row['loads']) * 1e6:+.1f} |"
        )
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "RESULTS.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
