"""``python -m saver inspect FILE``: what a snapshot holds."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime

from saver.snapshot import SnapshotError, read


def inspect(path: str, top: int) -> int:
    try:
        snapshot = read(path)
    except (SnapshotError, OSError) as error:
        print(f"{path}: {error}", file=sys.stderr)
        return 1
    saved = datetime.fromtimestamp(snapshot.saved_at, tz=UTC).isoformat(timespec="seconds")
    threads = snapshot.threads
    print(f"{path}: snapshot saved {saved}")
    print(f"  threads      {len(threads):,}")
    print(f"  namespaces   {sum(len(e.namespaces) for e, _ in threads):,}")
    print(f"  checkpoints  {sum(e.checkpoint_count for e, _ in threads):,}")
    print(f"  bytes        {snapshot.nbytes:,} (serialized payloads, as the store counts them)")
    if threads:
        idles = [idle for _, idle in threads]
        print(f"  idle         {min(idles):,.0f} s to {max(idles):,.0f} s (at save time)")
        print(f"\n  top {min(top, len(threads))} threads by bytes:")
        print(f"  {'thread':<40} {'bytes':>12} {'checkpoints':>12} {'namespaces':>11} {'idle s':>9}")
        for export, idle in sorted(threads, key=lambda item: item[0].nbytes, reverse=True)[:top]:
            print(
                f"  {export.thread_id[:40]:<40} {export.nbytes:>12,} {export.checkpoint_count:>12,} "
                f"{len(export.namespaces):>11,} {idle:>9,.0f}"
            )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m saver", description="Tools for langgraph-checkpoint-bounded.")
    commands = parser.add_subparsers(dest="command", required=True)
    inspect_command = commands.add_parser("inspect", help="print what a snapshot file holds")
    inspect_command.add_argument("file")
    inspect_command.add_argument("--top", type=int, default=10, help="how many of the largest threads to list")
    arguments = parser.parse_args(argv)
    return inspect(arguments.file, arguments.top)


if __name__ == "__main__":
    sys.exit(main())
