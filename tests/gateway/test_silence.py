"""The backend's silence timeout (``timeout``), over real HTTP, on every front.

A stream's silence is watched by one timer per stream (``ChunkStream.watch``),
not by aiohttp's ``sock_read``, which is set again on every read; these tests
hold what the setting means whichever does it: an error once the backend sent
nothing for ``timeout`` seconds, before the stream opened (a status) or after
(the front's error event), and none for a backend that sends something more
often than that, however long it takes in all. Margins are wide: a stall is
the backend holding the connection until the client leaves (many times the
timeout), a trickle sends every fifth of it.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import orjson
import pytest

from tests.gateway.rawbackend import RawBackend, RawRequest, chunk, response, sse_event, sse_head
from tests.gateway.support import gateway
from toolrelay.io.backends import BackendError
from toolrelay.io.backends.http import HttpClient, Limits

TIMEOUT = 0.5
SILENT = f"went silent for timeout ({TIMEOUT:g} s)"
HELLO = sse_event({"role": "assistant", "content": "Hel"})
DONE = sse_event({"content": "lo"}) + sse_event({}, "stop") + b"data: [DONE]\n\n"
USER = [{"role": "user", "content": "hi"}]


def _chat_error(payloads: list[Any]) -> str:
    message: str = payloads[-1]["error"]["message"]
    return message


def _messages_error(payloads: list[Any]) -> str:
    assert payloads[-1]["type"] == "error" and payloads[-1]["error"]["type"] == "timeout_error"
    message: str = payloads[-1]["error"]["message"]
    return message


def _responses_error(payloads: list[Any]) -> str:
    assert payloads[-1]["type"] == "response.failed"
    error = payloads[-1]["response"]["error"]
    assert error["code"] == "server_error"
    message: str = error["message"]
    return message


def _status_error(body: dict[str, Any]) -> str:
    """The message of an error answered with a status, in any front's shape."""
    error = body["error"]
    message: str = error["message"]
    return message


# front -> (path, request body without "stream", the stream's error event's message)
FRONTS: dict[str, tuple[str, dict[str, Any], Callable[[list[Any]], str]]] = {
    "chat": ("/v1/chat/completions", {"model": "m", "messages": USER}, _chat_error),
    "messages": (
        "/v1/messages",
        {"model": "m", "max_tokens": 64, "messages": USER},
        _messages_error,
    ),
    "responses": ("/v1/responses", {"model": "m", "input": "hi"}, _responses_error),
}


def _payloads(text: str) -> list[Any]:
    return [
        line[6:] if line == "data: [DONE]" else orjson.loads(line[6:])
        for line in text.splitlines()
        if line.startswith("data: ")
    ]


def _stall_after_chunks(count: int) -> Callable[[RawRequest, socket.socket], str]:
    """A backend that streams ``count`` content chunks, a tenth of the timeout
    apart (each its own read: the silence is the stream's, not its headers'),
    and then thinks forever."""

    def handler(request: RawRequest, conn: socket.socket) -> str:
        conn.sendall(sse_head() + chunk(HELLO))
        for _ in range(count):
            time.sleep(TIMEOUT / 10)
            conn.sendall(chunk(sse_event({"content": "x"})))
        return "hang"

    return handler


@pytest.mark.parametrize("front", list(FRONTS))
def test_a_stream_that_stalls_midway_ends_in_the_fronts_error_event(front: str) -> None:
    path, body, error_of = FRONTS[front]
    with (
        RawBackend(_stall_after_chunks(5)) as backend,
        gateway(backend.url + "/v1", backend_kind="openai", timeout=TIMEOUT) as gw,
    ):
        started = time.monotonic()
        reply = httpx.post(gw.url + path, json={**body, "stream": True}, timeout=30)
        elapsed = time.monotonic() - started
        assert reply.status_code == 200
        payloads = _payloads(reply.text)
        assert "[DONE]" not in payloads
        assert SILENT in error_of(payloads)
        assert elapsed >= TIMEOUT  # never before the backend was silent that long
        counters = httpx.get(gw.url + "/health", timeout=10).json()["counters"]
        assert counters["broken_streams"] == {"timeout": 1}
        assert backend.client_left.wait(10), "the backend's connection was left open"


def _stall_after_headers(request: RawRequest, conn: socket.socket) -> str:
    conn.sendall(sse_head())
    return "hang"


@pytest.mark.parametrize("front", list(FRONTS))
def test_a_stream_silent_after_its_headers_is_a_504(front: str) -> None:
    # Silent before its first chunk, within the first read's patience: nothing
    # was sent to the client yet, so the error is a status.
    path, body, _ = FRONTS[front]
    with (
        RawBackend(_stall_after_headers) as backend,
        gateway(backend.url + "/v1", backend_kind="openai", timeout=TIMEOUT) as gw,
    ):
        reply = httpx.post(gw.url + path, json={**body, "stream": True}, timeout=30)
        assert reply.status_code == 504, reply.text
        assert SILENT in _status_error(reply.json())


def _silent_before_headers(request: RawRequest, conn: socket.socket) -> str:
    return "hang"


def _stall_midway_unstreamed(request: RawRequest, conn: socket.socket) -> str:
    answer = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello"}}]}
    whole = response(orjson.dumps(answer))
    conn.sendall(whole[: len(whole) - 10])  # the headers and most of the body
    return "hang"


@pytest.mark.parametrize("stream", [False, True], ids=["not streamed", "streamed"])
@pytest.mark.parametrize("front", list(FRONTS))
def test_a_backend_silent_before_its_headers_is_a_504(front: str, stream: bool) -> None:
    path, body, _ = FRONTS[front]
    with (
        RawBackend(_silent_before_headers) as backend,
        gateway(backend.url + "/v1", backend_kind="openai", timeout=TIMEOUT) as gw,
    ):
        reply = httpx.post(gw.url + path, json={**body, "stream": stream}, timeout=30)
        assert reply.status_code == 504, reply.text
        assert "did not answer in time" in _status_error(reply.json())


@pytest.mark.parametrize("front", list(FRONTS))
def test_a_non_streamed_answer_that_stalls_midway_is_a_504(front: str) -> None:
    path, body, _ = FRONTS[front]
    with (
        RawBackend(_stall_midway_unstreamed) as backend,
        gateway(backend.url + "/v1", backend_kind="openai", timeout=TIMEOUT) as gw,
    ):
        reply = httpx.post(gw.url + path, json=body, timeout=30)
        assert reply.status_code == 504, reply.text
        assert "did not answer in time" in _status_error(reply.json())


PIECES = 15  # a piece every fifth of the timeout: three times the timeout in all


def _trickle_stream(request: RawRequest, conn: socket.socket) -> str:
    conn.sendall(sse_head() + chunk(HELLO))
    for _ in range(PIECES):
        time.sleep(TIMEOUT / 5)
        conn.sendall(chunk(sse_event({"content": "."})))
    conn.sendall(chunk(DONE) + chunk(b""))
    return "close"


def _trickle_unstreamed(request: RawRequest, conn: socket.socket) -> str:
    answer = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello"}}]}
    whole = response(orjson.dumps(answer))
    step = len(whole) // PIECES + 1
    for start in range(0, len(whole), step):
        conn.sendall(whole[start : start + step])
        time.sleep(TIMEOUT / 5)
    return "close"


@pytest.mark.parametrize("front", list(FRONTS))
def test_a_stream_slower_than_the_timeout_in_all_but_never_silent_completes(front: str) -> None:
    path, body, _ = FRONTS[front]
    with (
        RawBackend(_trickle_stream) as backend,
        gateway(backend.url + "/v1", backend_kind="openai", timeout=TIMEOUT) as gw,
    ):
        started = time.monotonic()
        reply = httpx.post(gw.url + path, json={**body, "stream": True}, timeout=30)
        assert time.monotonic() - started >= 3 * TIMEOUT  # it did take longer than the timeout
        assert reply.status_code == 200
        assert "went silent" not in reply.text
        # The stream's own end (its last event checked), with every piece in it.
        assert _streamed_text(front, _payloads(reply.text)) == "Hel" + "." * PIECES + "lo"


def _streamed_text(front: str, payloads: list[Any]) -> str:
    if front == "chat":
        assert payloads[-1] == "[DONE]"
        return "".join(
            p["choices"][0]["delta"].get("content") or "" for p in payloads[:-1] if p["choices"]
        )
    if front == "messages":
        assert payloads[-1]["type"] == "message_stop"
        return "".join(
            p["delta"].get("text", "") for p in payloads if p["type"] == "content_block_delta"
        )
    assert payloads[-1]["type"] == "response.completed"
    return "".join(p["delta"] for p in payloads if p["type"] == "response.output_text.delta")


def test_a_non_streamed_answer_slower_than_the_timeout_in_all_completes() -> None:
    with (
        RawBackend(_trickle_unstreamed) as backend,
        gateway(backend.url + "/v1", backend_kind="openai", timeout=TIMEOUT) as gw,
    ):
        reply = httpx.post(gw.url + "/v1/chat/completions", json=FRONTS["chat"][1], timeout=30)
        assert reply.status_code == 200, reply.text
        assert reply.json()["choices"][0]["message"]["content"] == "Hello"


def test_bytes_waiting_to_be_read_are_not_silence() -> None:
    """The timeout measures the backend, not the gateway: a reader that takes
    its time (its client is slow, say) finds what the backend sent meanwhile,
    and the timeout counts from its last read."""
    first_read = threading.Event()

    def handler(request: RawRequest, conn: socket.socket) -> str:
        conn.sendall(sse_head() + chunk(HELLO))
        if first_read.wait(10):
            conn.sendall(chunk(sse_event({"content": "lo"})))
        return "hang"

    async def read() -> tuple[list[Any], str]:
        client = HttpClient(limits=Limits(timeout=TIMEOUT))
        try:
            stream = await client.open_stream(backend.url + "/v1/chat/completions", {})
            batches = [await stream.__anext__()]
            first_read.set()
            await asyncio.sleep(4 * TIMEOUT)  # the next chunk came long ago; no read
            batches.append(await stream.__anext__())
            with pytest.raises(BackendError) as silent:
                await stream.__anext__()
            return batches, silent.value.message
        finally:
            await client.aclose()

    with RawBackend(handler) as backend:
        batches, message = asyncio.run(read())
    contents = [c["choices"][0]["delta"]["content"] for batch in batches for c in batch]
    assert contents == ["Hel", "lo"]
    assert SILENT in message
