"""The rescue path: tools in the prompt, calls parsed from text, history rewritten."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.gateway.support import TIME_TOOL, GatewayServer, stack
from tests.weather import ASK_WEATHER, WEATHER_TOOL
from toolrelay.simulator import Simulator

HERMES_NATIVE = {
    "rules": [
        {
            "match": {"tools": "prompt", "tool_result": True},
            "answer": {"content": "It is {last_tool_result} there."},
        },
        {
            "match": {"tools": "prompt", "last_user": "(?i)weather in (?P<city>\\w+)"},
            "answer": {
                "content": 'Let me look.\n[TOOL_CALL]{"name": "get_weather", '
                '"arguments": {"city": "{city}"}}[/TOOL_CALL]'
            },
        },
        {
            # What a Qwen model writes natively: vLLM's parser stops at the tag.
            "match": {"tools": "native"},
            "answer": {
                "content": 'Let me look.\n<tool_call>\n{"name": "get_weather", '
                '"arguments": {"city": "Paris"}}\n</tool_call>'
            },
        },
        {"answer": {"content": "no tools here"}},
    ]
}


def _last_completion(sim: Simulator) -> dict[str, Any]:
    """The body of the last chat completion the model got. Not ``sim.requests[-1]``:
    the gateway's capability probe of a model (``/api/show``) runs beside the first
    request to it, and may land after it (which test comes first is not fixed)."""
    return [r.body for r in sim.requests if r.path.endswith("/chat/completions")][-1]


@pytest.fixture(scope="module")
def stripped() -> Iterator[tuple[Simulator, GatewayServer]]:
    """A proxy in front of the model drops tools; toolrelay is told to rescue."""
    with stack(strip_tools=True, gateway_settings={"tool_mode": "rescue"}) as pair:
        yield pair


@pytest.fixture(scope="module")
def vllm_stop() -> Iterator[tuple[Simulator, GatewayServer]]:
    with stack(
        HERMES_NATIVE,
        stop_at_tool_call_tag=True,
        gateway_settings={"backend_kind": "vllm", "tool_mode": "rescue"},
    ) as pair:
        yield pair


def test_rescue_through_tools_stripping_backend(stripped: tuple[Simulator, GatewayServer]) -> None:
    sim, gw = stripped
    reply = gw.client().chat.completions.create(
        model="toolrelay-sim", messages=ASK_WEATHER, tools=[WEATHER_TOOL], tool_choice="auto"
    )
    message = reply.choices[0].message
    (call,) = message.tool_calls or []
    assert call.function.name == "get_weather" and call.type == "function" and call.id
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    assert "[TOOL_CALL]" not in (message.content or "")
    assert reply.choices[0].finish_reason == "tool_calls"
    sent = _last_completion(sim)
    assert "tools" not in sent and "tool_choice" not in sent
    system = sent["messages"][0]
    assert system["role"] == "system" and "[TOOL_CALL]" in system["content"]
    assert "[SYSTEM DIRECTIVE]" in sent["messages"][-1]["content"]


def test_rescue_streaming_keeps_markup_out(stripped: tuple[Simulator, GatewayServer]) -> None:
    _, gw = stripped
    chunks = list(
        gw.client().chat.completions.create(
            model="toolrelay-sim", messages=ASK_WEATHER, tools=[WEATHER_TOOL], stream=True
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert "TOOL_CALL" not in text and "[" not in text
    calls = [tc for c in chunks for tc in (c.choices[0].delta.tool_calls or [])]
    assert calls[0].function and calls[0].function.name == "get_weather"
    args = "".join(tc.function.arguments or "" for tc in calls if tc.function)
    assert json.loads(args) == {"city": "Paris"}
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_history_with_earlier_tool_rounds(stripped: tuple[Simulator, GatewayServer]) -> None:
    sim, gw = stripped
    messages = [
        {"role": "system", "content": "You are terse."},
        *ASK_WEATHER,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "18 C and sunny"},
    ]
    with gw.client().chat.completions.stream(
        model="toolrelay-sim", messages=messages, tools=[WEATHER_TOOL]
    ) as stream:
        final = stream.get_final_completion()
    message = final.choices[0].message
    assert not message.tool_calls
    assert "18 C and sunny" in (message.content or "")
    assert final.choices[0].finish_reason == "stop"
    sent = _last_completion(sim)["messages"]
    assert {m["role"] for m in sent} <= {"system", "user", "assistant"}
    assert sum(m["role"] == "system" for m in sent) == 1
    assert all("tool_calls" not in m for m in sent)


def test_vllm_stop_at_tag_is_avoided(vllm_stop: tuple[Simulator, GatewayServer]) -> None:
    sim, gw = vllm_stop
    for stream in (False, True):
        if stream:
            with gw.client().chat.completions.stream(
                model="toolrelay-sim", messages=ASK_WEATHER, tools=[WEATHER_TOOL]
            ) as helper:
                reply = helper.get_final_completion()
        else:
            reply = gw.client().chat.completions.create(
                model="toolrelay-sim", messages=ASK_WEATHER, tools=[WEATHER_TOOL]
            )
        (call,) = reply.choices[0].message.tool_calls or []
        assert json.loads(call.function.arguments) == {"city": "Paris"}
    # The bracket delimiters never reach the stop tag.
    assert "<tool_call>" not in json.dumps(_last_completion(sim))


def test_native_mode_on_stop_at_tag_backend_loses_the_call() -> None:
    """The failure the rescue path exists for, reproduced: natively, the
    server cuts the reply at <tool_call> and the call is gone."""
    with stack(
        HERMES_NATIVE,
        stop_at_tool_call_tag=True,
        gateway_settings={"backend_kind": "vllm", "tool_mode": "native"},
    ) as (_, gw):
        reply = gw.client().chat.completions.create(
            model="toolrelay-sim", messages=ASK_WEATHER, tools=[WEATHER_TOOL]
        )
    assert not reply.choices[0].message.tool_calls
    assert reply.choices[0].finish_reason == "stop"


def test_parallel_calls_in_text_stream_one_index_at_a_time() -> None:
    two_calls = {
        "rules": [
            {
                "answer": {
                    "content": 'On it.\n[TOOL_CALL]{"name": "get_weather", "arguments": '
                    '{"city": "Oslo"}}[/TOOL_CALL]\n[TOOL_CALL]{"name": "get_time", '
                    '"arguments": {"tz": "CET"}}[/TOOL_CALL]'
                }
            }
        ]
    }
    with stack(two_calls, chunk=3, gateway_settings={"tool_mode": "rescue"}) as (_, gw):
        client = gw.client()
        chunks = list(
            client.chat.completions.create(
                model="toolrelay-sim",
                messages=ASK_WEATHER,
                tools=[WEATHER_TOOL, TIME_TOOL],
                stream=True,
            )
        )
        indices = [tc.index for c in chunks for tc in (c.choices[0].delta.tool_calls or [])]
        assert indices == sorted(indices) and set(indices) == {0, 1}
        with client.chat.completions.stream(
            model="toolrelay-sim", messages=ASK_WEATHER, tools=[WEATHER_TOOL, TIME_TOOL]
        ) as stream:
            final = stream.get_final_completion()
    calls = final.choices[0].message.tool_calls or []
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == [
        ("get_weather", {"city": "Oslo"}),
        ("get_time", {"tz": "CET"}),
    ]
    assert (final.choices[0].message.content or "").strip() == "On it."


def test_namespaced_name_rescued(stripped: tuple[Simulator, GatewayServer]) -> None:
    """The model writes the short name; the declared namespaced one comes back."""
    namespaced = {
        "type": "function",
        "function": {**WEATHER_TOOL["function"], "name": "weather__get_weather"},
    }
    _, gw = stripped
    reply = gw.client().chat.completions.create(
        model="toolrelay-sim", messages=ASK_WEATHER, tools=[namespaced]
    )
    (call,) = reply.choices[0].message.tool_calls or []
    assert call.function.name == "weather__get_weather"
