"""Nesting: what the gateway accepts it forwards; past its limit, a 400 naming it."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.gateway.support import stack
from toolrelay.repair import MAX_DEPTH


def _body(levels: int, stream: bool = False) -> bytes:
    """A request whose ``metadata`` takes the whole body ``levels`` deep."""
    nested = b"[" * (levels - 1) + b"]" * (levels - 1)
    head = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}], '
    flag = b'"stream": true, ' if stream else b""
    return head + flag + b'"metadata": ' + nested + b"}"


@pytest.mark.parametrize("stream", [False, True])
def test_the_deepest_request_accepted_is_forwarded(stream: bool) -> None:
    with stack() as (sim, gw):
        reply = httpx.post(
            gw.url + "/v1/chat/completions",
            content=_body(MAX_DEPTH, stream),
            headers={"content-type": "application/json"},
            timeout=20,
        )
        assert reply.status_code == 200, reply.text[:300]
        forwarded: Any = sim.requests[-1].body["metadata"]
        depth = 1
        while forwarded:
            forwarded = forwarded[0]
            depth += 1
        assert depth == MAX_DEPTH - 1  # the body's own level is the first


@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 255, 1000])
def test_deeper_is_a_400_naming_the_limit(levels: int) -> None:
    with stack() as (sim, gw):
        for stream in (False, True):
            reply = httpx.post(
                gw.url + "/v1/chat/completions",
                content=_body(levels, stream),
                headers={"content-type": "application/json"},
                timeout=20,
            )
            assert reply.status_code == 400, reply.text[:300]
            error = reply.json()["error"]
            assert f"{MAX_DEPTH} levels" in error["message"]
            assert error["param"] == "metadata"
        assert not [r for r in sim.requests if r.path.endswith("/chat/completions")]


def test_a_deep_tool_schema_is_a_400_naming_tools() -> None:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(MAX_DEPTH):
        schema = {"type": "object", "properties": {"a": schema}}
    tool = {"type": "function", "function": {"name": "t", "parameters": schema}}
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": [tool]}
    with stack() as (_, gw):
        reply = httpx.post(gw.url + "/v1/chat/completions", json=body, timeout=20)
        assert reply.status_code == 400
        assert reply.json()["error"]["param"] == "tools"
