"""Payload type tags checked where stored state comes in from outside the process.

A payload is the ``(type_tag, bytes)`` pair a serializer wrote. Reading it back
hands the pair to ``serde.loads_typed``, which picks a decoder by the tag, and
the ``"pickle"`` decoder runs whatever code the bytes name. The saver's own
writes are tagged by its own serializer, so they are trusted. Payloads that come
in whole, still serialized, are not: a snapshot file (``load``) and an export
(``import_thread``). Their tags are checked here before anything is stored, so
that a store whose serializer would not write pickle never holds a pickle
payload for that serializer, or for another saver it is exported to, to read.

How a serializer is judged:

- ``JsonPlusSerializer``: unpickles only with ``pickle_fallback=True``.
- ``EncryptedSerializer``: tags are ``"<inner tag>+<cipher>"`` (``"pickle+aes"``)
  or a bare inner tag (read unencrypted); the inner serializer decides.
- ``CompressingSerializer``: tags are ``"<inner tag>~<codec>"`` (``"pickle~zstd"``)
  or a bare inner tag; the inner serializer decides.
- Any other serializer: unpickles only if it says so with a true
  ``pickle_fallback`` attribute. This is the conservative reading: a serializer
  we do not know may unpickle, so it must opt in.

A tag's base type is the part before its first ``"+"`` (how
``EncryptedSerializer`` splits it) and its first ``"~"`` (a compression codec), compared without regard to case (a
serializer we do not know might not care about case).

The check cannot help a serializer that ignores tags: LangGraph's
``SerializerCompat`` around an untyped serializer (``pickle`` itself, say)
decodes every payload the same way, whatever its tag. Against such a
serializer, only a signed snapshot (``snapshot_key``) keeps files trustworthy.
"""

from __future__ import annotations

from collections.abc import Iterator

from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

from .compression import CompressingSerializer, uncompressed_tag
from .engine import BoundedSaverError, CheckpointRecord, NamespaceExport, ThreadExport, WriteRecord

__all__ = [
    "PICKLE",
    "PayloadTagError",
    "allows_pickle",
    "base_type",
    "check_export",
    "payloads",
]

PICKLE = "pickle"
_UNDECLARED = object()
_ENCRYPTED_SEPARATOR = "+"
_SHOWN_CHARACTERS = 60  # of a tag or an identifier from outside: enough to recognize, not enough to flood a log


class PayloadTagError(BoundedSaverError, ValueError):
    """A payload's type tag is one this saver's serializer must not be given.

    Attributes:
        thread_id: The thread holding the payload.
        where: Which payload: namespace, checkpoint and field, write or blob.
        tag: The payload's type tag.
    """

    def __init__(self, thread_id: str, where: str, tag: str, serializer: str) -> None:
        self.thread_id = thread_id
        self.where = where
        self.tag = tag
        super().__init__(
            f"thread {_shown(thread_id)}: {where}: payload typed {_shown(tag)} refused: "
            f"the saver's serializer ({serializer}) does not unpickle; "
            "only a serializer with pickle_fallback=True accepts pickle payloads"
        )


def base_type(tag: str) -> str:
    """A tag without its cipher and compression suffixes, folded to lower case: ``"Pickle+aes"`` and
    ``"pickle~zstd+aes"`` give ``"pickle"``.

    Runtime complexity: O(length of the tag).
    """
    return uncompressed_tag(tag.split(_ENCRYPTED_SEPARATOR, 1)[0]).casefold()


def allows_pickle(serde: SerializerProtocol) -> bool:
    """Whether ``serde`` would unpickle a payload tagged ``"pickle"`` (see the module notes).

    Runtime complexity: O(depth of serializer wrapping).
    """
    while isinstance(serde, EncryptedSerializer | CompressingSerializer):
        serde = serde.serde  # decrypts or decompresses, then hands the inner tag to the inner serializer
    return bool(getattr(serde, "pickle_fallback", False))


def payloads(export: ThreadExport) -> Iterator[tuple[str, object]]:
    """Every payload tag of an export, with where it is, checkpoints first, then writes, then blobs.

    Parts that are not what an export holds are skipped: the engine rejects
    them with its own error when the export is stored.

    Runtime complexity: O(size of the export), lazily.
    """
    for tag, place in _tags(export):
        yield _where(place), tag


def check_export(export: ThreadExport, serde: SerializerProtocol) -> None:
    """Refuse an export holding a payload that ``serde`` must not be given.

    Raises:
        PayloadTagError: Naming the thread, the payload and its tag (the first one found).

    Runtime complexity: O(size of the export); O(1) if ``serde`` allows pickle.
    """
    if not isinstance(export, ThreadExport) or allows_pickle(serde):
        return
    for tag, place in _tags(export):
        if isinstance(tag, str) and base_type(tag) == PICKLE:
            raise PayloadTagError(export.thread_id, _where(place), tag, _describe(serde))


_Place = tuple[object, ...]  # what, namespace, then the identifiers that locate the payload: formatted only if shown


def _tags(export: ThreadExport) -> Iterator[tuple[object, _Place]]:
    """Each payload's tag with its place, as plain tuples: a load checks every payload of a file."""
    namespaces = export.namespaces if isinstance(export.namespaces, dict) else {}
    for name, space in namespaces.items():
        if not isinstance(space, NamespaceExport):
            continue
        for record in space.checkpoints if isinstance(space.checkpoints, tuple) else ():
            if isinstance(record, CheckpointRecord):
                yield record.checkpoint_type, ("checkpoint", name, record.checkpoint_id)
                yield record.metadata_type, ("metadata", name, record.checkpoint_id)
        for checkpoint_id, writes in space.writes.items() if isinstance(space.writes, dict) else ():
            for write in writes if isinstance(writes, tuple) else ():
                if isinstance(write, WriteRecord):
                    yield write.value_type, ("write", name, checkpoint_id, write.task_id, write.idx, write.channel)
        for key, blob in space.blobs.items() if isinstance(space.blobs, dict) else ():
            if isinstance(blob, tuple) and blob and isinstance(key, tuple) and len(key) == 2:
                yield blob[0], ("blob", name, *key)


def _where(place: _Place) -> str:
    kind, name, *ids = place
    prefix = f"namespace {_shown(name)}"
    if kind == "checkpoint":
        return f"{prefix}, checkpoint {_shown(ids[0])}"
    if kind == "metadata":
        return f"{prefix}, metadata of checkpoint {_shown(ids[0])}"
    if kind == "write":
        checkpoint_id, task_id, idx, channel = ids
        return (
            f"{prefix}, write ({_shown(task_id)}, {idx!r}) to channel {_shown(channel)} "
            f"of checkpoint {_shown(checkpoint_id)}"
        )
    channel, version = ids
    return f"{prefix}, value of channel {_shown(channel)} at version {_shown(version)}"


def _describe(serde: SerializerProtocol) -> str:
    if isinstance(serde, EncryptedSerializer | CompressingSerializer):
        return f"{type(serde).__name__} around {_describe(serde.serde)}"
    declared = getattr(serde, "pickle_fallback", _UNDECLARED)
    if declared is not _UNDECLARED:
        return f"{type(serde).__name__}(pickle_fallback={declared!r})"
    return f"{type(serde).__name__}, which does not declare pickle_fallback=True"


def _shown(value: object) -> str:
    """``repr`` of a value from outside, cut short: control characters escaped, length bounded."""
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARACTERS else f"{text[: _SHOWN_CHARACTERS - 3]}..."
