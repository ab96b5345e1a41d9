"""Learned facts are earned, visible and revocable (issue 24).

"Streams lose calls" holds every later stream to its end, so it is learned
only from direct evidence (the same request streamed without its call and
non-streamed with one), tested again after a number of requests or seconds,
forgotten when a stream brings its call, shown in ``/health`` with when and
why, and forgotten on ``DELETE /api/facts``.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
import openai

from tests.gateway.support import GatewayServer, stack
from tests.weather import ASK_WEATHER, WEATHER_TOOL

OPENAI = {"backend_kind": "openai"}
LOST = "swallows_streamed_calls"


def _health(gw: GatewayServer) -> Any:
    return httpx.get(gw.url + "/health", timeout=10).json()


def _learned(gw: GatewayServer) -> list[dict[str, Any]]:
    learned: list[dict[str, Any]] = _health(gw)["backends"][0]["learned"]
    return learned


def _streamed(sim: Any) -> list[bool]:
    """Per completion request the simulator got: was it streamed?"""
    return [bool(r.body.get("stream")) for r in sim.requests if r.path.endswith("/completions")]


def _stream_calls(client: openai.OpenAI) -> int:
    """Stream the weather question with its tool; the number of calls that came."""
    with client.chat.completions.stream(
        model="toolrelay-sim", messages=ASK_WEATHER, tools=[WEATHER_TOOL]
    ) as helper:
        final = helper.get_final_completion()
    return len(final.choices[0].message.tool_calls or ())


def test_an_empty_stream_is_no_evidence_when_the_model_had_nothing_to_call() -> None:
    silent = {"rules": [{"answer": {"content": ""}}]}
    with stack(silent, gateway_settings=OPENAI) as (sim, gw):
        client = gw.client()
        for _ in range(2):
            stream = client.chat.completions.create(
                model="toolrelay-sim", messages=ASK_WEATHER, tools=[WEATHER_TOOL], stream=True
            )
            list(stream)
        # Each empty stream was asked again without streaming, which brought no call
        # either: nothing was learned, so the second request streamed too.
        assert _streamed(sim) == [True, False, True, False]
        assert not [f for f in _learned(gw) if f["fact"] == LOST]


def test_a_lost_call_is_learned_with_its_evidence_and_forgotten_when_a_stream_brings_one() -> None:
    settings = {**OPENAI, "fact_recheck_requests": 3}
    with stack(swallow_streamed_calls_once=True, gateway_settings=settings) as (sim, gw):
        client = gw.client()
        assert _stream_calls(client) == 1  # lost streamed, asked again without streaming
        [fact] = [f for f in _learned(gw) if f["fact"] == LOST]
        assert fact["value"] is True and fact["model"] == "toolrelay-sim"
        assert "without streaming brought 1 call(s) (get_weather)" in fact["reason"]
        assert fact["learned_at"].endswith("+00:00") and fact["expires_in_seconds"] > 0
        # Held: asked without streaming, twice; the third request re-checks by streaming.
        for _ in range(3):
            assert _stream_calls(client) == 1
        assert _streamed(sim) == [True, False, False, False, True]
        # The stream brought its call: the fact is gone, and streams stream again.
        assert not [f for f in _learned(gw) if f["fact"] == LOST]
        assert LOST not in _health(gw)["backends"][0]["facts"].get("toolrelay-sim", {})
        assert _stream_calls(client) == 1
        assert _streamed(sim)[-1] is True


def test_a_held_model_is_re_checked_after_some_seconds() -> None:
    settings = {**OPENAI, "fact_recheck_requests": 1000, "fact_recheck_seconds": 0.3}
    with stack(swallow_streamed_calls_once=True, gateway_settings=settings) as (sim, gw):
        client = gw.client()
        _stream_calls(client)
        _stream_calls(client)
        assert _streamed(sim) == [True, False, False]
        time.sleep(0.4)
        assert _stream_calls(client) == 1
        assert _streamed(sim)[-1] is True
        assert not [f for f in _learned(gw) if f["fact"] == LOST]


def test_learn_facts_off_keeps_no_lesson() -> None:
    settings = {**OPENAI, "learn_facts": False}
    with stack(swallow_streamed_calls=True, gateway_settings=settings) as (sim, gw):
        client = gw.client()
        for _ in range(2):
            assert _stream_calls(client) == 1
        # Each request is rescued on its own; none is held on the strength of another.
        assert _streamed(sim) == [True, False, True, False]
        assert _learned(gw) == []


def test_delete_api_facts_forgets_with_the_admin_token() -> None:
    settings = {**OPENAI, "admin_token": "sesame"}
    with stack(swallow_streamed_calls=True, gateway_settings=settings) as (sim, gw):
        client = gw.client()
        _stream_calls(client)
        assert [f["fact"] for f in _learned(gw)] == [LOST]
        url = gw.url + "/api/facts/" + LOST
        refused = httpx.delete(url, timeout=10)
        assert refused.status_code == 401
        assert refused.json()["error"]["code"] == "invalid_admin_token"
        assert refused.headers["www-authenticate"] == "Bearer"
        wrong = httpx.delete(url, headers={"authorization": "Bearer nope"}, timeout=10)
        assert wrong.status_code == 401
        admin = {"authorization": "Bearer sesame"}
        unknown = httpx.delete(gw.url + "/api/facts/flies", headers=admin, timeout=10)
        assert unknown.status_code == 400 and "swallows_streamed_calls" in unknown.text
        no_backend = httpx.delete(url, params={"backend": "x"}, headers=admin, timeout=10)
        assert no_backend.status_code == 404
        other_model = httpx.delete(url, params={"model": "other"}, headers=admin, timeout=10)
        assert other_model.json() == {"ok": True, "forgotten": []}
        listed = httpx.get(gw.url + "/api/facts", timeout=10).json()
        assert [(f["backend"], f["fact"]) for f in listed["facts"]] == [("default", LOST)]
        done = httpx.delete(url, params={"model": "toolrelay-sim"}, headers=admin, timeout=10)
        assert done.status_code == 200
        assert done.json()["forgotten"] == [
            {"backend": "default", "model": "toolrelay-sim", "fact": LOST, "value": True}
        ]
        assert _learned(gw) == []
        # Forgotten: the next request streams again (and, here, learns it again).
        _stream_calls(client)
        assert _streamed(sim)[-2:] == [True, False]
        everything = httpx.delete(gw.url + "/api/facts", headers=admin, timeout=10)
        assert [f["fact"] for f in everything.json()["forgotten"]] == [LOST]


def test_the_admin_endpoint_takes_the_admin_token_when_api_keys_are_set() -> None:
    settings = {**OPENAI, "admin_token": "sesame", "api_keys": ["client-key"]}
    with stack(gateway_settings=settings) as (_, gw):
        as_client = {"authorization": "Bearer client-key"}
        refused = httpx.delete(gw.url + "/api/facts", headers=as_client, timeout=10)
        assert refused.status_code == 401
        as_admin = {"authorization": "Bearer sesame"}
        assert httpx.delete(gw.url + "/api/facts", headers=as_admin, timeout=10).status_code == 200


def test_the_facts_endpoints_are_documented() -> None:
    with stack(gateway_settings=OPENAI) as (_, gw):
        spec = httpx.get(gw.url + "/openapi.json", timeout=10).json()
        assert set(spec["paths"]["/api/facts"]) == {"get", "delete"}
        forget = spec["paths"]["/api/facts/{fact}"]["delete"]
        assert LOST in forget["parameters"][0]["schema"]["enum"]
        assert forget["security"] == [{"adminToken": []}]
