"""The ``langgraph-bounded`` command (also ``python -m langgraph.checkpoint.bounded``).

``langgraph-bounded inspect FILE [--key-env VAR]``: what a snapshot holds, and whether it is signed.

Inspecting never deserializes a payload: it reads the file's own structure
(ormsgpack without an extension hook) and counts bytes, so a tampered file can
be looked at safely. The key to verify a signature with is read from an
environment variable named by ``--key-env``, never from the command line, where
other users of the machine could read it in the process list.

Exit status: 0 if the file is readable and, with ``--key-env``, ``load`` with
that key would accept its signature (signed with it); 1 if the file is
unreadable, or, with ``--key-env``, its signature does not match or it is
unsigned; 2 for a usage error.
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

from . import __version__
from .snapshot import Header, SnapshotError, parse_body, read_header, signature_matches, signing_key

__all__ = [
    "copy_examples",
    "inspect",
    "main",
]

EXAMPLE_FILES = ("graph.py", "langgraph.json", "langgraph.tiered.json", "fastapi_app.py")
"""The serving recipes, as installed in ``langgraph.checkpoint.bounded.examples/serving``."""

_THREAD_COLUMN = 40


def inspect(path: str, top: int, key_env: str | None = None) -> int:
    """Print what the snapshot at ``path`` holds; return the exit status (see the module notes).

    Runtime complexity: O(size of the file + T log T) for T threads.
    """
    key = None
    if key_env is not None:
        try:
            key = signing_key(os.environ.get(key_env) or None)
        except ValueError as error:
            print(f"--key-env {key_env}: {error}", file=sys.stderr)
            return 2
        if key is None:
            print(f"--key-env {key_env}: the environment variable is not set or empty", file=sys.stderr)
            return 2
    try:
        with open(path, "rb") as file:
            data = file.read()
        header = read_header(data)
        accepted, signature_line = _signature_status(data, header, key, key_env)
        snapshot = parse_body(data, header)
    except (SnapshotError, OSError) as error:
        print(f"{path}: {error}", file=sys.stderr)
        return 1
    saved = datetime.fromtimestamp(snapshot.saved_at, tz=UTC).isoformat(timespec="seconds")
    threads = snapshot.threads
    print(f"{path}: snapshot saved {saved}")
    print(f"  format       version {header.version}, {'signed (HMAC-SHA256)' if header.signed else 'unsigned'}")
    print(f"  signature    {signature_line}")
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
                f"  {_printable(export.thread_id):<40} {export.nbytes:>12,} {export.checkpoint_count:>12,} "
                f"{len(export.namespaces):>11,} {idle:>9,.0f}"
            )
    if not accepted:
        print(f"{path}: load with the key in {key_env} refuses this file", file=sys.stderr)
        return 1
    return 0


def _signature_status(data: bytes, header: Header, key: bytes | None, key_env: str | None) -> tuple[bool, str]:
    """Whether ``load`` with ``key`` accepts the file's signature, and the line that says so."""
    if key is None:
        if header.signed:
            return True, "not verified (pass --key-env VAR to verify); load needs the key it was signed with"
        return True, "none; load refuses this file when a snapshot_key is set, unless allow_unsigned=True"
    if not header.signed:
        return False, f"none; load with the key in {key_env} refuses it unless allow_unsigned=True"
    if signature_matches(data, header, key):
        return True, f"verified with the key in {key_env}"
    return False, f"DOES NOT MATCH the key in {key_env}: changed after saving, or signed with another key"


def _printable(identifier: str) -> str:
    """An identifier from the file, safe for a terminal: escaped unless printable, cut to the column."""
    shown = identifier if identifier.isprintable() else ascii(identifier)
    return shown[:_THREAD_COLUMN]


def copy_examples(folder: str) -> int:
    """Copy the serving recipes into ``folder`` (created if needed), never over an existing file.

    Returns the exit status: 0, or 1 if a file is already there (nothing is copied then).
    Runtime complexity: O(size of the recipes).
    """
    source = resources.files("langgraph.checkpoint.bounded.examples").joinpath("serving")
    target = Path(folder)
    existing = [name for name in EXAMPLE_FILES if (target / name).exists()]
    if existing:
        print(f"{folder}: {', '.join(existing)} already there; nothing copied", file=sys.stderr)
        return 1
    target.mkdir(parents=True, exist_ok=True)
    for name in EXAMPLE_FILES:
        (target / name).write_bytes(source.joinpath(name).read_bytes())
    print(f"copied {', '.join(EXAMPLE_FILES)} to {folder}")
    print(f"  langgraph dev:     cd {folder} && langgraph dev  (langgraph.json names the process-wide saver)")
    print(f"  FastAPI (3.12+):   cd {folder} && uvicorn fastapi_app:app")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="langgraph-bounded", description="Tools for langgraph-checkpoint-bounded.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    inspect_command = commands.add_parser(
        "inspect", help="print what a snapshot file holds (never deserializes a payload)"
    )
    inspect_command.add_argument("file")
    inspect_command.add_argument("--top", type=int, default=10, help="how many of the largest threads to list")
    inspect_command.add_argument(
        "--key-env",
        metavar="VAR",
        help="verify the signature with the snapshot_key held in environment variable VAR (never pass a key itself)",
    )
    examples_command = commands.add_parser(
        "examples", help=f"copy the serving recipes ({', '.join(EXAMPLE_FILES)}) into a folder"
    )
    examples_command.add_argument("folder")
    arguments = parser.parse_args(argv)
    if arguments.command == "examples":
        return copy_examples(arguments.folder)
    return inspect(arguments.file, arguments.top, arguments.key_env)
