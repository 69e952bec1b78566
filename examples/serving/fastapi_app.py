"""fastapi-langgraph-server with the process-wide bounded saver, and its metrics at /metrics.

Run from this folder (limits from BOUNDED_SAVER_* variables)::

    BOUNDED_SAVER_MAX_THREADS=500 uvicorn fastapi_app:app --host 127.0.0.1 --port 8000

It cannot answer an interrupt: fastapi-langgraph-server 0.1.0 refuses a run with a ``command``
(``{"resume": ...}``) with 422 "unsupported run options: command", so the graph's review stays waiting.
For human-in-the-loop apps serve it with langgraph dev and langgraph.json instead (docs/guide/serving.md).
"""

from __future__ import annotations

from fastapi import Response
from fastapi_langgraph_server import AssistantConfig, StandaloneAppConfig, create_app
from graph import build_graph
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from langgraph.checkpoint.bounded.serving import shared_saver

assistant = AssistantConfig(
    assistant_id="agent", graph_id="agent", name="Review", checkpointed_graph_factory=build_graph
)
app = create_app(StandaloneAppConfig(assistants={"agent": assistant}, checkpointer=shared_saver()))


@app.get("/metrics", include_in_schema=False)
def metrics() -> Response:
    """Prometheus text of the default registry, where shared_saver() registered the saver's metrics."""
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)
