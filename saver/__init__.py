"""A bounded, drop-in in-memory checkpointer for LangGraph.

Start with ``BoundedInMemorySaver`` (its docstring shows a graph compiled over it) and
``InMemoryCheckpointConfig``; ``TieredSaver`` puts it in front of a durable LangGraph saver.

The names below are loaded when first used, so that importing the storage engine
(``langgraph.checkpoint.bounded.engine``, which never imports LangGraph) does not
load LangGraph either.
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .compression import CompressingSerializer
    from .config import InMemoryCheckpointConfig
    from .engine import (
        BoundedSaverError,
        CheckpointCapacityError,
        CheckpointRefusedError,
        DroppedThread,
        InvalidArgumentError,
        StoreStats,
        ThreadEvictedError,
        ThreadExport,
        ThreadQuarantinedError,
        ThreadStorage,
    )
    from .interrupts import InterruptLostError
    from .payload_tags import PayloadTagError
    from .saver import BoundedInMemorySaver, InMemorySaver, SaverStats
    from .snapshot import LoadReport, SnapshotError
    from .tiered import (
        CheckpointConflictError,
        CheckpointTooLargeError,
        RetentionPolicy,
        RetentionStats,
        SchemaMismatchError,
        SweepReport,
        ThreadDeletedError,
        TieredSaver,
        TieredStats,
        UnstorableWriteError,
        WriteBack,
        WriteThrough,
    )
    from .tiered.storage import TieredThreadStorage
    from .transfer import copy_threads

try:
    __version__ = version("langgraph-checkpoint-bounded")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"

_EXPORTS = {
    "BoundedInMemorySaver": ".saver",
    "BoundedSaverError": ".engine",
    "CheckpointCapacityError": ".engine",
    "CheckpointConflictError": ".tiered",
    "CheckpointRefusedError": ".engine",
    "CheckpointTooLargeError": ".tiered",
    "CompressingSerializer": ".compression",
    "DroppedThread": ".engine",
    "InMemoryCheckpointConfig": ".config",
    "InMemorySaver": ".saver",
    "InvalidArgumentError": ".engine",
    "InterruptLostError": ".interrupts",
    "LoadReport": ".snapshot",
    "PayloadTagError": ".payload_tags",
    "RetentionPolicy": ".tiered",
    "RetentionStats": ".tiered",
    "SaverStats": ".saver",
    "SchemaMismatchError": ".tiered",
    "SnapshotError": ".snapshot",
    "StoreStats": ".engine",
    "SweepReport": ".tiered",
    "ThreadDeletedError": ".tiered",
    "ThreadEvictedError": ".engine",
    "ThreadExport": ".engine",
    "ThreadQuarantinedError": ".engine",
    "ThreadStorage": ".engine",
    "TieredSaver": ".tiered",
    "TieredStats": ".tiered",
    "TieredThreadStorage": ".tiered.storage",
    "UnstorableWriteError": ".tiered",
    "WriteBack": ".tiered",
    "WriteThrough": ".tiered",
    "copy_threads": ".transfer",
}

__all__ = [
    "BoundedInMemorySaver",
    "BoundedSaverError",
    "CheckpointCapacityError",
    "CheckpointConflictError",
    "CheckpointRefusedError",
    "CheckpointTooLargeError",
    "CompressingSerializer",
    "DroppedThread",
    "InMemoryCheckpointConfig",
    "InMemorySaver",
    "InterruptLostError",
    "InvalidArgumentError",
    "LoadReport",
    "PayloadTagError",
    "RetentionPolicy",
    "RetentionStats",
    "SaverStats",
    "SchemaMismatchError",
    "SnapshotError",
    "StoreStats",
    "SweepReport",
    "ThreadDeletedError",
    "ThreadEvictedError",
    "ThreadExport",
    "ThreadQuarantinedError",
    "ThreadStorage",
    "TieredSaver",
    "TieredStats",
    "TieredThreadStorage",
    "UnstorableWriteError",
    "WriteBack",
    "WriteThrough",
    "__version__",
    "copy_threads",
]


def __getattr__(name: str) -> Any:
    """Load an exported name from its module at first use (PEP 562). Runtime complexity: O(1) after the first."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
