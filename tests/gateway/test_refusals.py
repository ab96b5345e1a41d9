"""Refusals of native tools in every server's words, and errors named for what happened.

The simulator's ``refuse_tools`` answers requests with tools in a chosen
status and wording while its probes keep claiming tool support, as
``llama-server --no-jinja`` does with a tool-capable template.
"""

from __future__ import annotations

import json
import logging
import socket
import time
from typing import Any

import httpx
import pytest

from tests.gateway.support import GatewayServer, gateway, stack
from tests.weather import ASK_WEATHER, WEATHER_TOOL
from toolrelay.io.backends.errors import BackendError

LLAMA_NO_JINJA = {
    "refuse_tools": "tools param requires --jinja flag",
    "refuse_tools_status": 500,
    "gateway_settings": {"backend_kind": "llamacpp"},
}


def _completions(sim: Any) -> list[Any]:
    return [r for r in sim.requests if r.path.endswith("/chat/completions")]


def _facts(gw: GatewayServer) -> dict[str, Any]:
    health = httpx.get(gw.url + "/health", timeout=10).json()
    return dict(health["backends"][0]["facts"].get("toolrelay-sim", {}))


def _ask(gw: GatewayServer, stream: bool) -> Any:
    client = gw.client()
    if stream:
        with client.chat.completions.stream(
            model="toolrelay-sim", messages=ASK_WEATHER, tools=[WEATHER_TOOL]
        ) as helper:
            return helper.get_final_completion()
    return client.chat.completions.create(
        model="toolrelay-sim", messages=ASK_WEATHER, tools=[WEATHER_TOOL]
    )


@pytest.mark.parametrize("stream", [False, True])
def test_llama_cpp_without_jinja_switches_the_model_to_rescue(stream: bool) -> None:
    with stack(**LLAMA_NO_JINJA) as (sim, gw):
        assert httpx.get(sim.url + "/props").json()["chat_template_caps"]["supports_tools"]
        for _ in range(2):
            (call,) = _ask(gw, stream).choices[0].message.tool_calls or []
            assert json.loads(call.function.arguments) == {"city": "Paris"}
        # One refused native attempt (the probe said yes), then rescue only.
        assert ["tools" in r.body for r in _completions(sim)] == [True, False, False]
        assert _facts(gw) == {"native_tools": False, "refuses_tools": True}


@pytest.mark.parametrize(
    ("message", "status"),
    [
        (
            '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser '
            "to be set",
            400,
        ),
        ('tool_choice="required" requires --tool-call-parser to be set', 400),
        ("registry.ollama.ai/library/gemma:2b does not support tools", 400),
        ("Tool error: Failed to parse generated text: EOF", 422),
        ("Unsupported param: tools", 500),
        ("Unable to generate parser for this template. Automatic parser generation failed", 400),
    ],
)
def test_known_refusals_in_any_status(message: str, status: int) -> None:
    with stack(
        refuse_tools=message, refuse_tools_status=status, gateway_settings={"backend_kind": "vllm"}
    ) as (sim, gw):
        assert _ask(gw, False).choices[0].message.tool_calls
        assert ["tools" in r.body for r in _completions(sim)] == [True, False]
        assert _facts(gw)["refuses_tools"] is True


@pytest.mark.parametrize("stream", [False, True])
def test_an_unknown_wording_is_tried_once_without_tools_and_learned(stream: bool) -> None:
    lm_studio = 'Error rendering prompt with jinja template: "Unknown test: sequence".'
    with stack(
        refuse_tools=lm_studio,
        refuse_tools_in_stream=True,
        gateway_settings={"backend_kind": "lmstudio"},
    ) as (sim, gw):
        assert _ask(gw, stream).choices[0].message.tool_calls
        assert _ask(gw, stream).choices[0].message.tool_calls
        assert ["tools" in r.body for r in _completions(sim)] == [True, False, False]
        assert _facts(gw)["refuses_tools"] is True


def test_an_error_that_is_not_about_tools_stands_and_teaches_nothing() -> None:
    with stack(status=500, gateway_settings={"backend_kind": "openai"}) as (sim, gw):
        response = httpx.post(
            gw.url + "/v1/chat/completions",
            json={"model": "toolrelay-sim", "messages": ASK_WEATHER, "tools": [WEATHER_TOOL]},
            timeout=10,
        )
        assert ["tools" in r.body for r in _completions(sim)] == [True, False]
        assert "refuses_tools" not in _facts(gw)
    assert response.status_code == 502
    # The backend is up: it answered. Its failure is a backend_error, not "unavailable".
    assert response.json()["error"]["code"] == "backend_error"
    assert "simulated failure" in response.json()["error"]["message"]


def test_native_mode_relays_a_500_refusal_as_a_backend_error() -> None:
    settings = {"backend_kind": "llamacpp", "tool_mode": "native"}
    with stack(**{**LLAMA_NO_JINJA, "gateway_settings": settings}) as (sim, gw):
        response = httpx.post(
            gw.url + "/v1/chat/completions",
            json={"model": "toolrelay-sim", "messages": ASK_WEATHER, "tools": [WEATHER_TOOL]},
            timeout=10,
        )
        assert len(_completions(sim)) == 1
    assert response.status_code == 502
    error = response.json()["error"]
    assert error["code"] == "backend_error"
    assert "tools param requires --jinja flag" in error["message"]


def test_a_backend_that_does_not_answer_is_unavailable() -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    with gateway(f"http://127.0.0.1:{port}/v1", backend_kind="openai") as gw:
        response = httpx.post(
            gw.url + "/v1/chat/completions",
            json={"model": "m", "messages": ASK_WEATHER},
            timeout=10,
        )
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "backend_unavailable"


@pytest.mark.parametrize(
    ("status", "message", "expected"),
    [
        (500, "tools param requires --jinja flag", "refused"),
        (200, "Error rendering prompt with jinja template", "unsure"),
        (400, "Value error, something odd", "unsure"),
        (401, "invalid api key", None),
        (429, "rate limited", None),
        (400, "This model's maximum context length is 4096 tokens", None),
        (None, "connection refused", None),
    ],
)
def test_refusal_classification(status: int | None, message: str, expected: str | None) -> None:
    assert BackendError(502, message, upstream_status=status).refusal == expected


def test_health_knows_the_kind_before_any_request() -> None:
    with stack() as (_, gw):
        # Probed at startup, in the background: /health never shows "auto" for long.
        for _ in range(50):
            kind = httpx.get(gw.url + "/health", timeout=10).json()["backends"][0]["kind"]
            if kind != "auto":
                break
            time.sleep(0.05)
    assert kind == "ollama"  # the simulator answers Ollama's /api/tags first


def test_backend_errors_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="toolrelay")
    with stack(**LLAMA_NO_JINJA) as (_, gw):
        assert _ask(gw, False).choices[0].message.tool_calls
    with stack(status=503, gateway_settings={"backend_kind": "openai"}) as (_, gw):
        httpx.post(
            gw.url + "/v1/chat/completions",
            json={"model": "toolrelay-sim", "messages": ASK_WEATHER},
            timeout=10,
        )
    messages = [record.getMessage() for record in caplog.records]
    assert any("tools param requires --jinja flag" in message for message in messages)
    assert any("backend error" in m and "simulated failure" in m for m in messages)
