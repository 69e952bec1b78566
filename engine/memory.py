"""The heap a store holds: its payload bytes plus what every object around them costs.

Payload bytes (``total_bytes``) are what the reference contract limits, but the
heap a store holds is larger, several times larger when payloads are small:
each checkpoint, blob and write is a few tuples, a bytes header, dictionary
entries and identifier strings. ``memory_bytes`` adds those costs, so that a
bound can be set from a container's memory limit (``max_memory_bytes``).

The estimate is payload bytes, plus a fixed cost per object derived from the
counters the store already keeps (threads, namespaces, checkpoints, blobs,
writes), plus ``variable_overhead``: the part that varies with the objects'
contents, kept incrementally beside the other totals by the write transactions
(``engine.store``) and recounted here for ``check()``:

* identifiers: a byte per character of ASCII text, the interpreter's wider
  layout for the rest (``text``); the root namespace's ``""`` is free;
* a checkpoint's versions tuple, two slots per channel;
* versions: a str or a number object (ints past the interpreter's shared small
  ones, floats) once per run of consecutive blob keys holding that very object,
  since LangGraph gives every channel a step updates one version object
  (``blobs_overhead``); a checkpoint's versions are counted with its blobs, as
  they are the same objects (a read hands back the stored ones:
  ``saver.codec.decode_view``);
* a blob's value containers; a task's id and path strings per run of its writes;
  a write index past the shared small ints; a run a thread holds.

Containers are costed as a base plus a cost per entry (``_costs``): a dict
allocates room for five entries with its first, so a small thread or namespace
is mostly bases. Every cost below is measured at import with ``sys.getsizeof``
of the real structures, filled as the store fills them (per-entry costs averaged
over typical sizes); none is typed in by hand. What the estimate leaves out is
in the docs (the guide "Limits for real graphs and the memory bound").
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

from .namespace import Namespace
from .plans import Pruning
from .records import Blob, BlobKey, CheckpointRecord, WriteRecord, make_checkpoint_record
from .thread import Thread
from .tombstones import DroppedThread, ParkedWrites, RefusedCheckpoint, Tombstones

__all__ = [
    "BLOB",
    "CHECKPOINT",
    "FLOAT",
    "INT",
    "LIST_SLOT",
    "NAMESPACE",
    "PARKED",
    "PARKED_WRITE",
    "REFUSAL",
    "RUN",
    "SMALL_INTS",
    "STR",
    "TASK",
    "THREAD",
    "TOMBSTONE",
    "TUPLE_SLOT",
    "VALUE",
    "WRITE",
    "WRITE_SET",
    "blobs_overhead",
    "change",
    "last_version",
    "namespace_overhead",
    "namespace_text",
    "number",
    "of_contents",
    "of_thread",
    "of_tombstones",
    "parked_writes_bytes",
    "record_overhead",
    "run_overhead",
    "text",
    "thread_overhead",
    "version_cost",
    "write_set_overhead",
]

_SIZES = tuple(round(8 * 2 ** (step / 2)) for step in range(17))
"""Container sizes averaged over, two per doubling (so that no resize threshold is favoured): 8 to 2,048
entries, a namespace's up to a big store's."""


def _filled(make: Callable[[], Any], keys: Iterable[object]) -> Any:
    """A container filled one key at a time, as the store fills its own."""
    container = make()
    for key in keys:
        if isinstance(container, set):
            container.add(key)
        elif isinstance(container, list):
            container.append(key)
        else:
            container[key] = None
    return container


def _costs(make: Callable[[], Any], key: Callable[[int], object]) -> tuple[int, int]:
    """A container's cost as ``(base, per entry)``, so that ``base + n * per_entry`` is its size with n entries.

    The per-entry cost is the growth past the first entry, averaged over ``_SIZES``; the base is
    what a container of one entry costs beyond that entry. A small container is mostly its base:
    a dict allocates room for five entries with its first.
    """
    one = sys.getsizeof(_filled(make, [key(0)]))
    growth = [(sys.getsizeof(_filled(make, map(key, range(n)))) - one) / (n - 1) for n in _SIZES]
    per_entry = round(sum(growth) / len(growth))
    return one - per_entry, per_entry


def _small_ints() -> range:
    """The ints the interpreter keeps one shared object of (CPython: -5 to 256): they cost nothing more."""
    low = high = 0
    while int(str(high + 1)) is int(str(high + 1)):
        high += 1
    while int(str(low - 1)) is int(str(low - 1)):
        low -= 1
    return range(low, high + 1)


STR = sys.getsizeof("")  # a str's header; ASCII text adds a byte per character (``text`` for the rest)
BYTES = sys.getsizeof(b"")  # a bytes object's header; the payload is counted as payload
PAIR = sys.getsizeof(("", ""))  # a two-item tuple
SMALL_INTS = _small_ints()
INT = sys.getsizeof(SMALL_INTS.stop + 1_000)  # an int past the shared ones, below 2**30
FLOAT = sys.getsizeof(0.5)
STR_DICT, STR_KEY_ENTRY = _costs(dict, str)  # a dict keyed by str, and each entry
TUPLE_DICT, TUPLE_KEY_ENTRY = _costs(dict, lambda i: (str(i), i))  # a dict keyed by tuples, and each entry
_, LRU_ENTRY = _costs(OrderedDict, str)  # one entry of an LRU map (the map itself is one per store)
SET, SET_ENTRY = _costs(set, str)
LIST, LIST_SLOT = _costs(list, int)  # a list grown by appending, and each slot
_WIDE = {width: sys.getsizeof(char) - 2 * width for width, char in ((1, "\xe9"), (2, "\u4e2d"), (4, "\U0001f600"))}
"""The header of a str holding a non-ASCII character, by the width of its widest character
(its length plus a terminator, times the width, follow)."""


def _numbers(sample: Any, *fields: str) -> int:
    """The number objects a record holds in these fields, with typical values past the shared ints."""
    return sum(sys.getsizeof(getattr(sample, field)) for field in fields)


def _sample_thread() -> Thread:
    thread = Thread("", 1.5, SMALL_INTS.stop + 1_000)  # a thread created past the first few hundred
    thread.nbytes = thread.variable_overhead = SMALL_INTS.stop + 1_000  # totals past the shared ints
    return thread


THREAD = (
    sys.getsizeof(_sample_thread())
    + _numbers(_sample_thread(), "nbytes", "variable_overhead", "created", "last_used")
    + STR_DICT
    + SET
    + LRU_ENTRY
    + STR
)
"""A thread: its object and the numbers it keeps (its totals, creation number and last use), its namespace
map and run set (each entry is counted with what it holds), its LRU entry, its id's header."""

NAMESPACE = sys.getsizeof(Namespace()) + 2 * STR_DICT + TUPLE_DICT + LIST + STR_KEY_ENTRY
"""A namespace: its object, its three dicts (checkpoints and writes by id, blobs by key) and id list,
its entry in its thread (its name: ``namespace_text``)."""

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

TUPLE_SLOT = sys.getsizeof((None,)) - sys.getsizeof(())
"""One slot of a tuple: a checkpoint's versions tuple holds two per channel."""

BLOB = PAIR + TUPLE_KEY_ENTRY
"""A blob: its ``(channel, version)`` key and its entry."""

VALUE = PAIR + BYTES
"""What a blob that holds a value adds: the ``(type, bytes)`` pair and the bytes header."""

WRITE = sys.getsizeof(WriteRecord("", 0, "", "", b"", "")) + BYTES + PAIR + TUPLE_KEY_ENTRY
"""A pending write: its record, its value's bytes header, its ``(task_id, idx)`` key and entry."""

TASK = 2 * STR
"""A task's writes at a checkpoint: the headers of the id and path strings they share."""

WRITE_SET = TUPLE_DICT + STR_KEY_ENTRY
"""The writes of one checkpoint: their dict and its entry."""

RUN = STR + STR_KEY_ENTRY + SET + SET_ENTRY
"""A run a thread holds: its id's header, its entry in the run index and its set of holders, its entry
in the thread's run set."""

TOMBSTONE = sys.getsizeof(DroppedThread("", "", 0.0, 0.0, None, 0.0)) + 2 * FLOAT + LRU_ENTRY + 2 * STR
"""A tombstone: its record, when it was dropped (by the store's clock and by the wall clock), its entry,
the headers of the ids it keeps (their text is its ``nbytes``)."""

REFUSAL = sys.getsizeof(RefusedCheckpoint("", "", "", "", 0.0)) + LRU_ENTRY + 3 * STR
"""A refused checkpoint remembered: its record, its entry, the headers of the ids it keeps."""

PARKED = sys.getsizeof(ParkedWrites("", "", "", (), 0)) + sys.getsizeof(()) + INT + LRU_ENTRY + 3 * STR
"""Parked writes: their record, its tuple of writes and its count of bytes, its entry, the headers of the
ids it keeps (each write adds ``PARKED_WRITE`` beside its counted bytes: ``parked_writes_bytes``)."""

PARKED_WRITE = TUPLE_SLOT + sys.getsizeof(WriteRecord("", 0, "", "", b"", "")) + BYTES + 2 * STR
"""One parked write: its slot, its record, its value's bytes header, its id and path headers."""


# --- the varying part (variable_overhead), one function per kind of object; the write transactions inline them ---


def text(value: str) -> int:
    """What a str holds beyond ``STR``: a byte per character if it is ASCII; else a wider header and
    one to four bytes per character, by its widest (the interpreter's compact layout; a UTF-8 copy
    it may cache beside is left out).

    Runtime complexity: O(1) for ASCII text, O(length) otherwise.
    """
    if value.isascii():
        return len(value)
    widest = max(value)
    width = 1 if widest <= "\xff" else 2 if widest <= "\uffff" else 4
    return _WIDE[width] - STR + (len(value) + 1) * width


def namespace_text(name: str) -> int:
    """A namespace's name: its str, none for the root's ``""`` (the interpreter's one empty string).

    Runtime complexity: O(1) for ASCII text, O(length) otherwise.
    """
    return STR + text(name) if name else 0


def number(version: object) -> int:
    """A number a blob key holds as its version: a float, or an int past the shared small ones.

    Runtime complexity: O(1).
    """
    if type(version) is float:
        return FLOAT
    return INT if type(version) is int and version not in SMALL_INTS else 0


def record_overhead(record: CheckpointRecord) -> int:
    """Its id's text and its versions tuple's slots. Runtime complexity: O(1) for an ASCII id."""
    return text(record.checkpoint_id) + TUPLE_SLOT * len(record.versions)


def version_cost(version: object) -> int:
    """A version object: a str's header and text (a byte per character: versions are ASCII in practice),
    or a number (``number``). Runtime complexity: O(1).
    """
    return STR + len(version) if isinstance(version, str) else number(version)


def blobs_overhead(blobs: Mapping[BlobKey, Blob]) -> int:
    """A namespace's blobs: each value's containers, and each version object once per run of consecutive
    keys holding that very object (LangGraph gives every channel a step updates one version object;
    the keys of one put are consecutive).

    Runtime complexity: O(len(blobs)).
    """
    overhead = 0
    previous = None  # no version is None
    for (_, version), blob in blobs.items():
        if blob is not None:
            overhead += VALUE
        if version is not previous:
            overhead += version_cost(version)
            previous = version
    return overhead


def last_version(blobs: dict[BlobKey, Blob], pruning: Pruning | None, namespace: str) -> object:
    """The version object of the last of these blob keys that ``pruning`` keeps in ``namespace`` (None if none):
    the run a new key may go on. Runtime complexity: O(1) without a pruning, O(len(blobs)) with one.
    """
    removed: Collection[BlobKey] = ()
    if pruning is not None:
        if namespace in pruning.namespaces:
            return None
        removal = pruning.removals.get(namespace)
        removed = set(removal.blob_keys) if removal is not None else ()
    return next((key[1] for key in reversed(blobs) if key not in removed), None)


def write_set_overhead(stored: Mapping[tuple[str, int], WriteRecord]) -> int:
    """The writes of one checkpoint: their dict, the id and path strings of each run of consecutive
    writes of one task (a task's writes arrive together and share its strings), and each index past
    the shared small ints (``SMALL_INTS``; a negative index is one of LangGraph's special channels).

    Runtime complexity: O(len(stored)).
    """
    overhead = WRITE_SET
    previous = None
    top = SMALL_INTS[-1]
    for task_id, idx in stored:
        if task_id != previous:
            overhead += TASK + text(task_id)
            previous = task_id
        if idx > top:
            overhead += INT
    return overhead


def run_overhead(run_id: str) -> int:
    """A run a thread holds (``RUN``) and its id's text. Runtime complexity: O(1) for an ASCII id."""
    return RUN + text(run_id)


def namespace_overhead(space: Namespace) -> int:
    """Everything varying a namespace holds, recounted. Runtime complexity: O(size of the namespace)."""
    overhead = sum(record_overhead(record) for record in space.records.values())
    overhead += blobs_overhead(space.blobs)
    return overhead + sum(write_set_overhead(stored) for stored in space.writes.values())


def thread_overhead(thread: Thread) -> int:
    """A thread's ``variable_overhead``, recounted: its id and namespace names, its runs, its namespaces' contents.

    Runtime complexity: O(size of the thread).
    """
    overhead = text(thread.thread_id) + sum(run_overhead(run_id) for run_id in thread.runs)
    for name, space in thread.namespaces.items():
        overhead += namespace_text(name) + namespace_overhead(space)
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
    (net of what ``pruning`` frees; and a new thread, if ``thread_id``). Runtime complexity: O(1), or
    O(length) of a non-ASCII thread id.
    """
    if pruning is not None:
        freed = pruning.freed
        overhead -= freed.variable_overhead
        checkpoints -= freed.checkpoints
        writes -= freed.writes
        blobs -= freed.blobs
        namespaces -= freed.namespaces
    change = nbytes + overhead + CHECKPOINT * checkpoints + WRITE * writes + BLOB * blobs + NAMESPACE * namespaces
    return change if thread_id is None else change + THREAD + text(thread_id)
