"""``serving.storage_app``: ``GET /threads/{thread_id}/storage`` from the process-wide saver, over HTTP (ASGI).

The Agent Server answers that route with 501 for any custom checkpointer (langgraph-api's
``get_thread_storage`` checks ``USE_CUSTOM_CHECKPOINTER`` before anything else); ``langgraph.json``'s
``"http": {"app": "langgraph.checkpoint.bounded.serving:storage_app"}`` answers it instead
(``test_langgraph_dev`` checks that under ``langgraph dev``).
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from langgraph.checkpoint.bounded import serving
from langgraph.checkpoint.bounded.serving import shared_saver
from tests.support.helpers import config, make_checkpoint


async def get(path: str) -> httpx.Response:
    transport = httpx.ASGITransport(app=serving.storage_app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        return await client.get(path)


async def test_the_memory_saver_s_report(environment: pytest.MonkeyPatch) -> None:
    saver = shared_saver()
    stored = saver.put(config("t"), make_checkpoint({"a": "x" * 50}), {}, {"a": 1})
    saver.put_writes(stored, [("a", "y")], "task")
    answer = await get("/threads/t/storage")
    assert answer.status_code == 200
    assert answer.json() == {**saver.thread_storage("t").as_dict(), "thread_id": "t"}
    assert answer.json()["pending_writes"]["count"] == 1
    empty = (await get("/threads/nobody/storage")).json()
    assert empty["total_bytes"] == 0 and saver.store.thread_ids() == ["t"]  # nothing created


async def test_the_tiered_saver_s_report(environment: pytest.MonkeyPatch, tmp_path: Path) -> None:
    environment.chdir(tmp_path)
    environment.setenv("BOUNDED_SAVER_DURABLE", "sqlite")
    saver = shared_saver()
    saver.put(config("t"), make_checkpoint({"a": "x" * 50}), {}, {"a": 1})
    body = (await get("/threads/t/storage")).json()
    assert body["tier"] == "tiered" and body["durable"]["checkpoints"]["count"] == 1
    assert body["hot"]["checkpoints"]["count"] == 1 and body["total_bytes"] == body["durable"]["total_bytes"] > 0


def test_importing_the_module_makes_no_app() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        serving.nothing  # noqa: B018
