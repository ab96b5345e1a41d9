"""tool_choice and parallel_tool_calls, enforced even on a backend that ignores them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import yaml

from tests.gateway.support import TIME_TOOL, GatewayServer, gateway
from tests.weather import WEATHER_TOOL
from toolrelay.io.settings import Settings
from toolrelay.simulator import Simulator, SimulatorConfig

# The simulator ignores tool_choice, like many servers; the gateway's re-ask is
# a rescue round (tools in the prompt), which these rules answer with a call.
SCENARIO = {
    "rules": [
        {"match": {"last_user": "stubborn"}, "answer": {"content": "I would rather chat."}},
        {
            "match": {"tools": "prompt", "last_user": "weather"},
            "answer": {
                "content": '[TOOL_CALL]{"name": "get_time", "arguments": {"tz": "UTC"}}[/TOOL_CALL]'
            },
        },
        {
            "match": {"tools": "prompt", "last_user": "please act"},
            "answer": {
                "content": '[TOOL_CALL]{"name": "get_weather", '
                '"arguments": {"city": "Oslo"}}[/TOOL_CALL]'
            },
        },
        {
            "match": {"tools": "native", "last_user": "markup"},
            "answer": {
                "content": 'Fine.[TOOL_CALL]{"name": "get_weather", '
                '"arguments": {"city": "Rome"}}[/TOOL_CALL]'
            },
        },
        {
            "match": {"tools": "native", "last_user": "weather"},
            "answer": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
        },
        {"answer": {"content": "Hello there."}},
    ]
}
TOOLS = [WEATHER_TOOL, TIME_TOOL]


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator(SimulatorConfig.load(SCENARIO, ignore_tool_choice=True, chunk=3)) as simulator:
        yield simulator


@pytest.fixture(scope="module")
def gw(sim: Simulator) -> Iterator[GatewayServer]:
    with gateway(sim.openai_url, backend_kind="openai") as server:
        yield server


def _ask(
    gw: GatewayServer, text: str, tool_choice: Any, stream: bool = False
) -> openai.types.chat.ChatCompletion:
    client = gw.client()
    messages: Any = [{"role": "user", "content": text}]
    if not stream:
        return client.chat.completions.create(
            model="toolrelay-sim", messages=messages, tools=TOOLS, tool_choice=tool_choice
        )
    with client.chat.completions.stream(
        model="toolrelay-sim", messages=messages, tools=TOOLS, tool_choice=tool_choice
    ) as helper:
        return helper.get_final_completion()


def _names(reply: openai.types.chat.ChatCompletion) -> list[str]:
    return [call.function.name for call in reply.choices[0].message.tool_calls or []]


@pytest.mark.parametrize("stream", [False, True])
def test_auto(gw: GatewayServer, stream: bool) -> None:
    reply = _ask(gw, "weather in Paris", "auto", stream)
    assert _names(reply) == ["get_weather"]
    assert reply.choices[0].finish_reason == "tool_calls"


@pytest.mark.parametrize("stream", [False, True])
def test_none_returns_no_call(gw: GatewayServer, stream: bool) -> None:
    reply = _ask(gw, "weather in Paris", "none", stream)
    assert _names(reply) == []
    assert reply.choices[0].finish_reason == "stop"


@pytest.mark.parametrize("stream", [False, True])
def test_none_removes_call_markup(gw: GatewayServer, stream: bool) -> None:
    reply = _ask(gw, "markup", "none", stream)
    assert _names(reply) == []
    assert reply.choices[0].message.content == "Fine."


@pytest.mark.parametrize("stream", [False, True])
def test_required_re_asks_once(gw: GatewayServer, stream: bool) -> None:
    reply = _ask(gw, "please act", "required", stream)
    assert _names(reply) == ["get_weather"]
    assert reply.choices[0].finish_reason == "tool_calls"
    assert not (reply.model_extra or {}).get("toolrelay_warning")


@pytest.mark.parametrize("stream", [False, True])
def test_required_unmet_warns(gw: GatewayServer, stream: bool) -> None:
    reply = _ask(gw, "stubborn", "required", stream)
    assert _names(reply) == []
    assert reply.choices[0].finish_reason == "stop"
    assert reply.choices[0].message.content == "I would rather chat."
    if not stream:
        assert "required" in (reply.model_extra or {})["toolrelay_warning"]


def test_required_unmet_warning_rides_on_the_final_chunk(gw: GatewayServer) -> None:
    chunks = list(
        gw.client().chat.completions.create(
            model="toolrelay-sim",
            messages=[{"role": "user", "content": "stubborn"}],
            tools=TOOLS,
            tool_choice="required",
            stream=True,
        )
    )
    final = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert len(final) == 1 and final[0] is chunks[-1]
    assert "required" in (final[0].model_extra or {})["toolrelay_warning"]
    assert all("toolrelay_warning" not in (c.model_extra or {}) for c in chunks[:-1])


@pytest.mark.parametrize("stream", [False, True])
def test_named_returns_only_that_call(gw: GatewayServer, stream: bool) -> None:
    named = {"type": "function", "function": {"name": "get_time"}}
    reply = _ask(gw, "weather in Paris", named, stream)
    assert _names(reply) == ["get_time"]
    assert json.loads(reply.choices[0].message.tool_calls[0].function.arguments) == {"tz": "UTC"}
    assert reply.choices[0].finish_reason == "tool_calls"


def test_named_finish_reason_stop_when_configured(sim: Simulator) -> None:
    models = {"toolrelay-sim": {"finish_reason_named": "stop"}}
    with gateway(sim.openai_url, backend_kind="openai", models=models) as gw:
        named = {"type": "function", "function": {"name": "get_weather"}}
        reply = _ask(gw, "weather in Paris", named)
    assert _names(reply) == ["get_weather"]
    assert reply.choices[0].finish_reason == "stop"


def test_named_undeclared_tool_is_a_400(gw: GatewayServer) -> None:
    response = httpx.post(
        gw.url + "/v1/chat/completions",
        json={
            "model": "toolrelay-sim",
            "messages": [{"role": "user", "content": "hi"}],
            "tools": TOOLS,
            "tool_choice": {"type": "function", "function": {"name": "nope"}},
        },
        timeout=10,
    )
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "tool_choice"


def test_omit_tool_choice(sim: Simulator) -> None:
    with gateway(sim.openai_url, backend_kind="openai", omit_tool_choice=True) as gw:
        _ask(gw, "weather in Paris", "auto")
    assert "tool_choice" not in sim.requests[-1].body
    assert sim.requests[-1].body["tools"]


def test_required_re_ask_uses_guided_decoding_where_offered(sim: Simulator) -> None:
    with gateway(sim.openai_url, backend_kind="vllm") as gw:
        reply = _ask(gw, "please act", "required")
    assert _names(reply) == ["get_weather"]
    schema = sim.requests[-1].body["response_format"]["json_schema"]["schema"]
    assert [v["properties"]["name"]["const"] for v in schema["anyOf"]] == [
        "get_weather",
        "get_time",
    ]
    assert "tools" not in sim.requests[-1].body


def test_omit_tool_choice_per_backend_and_model(sim: Simulator, tmp_path: Path) -> None:
    config = tmp_path / "toolrelay.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "backends": [{"url": sim.openai_url, "kind": "openai", "omit_tool_choice": True}],
                "models": {"keeps-it": {"omit_tool_choice": False}},
            }
        )
    )
    with GatewayServer(Settings(config=str(config))) as gw:
        _ask(gw, "weather in Paris", "auto")
        assert "tool_choice" not in sim.requests[-1].body
        gw.client().chat.completions.create(
            model="keeps-it",
            messages=[{"role": "user", "content": "weather in Paris"}],
            tools=TOOLS,
            tool_choice="auto",
        )
        assert sim.requests[-1].body["tool_choice"] == "auto"
