"""The plain-chunk fast path (toolrelay.io.backends.plain) against decoding every chunk.

A stream opened with ``plain=True`` hands content-only chunks over as their
text, sliced out of the payload by a learned frame, instead of decoding them.
These properties hold it to the slow path on generated streams, adversarial
ones included: escaped quotes and backslashes, the content's bytes inside the
id or the model, ``\\u`` escapes, spaces after the colons, other key orders, a
frame that changes mid-stream, usage, finish, reasoning and tool-call chunks,
lines that are not JSON or not UTF-8, and tool-call markers cut across chunks
and across reads. The stream is real: a raw HTTP server on 127.0.0.1 writes it
in the generated pieces, and the gateway's own client reads it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import socket
import time
from collections.abc import Callable
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.gateway.rawbackend import RawBackend, RawRequest, serving, sse_head
from toolrelay.events import ToolCallEnd, ToolCallStart
from toolrelay.io.backends.errors import BackendError
from toolrelay.io.backends.http import ChunkStream, HttpClient, Limits
from toolrelay.io.backends.native import NativeStream
from toolrelay.io.backends.plain import ContentRun, PlainChunks, plain_content
from toolrelay.io.round.body import ChunkReader
from toolrelay.io.round.request import StreamItem
from toolrelay.names import ToolSet
from toolrelay.undecided import stream_parser

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
# Pieces a model writes, markers and characters that need escaping among them.
PIECES = [
    "Hello",
    " world",
    "abcd",
    '"',
    "\\",
    "\\u00e9",
    "é",
    "😀",
    "\n",
    "\t",
    "\x01",
    "?",
    "!",
    "<",
    "tool",
    "_call>",
    "<tool_call>",
    "</tool_call>",
    '{"name": "get_weather", "arguments": {"city": "Paris"}}',
    '"content":"',
    "chatcmpl-1",
    "[TOOL_CALL]",
]
# Plain words often (the fast path's case, and collisions with the id), any piece sometimes.
texts = st.sampled_from(["abcd", "?", "!", "Hello", "xyz", "é"]) | st.lists(
    st.sampled_from(PIECES), min_size=1, max_size=4
).map("".join)


@st.composite
def frames(draw: st.DrawFn, words: st.SearchStrategy[str]) -> dict[str, Any]:
    """How one server writes its chunks: key order, spacing, escaping, id and model."""
    return {
        "id": draw(words),
        "model": draw(words),
        "created": draw(st.integers(0, 3)),
        "content_first": draw(st.booleans()),
        "ascii": draw(st.booleans()),
        "spaced": draw(st.booleans()),
    }


def _payload(frame: dict[str, Any], delta: dict[str, Any], extra: dict[str, Any]) -> bytes:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}
    choice.update(extra.pop("choice", {}))
    top = {"id": frame["id"], "object": "chat.completion.chunk", "created": frame["created"]}
    top["model"] = frame["model"]
    chunk = {"choices": [choice], **top} if frame["content_first"] else {**top, "choices": [choice]}
    chunk.update(extra)
    separators = (", ", ": ") if frame["spaced"] else (",", ":")
    return json.dumps(chunk, ensure_ascii=frame["ascii"], separators=separators).encode()


@st.composite
def payloads(draw: st.DrawFn, content: int = 6, most: int = 14) -> list[bytes]:
    """One stream's ``data:`` payloads, mostly content in one frame (``content`` in
    16 or more of them). Its texts come from a few words, so that the content's
    bytes are often the id's or the model's."""
    vocabulary = draw(st.lists(texts, min_size=1, max_size=2))
    words = st.sampled_from(vocabulary)
    frame = draw(frames(words))
    out = []
    for _ in range(draw(st.integers(1, most))):
        kind = draw(
            st.sampled_from(
                ["content"] * content
                + ["empty", "role", "finish", "usage", "reasoning", "call", "odd"]
                + ["other frame", "other id", "other id", "one in another frame"]
            )
        )
        if kind == "other frame":
            frame = {**frame, "created": frame["created"] + 1}
            kind = "content"
        elif kind == "other id":
            frame = {**frame, "id": draw(words)}
            kind = "content"
        if kind == "content":
            out.append(_payload(frame, {"content": draw(words)}, {}))
        elif kind == "one in another frame":
            # As long as the frame's, between two in it: only its bytes tell it apart.
            other = {**frame, "created": frame["created"] + 1}
            out.append(_payload(other, {"content": draw(words)}, {}))
        elif kind == "empty":
            out.append(_payload(frame, {"content": ""}, {}))
        elif kind == "role":
            out.append(_payload(frame, {"role": "assistant", "content": draw(texts)}, {}))
        elif kind == "finish":
            extra = {"choice": {"finish_reason": draw(st.sampled_from(["stop", "tool_calls"]))}}
            out.append(_payload(frame, {"content": draw(texts)}, extra))
        elif kind == "usage":
            usage = {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}
            out.append(_payload(frame, {"content": draw(texts)}, {"usage": usage}))
        elif kind == "reasoning":
            delta = {"content": draw(texts), "reasoning_content": draw(texts)}
            out.append(_payload(frame, delta, {}))
        elif kind == "call":
            call = {"index": 0, "id": "c1", "function": {"name": "get_weather", "arguments": ""}}
            out.append(_payload(frame, {"content": draw(texts), "tool_calls": [call]}, {}))
        else:
            # The frame around bytes that are not a JSON string's: a raw quote, a
            # control character, bytes that are not UTF-8.
            good = _payload(frame, {"content": "abcd"}, {})
            odd = draw(st.sampled_from([b'ab"cd', b"ab\x01cd", b"ab\xffcd", b"\xed\xa0\x80"]))
            out.append(good.replace(b'"abcd"', b'"' + odd + b'"'))
    return out


def test_a_learned_frame_reads_what_decoding_reads() -> None:
    """The smallest case, by hand: the second chunk is read through the first's frame."""
    plain = PlainChunks()
    first = b'{"id":"abcd","choices":[{"index":0,"delta":{"content":"abcd"},"finish_reason":null}]}'
    assert plain.read(first) is None
    plain.learn(first, orjson.loads(first))
    assert plain.read(first.replace(b'"abcd"}', b'"xyz"}')) == "xyz"
    # The id's bytes are not the content's: the last match is the one probed.
    assert plain.read(first.replace(b'"abcd",', b'"xyz",')) is None
    assert plain.read(first.replace(b'"abcd"}', b'"x\\"z"}')) is None


def test_a_frame_learned_with_its_line_reads_whole_lines() -> None:
    """By hand: the line's ``data:``, its spacing and its end are part of the frame."""
    first = b'{"id":"abcd","choices":[{"index":0,"delta":{"content":"abcd"},"finish_reason":null}]}'
    for before, after in [(b"data: ", b""), (b"data:", b"\r"), (b"data:\t", b" ")]:
        plain = PlainChunks()
        line = before + first + after
        plain.learn(first, orjson.loads(first), line)
        assert plain.read(line.replace(b'"abcd"}', b'"xyz"}')) == "xyz"
        # Another form of line, or the payload alone: decoded the usual way.
        assert plain.read(b"data:  " + first.replace(b'"abcd"}', b'"xyz"}')) is None
        assert plain.read(first.replace(b'"abcd"}', b'"xyz"}')) is None


@settings(max_examples=600, deadline=None)
@given(payloads())
def test_reading_through_the_frame_equals_decoding(stream: list[bytes]) -> None:
    """Whatever the frame reads is what orjson decodes, and a plain chunk's content."""
    plain = PlainChunks()
    for payload in stream:
        text = plain.read(payload)
        try:
            decoded = orjson.loads(payload)
        except orjson.JSONDecodeError:
            assert text is None
            continue
        if text is not None:
            assert plain_content(decoded) == text
        else:
            plain.learn(payload, decoded)


# How a server may write the line around a payload: the space after ``data:`` or
# none or two, a carriage return or spaces before the line's end.
LINE_FORMS = st.tuples(
    st.sampled_from([b"data: ", b"data:", b"data:  ", b"data:\t"]),
    st.sampled_from([b"", b"\r", b" ", b"\x0c"]),
)


@settings(max_examples=600, deadline=None)
@given(payloads(), st.lists(LINE_FORMS, min_size=1, max_size=3))
def test_reading_whole_lines_through_the_frame_equals_decoding(
    stream: list[bytes], forms: list[tuple[bytes, bytes]]
) -> None:
    """A frame learned with its SSE line reads later lines whole: whatever it reads
    is what orjson decodes of the line's payload, stripped as the client strips it,
    whatever the line's form, even when it changes from one line to the next."""
    plain = PlainChunks()
    for at, payload in enumerate(stream):
        before, after = forms[at % len(forms)]
        line = before + payload + after
        text = plain.read(line)
        try:
            decoded = orjson.loads(line[5:].strip())
        except orjson.JSONDecodeError:
            assert text is None
            continue
        if text is not None:
            assert plain_content(decoded) == text
        else:
            plain.learn(payload, decoded, line)


def _serve(
    stream: list[bytes], cuts: list[int], form: tuple[bytes, bytes] = (b"data: ", b"")
) -> Any:
    before, after = form
    lines = [before + payload + after + b"\n\n" for payload in stream]
    body = b"".join(lines) + b"data: [DONE]\n\n"
    positions = sorted({cut % len(body) for cut in cuts})

    def handler(_request: RawRequest, conn: socket.socket) -> str:
        conn.sendall(sse_head(chunked=False))
        start = 0
        for end in [*positions, len(body)]:
            conn.sendall(body[start:end])
            start = end
        return "close"

    return handler


class _Served:
    """One raw backend for every example: its handler is the current example's."""

    def __init__(self) -> None:
        self.handler: Any = None

    def __call__(self, request: RawRequest, conn: socket.socket) -> str:
        return str(self.handler(request, conn))


_SERVED = _Served()


def _normal(items: list[StreamItem]) -> list[Any]:
    """Events with the ids the gateway makes up left out (they differ per run)."""
    out: list[Any] = []
    for item in items:
        if isinstance(item, ToolCallStart):
            item = dataclasses.replace(item, id="")
        elif isinstance(item, ToolCallEnd):
            item = dataclasses.replace(item, call=dataclasses.replace(item.call, id=""))
        out.append(item)
    return out


async def _read(url: str, plain: bool) -> tuple[list[Any], dict[str, Any]]:
    client = HttpClient()
    tools = [spec["function"] for spec in TOOLS]
    reader = ChunkReader(
        lambda: stream_parser(tools, "auto", reasoning_open=False),
        lambda: NativeStream(ToolSet(tools)),
        None,
    )
    batches: list[Any] = []
    try:
        async with await client.open_stream(url, {"stream": True}, plain=plain) as chunks:
            async for batch in chunks:
                out: list[StreamItem] = []
                for chunk in batch:
                    reader.take(chunk, out)
                batches.append(_normal(out))
        end: list[StreamItem] = []
        reader.close(end)
        batches.append(_normal(end))
    except BackendError as exc:
        batches.append([("error", exc.reason)])
    finally:
        await client.aclose()
    state = {
        "raw": reader.raw,
        "finish": reader.finish,
        "usage": reader.usage,
        "calls": reader.calls,
        "saw_text": reader.saw_text,
    }
    return batches, state


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(payloads(), st.lists(st.integers(0, 10_000), max_size=6))
def test_a_plain_stream_gives_the_events_of_a_decoded_one(
    stream: list[bytes], cuts: list[int]
) -> None:
    """Through the real client and the round's chunk reader (a parser for text calls
    and native calls both): the same events per read, the same state at the end."""
    _assert_read_alike(_serve(stream, cuts))


def _assert_read_alike(handler: Any) -> None:
    """The stream ``handler`` serves, read plain and decoded: the same events, the same state."""
    _SERVED.handler = handler
    url = f"{_BACKEND.url}/v1/chat/completions"
    slow = asyncio.run(_read(url, plain=False))
    fast = asyncio.run(_read(url, plain=True))
    # Reads may cut the body differently from one run to the next: compare the
    # events in order, and the state.
    fast_events = [event for batch in fast[0] for event in batch]
    slow_events = [event for batch in slow[0] for event in batch]
    if any(isinstance(event, tuple) for event in fast_events + slow_events):
        # A broken stream: the same error; the events before it are those of the
        # reads before the one that broke, which depends on where reads fell.
        assert fast_events[-1] == slow_events[-1]
        shorter = min(len(fast_events), len(slow_events)) - 1
        assert fast_events[:shorter] == slow_events[:shorter]
        return
    assert fast_events == slow_events
    assert fast[1] == slow[1]


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(payloads(), st.lists(st.integers(0, 10_000), max_size=6), LINE_FORMS)
def test_a_plain_stream_in_any_line_form_gives_the_events_of_a_decoded_one(
    stream: list[bytes], cuts: list[int], form: tuple[bytes, bytes]
) -> None:
    """As above, the server writing its lines in another form: the frame is learned
    with the line, so the line's form is read through it too."""
    _assert_read_alike(_serve(stream, cuts, form))


_BACKEND = RawBackend(_SERVED)

_serving = serving(_BACKEND)


class _Body:
    """A response whose body comes in the given reads: all a ``ChunkStream`` reads of it."""

    def __init__(self, reads: list[bytes]) -> None:
        self.content = self
        self._reads = reads

    async def readany(self) -> bytes:
        return self._reads.pop(0) if self._reads else b""

    def is_eof(self) -> bool:
        return not self._reads

    def on_eof(self, callback: Callable[[], None]) -> None:
        pass  # a body with reads left after its [DONE] never ends here: the grace cuts it

    def release(self) -> None:
        pass

    def close(self) -> None:
        pass


@st.composite
def reads(draw: st.DrawFn) -> list[bytes]:
    """A generated stream's body cut into reads: mostly at the events' ends (the
    usual read, the one read whole), sometimes anywhere."""
    before, after = draw(LINE_FORMS)
    stream = draw(payloads(content=40, most=30))
    events = [before + payload + after + b"\n\n" for payload in stream]
    events.append(b"data: [DONE]\n\n")
    # What a server might send after its [DONE], in the same read: never read.
    events.append(draw(st.sampled_from([b"", events[0], events[-2]])))
    return cut_into_reads(draw, events)


def cut_into_reads(draw: st.DrawFn, events: list[bytes]) -> list[bytes]:
    """The events' bytes cut into reads: mostly at the events' ends, sometimes anywhere."""
    body = b"".join(events)
    ends = [len(b"".join(events[: at + 1])) for at in range(len(events))]
    kept = draw(st.lists(st.booleans(), min_size=len(ends), max_size=len(ends)))
    cuts = {end for end, keep in zip(ends, kept, strict=True) if keep}
    cuts |= set(draw(st.lists(st.integers(1, len(body)), max_size=2)))
    bounds = [0, *sorted(cuts - {len(body)}), len(body)]
    return [body[start:end] for start, end in itertools.pairwise(bounds)]


class _LineByLine(ChunkStream):
    """Every read line by line."""

    def _chunks(self, data: bytes) -> list[Any]:
        return self._decode(self._lines(data))


async def _batches(
    body: list[bytes], line_limit: int, stream_type: type[ChunkStream] = ChunkStream
) -> list[Any]:
    """Each read's batch (or the error that ended the stream, by its reason), and
    whether the stream saw its end; ``_LineByLine``: every read line by line."""
    limits = Limits(max_line_bytes=line_limit)
    response: Any = _Body(list(body))
    stream = stream_type(response, "test", limits, None, time.monotonic(), plain=True)
    out: list[Any] = []
    try:
        async for batch in stream:
            out.append((_texts_of_runs(batch), stream.ended))
    except BackendError as exc:
        out.append(("error", exc.reason))
    return out


def _texts_of_runs(batch: list[Any]) -> list[Any]:
    """The batch with each run's texts in its place, as a line by line read gives them."""
    out: list[Any] = []
    for chunk in batch:
        if isinstance(chunk, ContentRun):
            out += chunk.texts
        else:
            out.append(chunk)
    return out


@settings(max_examples=600, deadline=None)
@given(reads(), st.sampled_from([8 * 1024 * 1024, 400, 150]))
def test_a_read_of_whole_events_is_read_as_line_by_line(body: list[bytes], line_limit: int) -> None:
    """A read's run of whole content-only events in the frame is read all at once
    (``PlainChunks.read_all``), its first events and what follows the run line by
    line: the same batch, read for read, as reading all of it line by line, for
    any stream cut into any reads, and the same error where a line is over its
    limit (a read over the limit goes line by line)."""
    fast = asyncio.run(_batches(body, line_limit))
    slow = asyncio.run(_batches(body, line_limit, _LineByLine))
    assert fast == slow


def test_a_read_of_whole_events_is_read_at_once() -> None:
    """By hand: after the frame is learned, a read of such events takes the whole-read
    path, and one with anything else in it does not."""
    line = b'data: {"id":"a","choices":[{"index":0,"delta":{"content":"%s"}}]}\n\n'
    plain = PlainChunks()
    first = line % b"abcd"
    payload = first[6:-2]
    plain.learn(payload, orjson.loads(payload), first[:-2])
    assert plain.read((line % b"xyz")[:-2]) == "xyz"  # probed and adopted
    two = line % b"one" + line % b" two"
    assert plain.read_all(two) == (["one", " two"], len(two))
    assert plain.read_all(two + b"data: [DONE]\n\n") == (["one", " two"], len(two))
    assert plain.read_all(line % b"one" + line % b"") is None
    assert plain.read_all(line % b"one" + line % b't"o') is None
    assert plain.read_all(line % b"one" + b": comment\n\n" + line % b"two") is None
    assert plain.read_all((line % b"one")[:-1]) is None
    # A tail longer than where read_all cuts events: what is left of it is cut off too.
    line = b'data: {"choices":[{"delta":{"content":"%s"},"finish_reason":null}],"id":"a"}\n\n'
    plain = PlainChunks()
    plain.learn(line[6:-2] % b"abcd", orjson.loads(line[6:-2] % b"abcd"), line[:-2] % b"abcd")
    assert plain.read((line % b"xyz")[:-2]) == "xyz"
    two = line % b"one" + line % b" two"
    assert plain.read_all(two) == (["one", " two"], len(two))


def test_nothing_after_the_done_is_read() -> None:
    """By hand: a [DONE] among the events the frame is learned from ends the read,
    though what follows it is in the frame."""
    line = b'data: {"id":"a","choices":[{"index":0,"delta":{"content":"%s"}}]}\n\n'
    body = [line % b"one" + line % b"two" + b"data: [DONE]\n\n" + line % b"three"]
    fast = asyncio.run(_batches(body, 1024))
    slow = asyncio.run(_batches(body, 1024, _LineByLine))
    assert fast == slow
    assert fast[0][0][1:] == ["two"]
