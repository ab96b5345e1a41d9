"""A stream's connection back to the pool when the body ends after its ``[DONE]``.

Servers write the ``[DONE]`` event and the chunked body's last (empty) chunk
in two writes; the gateway often reads the first before the second has come.
Given back then, aiohttp would close a connection it could keep, and every such
stream would cost the next request a new connection. A backend that never ends
the body after its ``[DONE]`` has the connection cut after a grace, without
holding up the client's stream.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests.gateway.rawbackend import chunk, read_request, response, sse_event, sse_head
from tests.gateway.support import gateway
from toolrelay.io.backends.http import ChunkStream, Limits

STREAM = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
ANSWER = sse_event({"role": "assistant", "content": "Hello"}) + sse_event({}, "stop")
DONE = b"data: [DONE]\n\n"


class KeepAliveBackend:
    """Serves requests on kept connections: each stream's ``[DONE]``, then its
    body's end ``end_after`` seconds later (never, when None). Counts connections
    and notes when one is closed by the client."""

    def __init__(self, end_after: float | None) -> None:
        self.end_after = end_after
        self.connections = 0
        self.closed_at: list[float] = []
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(0.1)
        self._stopped = threading.Event()
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}/v1"

    def __enter__(self) -> KeepAliveBackend:
        threading.Thread(target=self._serve, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopped.set()
        self._sock.close()

    def _serve(self) -> None:
        while not self._stopped.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        conn.settimeout(10)
        try:
            while not self._stopped.is_set():
                request = read_request(conn)
                if request is None:
                    break
                if not request.path.endswith("/chat/completions"):
                    conn.sendall(_kept(response(b'{"object": "list", "data": []}')))
                    continue
                conn.sendall(_kept(sse_head()) + chunk(ANSWER + DONE))
                if self.end_after is None:
                    if conn.recv(1) == b"":  # held open until the client cuts it
                        break
                    continue
                time.sleep(self.end_after)
                conn.sendall(chunk(b""))
        except OSError:
            pass
        self.closed_at.append(time.monotonic())
        conn.close()


def _kept(head: bytes) -> bytes:
    return head.replace(b"Connection: close\r\n", b"")


def _stream(client: httpx.Client) -> str:
    with client.stream("POST", "/chat/completions", json=STREAM) as answer:
        assert answer.status_code == 200
        return answer.read().decode()


@pytest.fixture
def late_end() -> Iterator[KeepAliveBackend]:
    with KeepAliveBackend(end_after=0.05) as backend:
        yield backend


def test_a_body_that_ends_after_its_done_keeps_its_connection(late_end: KeepAliveBackend) -> None:
    with gateway(late_end.url) as gw, httpx.Client(base_url=gw.url + "/v1", timeout=10) as client:
        before = late_end.connections
        for _ in range(3):
            assert _stream(client).endswith("data: [DONE]\n\n")
            time.sleep(0.2)  # the body's end has come: the connection is back in the pool
        assert late_end.connections - before <= 1


def test_a_body_that_never_ends_is_cut_after_a_grace() -> None:
    with (
        KeepAliveBackend(end_after=None) as backend,
        gateway(backend.url) as gw,
        httpx.Client(base_url=gw.url + "/v1", timeout=10) as client,
    ):
        started = time.monotonic()
        assert _stream(client).endswith("data: [DONE]\n\n")
        assert time.monotonic() - started < 0.9  # the client is not held up by the grace
        deadline = time.monotonic() + 5
        while not backend.closed_at and time.monotonic() < deadline:
            time.sleep(0.05)
        assert backend.closed_at, "the connection was never cut"
        assert backend.closed_at[0] - started >= 0.9
        assert _stream(client).endswith("data: [DONE]\n\n")  # the next request is served


class _NotedBody:
    """A response whose body comes in one read, noting what a stream asks of it to
    let its connection go; ``ended``: the body's end came with the read."""

    def __init__(self, body: bytes, ended: bool) -> None:
        self.content = self
        self._reads = [body]
        self._ended = ended
        self.asked: list[str] = []

    async def readany(self) -> bytes:
        return self._reads.pop(0) if self._reads else b""

    def is_eof(self) -> bool:
        return self._ended

    def on_eof(self, callback: Callable[[], None]) -> None:
        self.asked.append("on_eof")  # the grace timer's, cancelled at the body's end

    def release(self) -> None:
        self.asked.append("release")

    def close(self) -> None:
        self.asked.append("close")


async def _read_in_async_with(response: _NotedBody, batches: int | None) -> list[str]:
    """What the stream asked of ``response``, read as the relay reads it (in its
    ``async with``): to its end (None), or ``batches`` batches and then left."""
    body: Any = response
    stream = ChunkStream(body, "test", Limits(), None, time.monotonic())
    async with stream:
        async for _ in stream:
            if batches is not None:
                batches -= 1
                if batches == 0:
                    break
    await stream.aclose()  # closed again: nothing more
    return response.asked


@pytest.mark.parametrize("ended", [True, False])
def test_a_stream_read_to_its_done_lets_its_connection_go_once(ended: bool) -> None:
    """The iteration's end lets the connection go, and the ``async with`` around it
    closes the stream again: given back to the pool once (the body ended), or
    one grace timer set (it did not yet)."""
    response = _NotedBody(ANSWER + DONE, ended)
    asked = asyncio.run(_read_in_async_with(response, None))
    assert asked == (["release"] if ended else ["on_eof"])


def test_a_stream_left_before_its_done_is_closed_once() -> None:
    response = _NotedBody(ANSWER, ended=False)
    assert asyncio.run(_read_in_async_with(response, 1)) == ["close"]
