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

from tests.gateway.inspected import WEATHER
from tests.gateway.rawbackend import Pieces, RawBackend, serving, sse_event
from toolrelay.events import ContentDelta
from toolrelay.io.backends import Backend
from toolrelay.io.backends.errors import BackendError
from toolrelay.io.backends.http import ChunkStream
from toolrelay.io.counters import Counters
from toolrelay.io.round import ContentRun, Finish, Opened, RoundRequest, stream_round
from toolrelay.io.round.batches import StreamRead
from toolrelay.io.round.complete import complete_handling_required
from toolrelay.io.round.opening import open_handling_refusals
from toolrelay.io.round.relays import StreamRelay
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


async def _generator_relay(
    backend: Backend, req: RoundRequest, counters: Counters, patience: float | None, runs: bool
) -> Any:
    """``_relay_single_stream`` as it was, an async generator: the reference of
    :class:`~toolrelay.io.round.relays.StreamRelay`."""
    mode, (chunks, observed, constraint) = await open_handling_refusals(
        backend, req, counters, patience
    )
    async with chunks:
        yield [Opened(mode)]
        has_tools = req.has_tools
        if has_tools:
            counters.inc("rounds", mode)
        opened = has_tools and await backend.reasoning_open(req.model, req.body, req.reasoning_open)
        read = StreamRead(backend, req, counters, mode, chunks, observed, constraint, opened, runs)
        try:
            async for batch in chunks:
                out = read.read(batch)
                if out is None:
                    break
                if out:
                    yield out
        except BackendError as exc:
            read.broke(exc)
            raise
    last = read.end()
    if last is None:
        last = read.reasked(await complete_handling_required(backend, req, counters))
    yield last


async def _relayed(relay: bool, body: dict[str, Any], stop_after: int | None) -> list[Any]:
    """What a consumer that stops after ``stop_after`` batches (None: never) sees, the
    counters the round left, and the iteration's end after the consumer closed it."""
    backend = Backend(BackendConfig(url=_BACKEND.url + "/v1", kind="openai"))
    req, counters = RoundRequest.from_body(body), Counters()
    stream: Any = (
        StreamRelay(backend, req, counters, None, True)
        if relay
        else _generator_relay(backend, req, counters, None, True)
    )
    seen: list[Any] = []
    try:
        if stop_after != 0:
            async for batch in stream:
                seen.append(batch)
                if len(seen) == stop_after:
                    break
    except Exception as exc:  # a broken stream's error, or the re-ask's, as its text
        seen.append(("error", str(exc)))
    finally:
        await stream.aclose()
        try:
            await stream.__anext__()
        except StopAsyncIteration:
            seen.append("ended")
        await backend.aclose()
    return [seen, counters.snapshot()]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    _EVENTS,
    _ENDS,
    st.lists(st.integers(0, 10_000), max_size=5),
    st.none() | st.integers(0, 3),
    st.booleans(),
)
def test_the_compiled_relay_gives_what_the_generator_gave(
    events: list[bytes], end: bytes, cuts: list[int], stop_after: int | None, tools: bool
) -> None:
    """Whatever the backend streams, however its bytes fall into reads, and wherever
    the consumer stops: :class:`StreamRelay` gives the items (or error) the
    generator it replaced gave, leaves the same counters, and ends once closed.
    How the bytes fell into reads (and so into batches) follows the clock: the
    whole stream is compared item by item, and a consumer that stopped after a
    batch past Opened saw a beginning of the whole stream's items."""
    _SERVED.pieces = _cut(b"".join(events) + end, cuts)
    body = {**_BODY, "tools": [WEATHER]} if tools else _BODY
    whole = _flat(asyncio.run(_relayed(False, body, None)))
    if stop_after is None or stop_after <= 1:  # no read after Opened, or all
        reference = (
            whole if stop_after is None else _flat(asyncio.run(_relayed(False, body, stop_after)))
        )
        assert _flat(asyncio.run(_relayed(True, body, stop_after))) == reference
        return
    (seen, _counters) = _flat(asyncio.run(_relayed(True, body, stop_after)))
    assert seen[-1] == "ended"
    assert seen[:-1] == whole[0][: len(seen) - 1]


def _flat(relayed: list[Any]) -> list[Any]:
    """The items seen in order (an error, and the end, as items), and the counters."""
    seen, counters = relayed
    items = [item for batch in seen for item in (batch if isinstance(batch, list) else [batch])]
    return [items, counters]
