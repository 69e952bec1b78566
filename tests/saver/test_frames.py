"""Python frames of ours per call on the write path, counted with ``sys.setprofile``.

A Python call costs about as much as a dict insert plus a hash, so the write
path's frames are counted like its allocations. Frames in ``saver/`` and
``engine/`` count; the serializer's and LangGraph's do not. The count is
deterministic: it is a test, while speed lives in the benchmarks.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import langgraph.checkpoint.bounded as saver
import langgraph.checkpoint.bounded.engine as engine
from langgraph.checkpoint.bounded import BoundedInMemorySaver
from tests.support.helpers import config, make_checkpoint

OURS = (str(Path(engine.__file__).parent), str(Path(saver.__file__).parent))


def frames_of_ours(call: Callable[[], Any]) -> Counter[str]:
    """Python functions of ours entered while ``call`` runs, by name."""
    entered: Counter[str] = Counter()

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename.startswith(OURS):
            entered[frame.f_code.co_qualname] += 1

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return entered


def a_thread_mid_conversation() -> tuple[BoundedInMemorySaver, dict[str, Any], dict[str, Any]]:
    """A saver whose thread already holds a checkpoint, and the next checkpoint LangGraph would put."""
    ours = BoundedInMemorySaver()
    first = make_checkpoint({"messages": ["hi"], "count": 1}, {"messages": "1.0", "count": "1.0"})
    stored = ours.put(config("t"), first, {"source": "loop", "step": 0, "run_id": "r"}, dict(first["channel_versions"]))
    following = make_checkpoint(
        {"messages": ["hi", "hello"], "count": 2}, {"messages": "2.0", "count": "2.0", "branch:to:node": "2.0"}
    )
    return ours, stored, following


def assert_four_frames(entered: Counter[str], method: str, encoder: str, store_method: str) -> None:
    """The write path's four frames, each entered once: the saver's ``method`` (the delivery), its body
    (``_`` + ``method``), the codec's ``encoder`` and the store's ``store_method``."""
    assert sum(entered.values()) == 4, entered
    assert set(entered) == {
        f"BoundedInMemorySaver.{method}",
        f"BoundedInMemorySaver._{method}",
        encoder,
        f"Store.{store_method}",
    }


def test_a_put_on_an_existing_thread_runs_four_frames_of_ours() -> None:
    """``put`` (delivery), ``_put`` (locate's fast path inline), ``encode_checkpoint``, ``Store.put_checkpoint``."""
    ours, stored, following = a_thread_mid_conversation()
    metadata = {"source": "loop", "step": 1, "run_id": "r"}
    new_versions = {"messages": "2.0", "count": "2.0", "branch:to:node": "2.0"}
    first = frames_of_ours(lambda: ours.put(stored, following, metadata, new_versions))
    assert first["admit_channel"] == 1, first  # "branch:to:node" is new to the store: checked once, off the path
    after = make_checkpoint({"messages": ["hi", "hello", "bye"], "count": 3}, {"messages": "3.0", "count": "3.0"})
    entered = frames_of_ours(
        lambda: ours.put(stored, after, {"step": 2, "run_id": "r"}, {"messages": "3.0", "count": "3.0"})
    )
    assert ours.stats().checkpoints == 3, "the puts did not happen"
    assert_four_frames(entered, "put", "encode_checkpoint", "put_checkpoint")


def test_the_frames_of_a_put_do_not_grow_with_its_channels() -> None:
    """Once the store has seen a channel name (a graph has a handful), checking it again costs no frame."""
    ours, stored, _ = a_thread_mid_conversation()
    many = {f"channel-{n}": f"value {n}" for n in range(12)}

    def put_wide(version: str) -> Any:
        return ours.put(stored, make_checkpoint(many, dict.fromkeys(many, version)), {}, dict.fromkeys(many, version))

    first = frames_of_ours(lambda: put_wide("2.0"))
    assert first["admit_channel"] == 12  # each new name checked once, in the rare-path module
    wide = frames_of_ours(lambda: put_wide("3.0"))
    few = make_checkpoint({"count": 3}, {"count": "4.0"})
    narrow = frames_of_ours(lambda: ours.put(stored, few, {"step": 2}, {"count": "4.0"}))
    assert wide == narrow and sum(wide.values()) == 4


def test_a_put_writes_of_two_writes_runs_four_frames_of_ours() -> None:
    ours, stored, _ = a_thread_mid_conversation()
    writes = [("messages", ["hello"]), ("count", 2)]
    entered = frames_of_ours(lambda: ours.put_writes(stored, writes, "task-1", "~__pregel_pull, node"))
    assert ours.stats().pending_writes == 2, "the writes were not stored"
    assert_four_frames(entered, "put_writes", "encode_writes", "put_writes")


def test_the_count_sees_our_frames() -> None:
    """The counter is not blind: a call that goes through the eviction module is seen doing so."""
    ours = BoundedInMemorySaver(config=saver.InMemoryCheckpointConfig(max_threads=1))
    ours.put(config("first"), make_checkpoint({"a": 1}), {}, {"a": 1})
    entered = frames_of_ours(lambda: ours.put(config("second"), make_checkpoint({"a": 1}), {}, {"a": 1}))
    assert entered["make_room"] == 1 and entered["drop"] == 1, entered
