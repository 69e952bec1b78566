"""The plain values planners return and the state carries out unchanged.

A plan says what a change will remove and what that frees, computed before
anything changes, so that a write rejected for any reason changes nothing, and
so that carrying it out needs no recount. ``engine.lineage`` and
``engine.pruning`` make them; ``engine.state`` carries them out.
"""

from __future__ import annotations

from typing import NamedTuple

from .records import BlobKey
from .totals import Totals

__all__ = ["NO_PRUNING", "Pruning", "Removal"]


class Removal(NamedTuple):
    """Checkpoints (with their writes) and blobs to remove from one namespace, and what that frees.

    Attributes:
        checkpoint_ids: The checkpoints, each stored.
        blob_keys: The blobs no surviving checkpoint references.
        freed: What removing all of it frees (``namespaces`` is 0: an emptied
            namespace is the state's to remove).
    """

    checkpoint_ids: list[str]
    blob_keys: list[BlobKey]
    freed: Totals


class Pruning(NamedTuple):
    """What a write removes from its own thread to fit its limits.

    Attributes:
        namespaces: Namespaces removed whole (``on_namespace_limit="prune_oldest"``),
            each with what removing it frees (``namespaces`` 1, the name's text included).
        removals: Oldest checkpoints removed per namespace (``on_checkpoint_limit="prune_oldest"``).
        freed: What all of it frees.
    """

    namespaces: dict[str, Totals]
    removals: dict[str, Removal]
    freed: Totals


NO_PRUNING = Pruning({}, {}, Totals())
"""A plan that removes nothing."""
