"""Hostile input for the surfaces added last (issue 23): tool definitions, tool
responses and ``/ws`` frames — the strategies and the checks, shared by the short
run in the suite (test_fuzz_surfaces.py) and the long one (bench/fuzz_surfaces.py).

Each check takes one drawn input against real servers on 127.0.0.1 and returns
None when the gateway held (a clean answer of the documented shape, and every
later request still served), or a sentence saying what broke: a defect.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson
import websockets
from hypothesis import strategies as st

from tests.strategies import json_trees
from toolrelay.events import ToolCall
from toolrelay.io.tools import HttpTool, HttpToolClient, Toolbox, parse_definitions
from toolrelay.io.tools.results import TRUNCATION_MARK
from toolrelay.server.background import BackgroundServer

MAX_CHARS = 300
_NAMES = st.from_regex(r"[A-Za-z0-9_-]{1,64}", fullmatch=True)
_HOSTILE_TEXT = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["", " ", "\r\nX-Injected: 1", "\x00", "\ud800", "{q}", "{missing}", "é" * 50]),
)
_INTEGERS = st.one_of(st.integers(), st.sampled_from([2**64, -(2**63) - 1, 10**4000]))
# An integer longer than any Python int reads (4,300 digits), as JSON text.
_HUGE_LITERAL = (
    b'[{"name": "n", "url": "http://127.0.0.1:9/x", "parameters": {"type": "object", '
    b'"maximum": ' + b"9" * 5000 + b"}}]"
)
_SCALARS = st.one_of(st.none(), st.booleans(), _INTEGERS, st.floats(allow_nan=False), _HOSTILE_TEXT)
_JSON = json_trees(
    _SCALARS,
    _HOSTILE_TEXT,
    leaves=12,
)


def _nested(depth: int) -> Any:
    value: Any = {"type": "string"}
    for _ in range(depth):
        value = {"type": "object", "properties": {"a": value}}
    return value


_SCHEMAS = st.one_of(
    st.just({"type": "object", "properties": {"q": {"type": "string"}}}),
    st.integers(1, 300).map(lambda depth: {"type": "object", "properties": {"a": _nested(depth)}}),
    st.dictionaries(st.sampled_from(["type", "properties", "required", "$ref", "items"]), _JSON),
    _JSON,
)
_URLS = st.one_of(
    st.sampled_from(
        [
            "http://127.0.0.1:9/{q}",
            "http://127.0.0.1:9/x?api_key=SECRET&q={q}",
            "https://user:pw@127.0.0.1:9/x",
            "http://[::1]:9/x",
            "ftp://127.0.0.1/x",
            "http:///x",
            "http://127.0.0.1:9/{nope}",
            "http://127.0.0.1:99999/x",
        ]
    ),
    _HOSTILE_TEXT,
)
_DEFINITION = st.fixed_dictionaries(
    {"name": st.one_of(_NAMES, _HOSTILE_TEXT, _INTEGERS)},
    optional={
        "description": st.one_of(_HOSTILE_TEXT, _JSON),
        "parameters": _SCHEMAS,
        "url": _URLS,
        "method": st.one_of(st.sampled_from(["GET", "post", "PURGE", "BAD METHOD", ""]), _JSON),
        "headers": st.one_of(st.dictionaries(_HOSTILE_TEXT, _HOSTILE_TEXT, max_size=3), _JSON),
        "extra": _JSON,
    },
)
DEFINITION_BODIES = st.one_of(
    st.lists(_DEFINITION, min_size=1, max_size=3).map(lambda entries: json.dumps(entries).encode()),
    _JSON.map(lambda value: json.dumps(value).encode()),
    st.binary(max_size=200),
    st.just(_HUGE_LITERAL),
)


def check_definitions(gateway_url: str, body: bytes) -> str | None:
    """POST the body to /api/tools; then the list, a chat request and a stream must work."""
    answer = httpx.post(gateway_url + "/api/tools", content=body, timeout=60)
    if answer.status_code not in (200, 400, 413):
        return f"POST /api/tools answered {answer.status_code}: {answer.text[:200]}"
    if answer.json().get("ok") is not (answer.status_code == 200):
        return f"POST /api/tools answered {answer.status_code} with ok={answer.json().get('ok')}"
    listed = httpx.get(gateway_url + "/api/tools", timeout=60)
    if listed.status_code != 200:
        return f"GET /api/tools answered {listed.status_code} after the post"
    if b"SECRET" in listed.content or b":pw@" in listed.content:
        return "GET /api/tools showed a credential"
    chat = {"model": "toolrelay-sim", "messages": [{"role": "user", "content": "hello"}]}
    for streamed in (False, True):
        reply = httpx.post(
            gateway_url + "/v1/chat/completions", json={**chat, "stream": streamed}, timeout=60
        )
        if reply.status_code != 200:
            return f"a chat request (stream={streamed}) answered {reply.status_code} after it"
    return None


@dataclass
class Answer:
    status: int
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    body: bytes = b""


_CHARSETS = st.sampled_from(["utf-8", "latin-1", "utf-16", "utf-7", "bogus", "", "x" * 100])
TOOL_ANSWERS = st.builds(
    Answer,
    status=st.sampled_from([200, 201, 204, 301, 302, 307, 400, 404, 500, 503, 599]),
    headers=st.lists(
        st.one_of(
            _CHARSETS.map(lambda cs: (b"content-type", f"text/plain; charset={cs}".encode())),
            st.just((b"content-encoding", b"gzip")),
            st.just((b"location", b"http://127.0.0.1:9/elsewhere")),
            st.just((b"location", b"/same-origin")),
            st.just((b"location", b"::not a url::")),
        ),
        max_size=3,
    ),
    body=st.one_of(st.binary(max_size=2000), st.text(max_size=2000).map(str.encode)),
)


class Responder(BackgroundServer):
    """A tool's server that answers whatever ``answer`` is set to."""

    def __init__(self) -> None:
        self.answer = Answer(200)

        async def app(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                return
            while (await receive()).get("more_body"):
                pass
            answer = self.answer
            await send(
                {"type": "http.response.start", "status": answer.status, "headers": answer.headers}
            )
            await send({"type": "http.response.body", "body": answer.body})

        super().__init__(app)


def check_tool_answer(responder: Responder, answer: Answer, follow: bool) -> str | None:
    """One call to a tool whose server answers ``answer``: a bounded text, never an exception."""
    responder.answer = answer
    definition = {
        "name": "t",
        "url": responder.url + "/t/{q}",
        "method": "GET",
        "headers": {"X-Api-Key": "k"},
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
    }
    (tool,) = parse_definitions([definition])

    async def main() -> Any:
        client = HttpToolClient(timeout=10, follow_redirects=follow)
        try:
            box = Toolbox([HttpTool(tool, client)], max_chars=MAX_CHARS)
            return await box.run(ToolCall("c1", "t", {"q": "x"}))
        finally:
            await client.aclose()

    try:
        output = asyncio.run(main())
    except Exception as exc:
        return f"the tool call raised {type(exc).__name__}: {exc}"
    if not isinstance(output.text, str) or len(output.text) > MAX_CHARS + len(TRUNCATION_MARK):
        return f"the result is not a bounded text: {output.text[:100]!r}"
    if not 200 <= answer.status < 300 and not output.is_error:
        return f"a {answer.status} answer was not an error: {output.text[:100]}"
    return None


WS_FRAMES = st.one_of(
    st.text(max_size=200),
    st.binary(max_size=200),
    _JSON.map(lambda value: json.dumps(value)),
    st.fixed_dictionaries({"type": st.sampled_from(["user_text", "x"]), "text": _JSON}).map(
        json.dumps
    ),
    st.text(min_size=1, max_size=100).map(lambda t: json.dumps({"type": "user_text", "text": t})),
)


def check_ws_frame(gateway_url: str, frame: str | bytes) -> str | None:
    """One frame on a fresh /ws connection: an error event or a whole turn, then it still
    serves (an unknown type gets its error event)."""

    async def main() -> str | None:
        url = gateway_url.replace("http", "ws", 1) + "/ws"
        async with websockets.connect(url, open_timeout=30, max_size=None) as ws:
            await ws.send(frame)
            ended = await _until_done(ws)
            if ended is not None:
                return ended
            await ws.send('{"type": "still there?"}')
            reply = orjson.loads(await asyncio.wait_for(ws.recv(), 30))
            if reply.get("type") != "error":
                return f"after the frame, an unknown type got {reply!r}"
        return None

    try:
        return asyncio.run(main())
    except Exception as exc:
        return f"/ws failed: {type(exc).__name__}: {exc}"


async def _until_done(ws: Any) -> str | None:
    for _ in range(1000):  # a turn's events, bounded
        event = orjson.loads(await asyncio.wait_for(ws.recv(), 60))
        kind = event.get("type")
        if kind == "error" or kind == "assistant_end":
            return None
        if kind not in ("assistant_delta", "tool_call", "tool_result"):
            return f"an unexpected event {event!r}"
    return "a turn that never ended"
