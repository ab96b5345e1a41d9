"""The argument-frame fast path (toolrelay.io.backends.fragments) against decoding every chunk.

A stream opened with ``plain=True`` hands a chunk that carries nothing but a
call's argument fragment over as that fragment, read through a learned frame,
instead of decoding it; the round's chunk reader hands it to the native call
streaming now, or reads it as the chunk it came in. These properties hold it
to decoding every chunk, event for event: native calls in fragments cut
anywhere, several calls, indices out of order, ids and names repeated, escapes
and unicode in the arguments, arguments that are invalid, coercible or not an
object, content before the calls, frames that change mid-stream, chunks whose
bytes are not a JSON string's where the fragment stands, and reads cut anywhere.

Usage comes anywhere among them too: the usage-only chunk a stream asked for
its usage ends with (early, late, more than one), usage on every chunk, in
whatever shape, whatever stands around it.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.gateway.test_plain_chunks import (
    LINE_FORMS,
    _Body,
    _normal,
    _payload,
    cut_into_reads,
    frames,
)
from toolrelay.io.backends.errors import BackendError
from toolrelay.io.backends.fragments import ArgumentChunks, argument_fragment
from toolrelay.io.backends.http import ChunkStream, Limits
from toolrelay.io.backends.native import NativeStream
from toolrelay.io.backends.shapes import LineShapes
from toolrelay.io.round.body import ChunkReader
from toolrelay.io.round.request import StreamItem
from toolrelay.names import ToolSet
from toolrelay.undecided import stream_parser

TOOLS = [
    {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
]
# Arguments as models write them: plain, escaped, unicode, spaced, coercible,
# invalid, cut short, not an object; the probe's own characters among them.
ARGUMENTS = [
    '{"city":"Paris"}',
    '{"city": "Par\\"is\\\\"}',
    '{"city":"Zürich 😀 \\u00e9"}',
    '{"city":"?"}',
    '{"city":3}',
    '{"n": 1, "ok": true, "x": null}',
    '{"city":"Par',
    '{"city" "Paris"}',
    '"{\\"city\\":\\"Paris\\"}"',
    "?",
    "!",
    '{"a":{"b":[1,2]}}',
]
words = st.sampled_from(["abcd", "?", "chatcmpl-1", "é", '{"ci'])


def _cut(draw: st.DrawFn, text: str) -> list[str]:
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(text) - 1)), max_size=6)))
    bounds = [0, *(cut for cut in cuts if cut < len(text)), len(text)]
    return [text[start:end] for start, end in itertools.pairwise(bounds)]


@st.composite
def payloads(draw: st.DrawFn) -> list[bytes]:
    """One stream's ``data:`` payloads: native calls streamed in fragments, with
    content before and between them, in a frame that may change."""
    frame = draw(frames(words))
    out: list[bytes] = []
    for kind in draw(
        st.lists(
            st.sampled_from(
                ["call"] * 4
                + ["content", "other frame", "odd", "finish", "usage", "usage only", "two"]
            ),
            min_size=1,
            max_size=5,
        )
    ):
        if kind == "other frame":
            frame = {**frame, "created": frame["created"] + 1}
        elif kind == "content":
            out.append(_payload(frame, {"content": draw(words)}, {}))
        elif kind == "finish":
            out.append(_payload(frame, {}, {"choice": {"finish_reason": "tool_calls"}}))
        elif kind == "usage":
            usage = {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}
            out.append(_payload(frame, {}, {"usage": usage}))
        elif kind == "usage only":
            out.append(_usage_only(frame, draw(USAGES)))
        elif kind == "odd":
            # The frame around bytes that are not one JSON string: a number, an
            # object, two strings, a raw control character, bytes that are not UTF-8.
            good = _payload(frame, {"tool_calls": [_entry(0, "abcd")]}, {})
            odd = draw(
                st.sampled_from(
                    [b"1", b'{"a":1}', b'"a","b"', b'"a\x01b"', b'"a\xffb"', b'""', b'"\\ud800"']
                )
            )
            out.append(good.replace(b'"abcd"', odd))
        elif kind == "two":
            # Two fragments in one chunk: never read through the frame.
            entries = [_entry(0, "{"), _entry(1, "{")]
            out.append(_payload(frame, {"tool_calls": entries}, {}))
        else:
            out += _call(draw, frame)
    return out


def _entry(index: Any, arguments: str, **more: Any) -> dict[str, Any]:
    return {"index": index, **more, "function": {"arguments": arguments}}


def _call(draw: st.DrawFn, frame: dict[str, Any]) -> list[bytes]:
    """One native call: its start, then its arguments in fragments, each under its
    index (or now and then another, a bool, an id or a name repeated)."""
    index = draw(st.integers(0, 3))
    start = {
        "index": index,
        "id": f"call_{index}",
        "type": "function",
        "function": {"name": draw(st.sampled_from(["get_weather", "other"])), "arguments": ""},
    }
    out = [_payload(frame, {"tool_calls": [start]}, {})]
    for fragment in _cut(draw, draw(st.sampled_from(ARGUMENTS))):
        shape = draw(st.sampled_from(["bare"] * 6 + ["other index", "bool", "id", "name", "type"]))
        if shape == "other index":
            entry = _entry((index + 1) % 4, fragment)
        elif shape == "bool":
            entry = _entry(True, fragment)
        elif shape == "id":
            entry = _entry(index, fragment, id=f"call_{index}")
        elif shape == "name":
            entry = {"index": index, "function": {"name": "get_weather", "arguments": fragment}}
        elif shape == "type":
            entry = _entry(index, fragment, type="function")
        else:
            entry = _entry(index, fragment)
        out.append(_payload(frame, {"tool_calls": [entry]}, {}))
    return out


@settings(max_examples=500, deadline=None)
@given(payloads(), LINE_FORMS)
def test_reading_through_the_frame_equals_decoding(
    stream: list[bytes], form: tuple[bytes, bytes]
) -> None:
    """Whatever the frame reads is the decoded chunk's one fragment, under the
    frame's index, and the frame gives back the decoded chunk."""
    before, after = form
    _assert_read_as_decoded([before + payload + after for payload in stream])


def _assert_read_as_decoded(lines: list[bytes]) -> None:
    """Line by line, as a stream reads them: whatever the frame reads is the decoded
    chunk's one fragment, under the frame's index, and the frame gives back the
    decoded chunk; a line the frame does not read teaches it."""
    fragments = ArgumentChunks()
    for line in lines:
        read = fragments.read(line)
        try:
            decoded = orjson.loads(line[5:].strip())
        except orjson.JSONDecodeError:
            assert read is None
            continue
        if read is None:
            fragments.learn(line[5:].strip(), decoded, line)
            continue
        frame, text = read
        assert argument_fragment(decoded) == (frame.index, text)
        assert frame.chunk(text) == decoded


# The names on the fragment's path and the probe's own strings: what a decoy may be
# (few, so that a decoy often meets the arguments' own text and shadows a key).
DECOYS = ["function", "?", "arguments", "!"]


def _token(text: str, escaped: bool) -> bytes:
    """A JSON string token of ``text``: as orjson writes it, or its first character
    escaped (the same string, other bytes: a search for the plain token misses it)."""
    if escaped and text:
        return b'"\\u%04x' % ord(text[0]) + orjson.dumps(text[1:])[1:]
    return orjson.dumps(text)


@st.composite
def decoyed_lines(draw: st.DrawFn) -> list[bytes]:
    """SSE lines of one call's argument fragments whose objects hold decoys: members
    before and after the real ones, keyed and valued by the path's names and the
    probe's strings, duplicate keys among them (the last one counts), tokens
    written plain or escaped, so that the fragment's token as orjson writes it
    may stand last somewhere else than where the arguments are (a key that
    shadows, a value a shadowed member holds). The later lines are the first
    with what stands at that last token replaced by another string."""

    def member() -> bytes:
        key = _token(draw(st.sampled_from(DECOYS)), draw(st.booleans()))
        inner = draw(st.sampled_from(DECOYS))
        value = draw(
            st.sampled_from(
                [
                    _token(inner, draw(st.booleans())),
                    b'{"arguments":' + _token(inner, draw(st.booleans())) + b"}",
                ]
            )
        )
        return key + b":" + value

    def members(real: list[bytes]) -> bytes:
        before = [member() for _ in range(draw(st.integers(0, 1)))]
        after = [member() for _ in range(draw(st.integers(0, 2)))]
        return b"{" + b",".join(before + real + after) + b"}"

    arguments = b'"arguments":' + _token(draw(st.sampled_from(DECOYS)), draw(st.booleans()))
    function = members([arguments])
    entry = members([b'"index":0', b'"function":' + function])
    first = b'data: {"id":"c","choices":[{"index":0,"delta":{"tool_calls":[%s]}}]}' % entry
    # What the chunk's arguments are once the duplicate keys are settled: the text
    # whose token the frame is learned around, wherever it stands last.
    found = argument_fragment(orjson.loads(first[6:]))
    at = -1 if found is None else first.rfind(orjson.dumps(found[1]))
    if found is None or at < 0:
        return [first]
    token = orjson.dumps(found[1])
    others = draw(st.lists(st.sampled_from(["zz", *DECOYS]), min_size=1, max_size=3))
    return [first] + [
        first[:at] + _token(other, draw(st.booleans())) + first[at + len(token) :]
        for other in others
    ]


@settings(max_examples=1500, deadline=None)
@given(decoyed_lines())
def test_a_frame_around_a_decoy_reads_what_decoding_reads(lines: list[bytes]) -> None:
    """Whatever the frame reads of a line whose fragment's token stands last
    somewhere else than in the arguments (a decoy: a key that shadows the call's
    function, say) is what decoding the line reads: the frame is adopted only
    where the probe proves it, the chunk around it included."""
    _assert_read_as_decoded(lines)


def test_a_frame_whose_probe_lands_on_the_arguments_through_a_shadowing_key() -> None:
    """By hand: the fragment's token stands last as a key that shadows the call's
    function (its arguments written escaped); the probe there unshadows an earlier
    function whose arguments are the probe's string: it lands on the arguments,
    yet the chunk around it is another. No frame: the later line is decoded."""
    entry = b'{"index":0,"function":{"arguments":"?"},"function":{"arguments":"\\u0066unction"}}'
    line = b'data: {"id":"c","choices":[{"index":0,"delta":{"tool_calls":[%s]}}]}'
    first = line % entry
    fragments = ArgumentChunks()
    fragments.learn(first[6:], orjson.loads(first[6:]), first)
    later = line % entry.replace(b',"function":{"arguments":"\\u', b',"zz":{"arguments":"\\u')
    assert argument_fragment(orjson.loads(later[6:])) == (0, "?")
    assert fragments.read(later) is None


def test_a_learned_frame_reads_what_decoding_reads() -> None:
    """By hand: the frame is learned from one chunk, probed at the next, and reads
    the fragments after it; the id's bytes are not the fragment's."""
    line = b'data: {"id":"%s","choices":[{"delta":{"tool_calls":[%s]}}]}'
    fragments = ArgumentChunks()
    first = line % (b'{\\"ci', b'{"index":0,"function":{"arguments":"{\\"ci"}}')
    assert fragments.read(first) is None
    fragments.learn(first[6:], orjson.loads(first[6:]), first)
    second = line % (b'{\\"ci', b'{"index":0,"function":{"arguments":"ty\\":"}}')
    read = fragments.read(second)
    assert read is not None and read[1] == 'ty":'
    # The id changed: another frame, decoded the usual way.
    assert fragments.read(second.replace(b'ci",', b'cj",')) is None
    # Not one string where the fragment stands.
    assert fragments.read(second.replace(b'"ty\\":"', b"12")) is None
    assert fragments.read(second.replace(b'"ty\\":"', b'""')) is None


async def _events(
    body: list[bytes], plain: bool, shapes: LineShapes | None = None
) -> tuple[list[Any], dict[str, Any]]:
    """Every item the round's chunk reader makes of ``body`` (or the error that
    ended the stream, by its reason), and its state at the end; read with a
    backend's ``shapes`` when given."""
    reader = ChunkReader(
        lambda: stream_parser(TOOLS, "auto", reasoning_open=False),
        lambda: NativeStream(ToolSet(TOOLS)),
        None,
    )
    response: Any = _Body(list(body))
    stream = ChunkStream(response, "test", Limits(), None, time.monotonic(), plain, shapes)
    items: list[Any] = []
    try:
        async for batch in stream:
            out: list[StreamItem] = []
            for chunk in batch:
                reader.take(chunk, out)
            items += _normal(out)
        end: list[StreamItem] = []
        reader.close(end)
        items += _normal(end)
    except BackendError as exc:
        items.append(("error", exc.reason))
    state = {
        "raw": reader.raw,
        "finish": reader.finish,
        "finish_choice": reader.finish_choice,
        "usage": reader.usage,
        "calls": reader.calls,
        "rejected": reader.rejected,
        "saw_text": reader.saw_text,
    }
    return items, state


@st.composite
def reads(draw: st.DrawFn) -> list[bytes]:
    """A generated stream's body cut into reads: mostly at the events' ends, sometimes anywhere."""
    before, after = draw(LINE_FORMS)
    events = [before + payload + after + b"\n\n" for payload in draw(payloads())]
    events.append(b"data: [DONE]\n\n")
    return cut_into_reads(draw, events)


@settings(max_examples=500, deadline=None)
@given(reads())
def test_a_stream_read_through_argument_frames_gives_the_events_of_a_decoded_one(
    body: list[bytes],
) -> None:
    """Through the gateway's stream reader and the round's chunk reader (native calls
    and a parser for text calls): the same events, in order, and the same state as
    reading the stream with every chunk decoded."""
    fast = asyncio.run(_events(body, plain=True))
    slow = asyncio.run(_events(body, plain=False))
    assert fast == slow


# What a server reports as usage: OpenAI's and vLLM's counts, with details
# (reasoning, cached tokens) or without, zero, empty, null, not an object.
USAGES = st.sampled_from(
    [
        {"prompt_tokens": 30, "completion_tokens": 7, "total_tokens": 37},
        {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        {
            "prompt_tokens": 30,
            "completion_tokens": 17,
            "total_tokens": 47,
            "prompt_tokens_details": {"cached_tokens": 12},
            "completion_tokens_details": {"reasoning_tokens": 10},
        },
        {"prompt_tokens": 3, "prompt_tokens_details": None, "total_tokens": 3.0},
        {},
        None,
        0,
        [1],
        5,
    ]
)


def _usage_only(frame: dict[str, Any], reported: Any, **before: Any) -> bytes:
    """A chunk with no choices and ``reported`` as its usage, in ``frame`` (its keys
    before the choices, or none: the choices first), ``before`` among the first keys."""
    top = {"id": frame["id"], "object": "chat.completion.chunk", "created": frame["created"]}
    top["model"] = frame["model"]
    top.update(before)
    chunk = {"choices": [], **top} if frame["content_first"] else {**top, "choices": []}
    chunk["usage"] = reported
    separators = (", ", ": ") if frame["spaced"] else (",", ":")
    return json.dumps(chunk, ensure_ascii=frame["ascii"], separators=separators).encode()


# What may stand where the usage does in a usage-only line: a value and more
# members, two values, a value cut short, bytes that are not UTF-8, a lone
# surrogate, a value with blanks, an object closed twice.
ODD_USAGES = [
    b'{"a":1},"x":2',
    b'{"a":1} {"b":2}',
    b'{"a":1',
    b'{"a":"\xff"}',
    b'{"a":"\\ud800"}',
    b' {"a":1} ',
    b'{"a":1}}',
    b'{"a":{"b":[1]}}',
]


@st.composite
def usage_streams(draw: st.DrawFn) -> list[bytes]:
    """One stream's payloads with usage in it anywhere: usage-only chunks (early,
    late, more than one, in the stream's shape or its first keys changed: a
    ``usage`` or an ``error`` among them, an object, another id), usage on every
    chunk (as some servers send it) or on a call's, odd bytes where the usage
    stands, between calls, content, a role and a finish."""
    # Mostly written as orjson writes it, the id first (vLLM's, SGLang's, OpenAI's);
    # spaced, escaped or the choices first sometimes.
    frame = {
        **draw(frames(words)),
        "spaced": draw(st.sampled_from([False, False, True])),
        "content_first": draw(st.sampled_from([False, False, True])),
    }
    every = draw(st.sampled_from([False, False, True]))
    out: list[bytes] = []
    if draw(st.integers(0, 3)):  # mostly a stream's usual first chunk
        out.append(_payload(frame, {"role": "assistant", "content": ""}, {}))
    for kind in draw(
        st.lists(
            st.sampled_from(
                [
                    *["role", "call", "call", "content", "finish"],
                    *["usage only"] * 4,
                    *["usage before", "error", "nested", "other id", "odd", "with choices"],
                ]
            ),
            min_size=1,
            max_size=6,
        )
    ):
        extra = {"usage": draw(USAGES)} if every else {}
        if kind == "role":
            out.append(_payload(frame, {"role": "assistant", "content": ""}, dict(extra)))
        elif kind == "call":
            out += [
                _payload(frame, orjson.loads(line)["choices"][0]["delta"], dict(extra))
                for line in _call(draw, frame)
            ]
        elif kind == "content":
            out.append(_payload(frame, {"content": draw(words)}, dict(extra)))
        elif kind == "finish":
            choice = {"choice": {"finish_reason": "tool_calls"}}
            out.append(_payload(frame, {}, {**choice, **extra}))
        elif kind == "usage only":
            out.append(_usage_only(frame, draw(USAGES)))
        elif kind == "usage before":
            out.append(_usage_only(frame, draw(USAGES), usage=draw(USAGES)))
        elif kind == "error":
            error = draw(st.sampled_from([None, "", {"message": "overloaded"}]))
            out.append(_usage_only(frame, draw(USAGES), error=error))
        elif kind == "nested":
            out.append(_usage_only(frame, draw(USAGES), system_fingerprint={"a": 1}))
        elif kind == "other id":
            out.append(_usage_only({**frame, "id": draw(words) + "x"}, draw(USAGES)))
        elif kind == "odd":
            line = _usage_only(frame, "@@")
            out.append(line.replace(b'"@@"', draw(st.sampled_from(ODD_USAGES))))
        else:
            out.append(_payload(frame, {}, {"usage": draw(USAGES)}))
    return out


@st.composite
def usage_reads(draw: st.DrawFn) -> list[bytes]:
    """A stream with usage in it, its lines in one form (mostly the usual one),
    cut into reads anywhere."""
    before, after = draw(st.one_of(st.tuples(st.just(b"data: "), st.just(b"")), LINE_FORMS))
    events = [before + payload + after + b"\n\n" for payload in draw(usage_streams())]
    events.append(b"data: [DONE]\n\n")
    return cut_into_reads(draw, events)


@settings(max_examples=300, deadline=None)
@given(usage_reads())
def test_a_stream_with_usage_gives_the_events_of_a_decoded_one(body: list[bytes]) -> None:
    """Usage anywhere in a stream read through the content and argument frames:
    through the round's chunk reader, the same events and state (its usage among
    them) as reading the stream with every chunk decoded."""
    fast = asyncio.run(_events(body, plain=True))
    slow = asyncio.run(_events(body, plain=False))
    assert fast == slow


def test_a_usage_that_is_not_an_object_is_none() -> None:
    """By hand: a chunk's usage is the stream's when it is a non-empty object, as a
    whole answer's is; anything else (a list, a number, empty, null) is none."""
    for usage, taken in [([1], None), (5, None), ({}, None), (None, None), ({"a": 1}, {"a": 1})]:
        reader = ChunkReader(None, None, None)
        reader.take({"choices": [], "usage": usage}, [])
        assert reader.usage == taken


# Lines read across a backend's streams through their learned shapes
# (toolrelay.io.backends.shapes), against decoding every line.

# A stream's id: vLLM's, the model's or a number's bytes (a look-alike of another
# value), empty, escaped when written (a quote, a backslash, a control
# character, a line separator), unicode, anything.
STREAM_IDS = st.one_of(
    st.builds("chatcmpl-{:016x}".format, st.integers(0, 2**64 - 1)),
    st.builds("chatcmpl-{:016x}".format, st.integers(0, 2**64 - 1)),
    st.builds("chatcmpl-{:x}".format, st.integers(0, 2**64)),
    st.sampled_from(["m", "30", "7", "", 'a"b', "a\\b", "a\nb", "\u2028", "é😀"]),
    st.text(max_size=5),
)
# Usage numbers: mostly of two digits (often the same as another's, and of the
# same length as the last stream's), any, past the digits a hole holds,
# negative, a boolean, a float.
NUMBERS = st.one_of(
    st.integers(10, 99),
    st.integers(10, 99),
    st.integers(10, 99),
    st.integers(0, 10**12),
    st.sampled_from([0, 10**17, 10**18, 10**19 - 1, -1, True, 1.5, 2.0]),
)
# ``created``: mostly a time's seconds (ten digits), or any such number.
CREATED = st.one_of(st.integers(10**9, 10**10 - 1), st.integers(10**9, 10**10 - 1), NUMBERS)
# What may stand in a learned shape's hole instead of a value written as orjson
# writes it: escapes, a quote, numbers orjson writes otherwise or not at all,
# more digits than a hole holds, blanks, a control character, bytes that are not
# UTF-8, a lone surrogate, nothing.
ODD_HOLES = [
    b"\\u0041",
    b'a\\"b',
    b'a"b',
    b"017",
    b"-1",
    b"1.0",
    b"1e3",
    b"1" * 25,
    b" 1",
    b"a\x01b",
    b"a\xffb",
    b"\\ud800",
    b"",
    b"1,2",
]
FINISH_REASONS = st.sampled_from(["tool_calls", "tool_calls", "stop", "length", None, ""])


def _server_chunk(server: dict[str, Any], stream: dict[str, Any], body: dict[str, Any]) -> bytes:
    """A chunk as ``server`` writes it in ``stream``: its id and created, ``body``
    (choices, usage) after them or before them, compact or spaced, escaped or not,
    now and then with its id twice (the last one counts)."""
    top: dict[str, Any] = {"id": stream["id"], "object": "chat.completion.chunk"}
    top["created"] = stream["created"]
    top["model"] = server["model"]
    if server["created_first"]:
        top = {"created": top.pop("created"), **top}
    chunk = {**body, **top} if server["body_first"] else {**top, **body}
    separators = (", ", ": ") if server["spaced"] else (",", ":")
    written = json.dumps(chunk, ensure_ascii=server["ascii"], separators=separators).encode()
    if server["twice"]:
        written = b'{"id":"twice",' + written[1:]
    return written


@st.composite
def servers(draw: st.DrawFn) -> dict[str, Any]:
    """How one backend writes its chunks: mostly as orjson does (vLLM's, SGLang's),
    the id and created first; spaced, escaped, the choices first, created before
    the id, an id twice sometimes."""
    return {
        "model": draw(st.sampled_from(["sim/bench", "m", "30", "chatcmpl-1f"])),
        "created_first": draw(st.sampled_from([False, False, True])),
        "body_first": draw(st.sampled_from([False, False, False, True])),
        "spaced": draw(st.sampled_from([False, False, False, True])),
        "ascii": draw(st.booleans()),
        "twice": draw(st.sampled_from([False] * 7 + [True])),
    }


def _choice(delta: dict[str, Any], reason: Any = None, **more: Any) -> dict[str, Any]:
    choice = {"index": 0, **more, "delta": delta, "logprobs": None, "finish_reason": reason}
    return {"choices": [choice]}


@st.composite
def backend_streams(draw: st.DrawFn) -> list[list[bytes]]:
    """A backend's streams (each its lines' payloads): each with its own id and
    created, the role's chunk, content or a call, a finish and a usage chunk with
    its own numbers (details nested sometimes), reasoning now and then, a
    stream's own line with odd bytes in a hole of the first stream's."""
    server = draw(servers())
    streams: list[list[bytes]] = []
    for _ in range(draw(st.integers(2, 4))):
        if draw(st.booleans()):  # often the same as a decoy's
            stream = {"id": draw(st.sampled_from(["chatcmpl-1", "chatcmpl-2"]))}
            stream["created"] = draw(st.integers(0, 2))
        else:
            stream = {"id": draw(STREAM_IDS), "created": draw(CREATED)}
        out: list[bytes] = []
        kinds = ["role", "content", "reasoning", "call", "odd", "stop reason"]
        kinds += ["finish", "usage"] * 3 + ["decoy"] * 2
        for kind in draw(st.lists(st.sampled_from(kinds), min_size=1, max_size=6)):
            if kind == "role":
                body = _choice({"role": "assistant", "content": ""}) | {"usage": None}
                out.append(_server_chunk(server, stream, body))
            elif kind == "content":
                body = _choice({"content": draw(st.sampled_from(["Hi", "30", "m", ""]))})
                out.append(_server_chunk(server, stream, body))
            elif kind == "reasoning":
                body = _choice({"reasoning_content": draw(st.sampled_from(["hm", ""]))})
                out.append(_server_chunk(server, stream, body))
            elif kind == "call":
                start = {"index": 0, "id": "call_1", "type": "function"}
                start["function"] = {"name": "get_weather"}
                out.append(_server_chunk(server, stream, _choice({"tool_calls": [start]})))
                fragment = _entry(0, draw(st.sampled_from(ARGUMENTS)))
                out.append(_server_chunk(server, stream, _choice({"tool_calls": [fragment]})))
            elif kind in ("finish", "stop reason", "decoy"):
                # A decoy: the choice's own id and created, a stream's look-alikes,
                # before the stream's own when the choices come first.
                decoys = {"id": draw(st.sampled_from(["chatcmpl-1", "chatcmpl-2"]))}
                decoys["created"] = draw(st.integers(0, 2))
                more = decoys if kind == "decoy" else {}
                body = _choice({}, draw(FINISH_REASONS), **more) | {"usage": None}
                if kind == "stop reason":
                    body["choices"][0]["stop_reason"] = draw(st.sampled_from(["END", 7, None]))
                out.append(_server_chunk(server, stream, body))
            elif kind == "usage":
                usage = {
                    key: draw(NUMBERS)
                    for key in ("prompt_tokens", "completion_tokens", "total_tokens")
                }
                if draw(st.sampled_from([False, False, True])):
                    usage["prompt_tokens_details"] = {"cached_tokens": draw(NUMBERS)}
                body = {"choices": [], "usage": usage}
                out.append(_server_chunk(server, stream, body))
            else:
                # The stream's role chunk with odd bytes where its id or created
                # stands, as many as there (the length a shape's hole has).
                role = _choice({"role": "assistant", "content": ""}) | {"usage": None}
                written = _server_chunk(server, stream, role)
                odd = draw(st.sampled_from(ODD_HOLES))
                if draw(st.booleans()) and isinstance(stream["id"], str):
                    token = json.dumps(stream["id"]).encode()[1:-1]
                    filled = (odd + b"a" * len(token))[: max(len(token), 1)]
                    out.append(written.replace(b'"%s"' % token, b'"%s"' % filled, 1))
                else:
                    token = json.dumps(stream["created"]).encode()
                    filled = (odd + b"0" * len(token))[: len(token)]
                    out.append(written.replace(b":%s," % token, b":%s," % filled, 1))
        streams.append(out)
    return streams


@st.composite
def backend_reads(draw: st.DrawFn) -> list[list[bytes]]:
    """A backend's streams, each cut into reads, its lines in one form."""
    before, after = draw(LINE_FORMS)
    bodies = []
    for payloads_ in draw(backend_streams()):
        events = [before + payload + after + b"\n\n" for payload in payloads_]
        events.append(b"data: [DONE]\n\n")
        bodies.append(cut_into_reads(draw, events))
    return bodies


@settings(max_examples=700, deadline=None)
@given(backend_reads())
def test_streams_read_through_a_backends_shapes_give_the_events_of_decoded_ones(
    bodies: list[list[bytes]],
) -> None:
    """A backend's streams, one after the other, with the shapes learned from the
    earlier ones: each gives the same events, in order, and the same kept values
    (usage, the finish's choice) as with every line decoded; and what a reader
    keeps of one stream no other stream's reading changes."""
    shapes = LineShapes()
    fast = [asyncio.run(_events(body, True, shapes)) for body in bodies]
    kept = orjson.dumps([state for _, state in fast])
    again = [asyncio.run(_events(body, True, shapes)) for body in bodies]
    slow = [asyncio.run(_events(body, False)) for body in bodies]
    assert fast == slow
    assert again == slow
    assert orjson.dumps([state for _, state in fast]) == kept


def _reader_reads(chunk: dict[str, Any]) -> tuple[list[StreamItem], Any, Any, Any, list[str]]:
    """What the round's chunk reader makes of ``chunk`` and keeps."""
    reader = ChunkReader(None, lambda: NativeStream(ToolSet(TOOLS)), None)
    out: list[StreamItem] = []
    reader.take(chunk, out)
    return out, reader.usage, reader.finish, reader.finish_choice, reader.raw


def _made(value: Any) -> list[Any]:
    """The dicts and lists of a decoded value, itself among them."""
    if isinstance(value, dict):
        return [value, *(made for item in value.values() for made in _made(item))]
    if isinstance(value, list):
        return [value, *(made for item in value for made in _made(item))]
    return []


@settings(max_examples=700, deadline=None)
@given(backend_streams(), LINE_FORMS)
def test_a_line_read_through_a_shape_is_what_the_reader_reads_of_its_chunk(
    streams: list[list[bytes]], form: tuple[bytes, bytes]
) -> None:
    """Line by line, over a backend's streams: whatever a shape reads is what the
    chunk reader reads of the decoded line (its first choice and its usage, as
    decoded; none where it reads nothing of them), made anew for each line, and
    whether the line holds the key of calls; a line no shape reads teaches them."""
    before, after = form
    shapes = LineShapes()
    handed: list[Any] = []  # every dict and list handed on (kept: their ids stay theirs)
    for payloads_ in streams:
        for payload in payloads_:
            line = before + payload + after
            read = shapes.read(line)
            try:
                decoded = orjson.loads(line[5:].strip())
            except orjson.JSONDecodeError:
                assert read is None
                continue
            if read is None:
                if isinstance(decoded, dict):
                    shapes.learn(line[5:].strip(), decoded, line)
                continue
            assert _reader_reads(read) == _reader_reads(decoded)
            assert set(read) <= {"choices", "usage"}
            if "choices" in read:
                assert read["choices"] == [decoded["choices"][0]]
            if "usage" in read:
                assert read["usage"] == decoded["usage"]
            assert shapes.calls == (b'"tool_calls"' in line)
            made = _made(read)
            assert not {id(value) for value in made} & {id(value) for value in handed}
            handed += made


def test_a_later_streams_role_finish_and_usage_are_read_through_their_shapes() -> None:
    """By hand, the bench's lines: the second stream's role, finish and usage lines
    (another id, created and usage numbers of the same lengths) are read through
    the first stream's shapes, as what the reader reads of them (the role's:
    nothing); its call's lines are not (a stream's own)."""
    head = b'{"id":"chatcmpl-%s","object":"chat.completion.chunk","created":%d,"model":"sim/bench",'
    opened = (
        b'"choices":[{"index":0,"delta":{%s},"logprobs":null,"finish_reason":%s}],"usage":null}'
    )
    role = head + opened % (b'"role":"assistant","content":""', b"null")
    call = b'"index":0,"id":"call_1","type":"function"'
    call += b',"function":{"name":"get_weather","arguments":""}'
    start = head + opened % (b'"tool_calls":[{' + call + b"}]", b"null")
    finish = head + opened % (b"", b'"tool_calls"')
    usage = head + b'"choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":7,'
    usage += b'"total_tokens":%d}}'
    shapes = LineShapes()
    first = [role % (b"0a", 1), start % (b"0a", 1), finish % (b"0a", 1)]
    first.append(usage % (b"0a", 1, 30, 37))
    for payload in first:
        assert shapes.read(b"data: " + payload) is None
        shapes.learn(payload, orjson.loads(payload), b"data: " + payload)
    second = [role % (b"9b", 2), start % (b"9b", 2), finish % (b"9b", 2)]
    second.append(usage % (b"9b", 2, 12, 19))
    read = [shapes.read(b"data: " + payload) for payload in second]
    assert read[0] == {} and read[1] is None
    assert read[2] == {"choices": orjson.loads(second[2])["choices"]}
    assert read[3] == {"usage": {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19}}
    # Not a value orjson writes so where the id stands: decoded the usual way.
    assert shapes.read(b"data: " + role.replace(b"chatcmpl-%s", b"a\\u0041") % 2) is None
    # Nor a line in another form (a blank after it), nor one whose values are of
    # other lengths: decoded too.
    assert shapes.read(b"data: " + finish % (b"9b", 2) + b" ") is None
    assert shapes.read(b"data: " + finish % (b"9b", 20)) is None


def test_a_look_alike_before_the_streams_own_values_is_no_hole() -> None:
    """By hand: the choices first, the finish's choice holding an id and a created
    of the stream's own values, which a search for them finds first. The probe
    finds the holes are not the stream's own: no shape is learned from it, and a
    later stream's line whose choice holds other values is decoded the usual way
    (were it read through holes there, its choice would be the first one's)."""
    line = b'data: {"choices":[{"index":0,"id":"chatcmpl-1","created":%d,"delta":{},'
    line += b'"finish_reason":"stop"}],"id":"chatcmpl-1","object":"chat.completion.chunk",'
    line += b'"created":%d,"model":"m","usage":null}'
    shapes = LineShapes()
    first = line % (0, 0)
    shapes.learn(first[6:], orjson.loads(first[6:]), first)
    later = line % (2, 0)
    read = shapes.read(later)
    assert read is None or read == {"choices": orjson.loads(later[6:])["choices"]}
    assert shapes.read(first) is None  # nothing learned
