"""The storage engine: threads of opaque serialized checkpoints, bounded.

The engine knows thread ids, namespaces, checkpoint and parent ids, run ids,
channel names, versions, serialized bytes, clocks, limits, LRU order and byte
totals. It never imports LangGraph and never looks inside a payload.

``__all__`` is what a user of the engine alone needs: the ``Store``, its limits, records, stats, exports and
errors. The names imported with a redundant ``as`` (``X as X``) serve ``saver/`` (which reaches the engine
only through this module); they are not the engine's public API and may change.
"""

from . import identifiers as identifiers
from .errors import (
    BoundedSaverError,
    CheckpointCapacityError,
    CheckpointRefusedError,
    InvalidArgumentError,
    ResumeRefusedError,
    ThreadEvictedError,
    ThreadQuarantinedError,
)
from .errors import dropped_how as dropped_how
from .export import NamespaceExport, ThreadExport
from .hooks import Announcements as Announcements
from .hooks import delivering as delivering
from .limits import KIB, MIB, StoreLimits
from .limits import MAX_WHOLE as MAX_WHOLE
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
)
from .records import payload_size as payload_size
from .stats import StoreStats, ThreadStorage
from .stats import render_rows as render_rows
from .stats import size_text as size_text
from .store import Store
from .tombstones import DroppedThread
from .tombstones import Tombstones as Tombstones

__all__ = [
    "KIB",
    "MIB",
    "Blob",
    "BlobKey",
    "BoundedSaverError",
    "ChannelHistory",
    "CheckpointCapacityError",
    "CheckpointRecord",
    "CheckpointRef",
    "CheckpointRefusedError",
    "CheckpointView",
    "DroppedThread",
    "InvalidArgumentError",
    "NamespaceExport",
    "Payload",
    "ResumeRefusedError",
    "Store",
    "StoreLimits",
    "StoreStats",
    "ThreadEvictedError",
    "ThreadExport",
    "ThreadQuarantinedError",
    "ThreadStorage",
    "Version",
    "WriteRecord",
    "make_checkpoint_record",
    "make_write_record",
]
