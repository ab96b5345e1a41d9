"""The one layer around every HTTP request (server/envelope.py): its request id,
its access-log line, a 500 in the error shape when a bug escapes; for any app
inside it, what the client receives is what the app sent, plus the id."""

from __future__ import annotations

import asyncio
import logging
from typing import Any
from unittest.mock import patch

import httpx
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.gateway.support import GatewayServer, gateway
from toolrelay.server.envelope import _SAFE_REQUEST_ID, Envelope, _request_id
from toolrelay.server.logs import NOTES

# What an app inside may do: its status, its headers, its body chunks, and
# whether it raises (before its response starts, or after some chunks).
statuses = st.sampled_from([200, 201, 400, 404, 502])
headers = st.lists(st.tuples(st.sampled_from([b"a", b"content-type"]), st.binary(max_size=8)))
chunks = st.lists(st.binary(max_size=16), max_size=5)
failures = st.one_of(st.none(), st.integers(min_value=-1, max_value=5))
SAFE = set(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:/=+-")
client_ids = st.one_of(st.none(), st.just(b"abc-1"), st.just(b"bad id!"), st.binary(max_size=4))


def _run(app: Any, client_id: bytes | None) -> tuple[list[dict[str, Any]], BaseException | None]:
    scope: dict[str, Any] = {"type": "http", "method": "POST", "path": "/x", "headers": []}
    if client_id is not None:
        scope["headers"].append((b"x-request-id", client_id))
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def go() -> BaseException | None:
        try:
            await Envelope(app)(scope, receive, send)
        except RuntimeError as exc:
            return exc
        return None

    raised = asyncio.run(go())
    assert scope[NOTES]["request_id"]
    return sent, raised


@given(statuses, headers, chunks, failures, client_ids)
def test_the_envelope_relays_what_the_app_sends_plus_the_id(
    status: int,
    head: list[tuple[bytes, bytes]],
    body: list[bytes],
    failure: int | None,
    client_id: bytes | None,
) -> None:
    """``failure``: None, the app ends well; -1, it raises before its response
    starts; n, it raises after n of its chunks."""
    wanted: list[dict[str, Any]] = [
        {"type": "http.response.start", "status": status, "headers": list(head)},
        *({"type": "http.response.body", "body": c, "more_body": True} for c in body),
        {"type": "http.response.body", "body": b"", "more_body": False},
    ]
    stop = None if failure is None else (0 if failure < 0 else min(failure + 1, len(wanted)))

    async def app(scope: Any, receive: Any, send: Any) -> None:
        for number, message in enumerate(wanted):
            if number == stop:
                raise RuntimeError("a bug")
            await send(dict(message))
        if stop is not None:
            raise RuntimeError("a bug")

    sent, raised = _run(app, client_id)
    assert (raised is None) == (stop is None)  # a bug is raised on, for the server's log
    ids = [v for m in sent[:1] for k, v in m["headers"] if k == b"x-request-id"]
    assert len(ids) == 1
    if client_id and len(client_id) <= 128 and set(client_id) <= SAFE:
        assert ids[0] == client_id
    else:
        assert ids[0].startswith(b"req_")
    if stop == 0:  # nothing sent yet: a 500 in the error shape
        assert sent[0]["status"] == 500 and len(sent) == 2
        error = orjson.loads(sent[1]["body"])["error"]
        assert error["type"] == "server_error" and error["message"] == "internal error: POST /x"
        return
    expected = wanted[: len(wanted) if stop is None else stop]
    expected[0] = {**expected[0], "headers": [*head, (b"x-request-id", ids[0])]}
    assert sent == expected


def _request_id_by_pairs(scope: dict[str, Any]) -> bytes:
    """The request id as it was read, each header unpacked into its name and value:
    the reference :func:`_request_id`, reading each header's name by its index, is
    held to."""
    for key, value in scope["headers"]:
        if key == b"x-request-id" and _SAFE_REQUEST_ID.fullmatch(value):
            return bytes(value)
    return b"req_" + b"0" * 32


_ID_HEADERS = st.lists(
    st.tuples(
        st.sampled_from([b"x-request-id", b"a", b"x-request-ids"]),
        st.sampled_from([b"abc-1", b"bad id!", b"x" * 129]) | st.binary(max_size=4),
    )
)


@given(_ID_HEADERS, st.booleans())
def test_the_request_id_is_the_headers_read_by_pairs(
    head: list[tuple[bytes, bytes]], as_lists: bool
) -> None:
    """For any headers, as tuples or as two-item lists (the ASGI spec allows
    either), the id is the one read unpacking each header."""
    pairs: list[Any] = [list(pair) if as_lists else pair for pair in head]
    scope = {"headers": pairs}
    with patch("toolrelay.server.envelope.unique_hex", lambda: "0" * 32):
        assert _request_id(scope) == _request_id_by_pairs(scope)


def _errors_and_log(
    gw: GatewayServer, caplog: pytest.LogCaptureFixture, response: httpx.Response
) -> None:
    assert response.status_code == 500
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["type"] == "server_error"
    request_id = response.headers["x-request-id"]
    lines = [r.getMessage() for r in caplog.records if r.name == "toolrelay.access"]
    assert any(" 500 " in line and line.endswith(request_id) for line in lines), lines


def test_a_bug_in_an_endpoint_is_a_500_with_its_request_id(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.INFO)
    with gateway("http://127.0.0.1:9/v1") as gw:

        async def broken() -> None:
            raise RuntimeError("a bug")

        monkeypatch.setattr(gw.gateway_app.state.gateway, "health", broken)
        response = httpx.get(gw.url + "/health", timeout=10)
        _errors_and_log(gw, caplog, response)
        assert response.json()["error"]["message"] == "internal error: GET /health"


def test_a_bug_that_escapes_a_front_is_a_500_with_its_request_id(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.INFO)

    def broken(message: Any, read: int, limit: int) -> bytes:
        raise RuntimeError("a bug")

    # The front's lane reaches the endpoint past Starlette's error middleware.
    monkeypatch.setattr("toolrelay.server.turn.body_part", broken)
    with gateway("http://127.0.0.1:9/v1") as gw:
        response = httpx.post(gw.url + "/v1/chat/completions", json={}, timeout=10)
        _errors_and_log(gw, caplog, response)
