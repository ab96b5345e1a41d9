"""Backends that break: nothing truncated passes as complete, nothing hangs.

A stream ends with ``[DONE]`` only when the backend's own stream did; every
other end is the in-stream error event of docs/gateway.md, counted under
``broken_streams``. Non-streamed answers that are not chat completions are 502s
that say what was wrong.
"""

from __future__ import annotations

import gzip
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import orjson
import pytest

from tests.gateway.rawbackend import (
    RawBackend,
    RawRequest,
    chunk,
    response,
    sse_event,
    sse_head,
)
from tests.gateway.support import GatewayServer, gateway

ASK = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
STREAM = {**ASK, "stream": True}
HELLO = sse_event({"role": "assistant", "content": "Hel"})
FINISHED = sse_event({"content": "lo"}) + sse_event({}, "stop")


def _pause() -> None:
    # The stream has started at the client (its first read is relayed) before it breaks;
    # a stream that breaks in its very first read is a 502 before any stream.
    time.sleep(0.1)


def _reset(request: RawRequest, conn: socket.socket) -> str:
    conn.sendall(sse_head() + chunk(HELLO))
    _pause()
    return "reset"


def _close_delimited(request: RawRequest, conn: socket.socket) -> str:
    # No Content-Length, no chunking: the body ends when the connection does,
    # so a crash looks like a normal end. Only [DONE] tells them apart.
    conn.sendall(sse_head(chunked=False) + HELLO)
    _pause()
    conn.sendall(FINISHED)
    return "close"


def _chunked_without_done(request: RawRequest, conn: socket.socket) -> str:
    conn.sendall(sse_head() + chunk(HELLO))
    _pause()
    conn.sendall(chunk(FINISHED) + chunk(b""))
    return "close"


def _invalid_utf8(request: RawRequest, conn: socket.socket) -> str:
    bad = b'data: {"choices": [{"index": 0, "delta": {"content": "caf\xe9"}}]}\n\n'
    conn.sendall(sse_head() + chunk(HELLO))
    _pause()
    conn.sendall(chunk(bad + FINISHED + b"data: [DONE]\n\n") + chunk(b""))
    return "close"


def _endless_line(request: RawRequest, conn: socket.socket) -> str:
    conn.sendall(sse_head() + chunk(HELLO))
    _pause()
    conn.sendall(chunk(b'data: {"choices": "'))
    for _ in range(256):  # 4 MB at most, well past the test's 64 kB line limit
        conn.sendall(chunk(b"a" * 16384))
    return "hang"


def _trickle(request: RawRequest, conn: socket.socket) -> str:
    conn.sendall(sse_head() + chunk(HELLO))
    for _ in range(100):  # a comment every 0.1 s: never silent, never done
        time.sleep(0.1)
        conn.sendall(chunk(b": still here\n"))
    return "close"


# case -> (backend, the broken_streams label, words the error event must hold)
BROKEN_STREAMS = {
    "reset": (_reset, "reset", "broke off"),
    "close-delimited, no [DONE]": (_close_delimited, "no_done", "without [DONE]"),
    "chunked, no [DONE]": (_chunked_without_done, "no_done", "without [DONE]"),
    "invalid UTF-8": (_invalid_utf8, "invalid_utf8", "not UTF-8"),
    "endless line": (_endless_line, "line_too_long", "max_line_bytes (65536 bytes)"),
    "trickle past the total timeout": (_trickle, "timeout", "total_timeout (1.5 s)"),
}
LIMITS = {"max_line_bytes": 65536, "total_timeout": 1.5, "keepalive_interval": 0}


def _sse_payloads(text: str) -> list[Any]:
    return [
        line[6:] if line == "data: [DONE]" else orjson.loads(line[6:])
        for line in text.splitlines()
        if line.startswith("data: ")
    ]


def _counters(gw: GatewayServer) -> dict[str, Any]:
    counters: dict[str, Any] = httpx.get(gw.url + "/health", timeout=10).json()["counters"]
    return counters


@pytest.mark.parametrize("case", list(BROKEN_STREAMS))
def test_a_broken_stream_ends_in_an_error_event_not_done(case: str) -> None:
    handler, reason, words = BROKEN_STREAMS[case]
    with RawBackend(handler) as backend, gateway(backend.url + "/v1", **LIMITS) as gw:
        started = time.monotonic()
        reply = httpx.post(gw.url + "/v1/chat/completions", json=STREAM, timeout=20)
        elapsed = time.monotonic() - started
        assert reply.status_code == 200
        payloads = _sse_payloads(reply.text)
        assert "[DONE]" not in payloads, "a broken stream was presented as complete"
        assert not any(
            p.get("choices") and p["choices"][0].get("finish_reason") for p in payloads[:-1]
        ), "a broken stream got a finish_reason"
        error = payloads[-1]["error"]
        assert error["type"] == "api_error" and words in error["message"], error
        assert elapsed < 10
        assert _counters(gw)["broken_streams"] == {reason: 1}


def test_a_proper_stream_still_ends_with_done() -> None:
    def proper(request: RawRequest, conn: socket.socket) -> str:
        conn.sendall(sse_head() + chunk(HELLO + FINISHED + b"data: [DONE]\n\n") + chunk(b""))
        return "close"

    with RawBackend(proper) as backend, gateway(backend.url + "/v1", **LIMITS) as gw:
        reply = httpx.post(gw.url + "/v1/chat/completions", json=STREAM, timeout=20)
        payloads = _sse_payloads(reply.text)
        assert payloads[-1] == "[DONE]"
        text = "".join(
            p["choices"][0]["delta"].get("content") or "" for p in payloads[:-1] if p.get("choices")
        )
        assert text == "Hello"


def _html_page(request: RawRequest, conn: socket.socket) -> str:
    page = b"<html><body><h1>502 Bad Gateway</h1>nginx</body></html>"
    conn.sendall(response(page, content_type="text/html"))
    return "close"


def _short_json(request: RawRequest, conn: socket.socket) -> str:
    conn.sendall(response(b'{"choices": [{"index": 0, "mess', length=500))
    return "close"


@pytest.mark.parametrize(
    ("handler", "words"),
    [(_html_page, "HTML page"), (_short_json, "Content-Length")],
    ids=["html page", "short body"],
)
def test_streamed_request_answered_with_a_broken_page_is_a_502(handler: Any, words: str) -> None:
    with RawBackend(handler) as backend, gateway(backend.url + "/v1", **LIMITS) as gw:
        reply = httpx.post(gw.url + "/v1/chat/completions", json=STREAM, timeout=20)
        assert reply.status_code == 502, reply.text
        assert words in reply.json()["error"]["message"]


def _answer(body: dict[str, Any]) -> Any:
    def handler(request: RawRequest, conn: socket.socket) -> str:
        conn.sendall(response(orjson.dumps(body)))
        return "close"

    return handler


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"choices": "nope"}, "'choices'"),
        ({"choices": []}, "'choices'"),
        ({"choices": [7]}, "'choices[0]'"),
        ({"choices": [{"index": 0}]}, "'choices[0].message'"),
        ({"choices": [{"index": 0, "message": {"role": "assistant", "content": 5}}]}, "content"),
        (
            {"choices": [{"index": 0, "message": {"role": "assistant", "content": {"a": 1}}}]},
            "content",
        ),
        ({"object": "list", "data": []}, "'choices'"),
    ],
)
def test_a_non_streamed_answer_without_the_openai_shape_is_a_502(
    body: dict[str, Any], words: str
) -> None:
    with RawBackend(_answer(body)) as backend, gateway(backend.url + "/v1") as gw:
        reply = httpx.post(gw.url + "/v1/chat/completions", json=ASK, timeout=20)
        assert reply.status_code == 502, reply.text
        message = reply.json()["error"]["message"]
        assert words in message, message


def test_a_non_streamed_body_shorter_than_its_length_is_a_502() -> None:
    with RawBackend(_short_json) as backend, gateway(backend.url + "/v1") as gw:
        reply = httpx.post(gw.url + "/v1/chat/completions", json=ASK, timeout=20)
        assert reply.status_code == 502
        assert "Content-Length" in reply.json()["error"]["message"]


def test_an_endless_non_streamed_body_stops_at_the_size_limit() -> None:
    def endless(request: RawRequest, conn: socket.socket) -> str:
        conn.sendall(sse_head(content_type="application/json") + chunk(b'{"choices": "'))
        for _ in range(1024):  # 16 MB at most, far past the test's limit of 1 MB
            conn.sendall(chunk(b"a" * 16384))
        return "hang"

    with (
        RawBackend(endless) as backend,
        gateway(backend.url + "/v1", max_response_bytes=1 << 20) as gw,
    ):
        reply = httpx.post(gw.url + "/v1/chat/completions", json=ASK, timeout=20)
        assert reply.status_code == 502
        assert "1048576 bytes" in reply.json()["error"]["message"]


def test_a_trickling_non_streamed_answer_meets_the_total_timeout() -> None:
    def trickle(request: RawRequest, conn: socket.socket) -> str:
        conn.sendall(sse_head(content_type="application/json") + chunk(b" "))
        for _ in range(100):
            time.sleep(0.1)
            conn.sendall(chunk(b" "))
        return "close"

    with RawBackend(trickle) as backend, gateway(backend.url + "/v1", total_timeout=1.0) as gw:
        started = time.monotonic()
        reply = httpx.post(gw.url + "/v1/chat/completions", json=ASK, timeout=20)
        assert reply.status_code == 504
        assert time.monotonic() - started < 5
        assert "total_timeout (1 s)" in reply.json()["error"]["message"]


def test_a_compressed_answer_is_never_inflated() -> None:
    bomb = gzip.compress(b" " * (64 << 20), compresslevel=9)  # 64 MB in about 64 kB

    def compressed(request: RawRequest, conn: socket.socket) -> str:
        conn.sendall(response(bomb, extra="Content-Encoding: gzip\r\n"))
        return "close"

    with RawBackend(compressed) as backend, gateway(backend.url + "/v1") as gw:
        reply = httpx.post(gw.url + "/v1/chat/completions", json=ASK, timeout=20)
        assert reply.status_code == 502
        assert "gzip" in reply.json()["error"]["message"]
        sent = backend.requests[-1].headers.get("accept-encoding")
        assert sent == "identity", "the gateway must not ask for compression"


def test_a_redirect_is_not_followed() -> None:
    with RawBackend(_answer({"choices": []})) as elsewhere:

        def redirect(request: RawRequest, conn: socket.socket) -> str:
            location = f"Location: {elsewhere.url}/v1/chat/completions\r\n"
            conn.sendall(response(b"", status="307 Temporary Redirect", extra=location))
            return "close"

        with RawBackend(redirect) as backend, gateway(backend.url + "/v1") as gw:
            for body in (ASK, STREAM):
                reply = httpx.post(gw.url + "/v1/chat/completions", json=body, timeout=20)
                assert reply.status_code == 502
                assert "307" in reply.json()["error"]["message"]
        assert not [r for r in elsewhere.requests if r.path.endswith("/chat/completions")], (
            "the conversation was re-posted to another origin"
        )


def _chats(backend: RawBackend) -> int:
    """Chat requests the backend has received (the startup check lists models first)."""
    return sum(r.path.startswith("/v1/chat/") for r in list(backend.requests))


def test_a_full_pool_queues_then_answers_503_with_retry_after() -> None:
    release = threading.Event()

    def held(request: RawRequest, conn: socket.socket) -> str:
        conn.sendall(sse_head() + chunk(HELLO))
        release.wait(10)
        conn.sendall(chunk(FINISHED + b"data: [DONE]\n\n") + chunk(b""))
        return "close"

    def stream() -> str:
        with httpx.stream("POST", url, json=STREAM, timeout=20) as reply:
            return reply.read().decode()

    pool = {"pool_size": 2, "pool_queue": 1, "pool_timeout": 5, "connect_timeout": 0.2}
    with (
        RawBackend(held) as backend,
        gateway(backend.url + "/v1", keepalive_interval=0, **pool) as gw,
        ThreadPoolExecutor(3) as threads,
    ):
        url = gw.url + "/v1/chat/completions"
        running = [threads.submit(stream) for _ in range(2)]
        deadline = time.monotonic() + 10
        while _chats(backend) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        queued = threads.submit(stream)
        # Wait until it waits for a slot (a fixed pause loses the race on a loaded machine).
        slots = gw.gateway_app.state.gateway.backends.default.client._slots
        deadline = time.monotonic() + 30
        while slots.waiting < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        refused = httpx.post(url, json=STREAM, timeout=20)
        assert refused.status_code == 503
        assert refused.headers["retry-after"] == "1"
        assert "pool_size" in refused.json()["error"]["message"]
        time.sleep(0.3)  # the queued request has now waited longer than connect_timeout
        release.set()
        for done in [*running, queued]:
            assert _sse_payloads(done.result(timeout=20))[-1] == "[DONE]"


def test_waiting_for_a_slot_ends_at_pool_timeout() -> None:
    release = threading.Event()

    def held(request: RawRequest, conn: socket.socket) -> str:
        conn.sendall(sse_head() + chunk(HELLO))
        release.wait(10)
        return "reset"

    with (
        RawBackend(held) as backend,
        gateway(backend.url + "/v1", pool_size=1, pool_timeout=0.5) as gw,
        ThreadPoolExecutor(1) as threads,
    ):
        url = gw.url + "/v1/chat/completions"
        running = threads.submit(lambda: httpx.post(url, json=STREAM, timeout=20))
        deadline = time.monotonic() + 10
        while _chats(backend) < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        started = time.monotonic()
        waited = httpx.post(url, json=ASK, timeout=20)
        assert waited.status_code == 503 and waited.headers["retry-after"] == "1"
        assert 0.4 < time.monotonic() - started < 5
        assert "0.5 s" in waited.json()["error"]["message"]
        release.set()
        running.result(timeout=20)


def test_a_stream_broken_in_its_first_read_is_a_502() -> None:
    def broken_at_once(request: RawRequest, conn: socket.socket) -> str:
        bad = b'data: {"choices": [{"index": 0, "delta": {"content": "caf\xe9"}}]}\n\n'
        conn.sendall(sse_head() + chunk(bad + FINISHED) + chunk(b""))
        return "close"

    with RawBackend(broken_at_once) as backend, gateway(backend.url + "/v1", **LIMITS) as gw:
        reply = httpx.post(gw.url + "/v1/chat/completions", json=STREAM, timeout=20)
        assert reply.status_code == 502
        assert "not UTF-8" in reply.json()["error"]["message"]
