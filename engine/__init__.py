"""The storage engine: threads of opaque serialized checkpoints, bounded.

The engine knows thread ids, namespaces, checkpoint and parent ids, run ids,
channel names, versions, serialized bytes, clocks, limits, LRU order and byte
totals. It never imports LangGraph and never looks inside a payload.
"""

from . import identifiers
from .errors import (
    CheckpointCapacityError,
    CheckpointRefusedError,
    ResumeRefusedError,
    ThreadEvictedError,
    ThreadQuarantinedError,
    dropped_how,
)
from .export import NamespaceExport, ThreadExport
from .hooks import Announcements, delivering
from .limits import KIB, MAX_WHOLE, MIB, StoreLimits
from .reads import CheckpointRef
from .records import (
    Blob,
    BlobKey,
    ChannelHistory,
    CheckpointRecord,
    CheckpointView,
    Payload,
    Version,
    WriteRecord,
    make_checkpoint_record,
    make_write_record,
    payload_size,
)
from .stats import StoreStats, render_rows, size_text
from .store import Store
from .tombstones import DroppedThread, RefusedCheckpoint, Tombstones

__all__ = [
    "KIB",
    "MAX_WHOLE",
    "MIB",
    "Announcements",
    "Blob",
    "BlobKey",
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
    "Tombstones",
    "Version",
    "WriteRecord",
    "delivering",
    "dropped_how",
    "identifiers",
    "make_checkpoint_record",
    "make_write_record",
    "payload_size",
    "render_rows",
    "size_text",
]
