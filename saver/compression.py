"""``CompressingSerializer``: stored values compressed, for either saver and for any durable LangGraph saver.

A serializer that wraps another, the way LangGraph's ``EncryptedSerializer``
does: ``dumps_typed`` serializes with the inner serializer, then compresses
what is at least ``threshold_bytes`` long and comes out smaller, and tags it
``"<inner tag>~<codec>"`` (``"msgpack~zstd"``); ``loads_typed`` decompresses a
tagged value and hands the rest to the inner serializer untouched. So:

* rows written before compression was turned on (no ``~`` suffix) still read,
  and a value too small to be worth it is stored as the inner serializer wrote it;
* any LangGraph saver given the same serializer (``SqliteSaver(conn,
  serde=CompressingSerializer())``) reads what ours wrote, and the reverse;
* it composes with ``EncryptedSerializer``: compress, then encrypt
  (``EncryptedSerializer(cipher, serde=CompressingSerializer())``; ciphertext
  does not compress). The encrypted tag is ``"msgpack~zstd+aes"``: its ``+``
  split, which ``EncryptedSerializer`` makes at the first ``+``, is unaffected,
  since this serializer never writes a ``+``;
* the memory saver counts the bytes it stores, so its byte limits
  (``max_total_bytes``, ``max_checkpoint_bytes``...) count the compressed size,
  and a byte budget holds more threads; ``TieredSaver`` uses its durable
  saver's serializer for both tiers, so both hold the compressed form.

A value made of pieces this serializer already wrote (``join``: ``TieredSaver``'s
SQLite rows, spliced from its hot tier's values) keeps their zstd frames, one
after the other, tagged ``"<inner tag>~zstd-frames"``; ``loads_typed`` reads
them one frame at a time and refuses a truncated one.

Codecs: ``"zstd"`` (the ``compression`` extra, ``zstandard``; Python 3.14's
standard ``compression.zstd`` where there is one) or ``"zlib"`` (the standard
library, always there). The default is zstd when it is installed, else zlib.
A value tagged with a codec this process cannot decode raises a ``ValueError``
that names the codec and the extra to install.
"""

from __future__ import annotations

import importlib
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from .engine import InvalidArgumentError

__all__ = [
    "CODECS",
    "DEFAULT_LEVELS",
    "DEFAULT_THRESHOLD_BYTES",
    "FRAMES",
    "SEPARATOR",
    "Codec",
    "CompressingSerializer",
    "uncompressed_tag",
    "zstd_available",
]

Codec = Literal["zstd", "zlib"]
CODECS: tuple[Codec, ...] = ("zstd", "zlib")

SEPARATOR = "~"
"""Between the inner serializer's tag and the codec's name: never ``+``, which ``EncryptedSerializer`` splits at."""

DEFAULT_THRESHOLD_BYTES = 1024
"""Values shorter than this, serialized, are stored as they are (``benchmarks/compression.py`` measures why)."""

DEFAULT_LEVELS: dict[Codec, int] = {"zstd": 1, "zlib": 1}
"""The fastest level of each codec: chat text still shrinks about threefold with zstd."""


FRAMES = "zstd-frames"
"""The codec tag of a value stored as zstd frames one after the other (``CompressingSerializer.join``), whose
contents, concatenated, are the inner serializer's bytes. Read by any ``CompressingSerializer`` that has zstd."""


@dataclass(frozen=True)
class _Functions:
    compress: Callable[[bytes, int], bytes]
    decompress: Callable[[bytes], bytes]
    decompress_frames: Callable[[bytes], bytes]
    content_size: Callable[[bytes], int]


_IDLE = 16
"""Idle zstd contexts kept for reuse, per level and for decompression: at most 16 of each. Measured (RSS, level 1,
values of 170 KB): 16 compressors hold 2.9 MiB after use, 16 decompressors 1.3 MiB; higher levels hold more."""


def _zstd() -> _Functions | None:
    """zstd's functions: the standard library's (Python 3.14+), else ``zstandard``'s, else None."""
    try:
        standard: Any = importlib.import_module("compression.zstd")
    except ImportError:
        standard = None
    if standard is not None:  # its decompress reads frames one after the other, and refuses a truncated one
        return _Functions(
            lambda data, level: standard.compress(data, level),
            standard.decompress,
            standard.decompress,
            lambda frame: -1 if (size := standard.get_frame_info(frame).decompressed_size) is None else int(size),
        )
    try:
        zstandard: Any = importlib.import_module("zstandard")
    except ImportError:
        return None

    # A context is costly to make and to warm: about 10 µs, and about 200 µs more where a thread uses a context of
    # its own for the first time (page faults; LangGraph runs a sync graph's puts on new threads every run). So
    # idle contexts are shared by every thread: taken off a list while in use (zstandard's objects must not be used
    # by two threads at once; list.pop and list.append are atomic), put back after, at most _IDLE of each kept.
    idle_compressors: dict[int, list[Any]] = {}
    idle_decompressors: list[Any] = []

    def compress(data: bytes, level: int) -> bytes:
        idle = idle_compressors.get(level)
        if idle is None:
            idle = idle_compressors.setdefault(level, [])
        try:
            compressor = idle.pop()
        except IndexError:
            compressor = zstandard.ZstdCompressor(level=level)
        compressed: bytes = compressor.compress(data)
        if len(idle) < _IDLE:
            idle.append(compressor)
        return compressed

    def decompress(data: bytes) -> bytes:
        # A frame of ours holds its content size (ZstdCompressor.compress writes it), so one call suffices; one that
        # does not (another writer's) is read as a stream.
        if zstandard.frame_content_size(data) < 0:
            return decompress_frames(data)
        try:
            decompressor = idle_decompressors.pop()
        except IndexError:
            decompressor = zstandard.ZstdDecompressor()
        content: bytes = decompressor.decompress(data)
        if len(idle_decompressors) < _IDLE:
            idle_decompressors.append(decompressor)
        return content

    def decompress_frames(data: bytes) -> bytes:
        # One frame at a time: zstandard's read_across_frames returns a truncated last frame's part without a word.
        decompressor = zstandard.ZstdDecompressor()
        contents: list[bytes] = []
        rest = data
        while rest:
            frame = decompressor.decompressobj()
            contents.append(frame.decompress(rest))
            if not frame.eof:
                raise zstandard.ZstdError("a zstd frame is truncated")
            rest = frame.unused_data
        return b"".join(contents)

    return _Functions(compress, decompress, decompress_frames, zstandard.frame_content_size)


def _no_frames(data: bytes) -> Any:
    raise InvalidArgumentError("zlib values are one stream: they have no frames")


_ZSTD = _zstd()
_ZLIB = _Functions(lambda data, level: zlib.compress(data, level), zlib.decompress, _no_frames, _no_frames)
_LEVELS: dict[Codec, range] = {"zstd": range(-7, 23), "zlib": range(0, 10)}


def zstd_available() -> bool:
    """Whether this process can write and read zstd (``pip install 'langgraph-checkpoint-bounded[compression]'``).
    Runtime complexity: O(1)."""
    return _ZSTD is not None


def _functions(codec: str) -> _Functions:
    if codec == "zlib":
        return _ZLIB
    if codec == "zstd" or codec == FRAMES:
        if _ZSTD is None:
            raise InvalidArgumentError(
                "a value is compressed with zstd, which this process cannot read: install the compression extra "
                "(pip install 'langgraph-checkpoint-bounded[compression]', which brings zstandard)"
            )
        return _ZSTD
    raise InvalidArgumentError(
        f"a value is tagged with the unknown compression codec {codec!r:.40}: expected one of {CODECS}"
    )


class CompressingSerializer(SerializerProtocol):
    """A serializer that compresses what another one writes, when it is long enough to be worth it.

    Pass it as ``serde=`` to ``BoundedInMemorySaver``, to a durable LangGraph
    saver under ``TieredSaver`` (which uses it for both tiers), or to any
    LangGraph saver: each then reads what the others wrote with it, and
    values written without it.

    Args:
        serde: The serializer that turns objects into bytes (LangGraph's ``JsonPlusSerializer`` with
            ``pickle_fallback=False`` if omitted, the memory saver's default).
        threshold_bytes: Serialized values shorter than this are stored uncompressed (at least 0).
        level: The codec's level (None: ``DEFAULT_LEVELS``, the fastest); zstd takes -7 to 22, zlib 0 to 9.
        codec: ``"zstd"`` or ``"zlib"`` (None: zstd where it is installed, else zlib).

    Raises:
        ValueError: A setting out of range, naming it, or ``codec="zstd"`` without zstd installed.

    Runtime complexity: ``dumps_typed`` costs the inner serializer's, plus compressing values at or over the
    threshold (zstd level 1: about 1 ns per byte, measured by ``benchmarks/compression.py``); ``loads_typed``
    the inner's, plus decompressing tagged values.

    Example:
        ```python
        from langgraph.checkpoint.bounded import BoundedInMemorySaver, CompressingSerializer

        saver = BoundedInMemorySaver(serde=CompressingSerializer())
        tag, data = saver.serde.dumps_typed({"text": "hello " * 1000})
        assert tag.endswith(("~zstd", "~zlib")) and len(data) < 1000
        assert saver.serde.loads_typed((tag, data)) == {"text": "hello " * 1000}
        ```
    """

    def __init__(
        self,
        serde: SerializerProtocol | None = None,
        *,
        threshold_bytes: int = DEFAULT_THRESHOLD_BYTES,
        level: int | None = None,
        codec: Codec | None = None,
    ) -> None:
        if isinstance(threshold_bytes, bool) or not isinstance(threshold_bytes, int) or threshold_bytes < 0:
            raise InvalidArgumentError(
                f"threshold_bytes must be a whole number of bytes, at least 0, got {threshold_bytes!r:.40}"
            )
        if codec is None:
            codec = "zstd" if _ZSTD is not None else "zlib"
        if codec not in CODECS:
            raise InvalidArgumentError(f"codec must be one of {CODECS}, got {codec!r:.40}")
        if codec == "zstd" and _ZSTD is None:
            _functions("zstd")  # raises, naming the extra
        chosen = DEFAULT_LEVELS[codec] if level is None else level
        if isinstance(chosen, bool) or not isinstance(chosen, int) or chosen not in _LEVELS[codec]:
            span = _LEVELS[codec]
            raise InvalidArgumentError(
                f"level for {codec} must be a whole number from {span[0]} to {span[-1]}, got {level!r:.40}"
            )
        self.serde: SerializerProtocol = serde if serde is not None else JsonPlusSerializer(pickle_fallback=False)
        self.threshold_bytes = threshold_bytes
        self.level = chosen
        self.codec: Codec = codec
        self._suffix = f"{SEPARATOR}{codec}"
        self._compress = _functions(codec).compress

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        """The inner serializer's ``(tag, bytes)``, compressed and tagged ``"<tag>~<codec>"`` when the bytes are
        at least ``threshold_bytes`` long and come out smaller. Runtime complexity: see the class."""
        tag, data = self.serde.dumps_typed(obj)
        if len(data) < self.threshold_bytes or SEPARATOR in tag:
            return tag, data
        return self._compressed(tag, data)

    def _compressed(self, tag: str, data: bytes) -> tuple[str, bytes]:
        compressed = self._compress(data, self.level)
        if len(compressed) >= len(data):
            return tag, data  # incompressible (already compressed media, ciphertext): stored as it is
        return f"{tag}{self._suffix}", compressed

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        """The object a ``(tag, bytes)`` pair holds: decompressed first when its tag names a codec.

        Raises:
            ValueError: The tag names a codec this process cannot decode (naming the extra to install).

        Runtime complexity: see the class.
        """
        tag, payload = data
        inner, separator, codec = tag.rpartition(SEPARATOR)
        if not separator or (codec not in CODECS and codec != FRAMES):
            return self.serde.loads_typed(data)
        functions = _functions(codec)
        decompress = functions.decompress_frames if codec == FRAMES else functions.decompress
        return self.serde.loads_typed((inner, decompress(payload)))

    def join(self, inner_tag: str, parts: Sequence[bytes | tuple[str, bytes]]) -> tuple[str, bytes]:
        """What ``dumps_typed`` stores for an object the inner serializer writes, tagged ``inner_tag``, as the
        concatenation of ``parts``, without compressing again what is compressed already.

        A part is the inner serializer's bytes, or a ``(tag, bytes)`` this serializer wrote for a piece of them
        (``inner_tag``, compressed or not). With zstd, a part stored compressed is kept as its frame, each run of
        the other parts is compressed into a frame of its own, and the value, if it has more than one frame, is
        tagged ``"<inner_tag>~zstd-frames"``; otherwise (zlib, or nothing compressed yet) it is ``dumps_typed``'s
        own bytes for the concatenation. Either way ``loads_typed`` reads the object back.

        Runtime complexity: compressing the parts not compressed yet, decompressing the compressed ones only where
        they cannot be kept (zlib, or the whole shorter than ``threshold_bytes``).
        """
        kept = f"{inner_tag}{self._suffix}" if self.codec == "zstd" else None  # a frame kept as it is
        if kept is not None and any(type(part) is tuple and part[0] == kept for part in parts):
            content_size = _functions(self.codec).content_size
            stored: list[bytes] = []
            run: list[bytes] = []
            size = 0
            for part in parts:
                if type(part) is tuple and part[0] == kept:
                    if run:
                        stored.append(self._compress(b"".join(run), self.level))
                        run = []
                    stored.append(part[1])
                    known = content_size(part[1])  # -1: a frame that does not say (not one of ours)
                    size += known if known >= 0 else -(1 << 62)
                else:
                    run.append(self._inner_bytes(inner_tag, part))
                    size += len(run[-1])
            if run:
                stored.append(self._compress(b"".join(run), self.level))
            data = b"".join(stored)
            if size >= self.threshold_bytes and len(data) < size:
                return (f"{inner_tag}{SEPARATOR}{FRAMES}" if len(stored) > 1 else kept), data
        whole = b"".join(self._inner_bytes(inner_tag, part) for part in parts)
        return (inner_tag, whole) if len(whole) < self.threshold_bytes else self._compressed(inner_tag, whole)

    def _inner_bytes(self, inner_tag: str, part: bytes | tuple[str, bytes]) -> bytes:
        if type(part) is not tuple:
            return part  # type: ignore[return-value]
        tag, payload = part
        if tag == inner_tag:
            return payload
        inner, _, codec = tag.rpartition(SEPARATOR)
        if inner != inner_tag:
            raise InvalidArgumentError(f"a part tagged {tag!r:.40} is not a piece of a {inner_tag!r:.40} value")
        functions = _functions(codec)
        return functions.decompress_frames(payload) if codec == FRAMES else functions.decompress(payload)

    def __repr__(self) -> str:
        return (
            f"CompressingSerializer({type(self.serde).__name__}, codec={self.codec!r}, level={self.level}, "
            f"threshold_bytes={self.threshold_bytes})"
        )


def uncompressed_tag(tag: str) -> str:
    """A payload tag without its compression suffix (``"msgpack~zstd"`` gives ``"msgpack"``). Runtime complexity:
    O(len(tag))."""
    return tag.split(SEPARATOR, 1)[0]
