"""Hypothesis strategies for realistic checkpoint contents."""

from __future__ import annotations

from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage

text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), max_codepoint=0x1F600), max_size=40
)  # unicode, emoji included, no lone surrogates

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**62), max_value=2**62),
    st.floats(allow_nan=False, allow_infinity=False),
    text,
    st.binary(max_size=64),
)

messages = st.one_of(
    st.builds(HumanMessage, content=text),
    st.builds(AIMessage, content=text),
    st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "tool"]), "content": text}),
)

values = st.recursive(
    st.one_of(scalars, messages),
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.dictionaries(st.text(max_size=8), children, max_size=5),
    ),
    max_leaves=12,
)
"""A channel or write value: scalars, bytes, unicode, messages, nested lists and dicts."""

big_values = st.builds(lambda n, fill: fill * n, st.integers(min_value=100, max_value=3_000), st.sampled_from("ab"))
"""Strings of 100 bytes to 3 KB, to push byte limits."""

thread_ids = st.sampled_from(["t1", "t2", "t3", "t4"])
namespaces = st.sampled_from(["", "sub:1|inner:2", "sub:3"])
channels = st.sampled_from(["messages", "count", "doc", "branch:to:node"])
special_channels = st.sampled_from(["__error__", "__interrupt__", "__scheduled__", "__resume__"])
task_ids = st.sampled_from(["task-a", "task-b", "task-c"])
task_paths = st.sampled_from(["", "~__pregel_pull, node", "~__pregel_pull, other", "~__pregel_push, 0, False"])
run_ids = st.sampled_from(["run-1", "run-2", "run-3"])
sources = st.sampled_from(["input", "loop", "update", "fork"])
