"""A bounded, drop-in in-memory checkpointer for LangGraph.

```python
from saver import InMemorySaver, InMemoryCheckpointConfig

checkpointer = InMemorySaver(config=InMemoryCheckpointConfig(max_threads=250))
graph = builder.compile(checkpointer=checkpointer)
```
"""

from engine import CheckpointCapacityError, DroppedThread, StoreStats, ThreadEvictedError, ThreadExport
from saver.config import InMemoryCheckpointConfig
from saver.payload_tags import PayloadTagError
from saver.saver import BoundedInMemorySaver, InMemorySaver
from saver.snapshot import LoadReport, SnapshotError
from saver.transfer import copy_threads

__all__ = [
    "BoundedInMemorySaver",
    "CheckpointCapacityError",
    "DroppedThread",
    "InMemoryCheckpointConfig",
    "InMemorySaver",
    "LoadReport",
    "PayloadTagError",
    "SnapshotError",
    "StoreStats",
    "ThreadEvictedError",
    "ThreadExport",
    "copy_threads",
]
