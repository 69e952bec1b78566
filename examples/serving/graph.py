"""The graph the serving recipes run: a draft, then a review that waits for a human (an interrupt).

``graph`` is for LangGraph's Agent Server, which adds its checkpointer; ``build_graph`` is the factory
fastapi-langgraph-server calls with the saver it was given.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import interrupt


class Review(TypedDict, total=False):
    messages: Annotated[list[str], operator.add]
    approved: bool


def draft(state: Review) -> Review:
    return {"messages": [f"draft of {state.get('messages', [''])[-1]}"]}


def review(state: Review) -> Review:
    answer = interrupt({"question": "approve the draft?"})
    return {"messages": [f"review: {answer}"], "approved": answer == "yes"}


def builder() -> StateGraph[Review, Any, Review, Review]:
    """draft -> review (interrupts) -> end."""
    graph = StateGraph(Review)
    graph.add_node("draft", draft)
    graph.add_node("review", review)
    graph.add_edge(START, "draft")
    graph.add_edge("draft", "review")
    graph.add_edge("review", END)
    return graph


def build_graph(checkpointer: BaseCheckpointSaver[str] | None) -> CompiledStateGraph[Review, Any, Review, Review]:
    """The graph compiled with ``checkpointer``: fastapi-langgraph-server's ``checkpointed_graph_factory``."""
    return builder().compile(checkpointer=checkpointer)


graph = builder().compile()  # the Agent Server supplies the checkpointer that langgraph.json names
