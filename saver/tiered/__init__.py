"""``TieredSaver``: the bounded store as a hot tier over a durable LangGraph saver.

The hot tier is the engine with every limit it has; the durable tier (any
``BaseCheckpointSaver``: ``SqliteSaver``, ``PostgresSaver``, their async
variants, ``RedisSaver``...) holds everything. A thread leaving memory is not a
loss: it is still durable, and the next read brings it back.

* ``write="through"`` (the default, ``WriteThrough()``): ``put`` and ``put_writes`` return once
  the durable tier has acknowledged the write; then the hot tier holds it too.
  Checks about the write alone (identifiers, metadata the durable saver cannot
  store, deleted threads) come first, so a refused write is written nowhere; a
  durable failure raises and leaves the hot tier as it was. No hot limit
  refuses what the durable tier takes: the thread leaves memory instead.
* ``write="back"`` (``WriteBack(...)``): writes land in the hot tier and in a ledger of unflushed
  writes (``writeback``), flushed to the durable tier oldest first, parents
  first, bounded in bytes (``max_dirty_bytes``) and in age
  (``max_dirty_seconds``, a flush under way and the backlog's flush time
  counted): a write that would pass either waits for a flush, the oldest
  write first. A flush reads its first checkpoint's parent back before
  writing (a thread another process deleted is refused, not revived).
* Reads: a hot hit is served from memory; a miss reads the durable tier (one
  read per key for callers no write came between) and admits what it read, as
  the durable saver stores it (its backend's format: ``backends``).
* Removals act on both tiers; a deleted thread never comes back.
* No durable round trip happens with the engine's lock held, and no work goes
  to an event loop's default executor (``pools``).
* Several processes, one durable tier: sticky routing by default;
  ``WriteThrough(processes="many")`` checks each read and refuses a put another
  process's write made stale (``conditional``).

The modules, from the public face down (imports run one way):

* ``saver``: ``TieredSaver``, whose methods choose a path;
* ``puts``: ``put`` and ``put_writes`` through both tiers, one plan for both sides;
* ``removal``: deletions, copies and pruning, durable tier first;
* ``read_through``: misses, one durable read per key, and admission;
* ``hot_reads``: what the hot tier answers alone, and the coherence check;
* ``hot_writes``: the hot tier's side of writes, the checks that refuse a
  write before anything is written, and conditional puts;
* ``flushing``: write-back's flushes, backpressure, spills and delivery;
* ``state``: the state every ``with_allowlist()`` copy shares (``Shared``) and
  one copy's handle on both tiers (``Tiers``);
* ``retention``: the durable tier bounded too: ``RetentionPolicy``, its
  sweeps, one thread's removal in one durable transaction (a package of
  its own);
* ``storage``: a thread's size in both tiers (``TieredSaver.thread_storage``);
* ``settings``, ``stats``: the modes and their checks; ``TieredStats``,
  retention's ``SweepReport`` and ``RetentionStats``;
* ``writeback``, ``residency``, ``coordination``, ``landing``: the ledger of
  unflushed writes, what a hot copy holds, how callers keep out of each
  other's way, the durable puts under way (which retention's discovery waits for);
* ``group_commit``: many threads' unflushed writes in one durable transaction
  (write-back's flushes), and write-through's puts on the same path, through
  the backend that owns the saver's SQL;
* ``durable``, ``conditional``, ``pools``: the durable saver called on either
  side, conditional puts, and the saver's own worker pools;
* ``backends``: each durable saver family in one file (a folder), the only
  place with SQL or a durable saver's connection: ``sqlite`` (``SqliteSaver``,
  ``AsyncSqliteSaver``), ``postgres`` (``PostgresSaver``, ``AsyncPostgresSaver``:
  one connection, pipeline, pool), ``generic`` (any other saver, through its
  API, and ``InMemorySaver``), ``sql`` (what the two SQL families share), behind
  ``base.Backend`` and ``backend_for(saver)``. Each SQL family declares its
  tables (``SCHEMA``), checked against the saver's before our SQL first runs
  (``SchemaMismatchError``).
"""

from .backends import SchemaMismatchError
from .conditional import CheckpointConflictError
from .coordination import ThreadDeletedError, UnstorableWriteError
from .retention import RetentionPolicy
from .saver import TieredSaver
from .settings import Oversize, Processes, WriteBack, WriteThrough
from .stats import RetentionStats, SweepReport, TieredStats
from .storage import CheckpointTooLargeError

__all__ = [
    "CheckpointConflictError",
    "CheckpointTooLargeError",
    "Oversize",
    "Processes",
    "RetentionPolicy",
    "RetentionStats",
    "SchemaMismatchError",
    "SweepReport",
    "ThreadDeletedError",
    "TieredSaver",
    "TieredStats",
    "UnstorableWriteError",
    "WriteBack",
    "WriteThrough",
]
