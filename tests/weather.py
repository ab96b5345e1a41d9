"""The weather tool and question the simulator's built-in scenario answers to."""

from __future__ import annotations

from typing import Any

WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
ASK_WEATHER = [{"role": "user", "content": "What's the weather in Paris?"}]
