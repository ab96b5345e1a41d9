"""A read of one event, before a stream's frame is learned, is read line by line
at once (``ChunkStream._chunks``), without the cut after a read's first events
that a read of many events gets: the same items, read for read, as with the cut
made on every read (the path before it, kept here as the reference). Runs are
compared as runs, not as their texts: where the cut falls decides which texts
come as one ``ContentRun``."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.gateway.test_argument_chunks import reads as call_reads
from tests.gateway.test_plain_chunks import _Body, reads
from toolrelay.io.backends import http
from toolrelay.io.backends.errors import BackendError
from toolrelay.io.backends.fragments import ArgumentFrame
from toolrelay.io.backends.http import Chunk, ChunkStream, Limits
from toolrelay.io.backends.plain import ContentRun


def _cut_on_every_read(stream: ChunkStream, data: bytes) -> list[Chunk]:
    """``_chunks`` as it was: the first events of every read not in a frame cut
    off and read line by line, the rest of the read as one run where it is in the
    frame (learned from them, or before), line by line where it is not."""
    plain = stream._plain
    if plain is None or stream._line or len(data) > stream._limits.max_line_bytes:
        return stream._decode(stream._lines(data))
    batch: list[Chunk] = []
    if not plain.framed:
        at = http._after_events(data, http._TEACHING_EVENTS)
        batch = stream._decode(stream._lines(data[:at]))
        data = data[at:]
        if stream._done or not data:
            return batch
        if stream._plain is None:  # a chunk of calls among them dropped the frame
            return batch + stream._decode(stream._lines(data))
    run = plain.read_all(data)
    if run is None:
        return batch + stream._decode(stream._lines(data))
    texts, at = run
    batch.append(ContentRun(texts))
    if at < len(data):
        batch += stream._decode(stream._lines(data[at:]))
    return batch


def _shown(chunk: Any) -> Any:
    """A chunk as compared: a fragment by its call's index and text (each stream
    has its own frame objects), anything else as it is."""
    if isinstance(chunk, tuple) and isinstance(chunk[0], ArgumentFrame):
        return ("fragment", chunk[0].index, chunk[1])
    return chunk


class _LineByLine(ChunkStream):
    """Every read line by line (``_cut_on_every_read``)."""

    def _chunks(self, data: bytes) -> list[Chunk]:
        return _cut_on_every_read(self, data)


async def _batches(
    body: list[bytes], line_limit: int, stream_type: type[ChunkStream] = ChunkStream
) -> list[Any]:
    stream = stream_type(
        _Body(list(body)),
        "test",
        Limits(max_line_bytes=line_limit),
        None,
        time.monotonic(),
        True,  # type: ignore[arg-type]
    )
    out: list[Any] = []
    try:
        async for batch in stream:
            out.append(([_shown(chunk) for chunk in batch], stream.ended))
    except BackendError as exc:
        out.append(("error", exc.reason))
    return out


def _both(body: list[bytes], line_limit: int) -> tuple[list[Any], list[Any]]:
    fast = asyncio.run(_batches(body, line_limit))
    slow = asyncio.run(_batches(body, line_limit, _LineByLine))
    return fast, slow


_CONTENT = (
    b'data: {"id":"abcd","object":"chat.completion.chunk","created":0,"model":"abcd",'
    b'"choices":[{"index":0,"delta":{"content":"abcd"%s},"finish_reason":null}]}\n\n'
)
_CALL = b',"tool_calls":[{"index":0,"id":"c1","function":{"name":"get_weather","arguments":""}}]'


@settings(max_examples=600, deadline=None)
@given(reads(), st.sampled_from([8 * 1024 * 1024, 400, 150]))
# Found by hypothesis: a chunk of calls among a read's first events drops the
# stream's content frame, so the content after it in the same read is decoded.
@example(
    [_CONTENT % b"" * 2 + _CONTENT % _CALL + _CONTENT % b"" + b"data: [DONE]\n\n"], 8 * 1024 * 1024
)
def test_a_stream_of_content_reads_as_with_the_cut_on_every_read(
    body: list[bytes], line_limit: int
) -> None:
    fast, slow = _both(body, line_limit)
    assert fast == slow


@settings(max_examples=300, deadline=None)
@given(call_reads())
def test_a_stream_of_calls_reads_as_with_the_cut_on_every_read(body: list[bytes]) -> None:
    fast, slow = _both(body, 8 * 1024 * 1024)
    assert fast == slow
