"""A model for the inspector's tests: on the rescue path it first calls a tool
that does not exist, and corrects itself when the gateway's re-ask says so."""

from __future__ import annotations

import json
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
