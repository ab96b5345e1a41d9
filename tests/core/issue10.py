"""Shared by the tests of issue 10's dialects and policies: one text, checked whole and
streamed (one character at a time, and in a few larger cuts)."""

from __future__ import annotations

from typing import Any

from streamcheck import check_stream  # type: ignore[import-not-found]

from toolrelay import ParseResult, parse_tool_calls

Schema = dict[str, Any]


def tool(name: str, required: tuple[str, ...] = (), **properties: Schema) -> dict[str, Any]:
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        parameters["required"] = list(required)
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


STRING: Schema = {"type": "string"}
INTEGER: Schema = {"type": "integer"}

WEATHER = tool("get_weather", ("city",), city=STRING, days=INTEGER)
TIME = tool("current_time")
EDIT = tool("edit_file", ("path",), path=STRING, old_string=STRING, new_string=STRING)
TOOLS = [WEATHER, TIME, EDIT]


def parsed(
    text: str,
    tools: Any = TOOLS,
    calls: list[tuple[str, dict[str, Any]]] | None = None,
    content: str | None = None,
    reasoning: str | None = None,
    fmt: str = "auto",
) -> ParseResult:
    """Parse ``text``, check the expected parts, and stream it every way checked."""
    result = parse_tool_calls(text, tools, fmt)
    if calls is not None:
        assert [(c.name, c.arguments) for c in result.calls] == calls
    if content is not None:
        assert result.content == content
    if reasoning is not None:
        assert result.reasoning == reasoning
    check_stream(text, list(range(1, len(text))), tools, fmt)
    check_stream(text, list(range(0, len(text), 7)), tools, fmt)
    return result
