"""A client that leaves, at any point, cancels the gateway's request to the backend."""

from __future__ import annotations

import socket
import time

import httpx
import pytest

from tests.gateway.rawbackend import RawBackend, RawRequest
from tests.gateway.support import gateway

ASK = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def _thinking(request: RawRequest, conn: socket.socket) -> str:
    # A long prefill: not even the headers come, until the client hangs up.
    return "hang"


@pytest.mark.parametrize("stream", [True, False], ids=["before headers", "non-streamed"])
def test_a_client_that_leaves_cancels_the_backend_request(stream: bool) -> None:
    with (
        RawBackend(_thinking) as backend,
        gateway(backend.url + "/v1", keepalive_interval=0) as gw,
    ):
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(gw.url + "/v1/chat/completions", json={**ASK, "stream": stream}, timeout=0.5)
        # The client is gone; the backend must see the gateway hang up too.
        assert backend.client_left.wait(5), "the backend request outlived the client"
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            counters = httpx.get(gw.url + "/health", timeout=10).json()["counters"]
            if counters["requests"].get("client_gone"):
                break
            time.sleep(0.05)
        assert counters["requests"].get("client_gone") == 1, counters
