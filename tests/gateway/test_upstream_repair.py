"""Upstream servers that get native tool-call deltas wrong, repaired on the way.

The backend here is a small real HTTP server replaying wire shapes seen from
real servers (missing index, repeated names, two calls under one index,
interleaved indices, whole calls with object arguments, empty ids).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import orjson
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.gateway.support import TIME_TOOL, GatewayServer, gateway
from tests.weather import WEATHER_TOOL
from toolrelay.server.background import BackgroundServer


def _call(index: int | None, **fields: Any) -> dict[str, Any]:
    entry = dict(fields)
    if index is not None:
        entry["index"] = index
    return entry


def _fn(name: str | None = None, arguments: Any = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if name is not None:
        out["name"] = name
    if arguments is not None:
        out["arguments"] = arguments
    return out


STREAMS: dict[str, list[list[dict[str, Any]]]] = {
    "missing index": [
        [_call(None, id="c1", type="function", function=_fn("get_weather", ""))],
        [_call(None, function=_fn(arguments='{"city":'))],
        [_call(None, function=_fn(arguments=' "Oslo"}'))],
    ],
    "repeated names": [
        [_call(0, id="c1", type="function", function=_fn("get_weather", '{"city"'))],
        [_call(0, id="c1", type="function", function=_fn("get_weather", ': "Oslo"'))],
        [_call(0, id="c1", type="function", function=_fn("get_weather", "}"))],
    ],
    "merged calls": [
        [_call(0, id="c1", type="function", function=_fn("get_weather", '{"city": "Oslo"}'))],
        [_call(0, id="c2", type="function", function=_fn("get_time", '{"tz": "CET"}'))],
    ],
    "interleaved": [
        [_call(0, id="c1", type="function", function=_fn("get_weather", ""))],
        [_call(1, id="c2", type="function", function=_fn("get_time", ""))],
        [_call(0, function=_fn(arguments='{"city": "Oslo"}'))],
        [_call(1, function=_fn(arguments='{"tz": "CET"}'))],
    ],
    "whole objects": [
        [
            _call(None, id="", function=_fn("get_weather", {"city": "Oslo"})),
            _call(None, function=_fn("get_time", {"tz": "CET"})),
        ]
    ],
    "same ids": [
        [_call(0, id="call_0", type="function", function=_fn("get_weather", '{"city": "Oslo"}'))],
        [_call(1, id="call_0", type="function", function=_fn("get_time", '{"tz": "CET"}'))],
    ],
    # Repaired (the trailing comma) into an integer orjson cannot write.
    "beyond 64 bits": [
        [_call(0, id="c1", type="function", function=_fn("get_weather", '{"n": 2e0, '))],
        [_call(0, function=_fn(arguments='"id": 123456789012345678901,}'))],
    ],
}
EXPECTED = {
    "missing index": [("get_weather", {"city": "Oslo"})],
    "repeated names": [("get_weather", {"city": "Oslo"})],
    "merged calls": [("get_weather", {"city": "Oslo"}), ("get_time", {"tz": "CET"})],
    "interleaved": [("get_weather", {"city": "Oslo"}), ("get_time", {"tz": "CET"})],
    "whole objects": [("get_weather", {"city": "Oslo"}), ("get_time", {"tz": "CET"})],
    "same ids": [("get_weather", {"city": "Oslo"}), ("get_time", {"tz": "CET"})],
    "beyond 64 bits": [("get_weather", {"n": 2.0, "id": 123456789012345678901})],
}


async def completions(request: Request) -> Response:
    body = await request.json()
    case = body["messages"][-1]["content"]
    if case == "json error" and body.get("stream"):
        return JSONResponse({"error": {"message": "model is loading"}})
    if case == "whoami":
        message = {"role": "assistant", "content": request.headers.get("authorization")}
        return JSONResponse({"choices": [{"index": 0, "message": message}]})
    if case == "slow":
        # A slow model, asked without streaming.
        await asyncio.sleep(0.6)
        call = {"id": "c1", "type": "function", "function": {"name": "get_weather"}}
        call["function"]["arguments"] = '{"city": "Oslo"}'
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        return JSONResponse({"choices": [{"index": 0, "message": message}]})
    common = {"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    if case == "error null":
        # An "error": null key on every chunk, which the openai SDK does not count as an error.
        pieces = [{"content": "fine"}, {}]
        chunks = [
            {**common, "error": None, "choices": [{"index": 0, "delta": delta}]} for delta in pieces
        ]
        chunks[-1]["choices"][0]["finish_reason"] = "stop"
        sse = b"".join(b"data: " + orjson.dumps(chunk) + b"\n\n" for chunk in chunks)
        return Response(sse + b"data: [DONE]\n\n", media_type="text/event-stream")
    if body.get("stream"):

        async def frames() -> Iterator[bytes]:  # type: ignore[misc]
            for deltas in STREAMS[case]:
                chunk = {**common, "choices": [{"index": 0, "delta": {"tool_calls": deltas}}]}
                yield b"data: " + orjson.dumps(chunk) + b"\n\n"
            end = {**common, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}
            yield b"data: " + orjson.dumps(end) + b"\n\ndata: [DONE]\n\n"

        return StreamingResponse(frames(), media_type="text/event-stream")
    calls = [
        {"id": "", "type": "function", "function": {"name": "search", "arguments": {"q": "x"}}},
        {"function": {"name": "get_weather", "arguments": '"{\\"city\\": \\"Oslo\\"}"'}},
    ]
    message = {"role": "assistant", "content": None, "tool_calls": calls}
    return JSONResponse(
        {**common, "object": "chat.completion", "choices": [{"index": 0, "message": message}]}
    )


NAMESPACED = {
    "type": "function",
    "function": {"name": "docs__search", "parameters": {"type": "object", "properties": {}}},
}


@pytest.fixture(scope="module")
def upstream() -> Iterator[BackgroundServer]:
    app = Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])
    with BackgroundServer(app) as server:
        yield server


@pytest.fixture(scope="module")
def gw(upstream: BackgroundServer) -> Iterator[GatewayServer]:
    # The wire is under test here: some calls' arguments do not fit their
    # schema on purpose, and must come through as the upstream meant them.
    with gateway(upstream.url + "/v1", backend_kind="openai", validation="off") as server:
        yield server


@pytest.mark.parametrize("case", list(STREAMS))
def test_streamed_deltas_are_repaired(gw: GatewayServer, case: str) -> None:
    client = gw.client()
    messages: Any = [{"role": "user", "content": case}]
    raw = list(
        client.chat.completions.create(
            model="m", messages=messages, tools=[WEATHER_TOOL, TIME_TOOL], stream=True
        )
    )
    entries = [tc for chunk in raw for tc in (chunk.choices[0].delta.tool_calls or [])]
    seen: list[int] = []
    for entry in entries:
        assert isinstance(entry.index, int) and entry.function is not None
        if entry.index not in seen:
            seen.append(entry.index)
            assert entry.id and entry.type == "function" and entry.function.name
        else:
            # Name and id once per index, and never back to an earlier index.
            assert entry.id is None and entry.function.name is None
            assert entry.index == seen[-1]
    with client.chat.completions.stream(
        model="m", messages=messages, tools=[WEATHER_TOOL, TIME_TOOL]
    ) as stream:
        final = stream.get_final_completion()
    calls = final.choices[0].message.tool_calls or []
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == EXPECTED[case]
    assert len({c.id for c in calls}) == len(calls)
    assert final.choices[0].finish_reason == "tool_calls"


def test_whole_message_calls_are_repaired(gw: GatewayServer) -> None:
    reply = gw.client().chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": "x"}],
        tools=[NAMESPACED, WEATHER_TOOL],
    )
    calls = reply.choices[0].message.tool_calls or []
    # Empty id replaced, object arguments serialised, short name rewritten,
    # double-encoded arguments decoded.
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == [
        ("docs__search", {"q": "x"}),
        ("get_weather", {"city": "Oslo"}),
    ]
    assert all(c.id and c.type == "function" for c in calls)


def test_keepalive_while_a_non_streamed_round_runs(upstream: BackgroundServer) -> None:
    """A streamed request answered without streaming (here: tool_choice
    required) commits to the stream once the keep-alive interval passes."""
    with gateway(upstream.url + "/v1", backend_kind="openai", keepalive_interval=0.1) as gw:
        body = {
            "model": "m",
            "messages": [{"role": "user", "content": "slow"}],
            "tools": [WEATHER_TOOL],
            "tool_choice": "required",
            "stream": True,
        }
        with httpx.stream("POST", gw.url + "/v1/chat/completions", json=body, timeout=20) as r:
            lines = [line for line in r.iter_lines() if line]
    first_call = next(i for i, line in enumerate(lines) if "tool_calls" in line)
    assert ": keep-alive" in lines[:first_call]
    assert lines[-1] == "data: [DONE]"
    assert any('"name":"get_weather"' in line for line in lines)


def test_credentials(upstream: BackgroundServer) -> None:
    """The client's key reaches a backend without one; a configured key wins."""
    ask: Any = [{"role": "user", "content": "whoami"}]
    for configured, expected in ((None, "Bearer sk-client"), ("sk-gw", "Bearer sk-gw")):
        with gateway(upstream.url + "/v1", backend_kind="openai", api_key=configured) as gw:
            client = gw.client(api_key="sk-client")
            reply = client.chat.completions.create(model="m", messages=ask)
            assert reply.choices[0].message.content == expected


def test_a_null_error_key_in_a_chunk_is_no_error(gw: GatewayServer) -> None:
    stream = gw.client().chat.completions.create(
        model="m", messages=[{"role": "user", "content": "error null"}], stream=True
    )
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "fine"
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_json_answer_to_a_streamed_request(gw: GatewayServer) -> None:
    with pytest.raises(openai.APIStatusError) as caught:
        gw.client().chat.completions.create(
            model="m", messages=[{"role": "user", "content": "json error"}], stream=True
        )
    assert caught.value.status_code == 502
    assert "model is loading" in caught.value.message
