"""``tiered/backends/spliced.py``: a ``SqliteSaver`` row made from the hot tier's bytes is the saver's own.

* Any checkpoint (channel values of every msgpack kind, ``None``, nested; names short and long, ASCII and not;
  up to 40 channels, past msgpack's 16-entry map; ``channel_values`` anywhere among the fields): the spliced
  bytes equal ``JsonPlusSerializer.dumps_typed`` of the checkpoint, for a write-back's replay (skeleton, then
  values) and for a write-through's ``put`` (the fields in the checkpoint's order, unchanged channels encoded
  there and then).
* Under ``CompressingSerializer``, the row reads back as the same checkpoint (zstd frames kept, or one zlib
  stream, byte for byte ``dumps_typed``'s).
* What it cannot splice, it leaves to the caller (None): a bytes value, a value pickled under
  ``pickle_fallback=True`` (also one the hot tier did not encode), a serializer it does not know (a subclass,
  ``EncryptedSerializer``, an instance whose ``dumps_typed`` was replaced).
"""

from __future__ import annotations

import operator
import sqlite3
from typing import Annotated, Any, TypedDict

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

from langgraph.checkpoint.bounded import CompressingSerializer, TieredSaver
from langgraph.checkpoint.bounded.tiered.backends.base import BatchPut
from langgraph.checkpoint.bounded.tiered.backends.spliced import splicer

PLAIN = JsonPlusSerializer(pickle_fallback=False)

scalars = st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False)
texts = st.text(st.characters(exclude_categories=("Cs",)), max_size=40) | st.sampled_from(["", "x" * 300, "é" * 70_000])
values = st.recursive(
    scalars | texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
names = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=40) | st.sampled_from(
    ["c" * 31, "c" * 32, "c" * 255, "c" * 256, "ü" * 20]
)
FIELDS = {"v": 4, "ts": "2026-12-05T00:00:00+00:00", "id": "1f1", "channel_versions": {"a": "1"}}


def _checkpoint(channel_values: dict[str, Any], at: int) -> dict[str, Any]:
    """LangGraph's checkpoint fields, with ``channel_values`` at position ``at``."""
    fields = list(FIELDS.items())
    fields.insert(min(at, len(fields)), ("channel_values", channel_values))
    return {**dict(fields), "versions_seen": {}, "updated_channels": None}


def _put(serde: Any, checkpoint: dict[str, Any], new: set[str], *, through: bool) -> BatchPut:
    """The hot tier's view of a put: every value encoded (a replay), or the new ones and the call (a put)."""
    channel_values = checkpoint["channel_values"]
    encoded = {name: serde.dumps_typed(value) for name, value in channel_values.items() if not through or name in new}
    skeleton = serde.dumps_typed({key: value for key, value in checkpoint.items() if key != "channel_values"})
    given = ({"configurable": {}}, checkpoint, {}) if through else None
    return BatchPut("t", "", "1f1", None, skeleton, ("", b""), encoded, {}, given)


def _replayed(checkpoint: dict[str, Any]) -> dict[str, Any]:
    """The checkpoint as a write-back's replay builds it (``full_checkpoint``): ``channel_values`` last."""
    return {
        **{k: v for k, v in checkpoint.items() if k != "channel_values"},
        "channel_values": checkpoint["channel_values"],
    }


@given(
    channel_values=st.dictionaries(names, values, max_size=40),
    at=st.integers(0, 6),
    through=st.booleans(),
    new=st.sets(names, max_size=5),
)
def test_a_spliced_row_is_the_savers_own_bytes(
    channel_values: dict[str, Any], at: int, through: bool, new: set[str]
) -> None:
    checkpoint = _checkpoint(channel_values, at)
    new |= set(list(channel_values)[::2])
    splice = splicer(PLAIN)
    assert splice is not None
    spliced = splice(_put(PLAIN, checkpoint, new, through=through), PLAIN.loads_typed)
    expected = PLAIN.dumps_typed(checkpoint if through else _replayed(checkpoint))
    assert spliced == expected


@pytest.mark.parametrize("codec", ["zstd", "zlib"])
@pytest.mark.parametrize("through", [False, True])
def test_a_compressed_row_reads_back_as_the_checkpoint(codec: str, through: bool) -> None:
    serde = CompressingSerializer(threshold_bytes=64, codec=codec)  # type: ignore[arg-type]
    long = [f"message {index}: the assistant answers the user about the weather. " * 3 for index in range(40)]
    checkpoint = _checkpoint({"messages": long, "turn": 7, "notes": {"n": long[:3]}, "empty": None}, 3)
    splice = splicer(serde)
    assert splice is not None
    tag, data = splice(_put(serde, checkpoint, {"messages", "turn"}, through=through), serde.loads_typed)  # type: ignore[misc]
    assert serde.loads_typed((tag, data)) == (checkpoint if through else _replayed(checkpoint))
    whole = serde.dumps_typed(checkpoint if through else _replayed(checkpoint))
    if codec == "zstd":  # the messages' frame kept: a frame before it and one after it
        assert tag == "msgpack~zstd-frames"
        assert serde.dumps_typed(long)[1] in data
    else:  # one zlib stream: dumps_typed's own bytes
        assert (tag, data) == whole
    assert len(data) < len(PLAIN.dumps_typed(checkpoint)[1]) / 3


class Frame:
    """A value msgpack cannot encode and pickle can (a pandas DataFrame, say)."""

    def __init__(self, rows: list[int]) -> None:
        self.rows = rows

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Frame) and other.rows == self.rows


class Table(TypedDict):
    frame: Frame
    steps: Annotated[int, operator.add]


@pytest.mark.parametrize("write", ["through", "back"])
def test_a_pickled_value_left_unchanged_is_left_to_the_savers_serializer(tmp_path: Any, write: str) -> None:
    """Under ``pickle_fallback=True`` a value msgpack refuses is pickled, also when the hot tier did not encode it
    (unchanged by the step): the row is then serialized whole, as ``SqliteSaver.put`` does (found by review: it
    used to raise ``TypeError``)."""
    builder = StateGraph(Table)
    builder.add_node("first", lambda state: {"steps": 1})
    builder.add_node("second", lambda state: {"steps": 1})
    builder.add_edge(START, "first")
    builder.add_edge("first", "second")
    builder.add_edge("second", END)
    path = tmp_path / "pickles.db"
    durable = SqliteSaver(
        sqlite3.connect(path, check_same_thread=False), serde=JsonPlusSerializer(pickle_fallback=True)
    )
    thread = {"configurable": {"thread_id": "t"}}
    with TieredSaver(durable, write=write) as tiered:  # type: ignore[arg-type]
        assert builder.compile(checkpointer=tiered).invoke({"frame": Frame([1, 2]), "steps": 0}, thread) == {
            "frame": Frame([1, 2]),
            "steps": 2,
        }
    plain = SqliteSaver(sqlite3.connect(path, check_same_thread=False), serde=JsonPlusSerializer(pickle_fallback=True))
    assert builder.compile(checkpointer=plain).get_state(thread).values == {"frame": Frame([1, 2]), "steps": 2}


def test_what_cannot_be_spliced_is_left_to_the_caller() -> None:
    checkpoint = _checkpoint({"raw": b"\x00\x01", "text": "x"}, 3)
    splice = splicer(PLAIN)
    assert splice is not None
    for through in (False, True):  # a bytes value is not msgpack under JsonPlusSerializer: serialized whole
        assert splice(_put(PLAIN, checkpoint, {"raw", "text"}, through=through), PLAIN.loads_typed) is None

    class Custom(JsonPlusSerializer):
        pass

    replaced = JsonPlusSerializer()
    replaced.dumps_typed = lambda obj: ("msgpack", b"\xc0")  # type: ignore[method-assign]  # an instance's own
    key = b"0123456789abcdef"
    encrypted = EncryptedSerializer.from_pycryptodome_aes(key=key)
    for serde in (Custom(), encrypted, CompressingSerializer(Custom()), replaced, CompressingSerializer(replaced)):
        assert splicer(serde) is None
    assert splicer(CompressingSerializer()) is not None
    pickling = JsonPlusSerializer(pickle_fallback=True)
    splice = splicer(pickling)
    assert splice is not None
    unchanged = _checkpoint({"frame": Frame([1]), "steps": 1}, 3)  # the hot tier encoded "steps" only
    assert splice(_put(pickling, unchanged, {"steps"}, through=True), pickling.loads_typed) is None


@pytest.mark.parametrize("channels", [0, 1, 15, 16, 65_535, 65_536])
@pytest.mark.parametrize("through", [False, True])
def test_every_map_header_and_string_width(channels: int, through: bool) -> None:
    """msgpack's map headers (fixmap, map16, map32) and string headers (fixstr, str8, str16, str32)."""
    widths = ["", "a" * 31, "b" * 32, "c" * 255, "d" * 256, "e" * 65_535, "f" * 65_536]
    channel_values: dict[str, Any] = {
        f"{widths[index] if index < len(widths) else ''}{index}": index for index in range(channels)
    }
    checkpoint = _checkpoint(channel_values, 2)
    splice = splicer(PLAIN)
    assert splice is not None
    spliced = splice(_put(PLAIN, checkpoint, set(list(channel_values)[::3]), through=through), PLAIN.loads_typed)
    assert spliced == PLAIN.dumps_typed(checkpoint if through else _replayed(checkpoint))
