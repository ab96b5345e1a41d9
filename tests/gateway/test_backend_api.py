"""The backend layer on its own, as the agent engine, `chat` and `doctor` use it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.gateway.support import silent_backend
from tests.weather import ASK_WEATHER, WEATHER_TOOL
from toolrelay.events import ContentDelta, ToolCallStart
from toolrelay.io.backends import Backend, BackendError
from toolrelay.io.counters import Counters
from toolrelay.io.round import Finish, Opened, RoundRequest, complete_round, stream_round
from toolrelay.io.round.body import backend_body
from toolrelay.io.round.opening import open_handling_refusals
from toolrelay.io.round.relays import StreamRelay
from toolrelay.io.round.streamed import stream_handling_fallbacks
from toolrelay.io.settings import BackendConfig
from toolrelay.server.asgi import read_body
from toolrelay.server.background import BackgroundServer
from toolrelay.simulator import Simulator, SimulatorConfig


def test_backend_api_against_an_ollama_without_tools() -> None:
    async def run(url: str) -> dict[str, Any]:
        backend = Backend(BackendConfig(url=url))
        try:
            model = await backend.default_model()
            body = {"model": model, "messages": ASK_WEATHER, "tools": [WEATHER_TOOL]}
            request = RoundRequest.from_body(body)
            batches = [batch async for batch in stream_round(backend, request, Counters())]
            plain = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
            return {
                "model": model,
                "kind": await backend.kind(),
                "mode": await backend.tool_mode_for(model),
                "models": await backend.list_models(),
                "raw": await backend.complete(plain),
                "chunks": [chunk async for chunk in backend.stream(plain)],
                "reply": await complete_round(backend, request, Counters()),
                "batches": batches,
            }
        finally:
            await backend.aclose()

    with Simulator(SimulatorConfig(no_tools_support=True)) as sim:
        out = asyncio.run(run(sim.openai_url))
    assert out["model"] == "toolrelay-sim"
    assert (out["kind"], out["mode"]) == ("ollama", "rescue")
    assert out["models"]["data"][0]["id"] == "toolrelay-sim"
    assert out["raw"]["choices"][0]["message"]["content"].startswith("This is the toolrelay")
    assert out["chunks"] and all(c["object"] == "chat.completion.chunk" for c in out["chunks"])
    reply = out["reply"]
    assert [c.name for c in reply.calls] == ["get_weather"] and reply.mode == "rescue"
    assert reply.calls[0].arguments == {"city": "Paris"}
    items = [item for batch in out["batches"] for item in batch]
    assert isinstance(items[0], Opened) and isinstance(items[-1], Finish)
    assert items[-1].reason == "tool_calls"
    assert any(isinstance(i, ToolCallStart) and i.name == "get_weather" for i in items)
    assert "[TOOL_CALL]" not in "".join(i.text for i in items if isinstance(i, ContentDelta))


def test_a_stream_round_closed_right_after_it_opened_closes_the_backend_connection() -> None:
    # A relay whose client leaves before the first chunk closes the round there.
    closed = threading.Event()

    async def run(url: str) -> bool:
        backend = Backend(BackendConfig(url=url, kind="openai"))
        try:
            body = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
            items = stream_round(backend, RoundRequest.from_body(body), Counters())
            assert await items.__anext__() == [Opened("native")]
            await items.aclose()
            return await asyncio.to_thread(closed.wait, 5)
        finally:
            await backend.aclose()

    with BackgroundServer(silent_backend(closed)) as server:
        assert asyncio.run(run(server.url + "/v1")), "the backend's stream was left open"


def _refusing_backend(asked: list[tuple[str, bytes, bytes | None, bytes]]) -> Any:
    """A model server that notes each request (path, query, Authorization, body) and
    refuses it."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = await read_body(receive, 1 << 20)
        auth = dict(scope["headers"]).get(b"authorization")
        asked.append((scope["path"], scope["query_string"], auth, body))
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 400, "headers": headers})
        await send({"type": "http.response.body", "body": b'{"error": "refused"}'})

    return app


@pytest.fixture(scope="module")
def refusing() -> Iterator[tuple[str, list[tuple[str, bytes, bytes | None, bytes]]]]:
    asked: list[tuple[str, bytes, bytes | None, bytes]] = []
    with BackgroundServer(_refusing_backend(asked)) as server:
        yield server.url.removeprefix("http://"), asked


@settings(max_examples=30)
@given(
    st.sampled_from(["http://{}/v1", "http://u:secret@{}/v1/", "http://{}/v1?k=v"]),
    st.sampled_from([None, "sk-own"]),
    st.sampled_from([None, "Bearer the-clients"]),
)
def test_a_round_opens_its_stream_as_backend_open_stream_does(
    refusing: tuple[str, list[tuple[str, bytes, bytes | None, bytes]]],
    url: str,
    api_key: str | None,
    auth: str | None,
) -> None:
    """The round writes Backend.open_stream out (its URL, body and credentials, the
    backend's own winning): both send the same request."""
    host, asked = refusing
    asked.clear()
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
    req = RoundRequest.from_body(body, auth=auth)

    async def run() -> None:
        backend = Backend(BackendConfig(url=url.format(host), kind="openai", api_key=api_key))
        try:
            sent = await backend_body(backend, req, "native")
            with pytest.raises(BackendError):
                await backend.open_stream(sent, auth=auth, plain=True)
            with pytest.raises(BackendError):
                await open_handling_refusals(backend, req, Counters(), None)
        finally:
            await backend.aclose()

    asyncio.run(run())
    assert len(asked) == 2
    assert asked[0] == asked[1]
    # The URL's own query goes with the request, and none where it has none.
    assert asked[0][1] == (b"k=v" if "?" in url else b"")


@given(st.lists(st.sampled_from(["ask", "loses", "keeps", "forget"]), max_size=16))
def test_a_round_holds_its_stream_where_holds_streams_does(steps: list[str]) -> None:
    """stream_handling_fallbacks looks the fact up before it asks holds_streams: a
    stream is held where holds_streams alone holds it, its re-checks counted alike."""
    config = BackendConfig(url="http://127.0.0.1:9/v1", kind="openai")
    alone, rounds = Backend(config, recheck_requests=3), Backend(config, recheck_requests=3)
    req = RoundRequest.from_body({"model": "m", "messages": ASK_WEATHER, "tools": [WEATHER_TOOL]})
    for step in steps:
        if step == "ask":
            held = alone.holds_streams("m")
            round_ = stream_handling_fallbacks(rounds, req, Counters(), patience=None)
            # Held: the finished reply's generator; else the stream's relay.
            assert isinstance(round_, StreamRelay) != held
        for backend in (alone, rounds):
            if step == "forget":
                backend.facts.forget("m", "swallows_streamed_calls")
            elif step != "ask":
                backend.learn("m", "swallows_streamed_calls", step == "loses")
