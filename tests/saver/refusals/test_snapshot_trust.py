"""Issue 14: snapshots and exports are a trust boundary.

The attack: a snapshot whose payload names a callable (``tests.support.tripwire.trip``
stands in for ``os.system``) with a valid checksum, which anyone who can write
the file can recompute. These tests show what it does without protection, that
a ``snapshot_key`` refuses it at ``load``, what LangGraph's strict msgpack mode
does with it, that payload tags are checked wherever serialized state comes in,
and that ``langgraph-bounded inspect`` never deserializes a payload.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import pickle
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import ormsgpack
import pytest
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver

from langgraph.checkpoint.bounded import (
    BoundedInMemorySaver,
    InMemoryCheckpointConfig,
    PayloadTagError,
    SnapshotError,
    copy_threads,
    snapshot,
)
from langgraph.checkpoint.bounded.__main__ import main as saver_main
from langgraph.checkpoint.bounded.engine import NamespaceExport, ThreadExport, WriteRecord
from langgraph.checkpoint.bounded.payload_tags import allows_pickle, base_type, payloads
from tests.support.helpers import config, fingerprint, put
from tests.support.paths import DATA, ROOT
from tests.support.tripwire import TRIPPED, Opaque, constructor_payload, pickle_payload

REPOSITORY = ROOT
KEY = "correct horse battery staple, 32+"  # str: what an environment variable holds
OTHER_KEY = b"a different key of the same kind"
AES_KEY = b"0123456789abcdef"
VERSION_1_FILE = DATA / "version1.snapshot"


def keyed(key: bytes | str | None = KEY, **settings: Any) -> InMemoryCheckpointConfig:
    return InMemoryCheckpointConfig(snapshot_key=key, **settings)


def stocked(settings: InMemoryCheckpointConfig | None = None, **saver_options: Any) -> BoundedInMemorySaver:
    """A saver holding a thread ``victim`` (a blob, a write, a subgraph namespace) and a thread ``bystander``."""
    saver = BoundedInMemorySaver(config=settings, **saver_options)
    stored = put(saver, "victim", {"messages": ["hello"]})
    saver.put_writes(stored, [("messages", "pending")], "task")
    put(saver, "victim", {"inner": 1}, namespace="sub:1")
    put(saver, "bystander", {"messages": ["other"]})
    return saver


def replace_blobs(export: ThreadExport, payload: tuple[str, bytes]) -> ThreadExport:
    """The export with every blob of its root namespace replaced by ``payload``."""
    root = export.namespaces[""]
    return export._replace(
        namespaces={**export.namespaces, "": root._replace(blobs=dict.fromkeys(root.blobs, payload))}
    )


def tampered(data: bytes, payload: tuple[str, bytes], *, thread_id: str = "victim", sign_with: Any = None) -> bytes:
    """What someone who can write the file makes of it: ``thread_id``'s blobs replaced, the checksum recomputed.

    ``sign_with``: None writes an unsigned file; bytes sign it with that key;
    ``"keep"`` keeps the signed flag and the original signature.
    """
    header = snapshot.read_header(data)
    parsed = snapshot.parse_body(data, header)
    threads = [
        (replace_blobs(export, payload) if export.thread_id == thread_id else export, idle)
        for export, idle in parsed.threads
    ]
    if sign_with == "keep":
        forged = bytearray(snapshot.encode(threads, parsed.saved_at))
        forged[9] = snapshot.FLAG_SIGNED
        forged[42:74] = header.signature
        return bytes(forged)
    return snapshot.encode(threads, parsed.saved_at, key=sign_with)


def saved(saver: BoundedInMemorySaver, path: Path) -> bytes:
    saver.save(path)
    return path.read_bytes()


def payload_tags_of(saver: BoundedInMemorySaver, thread_id: str) -> set[object]:
    export = saver.export_thread(thread_id)
    assert export is not None
    return {tag for _, tag in payloads(export)}


# --- the attack, end to end ---------------------------------------------------------------------------

ATTACK_SCRIPT = """
import sys
from pathlib import Path
from langgraph.checkpoint.bounded import BoundedInMemorySaver

path, marker = sys.argv[1], Path(sys.argv[2])
saver = BoundedInMemorySaver.load(path)
print("after load:", marker.exists())
values = saver.get_tuple({"configurable": {"thread_id": "victim"}}).checkpoint["channel_values"]
print("after read:", marker.exists())
print("value:", repr(values["messages"]))
"""


@pytest.mark.parametrize("strict", ["false", "true"])
def test_without_a_key_the_tampered_snapshot_loads_and_strict_msgpack_decides_what_a_read_does(
    tmp_path: Path, strict: str
) -> None:
    marker = tmp_path / "ran"
    path = tmp_path / "dev.snapshot"
    path.write_bytes(tampered(saved(stocked(), path), constructor_payload(marker)))
    environment = {**os.environ, "LANGGRAPH_STRICT_MSGPACK": strict}
    result = subprocess.run(
        [sys.executable, "-c", ATTACK_SCRIPT, str(path), str(marker)],
        cwd=REPOSITORY,  # so that the payload's module, tests.support.tripwire, can be imported: the worst case
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "after load: False"  # load stores payloads; it never deserializes one
    if strict == "false":  # the default: the attack works, the first read runs the callable
        assert lines[1:] == ["after read: True", f"value: {TRIPPED!r}"]
        assert marker.read_text() == TRIPPED
        assert "Deserializing unregistered type tests.support.tripwire.trip" in result.stderr
    else:  # strict mode blocks the call: the read returns the stored argument instead (it does not raise)
        assert lines[1:] == ["after read: False", f"value: {str(marker)!r}"]
        assert not marker.exists()
        assert "Blocked deserialization of tests.support.tripwire.trip" in result.stderr


@pytest.mark.parametrize(
    ("sign_with", "message"),
    [
        (None, "not signed and a snapshot_key is set"),
        ("keep", "signature does not match"),
        (OTHER_KEY, "signature does not match"),
    ],
    ids=["re-written unsigned", "signature kept", "signed with the attacker's key"],
)
def test_with_a_key_the_tampered_snapshot_is_refused_at_load_and_nothing_runs(
    tmp_path: Path, sign_with: Any, message: str
) -> None:
    marker = tmp_path / "ran"
    path = tmp_path / "dev.snapshot"
    original = saved(stocked(keyed()), path)
    assert BoundedInMemorySaver.load(path, config=keyed()).load_report.loaded == ["victim", "bystander"]
    path.write_bytes(tampered(original, constructor_payload(marker), sign_with=sign_with))
    with pytest.raises(SnapshotError, match=message):
        BoundedInMemorySaver.load(path, config=keyed())
    assert not marker.exists()


# --- signatures --------------------------------------------------------------------------------------


def flip(data: bytes, offset: int) -> bytes:
    return data[:offset] + bytes([data[offset] ^ 0x01]) + data[offset + 1 :]


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda data: data[: len(data) // 2], "signature does not match"),
        (lambda data: data[:-1], "signature does not match"),
        (lambda data: data[:60], "too short for its header"),
        (lambda data: data + b"\x00", "signature does not match"),
        (lambda data: data + data[74:], "signature does not match"),
        (lambda data: flip(data, len(data) - 1), "signature does not match"),
        (lambda data: flip(data, 20), "signature does not match"),  # in the digest
        (lambda data: flip(data, 50), "signature does not match"),  # in the signature
        (lambda data: flip(data, 9), "says unsigned but carries a signature"),  # the signed flag cleared
        (lambda data: data[:9] + b"\x03" + data[10:], "unknown flags 0x03"),
        (lambda data: data[:8] + b"\x01" + data[9:], "not signed"),  # format 1 has no signature: refused
    ],
    ids=[
        "truncated to half",
        "one byte short",
        "header cut",
        "extended by a byte",
        "body appended twice",
        "bit flip in the body",
        "bit flip in the digest",
        "bit flip in the signature",
        "signed flag cleared",
        "unknown flag",
        "downgraded to format 1",
    ],
)
def test_a_damaged_signed_file_is_refused_and_loads_nothing(tmp_path: Path, damage, message) -> None:
    path = tmp_path / "store.snapshot"
    evictions: list[str] = []
    original = saved(stocked(keyed()), path)
    path.write_bytes(damage(original))
    with pytest.raises(SnapshotError, match=message):
        BoundedInMemorySaver.load(path, config=keyed(max_threads=1, on_evict=lambda d, e: evictions.append(d)))
    assert evictions == []  # had a thread been restored, the next would have evicted it


def test_the_signature_covers_every_byte_but_its_own_field(tmp_path: Path) -> None:
    path = tmp_path / "store.snapshot"
    data = saved(stocked(keyed()), path)
    header = snapshot.read_header(data)
    assert header.version == 2 and header.signed and data[9] == snapshot.FLAG_SIGNED
    key = KEY.encode()
    for offset in [*range(0, 42), *range(74, len(data), max(1, len(data) // 64))]:
        assert not snapshot.signature_matches(flip(data, offset), snapshot.read_header(data), key), offset
    assert snapshot.signature_matches(data, header, key)


def test_a_wrong_key_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "store.snapshot"
    saved(stocked(keyed()), path)
    with pytest.raises(SnapshotError, match="signed with a different snapshot_key"):
        BoundedInMemorySaver.load(path, config=keyed(OTHER_KEY))
    with pytest.raises(SnapshotError, match="signature does not match"):
        BoundedInMemorySaver.load(path, config=keyed(KEY + " "))
    assert BoundedInMemorySaver.load(path, config=keyed(KEY.encode())).load_report.loaded  # str is its UTF-8 bytes


def test_a_signed_file_loaded_without_a_key_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "store.snapshot"
    saved(stocked(keyed()), path)
    with pytest.raises(SnapshotError, match="signed but no snapshot_key is set"):
        BoundedInMemorySaver.load(path)
    with pytest.raises(SnapshotError, match="signed but no snapshot_key is set"):
        BoundedInMemorySaver.load(path, allow_unsigned=True)  # allows unsigned files, not unverified ones


def test_an_unsigned_file_with_a_key_set_needs_allow_unsigned_and_is_signed_when_saved_again(tmp_path: Path) -> None:
    path = tmp_path / "store.snapshot"
    original = stocked()
    unsigned = saved(original, path)
    assert not snapshot.read_header(unsigned).signed and unsigned[42:74] == bytes(32)
    with pytest.raises(SnapshotError, match="pass allow_unsigned=True"):
        BoundedInMemorySaver.load(path, config=keyed())
    assert BoundedInMemorySaver.load(path).store.thread_ids() == ["victim", "bystander"]  # no key: nothing to check
    migrated = BoundedInMemorySaver.load(path, config=keyed(), allow_unsigned=True)
    assert migrated.store.thread_ids() == ["victim", "bystander"]
    assert migrated.stats().total_bytes == original.stats().total_bytes
    assert snapshot.read_header(saved(migrated, path)).signed  # saved under the key: signed from now on
    assert BoundedInMemorySaver.load(path, config=keyed()).store.thread_ids() == ["victim", "bystander"]


def test_format_1_files_still_load_under_the_unsigned_rule(tmp_path: Path) -> None:
    data = VERSION_1_FILE.read_bytes()
    assert data[8] == 1 and snapshot.read_header(data) == snapshot.Header(1, False, data[9:41], b"", 41)
    forever = {"idle_ttl_seconds": float("inf")}  # the file was saved long ago
    restored = BoundedInMemorySaver.load(VERSION_1_FILE, config=InMemoryCheckpointConfig(**forever))
    assert restored.load_report.loaded == ["legacy", "other"]
    first = restored.get_tuple(config("legacy", checkpoint_id="1ef00000-0000-6000-8000-000000000001"))
    assert first.checkpoint["channel_values"] == {"messages": ["hello"], "count": 1}
    latest = restored.get_tuple(config("legacy"))
    assert latest.parent_config == first.config and latest.checkpoint["channel_values"] == {"count": 2}
    assert latest.pending_writes == [("task-1", "__interrupt__", "waiting"), ("task-1", "count", 3)]  # idx -3, 0
    assert restored.get_tuple(config("legacy", "sub:1")).checkpoint["channel_values"] == {"inner": "x"}
    restored.check()
    with pytest.raises(SnapshotError, match="not signed"):
        BoundedInMemorySaver.load(VERSION_1_FILE, config=keyed(**forever))
    signed = BoundedInMemorySaver.load(VERSION_1_FILE, config=keyed(**forever), allow_unsigned=True)
    assert signed.store.thread_ids() == ["legacy", "other"]
    with pytest.raises(SnapshotError, match=r"checksum does not match"):
        BoundedInMemorySaver.load(_write(tmp_path, flip(data, len(data) - 1)))


def _write(folder: Path, data: bytes) -> Path:
    path = folder / "written.snapshot"
    path.write_bytes(data)
    return path


def test_autosave_signs_with_the_key(tmp_path: Path) -> None:
    path = tmp_path / "auto.snapshot"
    with BoundedInMemorySaver(config=keyed(autosave_path=str(path), autosave_interval_seconds=3600)) as saver:
        put(saver, "kept", {"a": 1})
    assert snapshot.read_header(path.read_bytes()).signed
    assert BoundedInMemorySaver.load(path, config=keyed()).store.thread_ids() == ["kept"]


def test_an_extension_type_in_the_file_structure_is_malformed_not_called(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    _, call = constructor_payload(marker)
    body = ormsgpack.packb({"saved_at": 0.0, "threads": [ormsgpack.Ext(0, call)]})
    data = snapshot.MAGIC + bytes([2, 0]) + hashlib.sha256(body).digest() + bytes(32) + body
    with pytest.raises(SnapshotError, match="malformed"):
        BoundedInMemorySaver.load(_write(tmp_path, data))
    assert not marker.exists()


# --- the key: validated, never shown ------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    ["", b"", 0, 1.5, bytearray(b"distinctive"), [b"distinctive"], "\ud800distinctive", memoryview(b"distinctive")],
    ids=lambda bad: type(bad).__name__ if isinstance(bad, memoryview) else repr(bad),  # a memoryview's repr moves
)
def test_a_bad_snapshot_key_is_refused_naming_the_field_and_not_the_value(bad: Any) -> None:
    with pytest.raises(ValueError, match="snapshot_key") as raised:
        InMemoryCheckpointConfig(snapshot_key=bad)
    assert "distinctive" not in str(raised.value)


def test_allow_unsigned_must_be_a_bool(tmp_path: Path) -> None:
    path = tmp_path / "store.snapshot"
    stocked().save(path)
    with pytest.raises(ValueError, match="allow_unsigned must be a bool"):
        BoundedInMemorySaver.load(path, allow_unsigned="yes")  # type: ignore[arg-type]


def test_the_key_appears_in_no_repr_error_or_log(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    secret = "s3cr3t-do-not-print"
    settings = keyed(secret)
    assert secret not in repr(settings) and secret not in str(settings) and "snapshot_key" not in repr(settings)
    assert settings.snapshot_key == secret
    saver = stocked(settings)
    assert secret not in repr(saver.config)
    path = tmp_path / "store.snapshot"
    data = saved(saver, path)
    assert secret.encode() not in data
    messages = []
    for attempt in (
        lambda: BoundedInMemorySaver.load(path, config=keyed(secret + "x")),
        lambda: BoundedInMemorySaver.load(path),
        lambda: BoundedInMemorySaver.load(_write(tmp_path, tampered(data, ("msgpack", b"\xc0"))), config=settings),
    ):
        with pytest.raises(SnapshotError) as raised:
            attempt()
        messages.append(str(raised.value))
    assert all(secret not in message for message in messages), messages
    with caplog.at_level(logging.DEBUG):  # a failing autosave logs its exception
        failing = keyed(secret, autosave_path=str(tmp_path / "missing" / "dir" / "file"), autosave_interval_seconds=9)
        with pytest.raises(FileNotFoundError) as closing, BoundedInMemorySaver(config=failing) as autosaving:
            put(autosaving, "t", {"a": 1})  # leaving the block closes it: the last save fails, and says so
    assert "autosave failed" in caplog.text and secret not in caplog.text and secret not in str(closing.value)


# --- payload tags ---------------------------------------------------------------------------------


def test_tags_are_read_as_encrypted_serializer_reads_them() -> None:
    assert base_type("pickle") == base_type("pickle+aes") == base_type("PICKLE+x+y") == "pickle"
    assert base_type("msgpack+aes") == "msgpack" and base_type("pickled") == "pickled"
    assert not allows_pickle(JsonPlusSerializer())
    assert allows_pickle(JsonPlusSerializer(pickle_fallback=True))
    assert not allows_pickle(EncryptedSerializer.from_pycryptodome_aes(key=AES_KEY))
    picky = JsonPlusSerializer(pickle_fallback=True)
    assert allows_pickle(EncryptedSerializer.from_pycryptodome_aes(picky, key=AES_KEY))
    assert not allows_pickle(PlainSerializer()) and allows_pickle(PlainSerializer(pickle_fallback=True))


class PlainSerializer:
    """A serializer this package does not know: it unpickles ``"pickle"`` payloads if told it may."""

    def __init__(self, *, pickle_fallback: bool | None = None) -> None:
        if pickle_fallback is not None:
            self.pickle_fallback = pickle_fallback

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        return JsonPlusSerializer().dumps_typed(obj)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        return pickle.loads(data[1]) if data[0] == "pickle" else JsonPlusSerializer().loads_typed(data)


def with_write(export: ThreadExport, payload: tuple[str, bytes]) -> ThreadExport:
    root = export.namespaces[""]
    checkpoint_id = root.checkpoints[-1].checkpoint_id
    extra = WriteRecord.of("intruder", 0, "messages", payload, "")
    writes = {**root.writes, checkpoint_id: (*root.writes.get(checkpoint_id, ()), extra)}
    return export._replace(namespaces={**export.namespaces, "": root._replace(writes=writes)})


def with_checkpoint_payload(export: ThreadExport, payload: tuple[str, bytes], field: str) -> ThreadExport:
    root = export.namespaces[""]
    record = root.checkpoints[0]
    changed = record._replace(**{f"{field}_type": payload[0], f"{field}_data": payload[1]})
    return export._replace(namespaces={**export.namespaces, "": root._replace(checkpoints=(changed,))})


@pytest.mark.parametrize(
    ("inject", "where"),
    [
        (replace_blobs, "namespace '', value of channel 'messages' at version 1"),
        (with_write, "namespace '', write ('intruder', 0) to channel 'messages' of checkpoint"),
        (lambda e, p: with_checkpoint_payload(e, p, "checkpoint"), "namespace '', checkpoint '"),
        (lambda e, p: with_checkpoint_payload(e, p, "metadata"), "namespace '', metadata of checkpoint '"),
    ],
    ids=["blob", "write", "checkpoint", "metadata"],
)
def test_import_thread_refuses_a_pickle_payload_anywhere_and_changes_nothing(tmp_path: Path, inject, where) -> None:
    marker = tmp_path / "ran"
    export = stocked().export_thread("victim")
    hostile = inject(export, pickle_payload(marker))
    target = stocked()
    before = fingerprint(target.store)
    for thread_id in (None, "renamed"):
        with pytest.raises(PayloadTagError) as raised:
            target.import_thread(hostile, thread_id)
        error = raised.value
        assert isinstance(error, ValueError) and error.thread_id == "victim" and error.tag == "pickle"
        assert where in error.where and "thread 'victim'" in str(error) and "typed 'pickle'" in str(error)
        assert "pickle_fallback=False" in str(error)
    assert fingerprint(target.store) == before
    assert not marker.exists()
    # the refusal is what stands between the file and the code: a saver that unpickles runs it on reading
    trusting = BoundedInMemorySaver(serde=JsonPlusSerializer(pickle_fallback=True))
    trusting.import_thread(hostile)
    with contextlib.suppress(TypeError):  # a checkpoint that unpickles to a string cannot be read on
        list(trusting.list(config("victim", "")))
    assert marker.read_text() == TRIPPED


def test_encrypted_pickle_payloads_are_refused_unless_the_inner_serializer_unpickles() -> None:
    unpickling = EncryptedSerializer.from_pycryptodome_aes(JsonPlusSerializer(pickle_fallback=True), key=AES_KEY)
    source = BoundedInMemorySaver(serde=unpickling)
    put(source, "secret", {"opaque": Opaque("x"), "plain": "y"})
    export = source.export_thread("secret")
    assert payload_tags_of(source, "secret") >= {"pickle+aes", "msgpack+aes"}  # real payloads, not stubs
    refusing = BoundedInMemorySaver(serde=EncryptedSerializer.from_pycryptodome_aes(key=AES_KEY))
    with pytest.raises(PayloadTagError, match=r"'pickle\+aes' refused.*EncryptedSerializer around JsonPlusSerializer"):
        refusing.import_thread(export)
    assert refusing.stats().threads == 0
    accepting = BoundedInMemorySaver(serde=unpickling)
    accepting.import_thread(export)
    assert accepting.get_tuple(config("secret")).checkpoint["channel_values"]["opaque"] == Opaque("x")


def test_an_unknown_serializer_must_declare_that_it_unpickles(tmp_path: Path) -> None:
    export = replace_blobs(stocked().export_thread("victim"), pickle_payload(tmp_path / "ran"))
    with pytest.raises(PayloadTagError, match="PlainSerializer, which does not declare pickle_fallback=True"):
        BoundedInMemorySaver(serde=PlainSerializer()).import_thread(export)
    declared = BoundedInMemorySaver(serde=PlainSerializer(pickle_fallback=True))
    declared.import_thread(export)
    assert declared.store.thread_ids() == ["victim"]


def test_load_refuses_a_file_holding_a_pickle_payload_before_restoring_any_thread(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    path = tmp_path / "store.snapshot"
    original = saved(stocked(keyed()), path)
    # signed by the key holder: the signature proves who wrote it, the tag check what this saver may read
    path.write_bytes(tampered(original, pickle_payload(marker), thread_id="bystander", sign_with=KEY.encode()))
    evictions: list[str] = []
    tight = keyed(max_threads=1, on_evict=lambda dropped, export: evictions.append(dropped.thread_id))
    with pytest.raises(SnapshotError, match="thread 'bystander': namespace '', value of channel 'messages'") as raised:
        BoundedInMemorySaver.load(path, config=tight)
    assert "typed 'pickle' refused" in str(raised.value) and "nothing loaded" in str(raised.value)
    assert evictions == []  # "victim" comes first in the file: restored, it would have been evicted for bystander
    unpickling = BoundedInMemorySaver.load(path, config=keyed(), serde=JsonPlusSerializer(pickle_fallback=True))
    assert unpickling.store.thread_ids() == ["victim", "bystander"] and not marker.exists()


def test_threads_too_idle_to_restore_are_checked_too(tmp_path: Path) -> None:
    path = tmp_path / "store.snapshot"
    data = saved(stocked(), path)
    path.write_bytes(tampered(data, pickle_payload(tmp_path / "ran"), thread_id="victim"))
    with pytest.raises(SnapshotError, match="thread 'victim'"):
        BoundedInMemorySaver.load(path, config=InMemoryCheckpointConfig(idle_ttl_seconds=1e-9))


# --- copy_threads into our saver ------------------------------------------------------------------------


@pytest.fixture
def sqlite_source(tmp_path: Path) -> Iterator[Callable[..., SqliteSaver]]:
    """Opens SqliteSavers on one database file, each with its own serializer; closes them after the test."""
    connections: list[sqlite3.Connection] = []

    def open_saver(*, pickle_fallback: bool) -> SqliteSaver:
        connections.append(sqlite3.connect(tmp_path / "checkpoints.sqlite", check_same_thread=False))
        return SqliteSaver(connections[-1], serde=JsonPlusSerializer(pickle_fallback=pickle_fallback))

    yield open_saver
    for connection in connections:
        connection.close()


def test_copy_threads_hands_our_saver_objects_so_its_own_serializer_chooses_every_tag(
    tmp_path: Path, sqlite_source: Callable[..., SqliteSaver]
) -> None:
    source = sqlite_source(pickle_fallback=True)
    put(source, "t", {"opaque": Opaque("kept"), "plain": "text"})  # pickled by the source, as it allows
    assert source.conn.execute("SELECT type FROM checkpoints").fetchall() == [("pickle",)]
    ours = BoundedInMemorySaver()
    with pytest.raises(TypeError, match="channel 'opaque': a Opaque cannot be serialized"):
        copy_threads(source, ours, ["t"])
    assert ours.stats().threads == 0  # nothing in our store carries the source's tag
    unpickling = BoundedInMemorySaver(serde=JsonPlusSerializer(pickle_fallback=True))
    assert copy_threads(source, unpickling, ["t"]) == 1
    assert "pickle" in payload_tags_of(unpickling, "t")  # written by our own serializer, which allows it
    path = tmp_path / "store.snapshot"
    unpickling.save(path)
    with pytest.raises(SnapshotError, match=r"thread 't': .*channel 'opaque'.*typed 'pickle' refused"):
        BoundedInMemorySaver.load(path)
    restored = BoundedInMemorySaver.load(path, serde=JsonPlusSerializer(pickle_fallback=True))
    assert restored.get_tuple(config("t")).checkpoint["channel_values"]["opaque"] == Opaque("kept")


def test_a_tampered_pickle_row_in_the_source_is_read_by_the_source_before_our_saver_sees_anything(
    tmp_path: Path, sqlite_source: Callable[..., SqliteSaver]
) -> None:
    marker = tmp_path / "ran"
    writer = sqlite_source(pickle_fallback=False)
    stored = put(writer, "t", {"messages": ["hello"]})
    writer.put_writes(stored, [("messages", "pending")], "task")
    tag, data = pickle_payload(marker)
    writer.conn.execute("UPDATE writes SET type = ?, value = ?", (tag, data))  # whoever can write the database
    writer.conn.commit()
    ours = BoundedInMemorySaver()
    with pytest.raises(NotImplementedError, match="Unknown serialization type: pickle"):
        copy_threads(writer, ours, ["t"])  # the source refuses to read it: nothing copied, nothing ran
    assert ours.stats().threads == 0 and not marker.exists()
    unpickling_source = sqlite_source(pickle_fallback=True)
    assert copy_threads(unpickling_source, ours, ["t"]) == 1
    assert marker.read_text() == TRIPPED  # ran inside the source's list(): no check in our saver can stop it
    assert ours.get_tuple(config("t")).pending_writes == [("task", "messages", TRIPPED)]  # what reached us: data
    assert "pickle" not in payload_tags_of(ours, "t")


# --- inspect never deserializes -----------------------------------------------------------------------


def test_inspect_of_a_tampered_file_runs_no_constructor(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    path = tmp_path / "store.snapshot"
    data = saved(stocked(), path)
    data = tampered(data, constructor_payload(marker))
    data = tampered(data, pickle_payload(marker), thread_id="bystander")
    path.write_bytes(data)
    shown = subprocess.run(
        [sys.executable, "-m", "langgraph.checkpoint.bounded", "inspect", str(path)],
        cwd=REPOSITORY,  # the payloads' module is importable: had inspect deserialized them, they would run
        env={**os.environ, "LANGGRAPH_STRICT_MSGPACK": "false"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    assert "threads      2" in shown.stdout and "victim" in shown.stdout and "bystander" in shown.stdout
    assert not marker.exists()
    assert "Deserializing" not in shown.stderr


def test_inspect_calls_no_deserializer_at_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "store.snapshot"
    data = tampered(saved(stocked(), path), constructor_payload(tmp_path / "ran"))
    path.write_bytes(tampered(data, pickle_payload(tmp_path / "ran"), thread_id="bystander"))
    calls: list[str] = []

    def forbidden(name: str):
        def record(*args: Any, **kwargs: Any) -> Any:
            calls.append(name)
            raise AssertionError(f"inspect called {name}")

        return record

    real_unpackb = ormsgpack.unpackb
    structure_reads: list[dict[str, Any]] = []

    def unpackb_without_hooks(data: Any, **kwargs: Any) -> Any:
        structure_reads.append(kwargs)
        return real_unpackb(data, **kwargs)

    monkeypatch.setattr(JsonPlusSerializer, "loads_typed", forbidden("JsonPlusSerializer.loads_typed"))
    monkeypatch.setattr(EncryptedSerializer, "loads_typed", forbidden("EncryptedSerializer.loads_typed"))
    monkeypatch.setattr(pickle, "loads", forbidden("pickle.loads"))
    monkeypatch.setattr(ormsgpack, "unpackb", unpackb_without_hooks)
    assert saver_main(["inspect", str(path)]) == 0
    assert calls == []
    assert structure_reads == [{}]  # the file's structure, once, without an extension hook
    assert "checkpoints  3" in capsys.readouterr().out


def run_inspect(path: Path, capsys: pytest.CaptureFixture[str], *arguments: str) -> tuple[int, str, str]:
    status = saver_main(["inspect", str(path), *arguments])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_inspect_says_whether_a_file_is_signed_and_verifies_with_a_key_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    signed, unsigned = tmp_path / "signed.snapshot", tmp_path / "unsigned.snapshot"
    stocked(keyed()).save(signed)
    stocked().save(unsigned)
    monkeypatch.setenv("RIGHT_KEY", KEY)
    monkeypatch.setenv("WRONG_KEY", OTHER_KEY.decode())
    monkeypatch.delenv("NO_SUCH_KEY", raising=False)

    status, out, _ = run_inspect(signed, capsys)
    assert status == 0 and "version 2, signed (HMAC-SHA256)" in out and "not verified" in out
    status, out, _ = run_inspect(signed, capsys, "--key-env", "RIGHT_KEY")
    assert status == 0 and "verified with the key in RIGHT_KEY" in out
    status, out, err = run_inspect(signed, capsys, "--key-env", "WRONG_KEY")
    assert status == 1 and "DOES NOT MATCH the key in WRONG_KEY" in out and "refuses this file" in err
    status, out, _ = run_inspect(unsigned, capsys)
    assert status == 0 and "version 2, unsigned" in out
    status, out, _ = run_inspect(unsigned, capsys, "--key-env", "RIGHT_KEY")
    assert status == 1 and "unless allow_unsigned=True" in out
    status, out, _ = run_inspect(VERSION_1_FILE, capsys)
    assert status == 0 and "version 1, unsigned" in out and "threads      2" in out
    status, _, err = run_inspect(signed, capsys, "--key-env", "NO_SUCH_KEY")
    assert status == 2 and "NO_SUCH_KEY" in err and "not set" in err
    tampered_path = _write(tmp_path, tampered(signed.read_bytes(), ("msgpack", b"\xc0"), sign_with="keep"))
    status, out, _ = run_inspect(tampered_path, capsys, "--key-env", "RIGHT_KEY")
    assert status == 1 and "DOES NOT MATCH" in out and "threads      2" in out  # still shown, safely
    for argument in ("RIGHT_KEY", "WRONG_KEY"):
        for path in (signed, unsigned, tampered_path):
            _, out, err = run_inspect(path, capsys, "--key-env", argument)
            assert KEY not in out + err and OTHER_KEY.decode() not in out + err


def test_inspect_escapes_identifiers_a_tampered_file_could_use_against_a_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hostile = ThreadExport("\x1b[2J\x1b]0;owned\x07", {"": NamespaceExport((), {}, {})})
    path = _write(tmp_path, snapshot.encode([(hostile, 1.0)]))
    status, out, _ = run_inspect(path, capsys)
    assert status == 0 and "\x1b" not in out and "\\x1b[2J" in out
