"""A backend that closes its pooled connections unannounced, as llama-server does
after a stream and uvicorn at its keep-alive edge: a request that went out on
such a connection (the server read it, then hung up without a byte, or reset)
is sent once more on a fresh connection, so the client never sees that 502.

The pool holds two connections the server will drop on their next request:
a second try that took the other pooled one would fail as the first did.
"""

from __future__ import annotations

import contextlib
import itertools
import socket
import struct
import threading
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import Any

import httpx
import orjson
import pytest

from tests.gateway.rawbackend import chunk, read_request, sse_event
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


class DroppingBackend:
    """Answers the first request on each connection and keeps it open; the next
    request on it is read, then the connection closed (``"close"``) or reset
    (``"reset"``) without a byte. The first two connections answer together, so
    that both are in the client's pool at once."""

    def __init__(self, ending: str) -> None:
        self._ending = ending
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self._together = threading.Barrier(2, timeout=10)
        self._order = itertools.count()
        self.dropped = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> DroppingBackend:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)  # wakes the accept() below
        self._sock.close()
        self._thread.join(5)

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            first = read_request(conn)
            if first is None:
                return
            if not first.path.endswith("/chat/completions"):
                # The gateway's startup check lists models; not kept.
                listing = b'{"object": "list", "data": []}'
                head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(listing)}\r\n"
                conn.sendall(head.encode() + b"Connection: close\r\n\r\n" + listing)
                return
            if next(self._order) < 2:
                self._together.wait()
            conn.sendall(_kept_alive(bool(orjson.loads(first.body).get("stream"))))
            if read_request(conn) is None:
                return
            self.dropped += 1
            if self._ending == "reset":
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


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
    with DroppingBackend(ending) as backend, gateway(backend.url + "/v1") as gw:
        with ThreadPoolExecutor(2) as pool:
            firsts = list(pool.map(lambda _: _ask(gw, stream), range(2)))
        assert [reply.status_code for reply in firsts] == [200, 200]
        third = _ask(gw, stream)
        assert third.status_code == 200, third.text
        assert _text(third, stream) == "Hello"
        # The first try went out on a pooled connection; the second on a new one.
        assert backend.dropped == 1
