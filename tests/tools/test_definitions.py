"""Tool definitions are checked at load, and every error names the entry, tool and field."""

from __future__ import annotations

from typing import Any

import pytest

from tests.weather import WEATHER_TOOL
from toolrelay.io.tools import ToolDefinition, ToolDefinitionError, parse_definitions

WEATHER = {**WEATHER_TOOL["function"], "url": "https://wttr.in/{city}?format=3", "method": "GET"}


def one(**changes: Any) -> dict[str, Any]:
    entry = {**WEATHER, **changes}
    return {key: value for key, value in entry.items() if value is not None}


def test_defaults_method_post_and_empty_object_parameters() -> None:
    (tool,) = parse_definitions([{"name": "ping", "url": "http://127.0.0.1:9/ping"}])
    assert tool == ToolDefinition(
        name="ping",
        url="http://127.0.0.1:9/ping",
        description="",
        parameters={"type": "object", "properties": {}},
        method="POST",
        headers=(),
    )
    assert tool.openai_tool() == {
        "type": "function",
        "function": {"name": "ping", "parameters": {"type": "object", "properties": {}}},
    }


@pytest.mark.parametrize("method", ["get", "Get", "purge", "MKCOL", "options", "trace"])
def test_any_verb_case_insensitive(method: str) -> None:
    (tool,) = parse_definitions([one(method=method)])
    assert tool.method == method.upper()


def test_round_trip_through_the_file_format() -> None:
    entry = one(headers={"X-Key": "k", "X-City": "{city}"})
    (tool,) = parse_definitions([entry])
    assert parse_definitions([tool.to_dict()]) == (tool,)
    assert tool.to_dict()["headers"] == {"X-Key": "k", "X-City": "{city}"}
    assert tool.openai_tool()["function"]["description"] == "Current weather for a city"


BAD: list[tuple[Any, str]] = [
    ({"name": "a"}, "tool #0 ('a'), field 'url': is required"),
    ({"url": "http://h/x"}, "tool #0, field 'name': is required"),
    ({"name": "has space", "url": "http://h/"}, "field 'name': must be 1 to 64 letters"),
    ({"name": "a" * 65, "url": "http://h/"}, "field 'name': must be 1 to 64 letters"),
    ({"name": 5, "url": "http://h/"}, "tool #0, field 'name': must be 1 to 64"),
    (one(url="wttr.in/{city}"), "field 'url': 'wttr.in/{city}' is not an absolute http"),
    (one(url="ftp://h/{city}"), "is not an absolute http:// or https:// URL"),
    (one(url="http:///path/{city}"), "is not an absolute http:// or https:// URL"),
    (one(url="http://h/a b/{city}"), "field 'url': must not contain spaces or line breaks"),
    (one(url=5), "tool #0 ('get_weather'), field 'url': must be a string"),
    (one(url="http://h/{town}"), "field 'url': placeholder {town} names no property"),
    (one(method="GE T"), "field 'method': 'GE T' is not an HTTP method"),
    (one(method=""), "field 'method': '' is not an HTTP method"),
    (one(method=["GET"]), "field 'method': ['GET'] is not an HTTP method"),
    (one(parameters=[]), "field 'parameters': must be a JSON Schema object"),
    (one(parameters={"type": "string"}), "field 'parameters': the arguments' schema must"),
    (one(parameters={"type": "object", "properties": []}), "'properties' must be an object"),
    (one(parameters={"type": "object", "required": "city"}), "'required' must be an array"),
    (one(description=3), "field 'description': must be a string"),
    (one(headers=["X-A: 1"]), "field 'headers': must be an object"),
    (one(headers={"X A": "1"}), "field 'headers.X A': is not a valid header name"),
    (one(headers={"X-A": 1}), "field 'headers.X-A': must be a string"),
    (one(headers={"X-A": "1\r\nX-B: 2"}), "field 'headers.X-A': must not contain CR, LF"),
    (one(headers={"X-A": "{token}"}), "field 'headers.X-A': placeholder {token} names no"),
    (one(header={"X-A": "1"}), "field 'header': unknown field; a tool has name, description"),
    ("get_weather", "tool #0: must be a JSON object, not a string"),
]


@pytest.mark.parametrize(("entry", "message"), BAD)
def test_bad_entries_name_tool_and_field(entry: Any, message: str) -> None:
    with pytest.raises(ToolDefinitionError) as caught:
        parse_definitions([entry])
    assert message in str(caught.value)


def test_the_failing_entry_is_counted_and_duplicates_are_refused() -> None:
    with pytest.raises(ToolDefinitionError, match=r"tool #1 \('b'\), field 'url'"):
        parse_definitions([one(), {"name": "b", "url": "nope"}])
    with pytest.raises(ToolDefinitionError, match=r"tool #1 .* tool #0 already has this name"):
        parse_definitions([one(), one()])


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({}, "must be a JSON array of objects, not an object"),
        ("[]", "must be a JSON array of objects, not a string"),
        (None, "not null"),
        ([], "holds no tool definition"),
    ],
)
def test_not_an_array_or_empty(data: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_definitions(data)
