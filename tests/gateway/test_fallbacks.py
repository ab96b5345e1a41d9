"""Automatic fallbacks: tool refusals, Ollama detection, swallowed streamed calls."""

from __future__ import annotations

import json
import socket
from typing import Any

import httpx
import pytest

from tests.gateway.support import GatewayServer, gateway, stack
from tests.weather import ASK_WEATHER, WEATHER_TOOL
from toolrelay.simulator import Simulator, SimulatorConfig


def _health(gw: GatewayServer) -> Any:
    return httpx.get(gw.url + "/health", timeout=10).json()


def _completion_requests(sim: Any) -> list[Any]:
    return [r for r in sim.requests if r.path.endswith("/chat/completions")]


def test_ollama_without_tools_detected_by_api_show() -> None:
    with stack(no_tools_support=True, gateway_settings={"backend_kind": "ollama"}) as (sim, gw):
        reply = gw.client().chat.completions.create(
            model="toolrelay-sim", messages=ASK_WEATHER, tools=[WEATHER_TOOL]
        )
        (call,) = reply.choices[0].message.tool_calls or []
        assert call.function.name == "get_weather"
        assert any(r.path == "/api/show" for r in sim.requests)
        # Rescued at once: the backend never saw a tools array.
        assert all("tools" not in r.body for r in _completion_requests(sim))
        facts = _health(gw)["backends"][0]["facts"]["toolrelay-sim"]
        assert facts["native_tools"] is False


def test_kind_auto_detects_ollama() -> None:
    with stack(no_tools_support=True) as (_, gw):
        reply = gw.client().chat.completions.create(
            model="toolrelay-sim", messages=ASK_WEATHER, tools=[WEATHER_TOOL]
        )
        assert reply.choices[0].message.tool_calls
        assert _health(gw)["backends"][0]["kind"] == "ollama"


def test_refusal_learned_from_the_400() -> None:
    with stack(no_tools_support=True, gateway_settings={"backend_kind": "openai"}) as (sim, gw):
        client = gw.client()
        for stream in (False, True, False):
            if stream:
                with client.chat.completions.stream(
                    model="toolrelay-sim", messages=ASK_WEATHER, tools=[WEATHER_TOOL]
                ) as helper:
                    reply = helper.get_final_completion()
            else:
                reply = client.chat.completions.create(
                    model="toolrelay-sim", messages=ASK_WEATHER, tools=[WEATHER_TOOL]
                )
            (call,) = reply.choices[0].message.tool_calls or []
            assert json.loads(call.function.arguments) == {"city": "Paris"}
        sent = _completion_requests(sim)
        # One refused native attempt, then rescue only: the lesson is kept.
        assert ["tools" in r.body for r in sent] == [True, False, False, False]
        health = _health(gw)
        assert health["counters"]["fallbacks"]["refuses_tools"] == 1
        assert health["backends"][0]["facts"]["toolrelay-sim"]["refuses_tools"] is True


def test_native_mode_relays_the_refusal() -> None:
    with stack(
        no_tools_support=True, gateway_settings={"backend_kind": "openai", "tool_mode": "native"}
    ) as (_, gw):
        response = httpx.post(
            gw.url + "/v1/chat/completions",
            json={"model": "toolrelay-sim", "messages": ASK_WEATHER, "tools": [WEATHER_TOOL]},
            timeout=10,
        )
    assert response.status_code == 400
    assert "does not support tools" in response.json()["error"]["message"]


def test_swallowed_streamed_call_is_re_asked_without_streaming() -> None:
    with stack(swallow_streamed_calls=True, gateway_settings={"backend_kind": "openai"}) as (
        sim,
        gw,
    ):
        client = gw.client()
        for _ in range(2):
            with client.chat.completions.stream(
                model="toolrelay-sim", messages=ASK_WEATHER, tools=[WEATHER_TOOL]
            ) as helper:
                final = helper.get_final_completion()
            (call,) = final.choices[0].message.tool_calls or []
            assert json.loads(call.function.arguments) == {"city": "Paris"}
            assert final.choices[0].finish_reason == "tool_calls"
        streamed = [bool(r.body.get("stream")) for r in _completion_requests(sim)]
        # First: streamed (empty), re-asked without streaming; then non-streaming at once.
        assert streamed == [True, False, False]
        health = _health(gw)
        assert health["counters"]["fallbacks"]["swallowed_stream"] == 1
        assert health["backends"][0]["facts"]["toolrelay-sim"]["swallows_streamed_calls"]
        # Requests without tools still stream.
        text = "".join(
            c.choices[0].delta.content or ""
            for c in client.chat.completions.create(
                model="toolrelay-sim", messages=[{"role": "user", "content": "hi"}], stream=True
            )
        )
        assert text.startswith("This is the toolrelay simulator")
        assert _completion_requests(sim)[-1].body["stream"] is True


def test_stream_tools_false_asks_without_streaming_from_the_first_round() -> None:
    models = {"toolrelay-sim": {"stream_tools": False}}
    with stack(
        swallow_streamed_calls=True,
        gateway_settings={"backend_kind": "openai", "models": models},
    ) as (sim, gw):
        with gw.client().chat.completions.stream(
            model="toolrelay-sim", messages=ASK_WEATHER, tools=[WEATHER_TOOL]
        ) as helper:
            final = helper.get_final_completion()
        (call,) = final.choices[0].message.tool_calls or []
        assert json.loads(call.function.arguments) == {"city": "Paris"}
        # No streamed round was wasted, and no fallback was needed.
        assert [bool(r.body.get("stream")) for r in _completion_requests(sim)] == [False]
        assert "swallowed_stream" not in _health(gw)["counters"]["fallbacks"]


@pytest.mark.parametrize("kind", ["ollama", "llamacpp", "lmstudio"])
@pytest.mark.parametrize("supports", [True, False])
def test_probes_decide_native_or_rescue(kind: str, supports: bool) -> None:
    with stack(no_tools_support=not supports, gateway_settings={"backend_kind": kind}) as (
        sim,
        gw,
    ):
        reply = gw.client().chat.completions.create(
            model="toolrelay-sim", messages=ASK_WEATHER, tools=[WEATHER_TOOL]
        )
        assert reply.choices[0].message.tool_calls
        probes = {"ollama": "/api/show", "llamacpp": "/props", "lmstudio": "/api/v1/models"}
        assert any(r.path == probes[kind] for r in sim.requests)
        # Decided up front: no refused native attempt.
        assert ["tools" in r.body for r in _completion_requests(sim)] == [supports]
        facts = _health(gw)["backends"][0]["facts"]["toolrelay-sim"]
        assert facts["native_tools"] is supports


def test_a_backend_down_at_first_is_probed_again() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    with gateway(url) as gw:
        response = httpx.post(
            gw.url + "/v1/chat/completions",
            json={"model": "toolrelay-sim", "messages": ASK_WEATHER, "tools": [WEATHER_TOOL]},
            timeout=10,
        )
        assert response.status_code == 502
        assert _health(gw)["backends"][0]["kind"] == "auto"  # nothing concluded
        # The backend comes up on that port: an Ollama without tools.
        with Simulator(SimulatorConfig(no_tools_support=True), port=port) as sim:
            reply = gw.client().chat.completions.create(
                model="toolrelay-sim", messages=ASK_WEATHER, tools=[WEATHER_TOOL]
            )
            assert reply.choices[0].message.tool_calls
            assert _health(gw)["backends"][0]["kind"] == "ollama"
            assert all("tools" not in r.body for r in _completion_requests(sim))


def test_a_stream_cut_off_by_the_token_limit_is_not_a_swallowed_call() -> None:
    thinking = {"reasoning": "Let me think about", "finish_reason": "length"}
    scenario = {"rules": [{"answer": thinking}]}
    with stack(scenario, gateway_settings={"backend_kind": "openai"}) as (sim, gw):
        chunks = list(
            gw.client().chat.completions.create(
                model="toolrelay-sim", messages=ASK_WEATHER, tools=[WEATHER_TOOL], stream=True
            )
        )
        assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
        assert len(_completion_requests(sim)) == 1, "asked once: nothing was swallowed"
        assert "swallows_streamed_calls" not in json.dumps(_health(gw)["backends"][0]["facts"])
