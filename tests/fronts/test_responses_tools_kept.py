"""A Responses request's top-level tool list is read once per list and copied
after (``_top_level_tools``): held here to the general read it skips, for
generated lists of every kind of entry, valid and not (the same tools, names
and hosted tools, or the same error), read once and again."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from toolrelay.server.errors import APIError
from toolrelay.server.responses.request import _ToolSet, _top_level_tools

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=3), inner, max_size=2)
    ),
    max_leaves=4,
)
NAME = st.sampled_from(["f", "g", "", "mcp"]) | JSON
FORMAT = st.sampled_from(
    [None, {"type": "text"}, {"type": "grammar", "definition": "x"}, {"type": "grammar"}, "x"]
)


@st.composite
def tools(draw: st.DrawFn, depth: int = 0) -> Any:
    kind = draw(st.sampled_from(["function", "custom", "namespace", "web_search", "bad"]))
    if kind == "bad":
        return draw(JSON)
    tool: dict[str, Any] = {"type": kind, "name": draw(NAME)}
    if draw(st.booleans()):
        tool["description"] = draw(st.text(max_size=4) | JSON)
    if kind == "function":
        if draw(st.booleans()):
            tool["parameters"] = draw(st.just({"type": "object"}) | JSON)
        if draw(st.booleans()):
            tool["strict"] = draw(st.booleans())
    elif kind == "custom":
        tool["format"] = draw(FORMAT)
    elif kind == "namespace" and depth < 2:
        tool["tools"] = draw(st.lists(tools(depth + 1), max_size=3) | JSON)
    return tool


def read(reader: Any, value: Any) -> tuple[Any, ...]:
    """What reading ``value`` gives: the tool set's parts, or the error."""
    try:
        toolset = reader(value)
    except APIError as exc:
        return ("error", exc.status, exc.message, exc.param)
    return (toolset.tools, toolset.custom, toolset.namespaced, toolset.hosted)


def general(value: Any) -> _ToolSet:
    toolset = _ToolSet()
    toolset.read(value, "tools")
    return toolset


@settings(max_examples=500, deadline=None)
@given(st.lists(tools(), max_size=4) | JSON)
def test_a_kept_read_is_the_general_read(value: Any) -> None:
    expected = read(general, value)
    assert read(_top_level_tools, value) == expected
    # Again, from the kept read; and what a round does to its tools stays its own.
    again = read(_top_level_tools, value)
    assert again == expected
    if again[0] != "error":
        for tool in again[0]:
            tool["function"]["name"] = "changed"
        again[1].add("changed")
        again[2]["changed"] = ("x", "y")
        again[3].clear()
        assert read(_top_level_tools, value) == expected
