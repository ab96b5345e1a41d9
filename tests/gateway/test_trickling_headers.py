"""Issue 23, item 8: a backend that sends its headers one byte every half second
is cut off by ``total_timeout``, whose default bounds it within minutes."""

from __future__ import annotations

import socket
import time

import httpx

from tests.gateway.rawbackend import RawBackend, RawRequest
from tests.gateway.support import gateway
from toolrelay.io.backends.http import Limits
from toolrelay.io.settings import Settings

ASK = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Padding: " + b"p" * 200


def trickle_headers(request: RawRequest, conn: socket.socket) -> str:
    for byte in HEAD:  # about 100 s of headers, if nobody hangs up
        try:
            conn.sendall(bytes([byte]))
        except OSError:
            return "close"  # the gateway gave up: what this test waits for
        time.sleep(0.5)
    return "close"


def test_trickling_headers_meet_the_total_timeout() -> None:
    with (
        RawBackend(trickle_headers) as backend,
        gateway(backend.url + "/v1", backend_kind="openai", total_timeout=2.0) as gw,
    ):
        started = time.monotonic()
        streamed = {**ASK, "stream": True}
        for body in (ASK, streamed):
            reply = httpx.post(gw.url + "/v1/chat/completions", json=body, timeout=60)
            assert reply.status_code == 504, reply.text
            assert "total_timeout (2 s)" in reply.json()["error"]["message"]
        # Two requests, two seconds each, and the time it takes to notice.
        assert time.monotonic() - started < 30


def test_the_default_total_timeout_is_minutes_not_half_an_hour() -> None:
    assert Settings().total_timeout == Limits().total_timeout == 600.0
