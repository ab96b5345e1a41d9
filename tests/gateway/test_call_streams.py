"""A stream's frames tried only where they can pay (``ChunkStream``): once a
decoded chunk carries calls, the content frame is dropped for the rest of the
stream (and a first read whose first events hold a call is read line by line,
without the cut a content stream's first read gets); the argument frame is
learned from the line's own bytes. Held to reading the stream with every chunk
decoded (``plain=False``), read for read: each item as the gateway reads it
(content, a call's fragment under its index, or the decoded chunk), for streams
of content, of calls, and of both in any order (content that turns to calls,
calls that turn to content), in every line form, cut into any reads, under
three line limits, with the same errors."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.gateway.test_argument_chunks import payloads as call_payloads
from tests.gateway.test_plain_chunks import LINE_FORMS, _Body, cut_into_reads
from tests.gateway.test_plain_chunks import payloads as content_payloads
from toolrelay.io.backends.errors import BackendError
from toolrelay.io.backends.fragments import ArgumentFrame, argument_fragment
from toolrelay.io.backends.http import ChunkStream, Limits
from toolrelay.io.backends.plain import ContentRun, plain_content


@st.composite
def reads(draw: st.DrawFn) -> list[bytes]:
    """A stream of content and calls in turns, in any order, cut into reads: mostly
    at the events' ends, sometimes anywhere."""
    before, after = draw(LINE_FORMS)
    stream: list[bytes] = []
    for kind in draw(st.lists(st.sampled_from(["content", "calls"]), min_size=1, max_size=4)):
        stream += draw(content_payloads(most=8) if kind == "content" else call_payloads())
    events = [before + payload + after + b"\n\n" for payload in stream]
    events.append(b"data: [DONE]\n\n")
    return cut_into_reads(draw, events)


def _read(item: Any) -> list[Any]:
    """An item as the gateway reads it: a content-only chunk as its content (a run
    as its contents), an argument-only chunk as its call's index and fragment,
    any other chunk as it is. (What a frame reads is all the chunk holds that
    the gateway reads: ``plain_content``'s and ``argument_fragment``'s nothing
    else.)"""
    if isinstance(item, ContentRun):
        return [("content", text) for text in item.texts]
    if isinstance(item, str):
        return [("content", item)]
    if isinstance(item, tuple) and isinstance(item[0], ArgumentFrame):
        return [("fragment", item[0].index, item[1])]
    text = plain_content(item)
    if text is not None:
        return [("content", text)]
    fragment = argument_fragment(item)
    if fragment is not None:
        return [("fragment", *fragment)]
    return [item]


async def _batches(body: list[bytes], line_limit: int, plain: bool) -> list[Any]:
    """Each read's items as the gateway reads them (or the error that ended the
    stream, by its reason), and whether the stream saw its end."""
    limits = Limits(max_line_bytes=line_limit)
    response: Any = _Body(list(body))
    stream = ChunkStream(response, "test", limits, None, time.monotonic(), plain=plain)  # type: ignore[arg-type]
    out: list[Any] = []
    try:
        async for batch in stream:
            out.append(([read for item in batch for read in _read(item)], stream.ended))
    except BackendError as exc:
        out.append(("error", exc.reason))
    return out


@settings(max_examples=600, deadline=None)
@given(reads(), st.sampled_from([8 * 1024 * 1024, 400, 150]))
def test_a_stream_of_content_and_calls_reads_as_decoded(body: list[bytes], line_limit: int) -> None:
    fast = asyncio.run(_batches(body, line_limit, plain=True))
    slow = asyncio.run(_batches(body, line_limit, plain=False))
    assert fast == slow


_CONTENT = b'data: {"id":"a","choices":[{"index":0,"delta":{"content":"%s"}}]}\n\n'
_CALL = (
    b'data: {"id":"a","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,'
    b'"id":"c","function":{"name":"f","arguments":""}}]}}]}\n\n'
)
_FRAGMENT = (
    b'data: {"id":"a","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,'
    b'"function":{"arguments":"%s"}}]}}]}\n\n'
)


def _items(body: list[bytes]) -> list[list[Any]]:
    async def read() -> list[list[Any]]:
        response: Any = _Body(list(body))
        stream = ChunkStream(response, "test", Limits(), None, time.monotonic(), plain=True)  # type: ignore[arg-type]
        return [batch async for batch in stream]

    return asyncio.run(read())


def test_a_stream_of_calls_reads_its_fragments_and_decodes_its_content() -> None:
    """By hand: a call's fragments after the first come through the argument
    frame; content after a call comes decoded (the content frame is dropped),
    though it is in one frame."""
    calls = _CALL + b"".join(_FRAGMENT % text for text in (b"{", b"}", b"x"))
    content = b"".join(_CONTENT % text for text in (b"one", b"two", b"three"))
    [batch] = _items([calls + content + b"data: [DONE]\n\n"])
    assert [type(item) for item in batch] == [dict, dict, tuple, tuple, dict, dict, dict]
    assert [_read(item) for item in batch[2:]] == [
        [("fragment", 0, "}")],
        [("fragment", 0, "x")],
        [("content", "one")],
        [("content", "two")],
        [("content", "three")],
    ]


def test_a_stream_of_content_turned_to_calls_keeps_its_run() -> None:
    """By hand: content first is read through its frame, a run at once; the calls
    after it drop the frame from then on."""
    content = b"".join(_CONTENT % text for text in (b"one", b"two", b"three", b"four"))
    [first, second] = _items([content + _CALL, _CONTENT % b"five" + b"data: [DONE]\n\n"])
    assert isinstance(first[3], ContentRun) and first[3].texts == ["four"]
    assert type(first[-1]) is dict and type(second[0]) is dict
