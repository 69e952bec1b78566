"""``CompressingSerializer`` (issue 35, item 1): stored values compressed, read back by every saver that has it.

* Values round-trip through both codecs; a value under the threshold, or one compression does not shrink, is
  stored as the inner serializer wrote it (its tag untouched); a value written without compression still reads.
* A plain ``SqliteSaver`` given the same serializer reads what ``TieredSaver`` wrote (both tiers compressed), and
  the rows in the file carry the codec's tag.
* With LangGraph's ``EncryptedSerializer`` around it: compress, then encrypt; the tag is ``"<tag>~zstd+aes"``.
* The memory saver counts the compressed bytes: the same byte budget holds more threads.
* Snapshot and import checks see through the codec's tag: ``"pickle~zstd"`` is pickle.
* Bad settings name the field and the range; a codec this process cannot read names the extra to install.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver

from langgraph.checkpoint.bounded import (
    BoundedInMemorySaver,
    CompressingSerializer,
    InMemoryCheckpointConfig,
    TieredSaver,
)
from langgraph.checkpoint.bounded import compression as compression_module
from langgraph.checkpoint.bounded.payload_tags import allows_pickle, base_type
from tests.support.graphs import linear

TEXT = "The weather in Paris is mild today; the assistant looks up the forecast and answers. " * 40
KEY = b"0123456789abcdef0123456789abcdef"


def chat(count: int) -> list[Any]:
    return [
        HumanMessage(f"{TEXT[: 200 + index]} #{index}", id=f"h{index}")
        if index % 2 == 0
        else AIMessage(f"{TEXT[: 300 + index]} #{index}", id=f"a{index}")
        for index in range(count)
    ]


@pytest.mark.parametrize("codec", ["zstd", "zlib"])
@pytest.mark.parametrize(
    "value",
    [TEXT, {"messages": chat(6), "n": 3}, list(range(2_000)), b"\x00" * 5_000, "é" * 3_000, None, 0, "short"],
    ids=["text", "chat", "ints", "bytes", "unicode", "none", "zero", "short"],
)
def test_values_round_trip_compressed_when_worth_it(codec: str, value: Any) -> None:
    plain = JsonPlusSerializer(pickle_fallback=False)
    serde = CompressingSerializer(plain, codec=codec)  # type: ignore[arg-type]
    tag, data = serde.dumps_typed(value)
    inner_tag, inner_data = plain.dumps_typed(value)
    if len(inner_data) >= serde.threshold_bytes:
        assert tag == f"{inner_tag}~{codec}" and len(data) < len(inner_data)
    else:
        assert (tag, data) == (inner_tag, inner_data)  # under the threshold: as the inner serializer wrote it
    assert serde.loads_typed((tag, data)) == value
    assert serde.loads_typed((inner_tag, inner_data)) == value  # a row written before compression was on


def test_an_incompressible_value_is_stored_as_it_is() -> None:
    import random

    noise = random.Random(3).randbytes(10_000)
    serde = CompressingSerializer()
    assert serde.dumps_typed(noise) == JsonPlusSerializer(pickle_fallback=False).dumps_typed(noise)


def test_the_threshold_is_exact() -> None:
    serde = CompressingSerializer(threshold_bytes=100)
    inner = JsonPlusSerializer(pickle_fallback=False)
    for length in range(80, 120):
        value = "a" * length
        tag, _ = serde.dumps_typed(value)
        assert tag.endswith(("~zstd", "~zlib")) == (len(inner.dumps_typed(value)[1]) >= 100), length


def test_bad_settings_name_the_field_and_the_range() -> None:
    with pytest.raises(ValueError, match="threshold_bytes must be a whole number of bytes, at least 0, got -1"):
        CompressingSerializer(threshold_bytes=-1)
    with pytest.raises(ValueError, match="threshold_bytes"):
        CompressingSerializer(threshold_bytes=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"level for zlib must be a whole number from 0 to 9, got 10"):
        CompressingSerializer(codec="zlib", level=10)
    with pytest.raises(ValueError, match=r"level for zstd must be a whole number from -7 to 22, got 23"):
        CompressingSerializer(codec="zstd", level=23)
    with pytest.raises(ValueError, match=r"codec must be one of \('zstd', 'zlib'\), got 'lz4'"):
        CompressingSerializer(codec="lz4")  # type: ignore[arg-type]


def test_a_codec_this_process_cannot_read_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    tag, data = CompressingSerializer(codec="zstd").dumps_typed(TEXT)
    monkeypatch.setattr(compression_module, "_ZSTD", None)
    reader = CompressingSerializer()  # zstd missing: zlib is the default now
    assert reader.codec == "zlib"
    with pytest.raises(
        ValueError, match=r"install the compression extra .*langgraph-checkpoint-bounded\[compression\]"
    ):
        reader.loads_typed((tag, data))
    with pytest.raises(ValueError, match="compression extra"):
        CompressingSerializer(codec="zstd")


def test_a_tag_with_an_unknown_suffix_goes_to_the_inner_serializer_untouched() -> None:
    class Tagging(JsonPlusSerializer):
        def loads_typed(self, data: tuple[str, bytes]) -> Any:
            return data

    serde = CompressingSerializer(Tagging())
    assert serde.loads_typed(("msgpack~other", b"x")) == ("msgpack~other", b"x")


def test_compress_then_encrypt_with_langgraph_encrypted_serializer() -> None:
    encrypted = EncryptedSerializer.from_pycryptodome_aes(serde=CompressingSerializer(), key=KEY)
    tag, data = encrypted.dumps_typed({"messages": chat(8)})
    assert tag in ("msgpack~zstd+aes", "msgpack~zlib+aes")
    plain_size = len(JsonPlusSerializer(pickle_fallback=False).dumps_typed({"messages": chat(8)})[1])
    assert len(data) < plain_size / 2  # compressed before it was encrypted (ciphertext does not compress)
    assert encrypted.loads_typed((tag, data)) == {"messages": chat(8)}


class Chat(TypedDict):
    text: str


def graph(checkpointer: Any) -> Any:
    builder = linear(Chat, {"reply": lambda state: {"text": state["text"] + TEXT}})
    return builder.compile(checkpointer=checkpointer)


@pytest.mark.parametrize("write", ["through", "back"])
def test_a_plain_sqlite_saver_with_the_serializer_reads_what_the_tiered_saver_wrote(tmp_path: Path, write: str) -> None:
    path = tmp_path / "threads.db"
    durable = SqliteSaver(sqlite3.connect(path, check_same_thread=False), serde=CompressingSerializer())
    thread = {"configurable": {"thread_id": "t"}}
    with TieredSaver(durable, write=write) as tiered:  # type: ignore[arg-type]
        app = graph(tiered)
        app.invoke({"text": "hello "}, thread)
        app.invoke({"text": "again "}, thread)
        hot_bytes = tiered._store.stats().total_bytes
    rows = sqlite3.connect(path).execute("SELECT type FROM checkpoints").fetchall()
    # the durable tier holds the compressed form: the hot tier's compressed value kept as its frame (``spliced``)
    assert {tag for (tag,) in rows} >= {"msgpack~zstd-frames"}
    assert {tag for (tag,) in rows} <= {"msgpack~zstd-frames", "msgpack~zstd", "msgpack"}
    plain = SqliteSaver(sqlite3.connect(path, check_same_thread=False), serde=CompressingSerializer())
    assert graph(plain).get_state(thread).values == {"text": "again " + TEXT}
    uncompressed = len(JsonPlusSerializer(pickle_fallback=False).dumps_typed({"text": "again " + TEXT})[1])
    assert hot_bytes < 3 * uncompressed  # the hot tier held compressed values too: 4 checkpoints' worth


def test_the_memory_saver_counts_compressed_bytes_so_a_budget_holds_more_threads() -> None:
    def threads_kept(serde: Any) -> int:
        saver = BoundedInMemorySaver(config=InMemoryCheckpointConfig(max_total_bytes=200_000), serde=serde)
        app = graph(saver)
        for index in range(100):
            app.invoke({"text": f"user {index} "}, {"configurable": {"thread_id": f"u{index}"}})
        saver.store.check()
        return saver.stats().threads

    plain, compressed = threads_kept(None), threads_kept(CompressingSerializer())
    assert compressed >= 3 * plain, (plain, compressed)


def test_snapshot_and_import_checks_see_through_the_codec_tag() -> None:
    assert base_type("pickle~zstd") == "pickle" and base_type("Pickle~zlib+aes") == "pickle"
    assert not allows_pickle(CompressingSerializer())
    assert allows_pickle(CompressingSerializer(JsonPlusSerializer(pickle_fallback=True)))
    encrypted = EncryptedSerializer.from_pycryptodome_aes(serde=CompressingSerializer(), key=KEY)
    assert not allows_pickle(encrypted)


def test_a_thread_exported_compressed_imports_into_a_saver_with_the_serializer() -> None:
    source = BoundedInMemorySaver(serde=CompressingSerializer())
    graph(source).invoke({"text": "hi "}, {"configurable": {"thread_id": "t"}})
    export = source.export_thread("t")
    target = BoundedInMemorySaver(serde=CompressingSerializer())
    target.import_thread(export)
    assert graph(target).get_state({"configurable": {"thread_id": "t"}}).values == {"text": "hi " + TEXT}


# --- join: a value made of pieces already serialized (``tiered/backends/spliced.py``) --------------------------------


def _pieces(serde: CompressingSerializer, values: list[Any]) -> tuple[list[Any], bytes]:
    """A msgpack array of ``values`` as parts: its header, then each value as ``serde`` stored it."""
    header = bytes((0x90 | len(values),))
    parts: list[Any] = [header, *(serde.dumps_typed(value) for value in values)]
    raw = header + b"".join(JsonPlusSerializer().dumps_typed(value)[1] for value in values)
    return parts, raw


@pytest.mark.parametrize("codec", ["zstd", "zlib"])
def test_join_keeps_compressed_pieces_as_frames_and_reads_back(codec: str) -> None:
    serde = CompressingSerializer(codec=codec, threshold_bytes=256)  # type: ignore[arg-type]
    values = [chat(8), "short", 7, chat(3), {"n": 1}]
    parts, raw = _pieces(serde, values)
    assert sum(type(part) is tuple and part[0] == f"msgpack~{codec}" for part in parts) == 2
    tag, data = serde.join("msgpack", parts)
    assert serde.loads_typed((tag, data)) == values
    if codec == "zstd":  # the two compressed values kept, the runs between them compressed: five frames
        assert tag == "msgpack~zstd-frames"
        assert all(part[1] in data for part in parts if type(part) is tuple and part[0] == "msgpack~zstd")
    else:  # zlib streams do not concatenate: what dumps_typed stores for the whole, byte for byte
        assert (tag, data) == serde.dumps_typed(values)
    assert len(data) < len(raw) / 2


def test_join_without_compressed_pieces_is_dumps_typed_byte_for_byte() -> None:
    serde = CompressingSerializer(threshold_bytes=256)
    for values in ([chat(8), 1], ["a", 1], []):
        parts = [bytes((0x90 | len(values),)), *(JsonPlusSerializer().dumps_typed(value)[1] for value in values)]
        assert serde.join("msgpack", parts) == serde.dumps_typed(values)


def test_join_under_the_threshold_stores_the_pieces_opened() -> None:
    small = CompressingSerializer(threshold_bytes=0)
    parts, raw = _pieces(small, [chat(2)])
    assert parts[1][0].endswith("~zstd")
    loose = CompressingSerializer(threshold_bytes=1 << 20)  # the whole is under this one's threshold
    assert loose.join("msgpack", parts) == ("msgpack", raw)


def test_frames_cut_short_or_foreign_pieces_are_refused() -> None:
    serde = CompressingSerializer(threshold_bytes=64)
    parts, _ = _pieces(serde, [chat(8), "x" * 40, chat(6)])
    tag, data = serde.join("msgpack", parts)
    assert tag == "msgpack~zstd-frames"
    with pytest.raises(Exception, match=r"truncated|error|frame"):
        serde.loads_typed((tag, data[:-5]))
    with pytest.raises(Exception):  # noqa: B017  (zstandard's own error: garbage after the last frame)
        serde.loads_typed((tag, data + b"\x00\x01\x02\x03\x04\x05"))
    with pytest.raises(ValueError, match="not a piece"):
        serde.join("msgpack", [("pickle~zstd", b"\x00")])


def test_join_opens_a_frame_that_does_not_say_its_size() -> None:
    zstandard = pytest.importorskip("zstandard")
    serde = CompressingSerializer(threshold_bytes=64)
    raw = JsonPlusSerializer().dumps_typed(chat(8))[1]
    silent = zstandard.ZstdCompressor(level=1, write_content_size=False).compress(raw)
    parts: list[Any] = [b"\x92", ("msgpack~zstd", silent), JsonPlusSerializer().dumps_typed(7)[1]]
    tag, data = serde.join("msgpack", parts)
    assert tag == "msgpack~zstd" and serde.loads_typed((tag, data)) == [chat(8), 7]  # opened, one frame again


def test_threads_share_the_codec_contexts_without_mixing_values() -> None:
    """zstd contexts are shared by every thread (LangGraph runs a sync graph's puts on new threads): each call
    takes one off the idle list, so values compressed and read back from 8 threads at once never mix."""
    import threading

    serde = CompressingSerializer(threshold_bytes=64)
    failures: list[str] = []
    start = threading.Barrier(8)

    def work(index: int) -> None:
        start.wait()
        for round_ in range(150):
            value = {"thread": index, "round": round_, "messages": chat(4 + (index + round_) % 5)}
            tag, data = serde.dumps_typed(value)
            if not tag.endswith("~zstd") or serde.loads_typed((tag, data)) != value:
                failures.append(f"thread {index} round {round_}: {tag}")

    threads = [threading.Thread(target=work, args=(index,)) for index in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
