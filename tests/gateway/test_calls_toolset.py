"""A finished answer's native calls resolve through the round's own tool set when
the choice allows every declared tool (made once per round, issue 29): the same
names resolve to the same tools as through a set made from the allowed tools."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from toolrelay.io.round import RoundRequest
from toolrelay.io.round.body import calls_toolset, parse_tools
from toolrelay.names import ToolSet

NAMES = ["get_weather", "functions.get_weather", "search", "a__search", "b__search", "x"]


def _tool(name: str) -> dict[str, Any]:
    parameters = {"type": "object", "properties": {name: {"type": "string"}}}
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


@given(
    declared=st.lists(st.sampled_from(NAMES), min_size=1, max_size=4, unique=True),
    choice=st.sampled_from(["auto", "required", "none", None, "named", "allowed"]),
    asked=st.lists(st.sampled_from([*NAMES, " search ", "weather", ""]), max_size=6),
)
def test_the_rounds_set_resolves_as_the_allowed_tools_set(
    declared: list[str], choice: str | None, asked: list[str]
) -> None:
    tool_choice: Any = choice
    if choice == "named":
        tool_choice = {"type": "function", "function": {"name": declared[-1]}}
    elif choice == "allowed":
        allowed = [{"type": "function", "function": {"name": declared[0]}}]
        tool_choice = {"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": allowed}}
    body = {"model": "m", "messages": [], "tools": [_tool(n) for n in declared]}
    body["tool_choice"] = tool_choice
    req = RoundRequest.from_body(body)
    tools = parse_tools(req)
    fast, slow = calls_toolset(req, tools), ToolSet(list(tools))  # a list: mapped afresh
    assert fast.declared == slow.declared
    for name in asked:
        assert fast.resolve(name) == slow.resolve(name)
        resolved = slow.resolve(name)
        if resolved is not None:
            assert fast.parameters(resolved) == slow.parameters(resolved)
