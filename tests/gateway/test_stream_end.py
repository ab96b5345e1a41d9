"""A streamed round without tools ends with the read that brought the backend's ``[DONE]``.

The items of that read go out in one batch with the round's end (one write to
the client less, no read that only ends the iteration). Whatever the backend
sends and however its bytes fall into reads, the round gives the items, in
order, that it gives when that read is a batch of its own (the general path:
``ChunkStream.ended`` held False). Real HTTP: a raw backend on 127.0.0.1 writing
the generated stream in the generated pieces, the round's real client.
"""

from __future__ import annotations

import asyncio
import gc
import importlib
from typing import Any, get_args
from unittest.mock import patch

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.gateway.rawbackend import Pieces, RawBackend, serving, sse_event
from toolrelay.events import ContentDelta
from toolrelay.io.backends import Backend
from toolrelay.io.backends.http import ChunkStream
from toolrelay.io.counters import Counters
from toolrelay.io.round import ContentRun, Finish, Opened, RoundRequest, stream_round
from toolrelay.io.round.request import StreamItem
from toolrelay.io.settings import BackendConfig

_BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}

# The stream's events: content (plain, or with what keeps it from the plain read),
# reasoning, the role, usage.
_EVENTS = st.lists(
    st.one_of(
        st.text(min_size=1).map(lambda text: sse_event({"content": text})),
        st.text(min_size=1).map(lambda text: sse_event({"reasoning_content": text})),
        st.just(sse_event({"role": "assistant", "content": ""})),
        st.just(b'data: {"choices":[],"usage":{"total_tokens":3}}\n\n'),
        st.just(b": keep-alive\n\n"),
    ),
    max_size=8,
)
_ENDS = st.sampled_from(
    [
        sse_event({}, "stop") + b"data: [DONE]\n\n",
        sse_event({}, "length") + b"data: [DONE]\n\n",
        b"data: [DONE]\n\n",
        sse_event({}, "stop"),  # no [DONE]: a broken stream
    ]
)


_SERVED = Pieces()
_BACKEND = RawBackend(_SERVED)

_serving = serving(_BACKEND)


async def _round() -> list[list[Any]]:
    """The round's batches, or its error last."""
    backend = Backend(BackendConfig(url=_BACKEND.url + "/v1", kind="openai"))
    batches: list[list[Any]] = []
    try:
        async for batch in stream_round(backend, RoundRequest.from_body(_BODY), Counters()):
            batches.append(batch)
    except Exception as exc:  # the broken stream's error, compared as its text
        batches.append([("error", str(exc))])
    finally:
        await backend.aclose()
    return batches


def _read(pieces: list[bytes], *, general: bool) -> list[list[Any]]:
    _SERVED.pieces = pieces
    if not general:
        return asyncio.run(_round())
    with patch.object(ChunkStream, "ended", property(lambda _self: False)):
        return asyncio.run(_round())


def _cut(body: bytes, cuts: list[int]) -> list[bytes]:
    positions = sorted({cut % (len(body) + 1) for cut in cuts} | {len(body)})
    pieces, start = [], 0
    for end in positions:
        pieces.append(body[start:end])
        start = end
    return [piece for piece in pieces if piece]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_EVENTS, _ENDS, st.lists(st.integers(0, 10_000), max_size=5))
def test_the_items_are_those_of_the_general_path(
    events: list[bytes], end: bytes, cuts: list[int]
) -> None:
    pieces = _cut(b"".join(events) + end, cuts)
    fast = _read(pieces, general=False)
    slow = _read(pieces, general=True)
    fast_items = [item for batch in fast for item in batch]
    slow_items = [item for batch in slow for item in batch]
    assert fast_items == slow_items
    assert all(not isinstance(item, Finish) for batch in fast[:-1] for item in batch)


def test_a_stream_read_whole_ends_in_one_batch() -> None:
    """The backend's whole answer in one write: Opened, then its content with the end."""
    body = sse_event({"content": "Hi"}) + sse_event({}, "stop") + b"data: [DONE]\n\n"
    fast = _read([body], general=False)
    assert fast[0] == [Opened("native")]
    assert len(fast) == 2
    assert fast[1][0] == ContentDelta("Hi")
    assert isinstance(fast[1][1], Finish) and fast[1][1].reason == "stop"
    # The general path: the content, then the end in a batch of its own.
    assert _read([body], general=True)[1:] == [fast[1][:1], fast[1][1:]]


def _refuses_subclasses(kind: type) -> bool:
    """A compiled class (setup.py) lets Python subclass it but make no instance of one."""
    subclass = type("Subclass", (kind,), {})
    try:
        subclass.__new__(subclass)
    except TypeError:
        return True
    finally:
        del subclass  # gone from __subclasses__() at the next collection
        gc.collect()
    return False


def test_the_relay_tells_events_by_their_type() -> None:
    """The relay (``server/turn.py``'s ``_Exchange.relay``) tells an event from ``ContentRun``,
    ``Finish`` and ``Opened`` by its exact type: none may have a subclass, which it
    would take for an event (every module of the gateway imported)."""
    importlib.import_module("toolrelay.server.app")  # every stream layer and front
    told = (ContentRun, Finish, Opened)
    for kind in told:
        assert kind.__subclasses__() == []
        # @final, and where its module is compiled (setup.py) a type Python cannot extend.
        assert getattr(kind, "__final__", False) or _refuses_subclasses(kind)
    events = [kind for kind in get_args(StreamItem) if kind not in told]
    assert all(not issubclass(kind, told) for kind in events)
