"""The storage engine: threads of opaque serialized checkpoints, bounded.

The engine knows thread ids, namespaces, checkpoint and parent ids, run ids,
channel names, versions, serialized bytes, clocks, limits, LRU order and byte
totals. It never imports LangGraph and never looks inside a payload.
"""

from engine.errors import CheckpointCapacityError, ThreadEvictedError
from engine.export import NamespaceExport, ThreadExport
from engine.limits import KIB, MIB, StoreLimits
from engine.reads import CheckpointRef
from engine.records import (
    Blob,
    ChannelHistory,
    CheckpointRecord,
    CheckpointView,
    Payload,
    Version,
    WriteRecord,
)
from engine.stats import StoreStats
from engine.store import Store
from engine.tombstones import DroppedThread

__all__ = [
    "KIB",
    "MIB",
    "Blob",
    "ChannelHistory",
    "CheckpointCapacityError",
    "CheckpointRecord",
    "CheckpointRef",
    "CheckpointView",
    "DroppedThread",
    "NamespaceExport",
    "Payload",
    "Store",
    "StoreLimits",
    "StoreStats",
    "ThreadEvictedError",
    "ThreadExport",
    "Version",
    "WriteRecord",
]
