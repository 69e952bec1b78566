"""``SqliteSaver``'s checkpoint row made from what the hot tier already serialized, instead of serializing the
whole checkpoint again.

``SqliteSaver`` stores a checkpoint with its channel values in one value: ``serde.dumps_typed(checkpoint)``, a
msgpack map. The hot tier has serialized each channel value already (``BatchPut.values``, and the skeleton for a
write-back). msgpack is context-free: a value nested in a map is written exactly as it is written alone. So the
row's bytes are the map's header, the other fields, then ``channel_values``' header and, for each channel, its
name and the hot tier's bytes: the same bytes ``SqliteSaver.put`` writes (``tests/tiered/test_group_commit.py``
pins them row for row), without encoding the messages a second time.

Under ``CompressingSerializer`` with zstd, a value the hot tier stored compressed is kept as its zstd frame
(``CompressingSerializer.join``): the row is the value's frames one after the other (tagged ``~zstd-frames``),
each read back by ``loads_typed``, so nothing is compressed twice either.

Only for the serializers whose bytes this knows: ``JsonPlusSerializer`` itself (not a subclass, nor an
instance whose ``dumps_typed`` was replaced) and ``CompressingSerializer`` over it. The fields and values the
hot tier did not encode are encoded by that same serializer. Any other serializer, and a value not stored as
msgpack (bytes; a pickle under ``pickle_fallback=True``; an encrypted value), gets ``None``: the caller
serializes the checkpoint whole, as before.

One difference remains, deliberately: ormsgpack refuses nesting past 255 levels in one call, and a channel
value sits two levels down in the whole checkpoint. A value nested 253 or 254 deep, which ``SqliteSaver.put``
would refuse (or pickle), is written here, and reads back intact.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import ormsgpack
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from ...compression import SEPARATOR, CompressingSerializer
from ...engine import Payload
from .base import BatchPut

__all__ = ["splicer"]

_MSGPACK = "msgpack"
_NIL = b"\xc0"  # msgpack's None: what JsonPlusSerializer stores as ("null", b"") stands for in a map
_CHANNEL_VALUES = "channel_values"
_CHANNEL_VALUES_KEY = ormsgpack.packb(_CHANNEL_VALUES)

Part = bytes | Payload
Dumps = Callable[[Any], Payload]
Splice = Callable[[BatchPut, Callable[[Payload], Any]], Payload | None]


def splicer(serde: Any) -> Splice | None:
    """How to make a ``BatchPut``'s ``SqliteSaver`` row from its encoded values under ``serde``, or None for a
    serializer whose bytes this cannot make (the caller serializes whole). Runtime complexity: O(1)."""
    compressing = serde if type(serde) is CompressingSerializer else None
    inner = compressing.serde if compressing is not None else serde
    if type(inner) is not JsonPlusSerializer or "dumps_typed" in vars(inner) or "dumps_typed" in vars(serde):
        return None
    dumps = inner.dumps_typed

    def splice(put: BatchPut, loads: Callable[[Payload], Any]) -> Payload | None:
        parts = _parts(put, loads, dumps)
        if parts is None:
            return None
        if compressing is None:
            return _MSGPACK, b"".join(parts)  # type: ignore[arg-type]  # a plain serializer writes no tuples
        return compressing.join(_MSGPACK, parts)

    return splice


def _parts(put: BatchPut, loads: Callable[[Payload], Any], dumps: Dumps) -> list[Part] | None:
    """The row's msgpack, in pieces: the checkpoint map with ``channel_values`` where the saver's own ``put``
    would have it. Runtime complexity: O(fields + channels), plus encoding the values the hot tier did not."""
    if put.given is None:  # a write-back's replay: the skeleton's fields, then channel_values (full_checkpoint's order)
        skeleton = _raw(put.skeleton, loads, dumps)
        if not skeleton:
            return None
        fields, body = _map_header_size(skeleton)
        if fields is None:
            return None
        values = _values(put.values, None, dumps)
        if values is None:
            return None
        return [_map_header(fields + 1), skeleton[body:], _CHANNEL_VALUES_KEY, *values]
    checkpoint = put.given[1]
    if type(checkpoint) is not dict or type(checkpoint.get(_CHANNEL_VALUES)) is not dict:
        return None
    keys = list(checkpoint)
    at = keys.index(_CHANNEL_VALUES)
    before = _fields({key: checkpoint[key] for key in keys[:at]}, dumps)
    after = _fields({key: checkpoint[key] for key in keys[at + 1 :]}, dumps)
    values = _values(put.values, checkpoint[_CHANNEL_VALUES], dumps)
    if before is None or after is None or values is None:
        return None
    return [_map_header(len(keys)), before, _CHANNEL_VALUES_KEY, *values, after]


def _values(encoded: Mapping[str, Payload], objects: dict[str, Any] | None, dumps: Dumps) -> list[Part] | None:
    """``channel_values``' map: each channel's name and its encoded value (``objects``: every channel, in the
    checkpoint's order, those the hot tier did not encode encoded now), or None for a value not in msgpack."""
    channels = encoded if objects is None else objects
    parts: list[Part] = [_map_header(len(channels))]
    for channel in channels:
        if type(channel) is not str:
            return None
        payload = encoded.get(channel)
        if payload is None:
            assert objects is not None
            payload = dumps(objects[channel])
        tag = payload[0]
        if tag == _MSGPACK:
            part: Part = payload[1]
        elif tag == "null":
            part = _NIL
        elif tag.partition(SEPARATOR)[0] == _MSGPACK and SEPARATOR in tag:
            part = payload  # compressed by the hot tier: CompressingSerializer.join keeps or opens it
        else:
            return None
        try:
            name = ormsgpack.packb(channel)
        except ormsgpack.MsgpackEncodeError:  # a name that is not valid UTF-8 (a lone surrogate)
            return None
        parts += (name, part)
    return parts


def _fields(fields: dict[str, Any], dumps: Dumps) -> bytes | None:
    """A map's fields, encoded, without the map's header."""
    tag, data = dumps(fields)
    if tag != _MSGPACK:
        return None
    _, body = _map_header_size(data)
    return data[body:]


def _raw(payload: Payload, loads: Callable[[Payload], Any], dumps: Dumps) -> bytes | None:
    """The msgpack bytes of an encoded skeleton (opened if the hot tier compressed it), or None."""
    tag, data = payload
    if tag == _MSGPACK:
        return data
    if tag.partition(SEPARATOR)[0] != _MSGPACK or SEPARATOR not in tag:
        return None
    tag, data = dumps(loads(payload))  # rare: a skeleton past the compression threshold
    return data if tag == _MSGPACK else None


def _map_header(count: int) -> bytes:
    if count < 16:
        return bytes((0x80 | count,))
    if count < 1 << 16:
        return b"\xde" + count.to_bytes(2, "big")
    return b"\xdf" + count.to_bytes(4, "big")


def _map_header_size(data: bytes) -> tuple[int | None, int]:
    """A msgpack map's field count and its header's length (None: not a map)."""
    first = data[0]
    if 0x80 <= first <= 0x8F:
        return first & 0x0F, 1
    if first == 0xDE:
        return int.from_bytes(data[1:3], "big"), 3
    if first == 0xDF:
        return int.from_bytes(data[1:5], "big"), 5
    return None, 0
