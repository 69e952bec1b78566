"""The saver's settings: the engine's limits plus how async methods behave."""

from __future__ import annotations

from dataclasses import dataclass

from engine import KIB, StoreLimits


@dataclass(frozen=True)
class InMemoryCheckpointConfig(StoreLimits):
    """Settings of ``BoundedInMemorySaver``; every field has the reference default.

    Example:
        ```python
        InMemoryCheckpointConfig(idle_ttl_seconds=30 * 60, max_threads=250)
        ```

    The limits (see ``engine.StoreLimits`` for each unit) are:
    ``idle_ttl_seconds`` (4 hours), ``max_threads`` (1,000),
    ``max_namespaces_per_thread`` (16), ``max_checkpoints_per_thread`` (1,000),
    ``max_checkpoint_bytes`` (1 MiB), ``max_pending_write_bytes`` (512 KiB),
    ``max_total_bytes`` (64 MiB), ``max_identifier_length`` (256) and
    ``max_namespace_depth`` (32).

    Invalid values (zero, negative, NaN, ``bool``, a fraction where a count is
    expected) raise ``ValueError`` naming the field.
    """

    async_offload_bytes: int = 64 * KIB  # bytes; async calls (de)serialize larger payloads in a worker thread
