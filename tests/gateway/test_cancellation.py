"""A client that leaves, at any point, cancels the gateway's request to the backend."""

from __future__ import annotations

import socket
import time

import httpx
import orjson
import pytest

from tests.gateway.rawbackend import RawBackend, RawRequest
from tests.gateway.support import gateway

ASK = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def _thinking(request: RawRequest, conn: socket.socket) -> str:
    # A long prefill: not even the headers come, until the client hangs up.
    return "hang"


def _chat_requests(backend: RawBackend) -> int:
    return sum(r.path.endswith("/chat/completions") for r in backend.requests)


@pytest.mark.parametrize("stream", [True, False], ids=["before headers", "non-streamed"])
def test_a_client_that_leaves_cancels_the_backend_request(stream: bool) -> None:
    with (
        RawBackend(_thinking) as backend,
        gateway(backend.url + "/v1", keepalive_interval=0) as gw,
    ):
        body = orjson.dumps({**ASK, "stream": stream})
        head = (
            f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        with socket.create_connection(("127.0.0.1", gw.port), timeout=5) as client:
            client.sendall(head.encode() + body)
            # The client leaves only once the backend is working on its request.
            deadline = time.monotonic() + 10
            while _chat_requests(backend) < 1 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert _chat_requests(backend) == 1
        # The client is gone; the backend must see the gateway hang up too.
        assert backend.client_left.wait(5), "the backend request outlived the client"
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            counters = httpx.get(gw.url + "/health", timeout=10).json()["counters"]
            if counters["requests"].get("client_gone"):
                break
            time.sleep(0.05)
        assert counters["requests"].get("client_gone") == 1, counters
