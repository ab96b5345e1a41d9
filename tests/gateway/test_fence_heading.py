"""The ``# TOOL_CALL`` heading a weak model writes over its call, through the gateway.

The same call, and no heading or emptied fence in the content, on the native
and rescue paths, finished and streamed one character at a time.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.gateway.support import stack
from tests.weather import ASK_WEATHER, WEATHER_TOOL

CALL = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
TEXTS = [
    f"Let me look.\n```\n# TOOL_CALL\n{CALL}\n```",
    f"Let me look.\n# TOOL_CALL {CALL}",
    f"Let me look.\n# TOOL_CALL\n```json\n{CALL}\n```",
    f"Let me look.\n## TOOL_CALL:\n{CALL}",
]


def model_writing(text: str) -> dict[str, Any]:
    return {"rules": [{"answer": {"content": text}}]}


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("mode", ["native", "rescue"])
@pytest.mark.parametrize("stream", [False, True])
def test_heading_and_fence_never_reach_the_client(text: str, mode: str, stream: bool) -> None:
    settings = {"tool_mode": mode, "backend_kind": "openai"}
    with stack(model_writing(text), chunk=1, gateway_settings=settings) as (_, gw):
        client = gw.client()
        request: dict[str, Any] = {"messages": ASK_WEATHER, "tools": [WEATHER_TOOL]}
        if stream:
            with client.chat.completions.stream(model="toolrelay-sim", **request) as helper:
                reply = helper.get_final_completion()
        else:
            reply = client.chat.completions.create(model="toolrelay-sim", **request)
    choice = reply.choices[0]
    calls = choice.message.tool_calls or []
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == [
        ("get_weather", {"city": "Paris"})
    ]
    assert choice.finish_reason == "tool_calls"
    content = choice.message.content or ""
    assert "TOOL_CALL" not in content and "```" not in content
    assert content.strip() == "Let me look."
