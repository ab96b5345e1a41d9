"""Calls the parser rejects reach the client as an explanation, never as silence (issue 10).

The simulator plays a model that writes a call to a tool the request did not
declare, and one whose arguments cannot be read. Whatever the validation
setting, the client gets no call, a ``toolrelay_warning`` naming each
rejected call and why, and an answer that is not empty.
"""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from tests.gateway.support import stack

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
SCENARIO = {
    "rules": [
        {
            "match": {"last_user": "(?i)delete"},
            "answer": {
                "content": '<tool_call>{"name": "rm_rf", "arguments": {"path": "/"}}</tool_call>'
            },
        },
        {
            "match": {"last_user": "(?i)weather"},
            "answer": {
                "content": 'On it.<tool_call>{"name": "get_weather", "arguments": {city: Oslo}}'
                "</tool_call>"
            },
        },
    ]
}


def _ask(gw: Any, stream: bool, question: str) -> tuple[str, list[Any], str, str | None]:
    client = gw.client()
    request: dict[str, Any] = {
        "model": "m",
        "messages": [{"role": "user", "content": question}],
        "tools": [WEATHER],
    }
    if stream:
        chunks = list(client.chat.completions.create(stream=True, **request))
        content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        calls = [t for c in chunks if c.choices for t in (c.choices[0].delta.tool_calls or [])]
        last = [c for c in chunks if c.choices][-1]
        warning = (last.model_extra or {}).get("toolrelay_warning")
        return content, calls, last.choices[0].finish_reason, warning
    reply = client.chat.completions.create(**request)
    choice = reply.choices[0]
    return (
        choice.message.content or "",
        choice.message.tool_calls or [],
        choice.finish_reason,
        (reply.model_extra or {}).get("toolrelay_warning"),
    )


@pytest.mark.parametrize("stream", [False, True])
def test_an_undeclared_tool_is_named_in_a_warning_and_the_answer_says_why(stream: bool) -> None:
    settings = {"tool_mode": "native", "validation": "off"}
    with stack(SCENARIO, gateway_settings=settings) as (_sim, gw):
        content, calls, finish, warning = _ask(gw, stream, "Delete everything")
    assert calls == []
    assert finish == "stop"
    assert warning is not None and "rm_rf" in warning and "no tool named" in warning
    assert "rm_rf" in content  # never an empty answer with no explanation
    assert "<tool_call>" not in content


@pytest.mark.parametrize("stream", [False, True])
def test_unreadable_arguments_are_reported_not_sent_as_an_empty_call(stream: bool) -> None:
    settings = {"tool_mode": "native", "validation": "off"}
    with stack(SCENARIO, gateway_settings=settings) as (_sim, gw):
        content, calls, finish, warning = _ask(gw, stream, "Weather in Oslo?")
    assert calls == []
    assert warning is not None and "get_weather" in warning and "could not be read" in warning
    assert content == "On it."
    assert finish == "stop"


# A call cut inside a later string: it had started streaming when its text ended.
CUT = {
    "rules": [
        {
            "match": {"last_user": "(?i)weather"},
            "answer": {
                "content": 'On it.<tool_call>{"name": "get_weather", "arguments": '
                '{"city": "Oslo", "unit": "c'
            },
        }
    ]
}


@pytest.mark.parametrize("stream", [False, True])
def test_a_call_cut_inside_a_string_is_reported_not_sent_cut_short(stream: bool) -> None:
    with stack(CUT, gateway_settings={"tool_mode": "native", "validation": "warn"}) as (_s, gw):
        content, calls, finish, warning = _ask(gw, stream, "Weather in Oslo?")
    assert calls == []
    assert warning is not None and "get_weather" in warning and "never ends" in warning
    assert content == "On it."
    assert finish == "stop"


def test_unchecked_a_cut_call_that_started_streaming_ends_without_a_value_cut_short() -> None:
    # Validation off, the call's start went out before its text was cut: the client has
    # the arguments as they stood (not a JSON object, so never a call that looks whole),
    # finish "stop" and the warning; the Anthropic front closes the tool_use block.
    with stack(CUT, gateway_settings={"tool_mode": "native", "validation": "off"}) as (_s, gw):
        content, calls, finish, warning = _ask(gw, True, "Weather in Oslo?")
        client = anthropic.Anthropic(base_url=gw.url, api_key="none", max_retries=0, timeout=20)
        with client.messages.stream(
            model="m",
            max_tokens=100,
            messages=[{"role": "user", "content": "Weather in Oslo?"}],
            tools=[{"name": "get_weather", "input_schema": WEATHER["function"]["parameters"]}],
        ) as events:
            kinds = [event.type for event in events]
    arguments = "".join(call.function.arguments or "" for call in calls)
    assert arguments == '{"city":"Oslo","unit":"c'
    assert finish == "stop" and content == "On it."
    assert warning is not None and "never ends" in warning
    assert kinds.count("content_block_start") == kinds.count("content_block_stop")
