"""The storage engine: threads of opaque serialized checkpoints, bounded.

The engine knows thread ids, namespaces, checkpoint and parent ids, run ids,
channel names, versions, serialized bytes, clocks, limits, LRU order and byte
totals. It never imports LangGraph and never looks inside a payload.
"""

from .errors import (
    CheckpointCapacityError,
    CheckpointRefusedError,
    ResumeRefusedError,
    ThreadEvictedError,
    ThreadQuarantinedError,
)
from .export import NamespaceExport, ThreadExport
from .limits import KIB, MIB, StoreLimits
from .reads import CheckpointRef
from .records import (
    Blob,
    ChannelHistory,
    CheckpointRecord,
    CheckpointView,
    Payload,
    Version,
    WriteRecord,
)
from .stats import StoreStats
from .store import Store
from .tombstones import DroppedThread, RefusedCheckpoint

__all__ = [
    "KIB",
    "MIB",
    "Blob",
    "ChannelHistory",
    "CheckpointCapacityError",
    "CheckpointRefusedError",
    "CheckpointRecord",
    "CheckpointRef",
    "CheckpointView",
    "DroppedThread",
    "NamespaceExport",
    "Payload",
    "RefusedCheckpoint",
    "ResumeRefusedError",
    "Store",
    "StoreLimits",
    "StoreStats",
    "ThreadEvictedError",
    "ThreadExport",
    "ThreadQuarantinedError",
    "Version",
    "WriteRecord",
]
