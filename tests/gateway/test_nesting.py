"""Nesting: what the gateway accepts it forwards; past its limit, a 400 naming it."""

from __future__ import annotations

import json
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.gateway.support import stack
from tests.strategies import json_trees
from toolrelay.repair import MAX_DEPTH
from toolrelay.server.asgi import _WRAP, _may_nest_too_deep, _too_deep, decode
from toolrelay.server.errors import APIError


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


def _nest(depth: int, kinds: list[bool], filler: list[Any]) -> Any:
    """A value ``depth`` levels deep (lists and objects as ``kinds`` says), beside ``filler``."""
    value: Any = "leaf"
    for level in range(depth):
        if kinds[level % len(kinds)]:
            # No filler, no "f": an empty list beside the innermost value is a level more.
            value = {"k": value, "f": filler} if filler else {"k": value}
        else:
            value = [value, *filler]
    return value


json_values = json_trees(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='{}[]"\\ab', max_size=6),
    st.text(max_size=3),
    leaves=6,
    object_width=None,
)


@settings(max_examples=300)
@given(
    depth=st.integers(min_value=0, max_value=MAX_DEPTH + 12),
    kinds=st.lists(st.booleans(), min_size=1, max_size=4),
    filler=st.lists(json_values, max_size=2),
    spaced=st.booleans(),
)
def test_the_bracket_count_shortcut_agrees_with_the_depth_check(
    depth: int, kinds: list[bool], filler: list[Any], spaced: bool
) -> None:
    """A body is checked for depth (encoding it again) only when its brackets
    could reach the limit; the shortcut never lets through what the check
    refuses, and decoding answers as with the check always run."""
    body = {"model": "m", "metadata": _nest(depth, kinds, filler)}
    raw = json.dumps(body, indent=1 if spaced else None).encode()
    refused = _too_deep(orjson.loads(raw), _WRAP)
    if not _may_nest_too_deep(raw):
        assert not refused
    if refused:
        with pytest.raises(APIError) as caught:
            decode(raw)
        assert caught.value.param == "metadata"
    else:
        assert decode(raw) == orjson.loads(raw)
    if not filler:  # the body is depth + 1 levels deep: both sides of the limit occur
        assert refused == (depth + 1 > MAX_DEPTH)
