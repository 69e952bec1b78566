"""The heap a store holds: its payload bytes plus what every object around them costs.

Payload bytes (``total_bytes``) are what the reference contract limits, but the
heap a store holds is larger, several times larger when payloads are small:
each checkpoint, blob and write is a few tuples, a bytes header, dictionary
entries and identifier strings. ``memory_bytes`` adds those costs, so that a
bound can be set from a container's memory limit (``max_memory_bytes``).

The estimate is payload bytes, plus a fixed cost per object derived from the
counters the store already keeps (threads, namespaces, checkpoints, blobs,
writes), plus ``extra``: the part that varies with the objects' contents
(identifier lengths, how many channels a checkpoint references, whether a blob
holds a value), kept incrementally beside the other totals.

Every cost below is measured at import with ``sys.getsizeof`` of the real
structures (dictionary entries averaged over typical sizes); none is typed in
by hand. What the estimate leaves out is in the README ("A memory bound").
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import Mapping
from typing import TYPE_CHECKING

from .namespace import Namespace
from .records import Blob, BlobKey, CheckpointRecord, WriteRecord, make_checkpoint_record
from .thread import Thread
from .tombstones import DroppedThread, Tombstones

if TYPE_CHECKING:
    from .policy import Pruning
    from .store import Store

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


# --- the varying part ("extra"), one function per kind of object; the write transactions inline them ---


def record_extra(record: CheckpointRecord) -> int:
    """Its id's text and its versions tuple's slots. Runtime complexity: O(1)."""
    return len(record.checkpoint_id) + LIST_SLOT * len(record.versions)


def blob_extra(key: BlobKey, blob: Blob) -> int:
    """Its value's containers, if it holds one, and its version's text. Runtime complexity: O(1)."""
    version = key[1]
    return (VALUE if blob is not None else 0) + (STR + len(version) if type(version) is str else 0)


def write_set_extra(stored: Mapping[tuple[str, int], WriteRecord]) -> int:
    """The writes of one checkpoint: their dict, and the id and path strings of each run of
    consecutive writes of one task (a task's writes arrive together and share its strings).

    Runtime complexity: O(len(stored)).
    """
    extra = WRITE_SET
    previous = None
    for task_id, _ in stored:
        if task_id != previous:
            extra += TASK + len(task_id)
            previous = task_id
    return extra


def namespace_extra(space: Namespace) -> int:
    """Everything varying a namespace holds, recounted. Runtime complexity: O(size of the namespace)."""
    extra = sum(record_extra(record) for record in space.records.values())
    extra += sum(blob_extra(key, blob) for key, blob in space.blobs.items())
    return extra + sum(write_set_extra(stored) for stored in space.writes.values())


def thread_extra(thread: Thread) -> int:
    """A thread's ``extra``, recounted: its id and namespace names, its runs, its namespaces' contents.

    Runtime complexity: O(size of the thread).
    """
    extra = len(thread.thread_id) + sum(RUN + len(run_id) for run_id in thread.runs)
    for name, space in thread.namespaces.items():
        extra += len(name) + namespace_extra(space)
    return extra


def of_thread(thread: Thread) -> int:
    """The heap a thread holds. Runtime complexity: O(1), from its counters."""
    return (
        thread.nbytes
        + thread.extra
        + CHECKPOINT * thread.checkpoints
        + WRITE * thread.writes
        + BLOB * thread.blobs
        + NAMESPACE * len(thread.namespaces)
        + THREAD
    )


def of_tombstones(tombstones: Tombstones) -> int:
    """The heap tombstones hold. Runtime complexity: O(1), from their counters."""
    return TOMBSTONE * len(tombstones) + tombstones.nbytes


def of_store(store: Store) -> int:
    """The heap the whole store holds, its tombstones included. Runtime complexity: O(1), from its counters."""
    return (
        of_tombstones(store.tombstones)
        + store.nbytes
        + store.extra
        + CHECKPOINT * store.checkpoints
        + WRITE * store.writes
        + BLOB * store.blobs
        + NAMESPACE * store.namespaces
        + THREAD * len(store.threads)
    )


def change(
    nbytes: int,
    extra: int,
    pruning: Pruning | None = None,
    *,
    checkpoints: int = 0,
    writes: int = 0,
    blobs: int = 0,
    namespaces: int = 0,
    thread_id: str | None = None,
) -> int:
    """How much the heap estimate changes with these payload bytes, ``extra`` and counts (net of
    what ``pruning`` frees; and a new thread, if ``thread_id``). Runtime complexity: O(1).
    """
    if pruning is not None:
        freed = pruning.freed
        extra -= freed.extra
        checkpoints -= freed.checkpoints
        writes -= freed.writes
        blobs -= freed.blobs
        namespaces -= freed.namespaces
    change = nbytes + extra + CHECKPOINT * checkpoints + WRITE * writes + BLOB * blobs + NAMESPACE * namespaces
    return change if thread_id is None else change + THREAD + len(thread_id)
