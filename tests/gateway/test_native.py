"""Native pass-through: the backend calls tools itself; the gateway keeps the wire strict."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.gateway.support import TIME_TOOL, GatewayServer, stack
from tests.weather import ASK_WEATHER, WEATHER_TOOL
from toolrelay.simulator import Simulator

PARALLEL = {
    "models": [{"name": "toolrelay-sim"}, {"name": "other-model"}],
    "rules": [
        {
            "match": {"tools": "native", "last_user": "both"},
            "answer": {
                "tool_calls": [
                    {"name": "get_weather", "arguments": {"city": "Oslo"}},
                    {"name": "get_time", "arguments": {"tz": "CET"}},
                ]
            },
        },
        {
            "match": {"tools": "native", "last_user": "short name"},
            "answer": {"tool_calls": [{"name": "search", "arguments": {"q": "x"}}]},
        },
        {
            "match": {"tools": "native", "last_user": "text call"},
            "answer": {
                "content": 'Sure.\n<tool_call>\n{"name": "get_weather", '
                '"arguments": {"city": "Rome"}}\n</tool_call>'
            },
        },
        {
            "match": {"tools": "native", "last_user": "sloppy"},
            "answer": {"tool_calls": [{"name": "get_weather", "arguments": "{'city': 'Lima',}"}]},
        },
        {"answer": {"content": "plain answer to: {last_user}"}},
    ],
}
NAMESPACED = {
    "type": "function",
    "function": {
        "name": "docs__search",
        "description": "Search the docs",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
    },
}


@pytest.fixture(scope="module")
def gw() -> Iterator[GatewayServer]:
    with stack(PARALLEL, gateway_settings={"backend_kind": "openai"}) as (_, server):
        yield server


@pytest.fixture(scope="module")
def weather() -> Iterator[tuple[Simulator, GatewayServer]]:
    with stack(gateway_settings={"backend_kind": "openai"}) as pair:
        yield pair


def _ask(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def test_native_call_non_streaming(weather: tuple[Simulator, GatewayServer]) -> None:
    sim, gw = weather
    reply = gw.client().chat.completions.create(
        model="toolrelay-sim", messages=ASK_WEATHER, tools=[WEATHER_TOOL]
    )
    assert reply.object == "chat.completion"
    assert reply.id and reply.created and reply.model == "toolrelay-sim"
    choice = reply.choices[0]
    assert choice.index == 0 and choice.finish_reason == "tool_calls"
    assert choice.message.role == "assistant"
    (call,) = choice.message.tool_calls or []
    assert call.id and call.type == "function"
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    # Native: the backend got the tools array itself.
    assert sim.requests[-1].body["tools"][0]["function"]["name"] == "get_weather"


def test_native_call_streaming_iteration(weather: tuple[Simulator, GatewayServer]) -> None:
    _, gw = weather
    stream = gw.client().chat.completions.create(
        model="toolrelay-sim", messages=ASK_WEATHER, tools=[WEATHER_TOOL], stream=True
    )
    chunks = list(stream)
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert len({(c.id, c.created, c.model) for c in chunks}) == 1
    deltas = [tc for c in chunks for tc in (c.choices[0].delta.tool_calls or [])]
    assert deltas[0].id and deltas[0].type == "function"
    assert deltas[0].function and deltas[0].function.name == "get_weather"
    assert all(d.id is None and d.function and d.function.name is None for d in deltas[1:])
    arguments = "".join(d.function.arguments or "" for d in deltas if d.function)
    assert json.loads(arguments) == {"city": "Paris"}
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_stream_helper_final_completion(weather: tuple[Simulator, GatewayServer]) -> None:
    _, gw = weather
    with gw.client().chat.completions.stream(
        model="toolrelay-sim", messages=ASK_WEATHER, tools=[WEATHER_TOOL]
    ) as stream:
        for _ in stream:
            pass
        final = stream.get_final_completion()
    (call,) = final.choices[0].message.tool_calls or []
    assert call.function.name == "get_weather"
    assert call.function.parsed_arguments is None or call.function.parsed_arguments
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    assert final.choices[0].finish_reason == "tool_calls"


def test_usage_chunk_only_when_asked(weather: tuple[Simulator, GatewayServer]) -> None:
    _, gw = weather
    client = gw.client()
    plain = list(
        client.chat.completions.create(model="toolrelay-sim", messages=_ask("hi"), stream=True)
    )
    assert all(c.choices for c in plain) and all(c.usage is None for c in plain)
    with_usage = list(
        client.chat.completions.create(
            model="toolrelay-sim",
            messages=_ask("hi"),
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert with_usage[-1].choices == [] and with_usage[-1].usage is not None
    assert with_usage[-1].usage.total_tokens > 0
    text = "".join(c.choices[0].delta.content or "" for c in with_usage if c.choices)
    assert text.startswith("This is the toolrelay simulator")


def test_parallel_calls(gw: GatewayServer) -> None:
    client = gw.client()
    reply = client.chat.completions.create(
        model="toolrelay-sim", messages=_ask("both please"), tools=[WEATHER_TOOL, TIME_TOOL]
    )
    calls = reply.choices[0].message.tool_calls or []
    assert [c.function.name for c in calls] == ["get_weather", "get_time"]
    assert len({c.id for c in calls}) == 2
    with client.chat.completions.stream(
        model="toolrelay-sim", messages=_ask("both please"), tools=[WEATHER_TOOL, TIME_TOOL]
    ) as stream:
        final = stream.get_final_completion()
    streamed = final.choices[0].message.tool_calls or []
    assert [json.loads(c.function.arguments) for c in streamed] == [{"city": "Oslo"}, {"tz": "CET"}]


def test_parallel_tool_calls_false_keeps_the_first(gw: GatewayServer) -> None:
    client = gw.client()
    for stream in (False, True):
        raw = client.chat.completions.create(
            model="toolrelay-sim",
            messages=_ask("both please"),
            tools=[WEATHER_TOOL, TIME_TOOL],
            parallel_tool_calls=False,
            stream=stream,
        )
        if stream:
            names = [
                tc.function.name
                for chunk in raw
                for tc in (chunk.choices[0].delta.tool_calls or [])
                if tc.function and tc.function.name
            ]
        else:
            names = [c.function.name for c in raw.choices[0].message.tool_calls or []]
        assert names == ["get_weather"]


def test_namespaced_short_name_rewritten(gw: GatewayServer) -> None:
    reply = gw.client().chat.completions.create(
        model="toolrelay-sim", messages=_ask("short name"), tools=[NAMESPACED]
    )
    (call,) = reply.choices[0].message.tool_calls or []
    assert call.function.name == "docs__search"


def test_text_call_in_native_round_is_parsed(gw: GatewayServer) -> None:
    client = gw.client()
    for stream in (False, True):
        with (
            client.chat.completions.stream(
                model="toolrelay-sim", messages=_ask("text call"), tools=[WEATHER_TOOL]
            )
            if stream
            else _nullstream() as helper
        ):
            if helper is None:
                reply = client.chat.completions.create(
                    model="toolrelay-sim", messages=_ask("text call"), tools=[WEATHER_TOOL]
                )
            else:
                reply = helper.get_final_completion()
        message = reply.choices[0].message
        assert "<tool_call>" not in (message.content or "")
        (call,) = message.tool_calls or []
        assert call.function.name == "get_weather"
        assert json.loads(call.function.arguments) == {"city": "Rome"}
        assert reply.choices[0].finish_reason == "tool_calls"
    health = _health(gw)
    assert health["counters"]["text_calls"] >= 2
    assert health["backends"][0]["facts"]["toolrelay-sim"]["emits_text_calls"] is True


def test_sloppy_native_arguments_leave_strict(gw: GatewayServer) -> None:
    reply = gw.client().chat.completions.create(
        model="toolrelay-sim", messages=_ask("sloppy"), tools=[WEATHER_TOOL]
    )
    (call,) = reply.choices[0].message.tool_calls or []
    assert json.loads(call.function.arguments) == {"city": "Lima"}


def test_framework_style_request(gw: GatewayServer) -> None:
    """What pydantic-ai / the Agents SDK send: strict tools, additionalProperties
    false, tool_choice auto, no stream key."""
    strict_tool = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather",
            "strict": True,
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
                "additionalProperties": False,
            },
        },
    }
    reply = gw.client().chat.completions.create(
        model="toolrelay-sim",
        messages=[{"role": "system", "content": "be brief"}, *_ask("both please")],
        tools=[strict_tool],
        tool_choice="auto",
    )
    assert [c.function.name for c in reply.choices[0].message.tool_calls or []] == ["get_weather"]


def test_models_passthrough(gw: GatewayServer) -> None:
    ids = [m.id for m in gw.client().models.list()]
    assert ids == ["toolrelay-sim", "other-model"]


def _health(gw: GatewayServer) -> Any:
    import httpx

    return httpx.get(gw.url + "/health", timeout=10).json()


class _nullstream:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None
