"""A simulator scenario for the fronts, and their tools in each wire format."""

from __future__ import annotations

from typing import Any

from tests.weather import WEATHER_TOOL

CITY = r"(?i)weather in (?P<city>\w+)"
PATCH = "*** Begin Patch\n*** End Patch"
SCENARIO: dict[str, Any] = {
    "rules": [
        {
            "match": {"tool_result": True},
            "answer": {"content": "The {tool_name} tool says: {last_tool_result}"},
        },
        {
            "match": {"tools": "native", "last_user": CITY},
            "answer": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "{city}"}}]},
        },
        {
            "match": {"tools": "prompt", "last_user": CITY},
            "answer": {
                "content": 'Let me look.\n[TOOL_CALL]{"name": "get_weather", '
                '"arguments": {"city": "{city}"}}[/TOOL_CALL]'
            },
        },
        {
            "match": {"tools": "native", "last_user": "(?i)patch"},
            "answer": {"tool_calls": [{"name": "apply_patch", "arguments": {"input": PATCH}}]},
        },
        {
            "match": {"tools": "prompt", "last_user": "(?i)patch"},
            "answer": {
                "content": '[TOOL_CALL]{"name": "apply_patch", "arguments": {"input": '
                '"*** Begin Patch\\n*** End Patch"}}[/TOOL_CALL]'
            },
        },
        {
            "match": {"last_user": "(?i)think"},
            "answer": {"reasoning": "The user wants a thought.", "content": "Here it is."},
        },
        {
            "match": {"last_user": "(?i)long"},
            "answer": {"content": "This answer was cut", "finish_reason": "length"},
        },
        {"match": {"last_user": "(?i)fail"}, "answer": {"error": {"status": 503}}},
        {"answer": {"content": "You said: {last_user}"}},
    ]
}
ANTHROPIC_TOOL: dict[str, Any] = {
    "name": "get_weather",
    "description": WEATHER_TOOL["function"]["description"],
    "input_schema": WEATHER_TOOL["function"]["parameters"],
}
RESPONSES_TOOL: dict[str, Any] = {
    "type": "function",
    "name": "get_weather",
    "description": WEATHER_TOOL["function"]["description"],
    "parameters": WEATHER_TOOL["function"]["parameters"],
}
ASK = "What's the weather in Paris?"
# Codex's freeform apply_patch: a custom tool with a grammar.
CUSTOM_TOOL: dict[str, Any] = {
    "type": "custom",
    "name": "apply_patch",
    "description": "Apply a patch to files.",
    "format": {"type": "grammar", "syntax": "lark", "definition": 'start: "*** Begin Patch"'},
}
