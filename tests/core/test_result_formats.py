"""A parse names the format of each call, and that name is description, not
identity: a result still equals one built from its calls and content."""

from __future__ import annotations

from toolrelay import parse_tool_calls
from toolrelay.events import ParseResult

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}},
]


def test_each_call_is_named_by_its_format() -> None:
    text = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    result = parse_tool_calls(text, TOOLS)
    assert result.formats == ["hermes"]


def test_formats_take_no_part_in_equality() -> None:
    text = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    result = parse_tool_calls(text, TOOLS)
    assert result == ParseResult(calls=result.calls, content=result.content)
