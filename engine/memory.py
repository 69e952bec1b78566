"""The heap a store holds: its payload bytes plus what every object around them costs.

Payload bytes (``total_bytes``) are what the reference contract limits, but the
heap a store holds is larger, several times larger when payloads are small:
each checkpoint, blob and write is a few tuples, a bytes header, dictionary
entries and identifier strings. ``memory_bytes`` adds those costs, so that a
bound can be set from a container's memory limit (``max_memory_bytes``).

The estimate is payload bytes, plus a fixed cost per object derived from the
counters the store already keeps (threads, namespaces, checkpoints, blobs,
writes), plus ``variable_overhead``: the part that varies with the objects'
contents (identifier lengths, how many channels a checkpoint references,
whether a blob holds a value), kept incrementally beside the other totals.

Every cost below is measured at import with ``sys.getsizeof`` of the real
structures (dictionary entries averaged over typical sizes); none is typed in
by hand. What the estimate leaves out is in the README ("A memory bound").
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import Mapping, Sequence

from .namespace import Namespace
from .plans import Pruning
from .records import Blob, BlobKey, CheckpointRecord, WriteRecord, make_checkpoint_record
from .thread import Thread
from .tombstones import DroppedThread, ParkedWrites, RefusedCheckpoint, Tombstones

__all__ = [
    "BLOB",
    "CHECKPOINT",
    "LIST_SLOT",
    "NAMESPACE",
    "PARKED",
    "PARKED_WRITE",
    "REFUSAL",
    "RUN",
    "STR",
    "TASK",
    "THREAD",
    "TOMBSTONE",
    "VALUE",
    "WRITE",
    "WRITE_SET",
    "blob_overhead",
    "change",
    "namespace_overhead",
    "of_contents",
    "of_thread",
    "of_tombstones",
    "parked_writes_bytes",
    "record_overhead",
    "thread_overhead",
    "write_set_overhead",
]

_SIZES = (8, 64, 512, 4096)  # dictionary sizes averaged over: a namespace's entries up to a big store's


def _per_entry(make: type, key: object) -> int:
    """Bytes per entry of a container, averaged over typical sizes."""
    empty = sys.getsizeof(make())
    costs = [(sys.getsizeof(make({key(i): None for i in range(n)})) - empty) / n for n in _SIZES]  # type: ignore[operator]
    return round(sum(costs) / len(costs))


STR = sys.getsizeof("")  # a str's header; ASCII text adds a byte per character
BYTES = sys.getsizeof(b"")  # a bytes object's header; the payload is counted as payload
PAIR = sys.getsizeof(("", ""))  # a two-item tuple
DICT = sys.getsizeof({})
SET = sys.getsizeof(set())
STR_KEY_ENTRY = _per_entry(dict, str)  # one entry of a dict keyed by str
TUPLE_KEY_ENTRY = _per_entry(dict, lambda i: (str(i), i))  # one entry of a dict keyed by a tuple
LRU_ENTRY = _per_entry(OrderedDict, str)  # one entry of the store's LRU map
LIST_SLOT = sys.getsizeof([None]) - sys.getsizeof([])

THREAD = sys.getsizeof(Thread("", 0.0, 0)) + DICT + SET + LRU_ENTRY + STR
"""A thread: its object, its namespace map and run set, its LRU entry, its id's header."""

NAMESPACE = sys.getsizeof(Namespace()) + 3 * DICT + sys.getsizeof([]) + STR_KEY_ENTRY + STR
"""A namespace: its object, three dicts and id list, its entry in its thread, its name's header."""

CHECKPOINT = (
    sys.getsizeof(make_checkpoint_record(("", None, "", b"", "", b"", (), None, frozenset())))
    + 2 * BYTES
    + sys.getsizeof(())
    + STR
    + STR_KEY_ENTRY
    + LIST_SLOT
)
"""A checkpoint: its record, two bytes headers, its versions tuple's header, its id's header,
its entry by id and in the sorted ids."""

BLOB = PAIR + TUPLE_KEY_ENTRY
"""A blob: its ``(channel, version)`` key and its entry."""

VALUE = PAIR + BYTES
"""What a blob that holds a value adds: the ``(type, bytes)`` pair and the bytes header."""

WRITE = sys.getsizeof(WriteRecord("", 0, "", "", b"", "")) + BYTES + PAIR + TUPLE_KEY_ENTRY
"""A pending write: its record, its value's bytes header, its ``(task_id, idx)`` key and entry."""

TASK = 2 * STR
"""A task's writes at a checkpoint: the headers of the id and path strings they share."""

WRITE_SET = DICT + STR_KEY_ENTRY
"""The writes of one checkpoint: their dict and its entry."""

RUN = STR + STR_KEY_ENTRY + SET
"""A run a thread holds: its id's header, its entry in the run index and its set of holders."""

TOMBSTONE = sys.getsizeof(DroppedThread("", "", 0.0, 0.0, None)) + LRU_ENTRY + 2 * STR
"""A tombstone: its record, its entry, the headers of the ids it keeps (their text is its ``nbytes``)."""

REFUSAL = sys.getsizeof(RefusedCheckpoint("", "", "", "", 0.0)) + LRU_ENTRY + 3 * STR
"""A refused checkpoint remembered: its record, its entry, the headers of the ids it keeps."""

PARKED = sys.getsizeof(ParkedWrites("", "", "", (), 0)) + sys.getsizeof(()) + LRU_ENTRY + 3 * STR
"""Parked writes: their record, its tuple of writes, its entry, the headers of the ids it keeps
(each write adds ``PARKED_WRITE`` beside its counted bytes: ``parked_writes_bytes``)."""

PARKED_WRITE = LIST_SLOT + sys.getsizeof(WriteRecord("", 0, "", "", b"", "")) + BYTES + 2 * STR
"""One parked write: its slot, its record, its value's bytes header, its id and path headers."""


# --- the varying part (variable_overhead), one function per kind of object; the write transactions inline them ---


def record_overhead(record: CheckpointRecord) -> int:
    """Its id's text and its versions tuple's slots. Runtime complexity: O(1)."""
    return len(record.checkpoint_id) + LIST_SLOT * len(record.versions)


def blob_overhead(key: BlobKey, blob: Blob) -> int:
    """Its value's containers, if it holds one, and its version's text. Runtime complexity: O(1)."""
    version = key[1]
    return (VALUE if blob is not None else 0) + (STR + len(version) if type(version) is str else 0)


def write_set_overhead(stored: Mapping[tuple[str, int], WriteRecord]) -> int:
    """The writes of one checkpoint: their dict, and the id and path strings of each run of
    consecutive writes of one task (a task's writes arrive together and share its strings).

    Runtime complexity: O(len(stored)).
    """
    overhead = WRITE_SET
    previous = None
    for task_id, _ in stored:
        if task_id != previous:
            overhead += TASK + len(task_id)
            previous = task_id
    return overhead


def namespace_overhead(space: Namespace) -> int:
    """Everything varying a namespace holds, recounted. Runtime complexity: O(size of the namespace)."""
    overhead = sum(record_overhead(record) for record in space.records.values())
    overhead += sum(blob_overhead(key, blob) for key, blob in space.blobs.items())
    return overhead + sum(write_set_overhead(stored) for stored in space.writes.values())


def thread_overhead(thread: Thread) -> int:
    """A thread's ``variable_overhead``, recounted: its id and namespace names, its runs, its namespaces' contents.

    Runtime complexity: O(size of the thread).
    """
    overhead = len(thread.thread_id) + sum(RUN + len(run_id) for run_id in thread.runs)
    for name, space in thread.namespaces.items():
        overhead += len(name) + namespace_overhead(space)
    return overhead


def parked_writes_bytes(writes: Sequence[WriteRecord]) -> int:
    """The heap parked writes hold: their counted bytes and ``PARKED_WRITE`` each. Runtime complexity: O(writes)."""
    return sum(write.nbytes + PARKED_WRITE for write in writes)


def of_contents(
    nbytes: int, variable_overhead: int, checkpoints: int, writes: int, blobs: int, namespaces: int, threads: int
) -> int:
    """The heap that threads holding these counts hold. Runtime complexity: O(1)."""
    return (
        nbytes
        + variable_overhead
        + CHECKPOINT * checkpoints
        + WRITE * writes
        + BLOB * blobs
        + NAMESPACE * namespaces
        + THREAD * threads
    )


def of_thread(thread: Thread) -> int:
    """The heap a thread holds. Runtime complexity: O(1), from its counters."""
    return of_contents(
        thread.nbytes,
        thread.variable_overhead,
        thread.checkpoints,
        thread.writes,
        thread.blobs,
        len(thread.namespaces),
        1,
    )


def of_tombstones(
    tombstones: Tombstones[DroppedThread],
    refusals: Tombstones[RefusedCheckpoint],
    parked: Tombstones[ParkedWrites],
) -> int:
    """The heap the tombstones of dropped threads and of refused checkpoints, and the parked writes, hold.

    Runtime complexity: O(1), from their counters (a parked record's ``nbytes`` counts its writes).
    """
    return (
        TOMBSTONE * len(tombstones)
        + tombstones.nbytes
        + REFUSAL * len(refusals)
        + refusals.nbytes
        + PARKED * len(parked)
        + parked.nbytes
    )


def change(
    nbytes: int,
    overhead: int,
    pruning: Pruning | None = None,
    *,
    checkpoints: int = 0,
    writes: int = 0,
    blobs: int = 0,
    namespaces: int = 0,
    thread_id: str | None = None,
) -> int:
    """How much the heap estimate changes with these payload bytes, variable overhead and counts
    (net of what ``pruning`` frees; and a new thread, if ``thread_id``). Runtime complexity: O(1).
    """
    if pruning is not None:
        freed = pruning.freed
        overhead -= freed.variable_overhead
        checkpoints -= freed.checkpoints
        writes -= freed.writes
        blobs -= freed.blobs
        namespaces -= freed.namespaces
    change = nbytes + overhead + CHECKPOINT * checkpoints + WRITE * writes + BLOB * blobs + NAMESPACE * namespaces
    return change if thread_id is None else change + THREAD + len(thread_id)
