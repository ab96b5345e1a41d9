"""A backend that closes its pooled connections unannounced, as llama-server does
after a stream and uvicorn at its keep-alive edge: a request that went out on
such a connection (the server read it, then hung up without a byte, or reset)
is sent once more on a fresh connection, so the client never sees that 502.

The pool holds two connections the server will drop on their next request:
a second try that took the other pooled one would fail as the first did.
"""

from __future__ import annotations

import itertools
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import orjson
import pytest

from tests.gateway.rawbackend import RawBackend, RawRequest, chunk, read_request, sse_event
from tests.gateway.support import GatewayServer, gateway

ASK = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
ANSWER = orjson.dumps(
    {
        "id": "chatcmpl-raw",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Hello"},
                "finish_reason": "stop",
            }
        ],
    }
)
STREAMED = sse_event({"role": "assistant", "content": "Hello"}) + sse_event({}, "stop")


def _kept_alive(streamed: bool) -> bytes:
    """An answer that leaves the connection open (no ``Connection: close``)."""
    if streamed:
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
        head += b"Transfer-Encoding: chunked\r\n\r\n"
        return head + chunk(STREAMED + b"data: [DONE]\n\n") + chunk(b"")
    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(ANSWER)}"
    return head.encode() + b"\r\n\r\n" + ANSWER


class Dropping:
    """A ``RawBackend`` handler: answers the first request on each connection and
    keeps it open; the next request on it is read, then the connection closed
    (``"close"``) or reset (``"reset"``) without a byte. The first two
    connections answer together, so that both are in the client's pool at once."""

    def __init__(self, ending: str) -> None:
        self._ending = ending
        self._together = threading.Barrier(2, timeout=10)
        self._order = itertools.count()
        self.dropped = 0

    def __call__(self, first: RawRequest, conn: socket.socket) -> str:
        if next(self._order) < 2:
            self._together.wait()
        conn.sendall(_kept_alive(bool(orjson.loads(first.body).get("stream"))))
        if read_request(conn) is None:
            return "close"
        self.dropped += 1
        return self._ending


def _ask(gw: GatewayServer, stream: bool) -> httpx.Response:
    body: dict[str, Any] = {**ASK, "stream": True} if stream else ASK
    return httpx.post(gw.url + "/v1/chat/completions", json=body, timeout=20)


def _text(reply: httpx.Response, stream: bool) -> str:
    if not stream:
        content: str = reply.json()["choices"][0]["message"]["content"]
        return content
    lines = [line[6:] for line in reply.text.splitlines() if line.startswith("data: {")]
    return "".join(
        choice["delta"].get("content") or ""
        for line in lines
        for choice in orjson.loads(line)["choices"]
    )


@pytest.mark.parametrize("ending", ["close", "reset"])
@pytest.mark.parametrize("stream", [False, True])
def test_a_request_on_dropped_pooled_connections_is_answered_on_a_fresh_one(
    stream: bool, ending: str
) -> None:
    dropping = Dropping(ending)
    with RawBackend(dropping) as backend, gateway(backend.url + "/v1") as gw:
        with ThreadPoolExecutor(2) as pool:
            firsts = list(pool.map(lambda _: _ask(gw, stream), range(2)))
        assert [reply.status_code for reply in firsts] == [200, 200]
        third = _ask(gw, stream)
        assert third.status_code == 200, third.text
        assert _text(third, stream) == "Hello"
        # The first try went out on a pooled connection; the second on a new one.
        assert dropping.dropped == 1
