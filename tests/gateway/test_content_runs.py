"""A read's run of plain content goes from the backend to the client as one
:class:`ContentRun`, written at once by the front (the gateway's turn asks
``stream_routed`` for runs). Whatever the content (blanks at a text's end or
alone, empty, beyond ASCII, ``%``, what JSON escapes), whatever breaks a run
(reasoning, the role, usage, the finish) and however the bytes fall into reads,
the client gets the bytes of the general path, where each chunk's text is its own
``ContentDelta`` through the front's event writer: Chat Completions, Anthropic
Messages (with thinking and without) and OpenAI Responses. Real HTTP: a raw
backend on 127.0.0.1 writing the generated stream in the generated pieces, the
turn's own stream (``stream_turn``) and relay (``_Exchange.relay``).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any
from unittest.mock import patch

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.types import Message

from tests.gateway.rawbackend import Pieces, RawBackend, serving, sse_event
from toolrelay.io.round import ContentRun, Finish, RoundRequest, stream_routed
from toolrelay.io.settings import Settings
from toolrelay.server import turn
from toolrelay.server.anthropic.wire import MessageEncoder
from toolrelay.server.chat.wire import ChunkEncoder
from toolrelay.server.gateway import Gateway
from toolrelay.server.responses.wire import ResponseBuilder

_BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
# Plain content, which a run is made of, heavy in what a front's blank rules and
# templates must get right; and content a run stops at (an empty text, escapes).
_PLAIN = st.lists(
    st.sampled_from(["abcd", " the", "a ", " ", "\xa0", "\u3000", "\x85", "%d", "é", "😀"]),
    min_size=1,
    max_size=3,
).map(lambda pieces: sse_event({"content": "".join(pieces)}))
_ODD = st.sampled_from(['"', "\\", "a\n", ""]).map(lambda text: sse_event({"content": text}))
_BREAKS = {
    "odd": _ODD,
    "reasoning": st.text(min_size=1, max_size=4).map(
        lambda text: sse_event({"reasoning_content": text})
    ),
    "role": st.just(sse_event({"role": "assistant", "content": ""})),
    "usage": st.just(b'data: {"choices":[],"usage":{"total_tokens":3}}\n\n'),
}
# Mostly plain content, as a long answer is (a kind drawn from a list is drawn
# by its share of the list); what breaks a run now and then.
_EVENTS = st.lists(
    st.sampled_from([*["plain"] * 12, *_BREAKS]).flatmap(
        lambda kind: _PLAIN if kind == "plain" else _BREAKS[kind]
    ),
    min_size=6,
    max_size=40,
)
_ENDS = st.sampled_from(
    [sse_event({}, "stop") + b"data: [DONE]\n\n", sse_event({}, "length") + b"data: [DONE]\n\n"]
)


_SERVED = Pieces()
_BACKEND = RawBackend(_SERVED)

_serving = serving(_BACKEND)


class _Client:
    """What the relay sends the client, kept; a client that never leaves."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []

    async def receive(self) -> Message:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def send(self, message: Message) -> None:
        self.sent.append(message["body"])


class _ResponsesEncoder:
    """The Responses front's encoder without its front and turn (which only keep
    the finished response): the builder's own methods, as the encoder's are."""

    def __init__(self) -> None:
        self.builder = ResponseBuilder("m", {}, True)
        self.event = self.builder.stream_event
        self.run = self.builder.stream_run

    def start(self) -> bytes:
        return self.builder.start()

    def finish(self, finish: Finish, extra: dict[str, Any]) -> bytes:
        return self.builder.finish_bytes(finish, extra)


_ENCODERS: dict[str, Callable[[], Any]] = {
    "chat": lambda: ChunkEncoder("m", include_usage=True),
    "messages": lambda: MessageEncoder("m", thinking=False),
    "messages thinking": lambda: MessageEncoder("m", thinking=True),
    "responses": _ResponsesEncoder,
}


async def _client_bytes(front: str) -> bytes:
    """What the client of ``front`` gets for the served stream, through the turn's
    stream and relay."""
    gateway = Gateway(Settings(backend=_BACKEND.url + "/v1", backend_kind="openai"))
    items = turn.stream_turn(gateway, RoundRequest.from_body(_BODY))
    client = _Client()
    exchange = turn._Exchange(client.receive, client.send, turn._Listeners())
    try:
        await items.__anext__()  # Opened
        await exchange.relay(items, _ENCODERS[front](), {})
    finally:
        exchange.stop()
        await items.aclose()
        await gateway.aclose()
    return b"".join(client.sent)


def _stream(pieces: list[bytes], front: str, *, general: bool) -> bytes:
    """The client's bytes; ``general``: the turn's stream asked for no runs."""
    _SERVED.pieces = pieces
    with ExitStack() as stack:
        # The ids and times the encoders draw, alike on both paths.
        for module in ("chat", "anthropic", "responses"):
            wire = f"toolrelay.server.{module}.wire"
            stack.enter_context(patch(f"{wire}.unique_hex", lambda: "0" * 32))
        # The clock itself: a compiled module (setup.py) holds the time module, not its name.
        stack.enter_context(patch("time.time", lambda: 0.0))
        if general:
            without_runs = _without_runs(stream_routed)
            stack.enter_context(patch.object(turn, "stream_routed", without_runs))
        return asyncio.run(_client_bytes(front))


def _without_runs(routed: Callable[..., Any]) -> Callable[..., Any]:
    def stream(*args: Any, **kwargs: Any) -> Any:
        return routed(*args, **{**kwargs, "runs": False})

    return stream


@st.composite
def _pieces(draw: st.DrawFn) -> list[bytes]:
    """A generated stream cut into a few pieces: mostly at the events' ends (reads
    of several whole events, where runs are read), sometimes anywhere."""
    events = [*draw(_EVENTS), draw(_ENDS)]
    body = b"".join(events)
    ends = [len(b"".join(events[: at + 1])) for at in range(len(events))]
    cuts = draw(st.sets(st.sampled_from(ends), max_size=4))
    cuts |= set(draw(st.lists(st.integers(1, len(body)), max_size=1)))
    bounds = [0, *sorted(cuts - {len(body)}), len(body)]
    return [body[start:end] for start, end in itertools.pairwise(bounds)]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_pieces())
def test_a_stream_with_runs_gives_the_client_the_general_bytes(pieces: list[bytes]) -> None:
    for front in _ENCODERS:
        assert _stream(pieces, front, general=False) == _stream(pieces, front, general=True)


async def _items(*, runs: bool) -> list[Any]:
    gateway = Gateway(Settings(backend=_BACKEND.url + "/v1", backend_kind="openai"))
    pool = gateway.backends.pool_for("m")
    items = stream_routed(
        pool, RoundRequest.from_body(_BODY), gateway.counters, patience=None, runs=runs
    )
    try:
        return [item async for batch in items for item in batch]
    finally:
        await items.aclose()
        await gateway.aclose()


def test_a_long_answer_read_at_once_comes_as_a_run_only_to_who_asks() -> None:
    """By hand: 40 plain chunks in one read come as the first ones' ContentDeltas
    (which teach the frame), then one run; without asking, as ContentDeltas all."""
    body = b"".join(sse_event({"content": f"w{at}"}) for at in range(40))
    _SERVED.pieces = [body + sse_event({}, "stop") + b"data: [DONE]\n\n"]
    with_runs = asyncio.run(_items(runs=True))
    runs = [item for item in with_runs if isinstance(item, ContentRun)]
    assert len(runs) == 1 and runs[0].texts == [f"w{at}" for at in range(3, 40)]
    assert not any(isinstance(item, ContentRun) for item in asyncio.run(_items(runs=False)))
