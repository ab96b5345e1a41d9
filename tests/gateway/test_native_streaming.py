"""Native streamed tool calls are relayed as they arrive, not held to the end."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import httpx
import orjson
import pytest

from tests.gateway.support import gateway, stack
from toolrelay.server.background import BackgroundServer

SNIPPET = 'def greet(name):\n    print(f"Hello, {name}!\\n")\n    return {"ok": True}\n\n'
CODE_TOOL = {
    "type": "function",
    "function": {
        "name": "write_file",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "code": {"type": "string"}},
        },
    },
}


def _sse(lines: list[bytes]) -> list[Any]:
    return [orjson.loads(line[6:]) for line in lines if line.startswith(b"data: {")]


def _argument_chunks(payloads: list[Any]) -> list[str]:
    return [
        call["function"]["arguments"]
        for payload in payloads
        if payload.get("choices")
        for call in payload["choices"][0]["delta"].get("tool_calls") or []
        if call["function"].get("arguments")
    ]


@pytest.mark.parametrize("validate", ["off", "repair"])
def test_a_long_native_call_arrives_in_as_many_chunks_as_the_backend_sent(validate: str) -> None:
    """Relayed as it comes (validation off), each fragment is a chunk; held until
    checked (validation on), the call comes whole in one."""
    code = SNIPPET * 200  # 14 kB of code: quotes, braces and escapes
    arguments = {"code": code}
    scenario = {
        "rules": [{"answer": {"tool_calls": [{"name": "write_file", "arguments": arguments}]}}]
    }
    with stack(scenario, gateway_settings={"backend_kind": "openai"}) as (_, gw):
        body = {
            "model": "m",
            "messages": [{"role": "user", "content": "write it"}],
            "tools": [CODE_TOOL],
            "stream": True,
            "toolrelay_validate": validate,
        }
        with httpx.stream("POST", gw.url + "/v1/chat/completions", json=body, timeout=30) as reply:
            payloads = _sse([line.encode() for line in reply.iter_lines()])
    chunks = _argument_chunks(payloads)
    sent = orjson.dumps(arguments).decode()
    backend_fragments = [sent[i : i + 4] for i in range(0, len(sent), 4)]
    if validate == "off":
        # The second fragment, 'de":', is nothing but the key: it rides with the
        # value's first fragment. Every other fragment is one chunk to the client.
        assert backend_fragments[1] == 'de":'
        assert len(chunks) == len(backend_fragments) - 1
    else:
        assert chunks == [sent]
    assert json.loads("".join(chunks)) == arguments
    assert payloads[-1]["choices"][0]["finish_reason"] == "tool_calls"


def _paused_backend(release: threading.Event, fragments: list[str], held: list[bool]) -> Any:
    """Streams a call's start and its first fragments, then waits for ``release``
    (5 s at most; ``held`` records whether it had to give up waiting)."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        payload = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
        return b"data: " + orjson.dumps({**payload, "choices": [choice]}) + b"\n\n"

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await receive()
        if not scope["path"].endswith("/chat/completions"):
            await send({"type": "http.response.start", "status": 404, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        headers = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        start = {"index": 0, "id": "call_1", "type": "function"}
        start["function"] = {"name": "write_file", "arguments": ""}
        frames = [chunk({"tool_calls": [start]})]
        for fragment in fragments:
            frames.append(
                chunk({"tool_calls": [{"index": 0, "function": {"arguments": fragment}}]})
            )
        half = len(frames) // 2
        for frame in frames[:half]:
            await send({"type": "http.response.body", "body": frame, "more_body": True})
        deadline = time.monotonic() + 5
        while not release.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        held.append(not release.is_set())
        for frame in frames[half:]:
            await send({"type": "http.response.body", "body": frame, "more_body": True})
        end = chunk({}, "tool_calls") + b"data: [DONE]\n\n"
        await send({"type": "http.response.body", "body": end, "more_body": False})

    return app


def test_native_call_fragments_reach_the_client_before_the_backend_finishes() -> None:
    release = threading.Event()
    held: list[bool] = []
    fragments = ['{"path": "a.py", ', '"code": "', *("x = 1\\n" for _ in range(20)), '"}']
    with (
        BackgroundServer(_paused_backend(release, fragments, held)) as backend,
        # Validation holds a call until it is complete; off, fragments pass at once.
        gateway(backend.url + "/v1", backend_kind="openai", validation="off") as gw,
    ):
        body = {
            "model": "m",
            "messages": [{"role": "user", "content": "write it"}],
            "tools": [CODE_TOOL],
            "stream": True,
        }
        lines: list[bytes] = []
        with httpx.stream("POST", gw.url + "/v1/chat/completions", json=body, timeout=30) as reply:
            for line in reply.iter_lines():
                lines.append(line.encode())
                if len(_argument_chunks(_sse(lines))) == 5:
                    # Half the call is at the client while the backend still holds the rest.
                    release.set()
    assert held == [False], "the gateway held the call until the backend finished"
    chunks = _argument_chunks(_sse(lines))
    assert json.loads("".join(chunks)) == {"path": "a.py", "code": "x = 1\n" * 20}
    assert len(chunks) == len(fragments)
