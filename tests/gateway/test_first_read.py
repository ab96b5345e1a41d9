"""The stream's first read, awaited with the keep-alive's patience and no task of its own.

The gateway waits up to ``keepalive_interval`` for the backend's first chunk
before it answers 200, so that an error first thing in a 200 stream is a 502;
past that patience the read is cut off and made again once the stream is
open. Cutting a read off must lose nothing: whatever the backend sends, and
whenever, the client gets what a direct read would have given it. Real HTTP:
a raw backend on 127.0.0.1 that sends the generated stream with the generated
pauses, the gateway in front, httpx as the client.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.gateway.rawbackend import RawBackend, RawRequest, chunk, sse_event, sse_head
from tests.gateway.support import GatewayServer, gateway

# keepalive_interval: the first read's patience (a stall this long on a loaded CI machine is rare)
PATIENCE = 0.25
# A pause well past the patience (the stream opens and a keep-alive goes out in it),
# and one well within it, even on a loaded machine.
LONG, SHORT = 0.6, 0.0
STREAM = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
ERROR = b'data: {"error": {"message": "template failed", "type": "server_error"}}\n\n'


@dataclass
class Plan:
    """What the backend sends: pieces of content, each after its pause, then the end."""

    pieces: list[tuple[float, str]] = field(default_factory=list)
    error_after: float | None = None  # an error event in place of the end, after a pause
    first_pause: float = 0.0  # before anything but the headers

    def send(self, request: RawRequest, conn: socket.socket) -> str:
        conn.sendall(sse_head())
        time.sleep(self.first_pause)
        for pause, text in self.pieces:
            time.sleep(pause)
            conn.sendall(chunk(sse_event({"content": text})))
        if self.error_after is not None:
            time.sleep(self.error_after)
            conn.sendall(chunk(ERROR) + chunk(b""))
            return "close"
        conn.sendall(chunk(sse_event({}, "stop") + b"data: [DONE]\n\n") + chunk(b""))
        return "close"


class _Current:
    plan = Plan()

    def __call__(self, request: RawRequest, conn: socket.socket) -> str:
        return self.plan.send(request, conn)


CURRENT = _Current()


@pytest.fixture(scope="module")
def gw() -> Iterator[GatewayServer]:
    with (
        RawBackend(CURRENT) as backend,
        gateway(backend.url + "/v1", backend_kind="openai", keepalive_interval=PATIENCE) as server,
    ):
        yield server


def _expected(plan: Plan) -> tuple[int, str, bool]:
    """Status, the content the client reads and whether the stream ends in ``[DONE]``:
    what reading the backend's stream straight through gives."""
    text = "".join(piece for _, piece in plan.pieces)
    first_late = plan.first_pause + (plan.pieces[0][0] if plan.pieces else plan.error_after or 0)
    if plan.error_after is not None and not plan.pieces and first_late < PATIENCE:
        return 502, "", False  # the error was the first thing read: a refusal to start
    return 200, text, plan.error_after is None


pauses = st.sampled_from([SHORT, LONG])
texts = st.text(st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=12)
plans = st.builds(
    Plan,
    pieces=st.lists(st.tuples(pauses, texts), max_size=3),
    error_after=st.none() | pauses,
    first_pause=pauses,
)


@settings(max_examples=24, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=plans)
def test_a_first_read_cut_off_by_the_patience_loses_nothing(gw: GatewayServer, plan: Plan) -> None:
    if plan.pieces and plan.error_after == SHORT:
        # An error in the same read as content fails that read whole (a refusal
        # to start when it is the first): timing would decide the status.
        plan.error_after = LONG
    CURRENT.plan = plan
    with httpx.stream("POST", gw.url + "/v1/chat/completions", json=STREAM, timeout=20) as reply:
        body = reply.read().decode()
    status, text, done = _expected(plan)
    assert reply.status_code == status, body
    if status != 200:
        assert "template failed" in orjson.loads(body)["error"]["message"]
        return
    lines = body.split("\n")
    events = [orjson.loads(line[6:]) for line in lines if line.startswith("data: {")]
    content = "".join(
        event["choices"][0]["delta"].get("content") or ""
        for event in events
        if event.get("choices")
    )
    assert content == text
    assert (lines[-3:] == ["data: [DONE]", "", ""]) is done, body[-200:]
    if not done:
        assert "template failed" in events[-1]["error"]["message"]
    if plan.first_pause == LONG:
        # Silent past the patience: the stream opened, and was kept alive.
        assert ": keep-alive" in lines


def _silent(request: RawRequest, conn: socket.socket) -> str:
    conn.sendall(sse_head())
    return "hang"  # headers, then nothing until the client leaves


@pytest.mark.parametrize("leave", ["within the patience", "after the stream opened"])
def test_a_client_leaving_during_the_first_read_closes_the_backend_stream(leave: str) -> None:
    with (
        RawBackend(_silent) as backend,
        gateway(backend.url + "/v1", backend_kind="openai", keepalive_interval=0.3) as gw,
    ):
        body = orjson.dumps(STREAM)
        head = (
            f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        with socket.create_connection(("127.0.0.1", gw.port), timeout=10) as client:
            client.sendall(head.encode() + body)
            if leave == "after the stream opened":
                assert client.recv(65536).startswith(b"HTTP/1.1 200")
            else:
                time.sleep(0.05)
        assert backend.client_left.wait(5), "the gateway kept the backend's stream open"
        deadline = time.monotonic() + 5
        while True:
            counters = httpx.get(gw.url + "/health", timeout=10).json()["counters"]
            if counters["requests"].get("client_gone") == 1:
                break
            assert time.monotonic() < deadline, counters
            time.sleep(0.05)
