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
