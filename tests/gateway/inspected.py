"""A model for the inspector's tests: on the rescue path it first calls a tool
that does not exist, and corrects itself when the gateway's re-ask says so; asked
to "Lookup", it calls the gateway's own ``lookup`` tool and answers from its result."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

WEATHER: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
WRONG = '[TOOL_CALL]{"name": "get_wether", "arguments": {"city": "Paris"}}[/TOOL_CALL]'
RIGHT = '[TOOL_CALL]{"name": "get_weather", "arguments": {"city": "Paris"}}[/TOOL_CALL]'
QUESTION = "Weather in Paris, please"


def scenario() -> dict[str, Any]:
    """The simulator's rules (``toolrelay simulate --scenario``, or SimulatorConfig.load)."""
    return {
        "rules": [
            {"match": {"tool_result": "."}, "answer": {"content": "It is sunny."}},
            {
                "match": {"last_user": "^Lookup", "tools": "prompt"},
                "answer": {
                    "content": '[TOOL_CALL]{"name": "lookup", "arguments": {"city": "Paris"}}'
                    "[/TOOL_CALL]"
                },
            },
            {"match": {"repair": True, "tools": "prompt"}, "answer": {"content": RIGHT}},
            {
                "match": {"last_user": "^Weather", "tools": "prompt"},
                "answer": {"content": "Let me look.\n" + WRONG},
            },
            {"answer": {"content": "Hello."}},
        ]
    }


def scenario_json() -> str:
    return json.dumps(scenario())


def lookup_tools_file(service_url: str, folder: Path) -> str:
    """A tools file declaring the gateway's ``lookup`` tool, served at ``service_url``."""
    tool = {
        "name": "lookup",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        "url": service_url + "/lookup",
    }
    path = folder / "tools.json"
    path.write_text(json.dumps([tool]), encoding="utf-8")
    return str(path)
