"""Secrets: credentials in a backend URL are used, never shown."""

from __future__ import annotations

import base64
import logging
import socket

import httpx
import orjson
import pytest

from tests.gateway.rawbackend import RawBackend, RawRequest, response
from tests.gateway.support import gateway

PASSWORD = "pw-Zq81xT"
KEY = "key-Lm52vR"
ASK = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
ANSWER = {
    "id": "c",
    "object": "chat.completion",
    "created": 1,
    "model": "m",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "hello"}}],
}


def _answer(request: RawRequest, conn: socket.socket) -> str:
    conn.sendall(response(orjson.dumps(ANSWER)))
    return "close"


def _secret_url(base: str) -> str:
    host = base.removeprefix("http://")
    return f"http://alice:{PASSWORD}@{host}/v1?key={KEY}"


def test_userinfo_becomes_basic_credentials_and_the_query_is_sent() -> None:
    with RawBackend(_answer) as backend, gateway(_secret_url(backend.url)) as gw:
        for client_auth in (None, "Bearer client-token"):
            headers = {"authorization": client_auth} if client_auth else {}
            reply = httpx.post(
                gw.url + "/v1/chat/completions", json=ASK, headers=headers, timeout=20
            )
            assert reply.status_code == 200, reply.text
            sent = backend.requests[-1]
            expected = base64.b64encode(f"alice:{PASSWORD}".encode()).decode()
            assert sent.headers["authorization"] == "Basic " + expected
            assert sent.path == f"/v1/chat/completions?key={KEY}"


def test_urls_are_redacted_in_health_errors_and_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens here once closed
    url = _secret_url(f"http://127.0.0.1:{port}")
    with gateway(url) as gw:
        health = httpx.get(gw.url + "/health", timeout=20).text
        error = httpx.post(gw.url + "/v1/chat/completions", json=ASK, timeout=20)
        streamed = httpx.post(
            gw.url + "/v1/chat/completions", json={**ASK, "stream": True}, timeout=20
        )
    assert error.status_code == 502 and streamed.status_code == 502
    for shown in (health, error.text, streamed.text, caplog.text):
        assert PASSWORD not in shown and KEY not in shown
    assert f"alice:***@127.0.0.1:{port}/v1?key=***" in health
    assert f"127.0.0.1:{port}" in error.json()["error"]["message"]


def test_api_keys_are_required_and_never_forwarded() -> None:
    keys = ["k-first-71", "k-second-42"]
    with RawBackend(_answer) as backend, gateway(backend.url + "/v1", api_keys=keys) as gw:
        url = gw.url + "/v1/chat/completions"
        for headers in ({}, {"authorization": "Bearer nope"}, {"authorization": "k-first-71"}):
            refused = httpx.post(url, json=ASK, headers=headers, timeout=20)
            assert refused.status_code == 401, headers
            assert refused.headers["www-authenticate"] == "Bearer"
            assert refused.json()["error"]["code"] == "invalid_api_key"
        assert httpx.get(gw.url + "/v1/models", timeout=20).status_code == 401
        assert httpx.get(gw.url + "/metrics", timeout=20).status_code == 401
        # Either key, as OpenAI's SDKs send it or as Anthropic's do.
        for headers in ({"authorization": "Bearer k-second-42"}, {"x-api-key": "k-first-71"}):
            reply = httpx.post(url, json=ASK, headers=headers, timeout=20)
            assert reply.status_code == 200, reply.text
            sent = backend.requests[-1].headers
            assert "authorization" not in sent and "x-api-key" not in sent
        health = httpx.get(gw.url + "/health", timeout=20)
        assert health.status_code == 200
        assert "k-first-71" not in health.text and health.json()["settings"]["api_keys"] == 2


def test_api_keys_from_the_environment_are_comma_separated(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from toolrelay.io.settings import Settings

    monkeypatch.setenv("TOOLRELAY_API_KEYS", " a1, b2 ,,c3")
    assert Settings().api_keys == ["a1", "b2", "c3"]


def test_loopback_hosts_are_told_apart_for_the_startup_warning() -> None:
    from toolrelay.server.auth import is_loopback

    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.0.2.7")
    assert not is_loopback("gateway.internal")
