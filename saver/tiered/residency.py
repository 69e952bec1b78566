"""What the hot tier of ``TieredSaver`` holds of each thread, beyond its latest checkpoints.

The hot tier holds a recent *suffix* of each namespace it has: every
checkpoint from some id (the namespace's *floor*) on, with all their pending
writes. Its latest checkpoint of a namespace is always the durable tier's
latest (every write reaches both tiers, a read-through admits the latest it
read, and a thread that cannot take a write leaves memory whole), so a read of
the latest needs nothing from here. The reads that need more do:

* a checkpoint id the hot tier lacks: absent from the durable tier too when it
  is at or above the namespace's floor;
* ``list()`` with ``before``, ``filter`` or a ``limit`` reaching below the floor;
* ``get_delta_channel_history`` walking below it;
* a namespace the hot tier has not: absent from the durable tier too when the
  thread's namespaces are all known (``all_namespaces``: a thread the durable
  tier did not hold when it first came to memory).

A ``Residency`` describes one life of a hot thread: it is replaced whenever the
thread comes to memory anew, and forgotten when it leaves. Every change happens
with the hot store's lock held (``ResidencyLedger`` says so in each method), in
the same hold as the store operation it describes.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

__all__ = [
    "CEILINGS_BOUND",
    "COMPLETE",
    "EARLY_WRITES_BOUND",
    "KNOWN_EMPTY_BOUND",
    "SWEEP_FLOOR",
    "INEXACT_BOUND",
    "EarlyWrites",
    "Floor",
    "Residency",
    "ResidencyLedger",
]

COMPLETE = None
"""A floor meaning: every checkpoint of the namespace is hot (tested as ``floor is None``, which checkers narrow)."""

KNOWN_EMPTY_BOUND = 4_096
"""Threads remembered as held by neither tier (a thread's first read found nothing), the oldest forgotten first."""

INEXACT_BOUND = 4_096
"""Checkpoints remembered as holding writes admitted with made-up indexes and paths, the oldest forgotten first."""

CEILINGS_BOUND = 16_384
"""Namespaces whose greatest durable checkpoint id is remembered, the least recently written forgotten first."""

SWEEP_FLOOR = 1_024
"""Entries of stored lives kept before the first sweep of those whose thread left memory."""

EARLY_WRITES_BOUND = 16_384
"""Checkpoints remembered as having pending writes acknowledged before their put, the oldest forgotten first."""


class Floor(NamedTuple):
    """What is known of one namespace: whether it is described at all, and its floor (``COMPLETE``: every
    checkpoint of it is hot)."""

    described: bool
    floor: str | None


@dataclass
class Residency:
    """What one thread's hot copy holds.

    Invariant: for each namespace in ``floors``, the hot tier holds every
    checkpoint the durable tier (with write-back, plus the unflushed ones)
    holds in it whose id is at least its floor (every one when the floor is
    ``COMPLETE``), each with all its pending writes; with ``all_namespaces``,
    the durable tier has no namespace of the thread that is not in ``floors``.

    Attributes:
        floors: Namespace to its floor, or ``COMPLETE``.
        all_namespaces: Every namespace the thread has is in ``floors``.
        stored: It describes a thread stored in the hot tier (False: a thread
            known to be held by neither tier, so nothing is stored).
    """

    floors: dict[str, str | None] = field(default_factory=dict)
    all_namespaces: bool = False
    stored: bool = True

    def floor_of(self, namespace: str) -> Floor:
        """Whether the namespace is described, and its floor. Runtime complexity: O(1)."""
        if namespace in self.floors:
            return Floor(True, self.floors[namespace])
        return Floor(self.all_namespaces, COMPLETE)  # a namespace the thread does not have: complete, and empty

    def holds(self, namespace: str, checkpoint_id: str) -> bool:
        """Whether the hot tier holds the checkpoint if the durable tier does. Runtime complexity: O(1)."""
        described, floor = self.floor_of(namespace)
        return described and (floor is None or checkpoint_id >= floor)

    def complete(self) -> bool:
        """Whether the hot tier holds the whole thread. Runtime complexity: O(namespaces)."""
        return self.all_namespaces and all(floor is None for floor in self.floors.values())


class ResidencyLedger:
    """The ``Residency`` of every hot thread, and of threads known to be held by neither tier.

    Invariant: an entry with ``stored`` describes the thread's current life in
    the hot store, or is stale and then ignored: a reader passes whether the
    thread is stored, and an entry whose ``stored`` differs is no answer. A new
    life always replaces the entry (``came_to_memory``). Entries not ``stored``
    are at most ``KNOWN_EMPTY_BOUND``; stale entries of lives that left memory
    are swept once the stored entries pass ``sweep_at`` (twice what the last
    sweep kept), so they are bounded by twice the hot threads, amortized O(1)
    per new life. Every method runs with the hot store's lock held.
    """

    def __init__(self) -> None:
        self.entries: dict[str, Residency] = {}
        self.empty: OrderedDict[str, None] = OrderedDict()  # the entries not stored, oldest first
        self.sweep_at = SWEEP_FLOOR
        # (thread, namespace) to the greatest checkpoint id this process saw the durable tier hold there (written or
        # admitted), outliving the thread's hot copy: a put starting a new hot copy must sort above it to become
        # the hot latest (a clock behind, or stepped back, makes ids that sort below)
        # the key (thread, None) holds a ceiling for every namespace of the thread (a copy into it)
        self.ceilings: OrderedDict[tuple[str, str | None], str] = OrderedDict()
        # (thread, namespace, checkpoint) whose pending writes a read-through admitted with made-up indexes and
        # task paths (a durable saver whose tables are not read): a later write to it is not kept hot
        self.inexact: OrderedDict[tuple[str, str, str], None] = OrderedDict()

    def mark_inexact(self, thread_id: str, namespace: str, checkpoint_id: str) -> None:
        """The checkpoint's admitted writes have made-up indexes and paths. Runtime complexity: O(1) amortized."""
        self.inexact[(thread_id, namespace, checkpoint_id)] = None
        while len(self.inexact) > INEXACT_BOUND:
            self.inexact.popitem(last=False)

    def is_inexact(self, thread_id: str, namespace: str, checkpoint_id: str) -> bool:
        """Whether the checkpoint's hot writes were admitted with made-up indexes and paths (and forget it: the
        caller keeps the thread out of memory). Runtime complexity: O(1)."""
        if not self.inexact:
            return False
        return self.inexact.pop((thread_id, namespace, checkpoint_id), False) is None

    def ceiling(self, thread_id: str, namespace: str) -> str | None:
        """The greatest checkpoint id this process saw the durable tier hold in the namespace, if remembered.

        Runtime complexity: O(1).
        """
        if not self.ceilings:
            return None
        own, every = self.ceilings.get((thread_id, namespace)), self.ceilings.get((thread_id, None))
        return own if every is None else every if own is None else max(own, every)

    def raise_ceiling(self, thread_id: str, namespace: str | None, checkpoint_id: str) -> None:
        """The durable tier holds ``checkpoint_id`` in the namespace (a write of it, or a read that found it); in
        some namespace of the thread, for ``None`` (a copy into the thread, whose namespaces are not read).

        Runtime complexity: O(1) amortized.
        """
        key = (thread_id, namespace)
        current = self.ceilings.pop(key, None)
        self.ceilings[key] = checkpoint_id if current is None else max(current, checkpoint_id)
        while len(self.ceilings) > CEILINGS_BOUND:
            self.ceilings.popitem(last=False)

    def sweep_if_due(self, stored: Callable[[str], bool]) -> int:
        """Forget the entries of lives whose thread left memory, once there are ``sweep_at`` entries of
        stored lives; return how many went. Runtime complexity: O(1), or O(entries) once per that many
        new lives.
        """
        if len(self.entries) - len(self.empty) <= self.sweep_at:
            return 0
        gone = [thread_id for thread_id, entry in self.entries.items() if entry.stored and not stored(thread_id)]
        for thread_id in gone:
            del self.entries[thread_id]
        self.sweep_at = max(SWEEP_FLOOR, 2 * (len(self.entries) - len(self.empty)))
        return len(gone)

    def lookup(self, thread_id: str, stored: bool) -> Residency | None:
        """The thread's residency if it describes the thread as it is (stored or not). Runtime complexity: O(1)."""
        entry = self.entries.get(thread_id)
        return entry if entry is not None and entry.stored == stored else None

    def came_to_memory(self, thread_id: str, namespace: str, floor: str | None) -> Residency:
        """A new life: the thread was not stored, and a write or an admission just stored ``namespace``
        from ``floor`` on. A thread known to be held by neither tier starts with every namespace known.

        Runtime complexity: O(1).
        """
        known_empty = thread_id in self.empty
        self._unmark_empty(thread_id)
        entry = Residency({namespace: COMPLETE if known_empty else floor}, all_namespaces=known_empty)
        self.entries[thread_id] = entry
        return entry

    def came_with_writes_only(self, thread_id: str) -> None:
        """A new life that holds pending writes and no checkpoint yet. Runtime complexity: O(1)."""
        known_empty = thread_id in self.empty
        self._unmark_empty(thread_id)
        self.entries[thread_id] = Residency({}, all_namespaces=known_empty)

    def stored_namespace(self, thread_id: str, namespace: str, floor: str | None) -> None:
        """A stored thread's write or admission stored a namespace it had not, from ``floor`` on (a namespace
        it has keeps its floor: a write's checkpoint is its newest). Runtime complexity: O(1).
        """
        entry = self.entries.get(thread_id)
        if entry is not None and entry.stored and namespace not in entry.floors:
            entry.floors[namespace] = COMPLETE if entry.all_namespaces else floor

    def lower_floor(self, thread_id: str, namespace: str, floor: str | None) -> None:
        """An admission stored every durable checkpoint of a namespace from ``floor`` up to the ones it held:
        the suffix it holds grows downward. Runtime complexity: O(1).
        """
        entry = self.entries.get(thread_id)
        if entry is None or not entry.stored:
            return
        current = entry.floors.get(namespace, floor)
        if floor is None or current is None:
            entry.floors[namespace] = COMPLETE if floor is None else current
        else:
            entry.floors[namespace] = min(floor, current)

    def reset(self, thread_id: str, namespace: str, floor: str | None) -> None:
        """An operation changed the thread in ways not tracked (pruning, a drop and return): keep only what
        it guarantees, ``namespace`` from ``floor`` on. Runtime complexity: O(1).
        """
        self._unmark_empty(thread_id)
        self.entries[thread_id] = Residency({namespace: floor}, all_namespaces=False)

    def known_empty(self, thread_id: str) -> None:
        """The thread is held by neither tier (a read found nothing, or it was deleted). Runtime complexity: O(1)."""
        self.entries[thread_id] = Residency({}, all_namespaces=True, stored=False)
        self.empty.pop(thread_id, None)
        self.empty[thread_id] = None
        while len(self.empty) > KNOWN_EMPTY_BOUND:
            oldest, _ = self.empty.popitem(last=False)
            self.entries.pop(oldest, None)

    def forget(self, thread_id: str) -> None:
        """Nothing is known of the thread any more (it left memory, or changed in the durable tier).

        Runtime complexity: O(1).
        """
        self.entries.pop(thread_id, None)
        self.empty.pop(thread_id, None)

    def forget_stored(self, thread_id: str) -> None:
        """Forget the thread's entry if it describes a stored life (one that just left memory).

        Runtime complexity: O(1).
        """
        entry = self.entries.get(thread_id)
        if entry is not None and entry.stored:
            del self.entries[thread_id]

    def _unmark_empty(self, thread_id: str) -> None:
        self.empty.pop(thread_id, None)

    def __len__(self) -> int:
        return len(self.entries)


class EarlyWrites:
    """Pending writes acknowledged before their checkpoint's put reached the hot tier.

    LangGraph's ``durability="async"`` and ``"exit"`` write a step's pending
    writes while its checkpoint's put is still under way. The hot tier keeps
    such writes beside the thread until the put arrives, unless the thread
    leaves memory in between (evicted, expired, left out): the put would then
    store the checkpoint without them, and the hot copy would answer without
    its interrupts and errors. So every such batch is counted here, and the
    put compares the count with the writes the hot tier still holds for the
    checkpoint (``Store.held_writes``): fewer, and the checkpoint is not kept
    hot (it is read from the durable tier, which has them all).

    Invariant: at most ``EARLY_WRITES_BOUND`` entries, each a positive count of
    write records, the oldest forgotten first (a run that died before its put
    leaves one behind; a forgotten entry's checkpoint is then trusted as the
    engine holds it). Every method runs with the hot store's lock held.
    """

    def __init__(self) -> None:
        self.counts: OrderedDict[tuple[str, str, str], int] = OrderedDict()

    def arrived(self, thread_id: str, namespace: str, checkpoint_id: str, records: int) -> None:
        """A batch of ``records`` writes for a checkpoint the hot tier does not hold was acknowledged.

        Runtime complexity: O(1).
        """
        key = (thread_id, namespace, checkpoint_id)
        self.counts[key] = self.counts.pop(key, 0) + records
        if len(self.counts) > EARLY_WRITES_BOUND:
            self.counts.popitem(last=False)

    def expected(self, thread_id: str, namespace: str, checkpoint_id: str) -> int:
        """Writes acknowledged for the checkpoint before its put (0: none known). Runtime complexity: O(1)."""
        return self.counts.get((thread_id, namespace, checkpoint_id), 0) if self.counts else 0

    def settled(self, thread_id: str, namespace: str, checkpoint_id: str) -> None:
        """The checkpoint's put reached the hot tier: nothing more to compare. Runtime complexity: O(1)."""
        if self.counts:
            self.counts.pop((thread_id, namespace, checkpoint_id), None)

    def check(self) -> None:
        """Raise ``AssertionError`` if the invariant does not hold. Runtime complexity: O(entries)."""
        assert len(self.counts) <= EARLY_WRITES_BOUND, "early writes past their bound"
        assert all(count > 0 for count in self.counts.values()), "an early-writes count that is not positive"
