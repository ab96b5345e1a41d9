"""A native call read for the hold (``NativeStream(held=True)``: validation on, the
checked stage's ``CallHold`` holds each call until it is whole) makes no event per
argument fragment: what its ``FlatObject`` reads is gathered and goes out as one
delta just before the call's end. Through the hold it must release what the
unflagged reader's events release, take for take: for generated native call
streams (ids given or not, names declared, schema-checked and unknown, arguments
of every JSON shape from ``json_trees``, spaced, sloppy, cut short, not an object,
a stray brace after, fragments cut anywhere and read as chunks or through their
byte frame, several calls in turn or interleaved, text between, a text parser or
none, a call limit or none), under ``warn`` (invalid calls passed on) and
``repair``/``reject`` (held back: the hold treats both alike), the released
events, each front's bytes of them and the hold's and the reader's state are
the same. Validation off keeps the fragments going out as they come."""

from __future__ import annotations

import json
from typing import Any
from unittest.mock import patch

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.core.test_correction import TOOLS
from tests.fronts.test_stream_ends import _numbered_ids
from tests.gateway.test_native_fragments import _SCALARS, _STRINGS
from tests.gateway.test_native_opening import _pieces
from tests.strategies import json_trees
from toolrelay import StreamParser
from toolrelay.correction import CallHold
from toolrelay.events import Event, ToolCallArgumentsDelta, ToolCallEnd, ToolCallStart
from toolrelay.io.backends.fragments import ArgumentFrame
from toolrelay.io.backends.native import NativeStream
from toolrelay.io.round.body import ChunkReader
from toolrelay.server.anthropic.wire import MessageEncoder
from toolrelay.server.chat.wire import ChunkEncoder
from toolrelay.server.responses.wire import ResponseBuilder

_OBJECTS = st.dictionaries(_STRINGS, json_trees(_SCALARS, _STRINGS, leaves=6), max_size=3)
_WEATHER = st.sampled_from(
    [
        {"city": "Paris"},  # valid
        {"city": "Paris", "days": "3"},  # coerced
        {"city": "Paris", "days": "three"},  # invalid
        {"days": 2},  # invalid: no city
        {},
    ]
)


@st.composite
def _arguments(draw: st.DrawFn, name: str) -> str:
    """A call's arguments text: an object as a writer writes it (compact, spaced, or
    escaped to ASCII), now and then sloppy, cut short, not an object, or blank."""
    value = draw(_WEATHER if name == "get_weather" else _OBJECTS)
    text = draw(
        st.sampled_from(
            [
                json.dumps(value, separators=(",", ":"), ensure_ascii=False),
                json.dumps(value, separators=(",", ":"), ensure_ascii=False),
                json.dumps(value),
                " " + json.dumps(value, ensure_ascii=False),
            ]
        )
    )
    if "\ud800" in text:  # never sent raw (not UTF-8): written as an escape
        text = json.dumps(value)
    return draw(
        st.sampled_from(
            [text, text, text, text[: max(1, len(text) // 2)], text + "}", "{'a': 1,}", "[1]", ""]
        )
    )


def _chunk(entry: dict[str, Any]) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"tool_calls": [entry]}, "finish_reason": None}]}


def _framed(index: int, text: str) -> tuple[ArgumentFrame, str]:
    """An argument-only chunk as ``ChunkStream`` hands it on when read through its frame."""
    head = b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":%d,' % index
    tail = b'}}]},"finish_reason":null}]}\n\n'
    return ArgumentFrame(index, head + b'"function":{"arguments":', tail)


@st.composite
def _call(draw: st.DrawFn, index: int) -> list[Any]:
    """One call's chunks: its id and name (with an empty fragment or not), then its
    argument fragments, each as a decoded chunk or through its byte frame."""
    name = draw(st.sampled_from(["get_time", "get_time", "get_weather", "unknown"]))
    entry: dict[str, Any] = {"index": index, "type": "function", "function": {"name": name}}
    call_id = draw(st.sampled_from([f"call_{index}", None]))
    if call_id is not None:
        entry["id"] = call_id
    if draw(st.booleans()):
        entry["function"]["arguments"] = ""
    chunks: list[Any] = [_chunk(entry)]
    text = draw(_arguments(name))
    for piece in _pieces(text, draw(st.lists(st.integers(0, 300), max_size=8))):
        if draw(st.booleans()):
            frame = _framed(index, piece)
            chunks.append((frame, piece))
        else:
            chunks.append(_chunk({"index": index, "function": {"arguments": piece}}))
    return chunks


_TEXTS = st.sampled_from(
    [
        "Let me look.",
        " ",
        'Here: <tool_call>{"name": "get_time", "arguments": {"a": 1}}</tool_call>',
        "<tool_call>",
        '{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call> done',
    ]
)


@st.composite
def _streams(draw: st.DrawFn) -> list[Any]:
    """Several calls under their own indices, in turn or interleaved; text between
    (as plain chunks or in a delta); a finish at the end."""
    indices = draw(st.permutations([0, 1, 2]))[: draw(st.integers(1, 3))]
    calls = [draw(_call(index)) for index in indices]
    chunks: list[Any] = []
    if draw(st.booleans()):
        for call in calls:
            chunks += call
    else:
        queues = [list(call) for call in calls]
        while any(queues):
            queue = draw(st.sampled_from([queue for queue in queues if queue]))
            chunks.append(queue.pop(0))
    for _ in range(draw(st.integers(0, 3))):
        text = draw(_TEXTS)
        said = text if draw(st.booleans()) else {"choices": [{"delta": {"content": text}}]}
        chunks.insert(draw(st.integers(0, len(chunks))), said)
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    return chunks


def _run(
    chunks: list[Any], *, held: bool, parses: bool, limit: int | None, warn: bool
) -> tuple[list[list[Event]], list[bytes], tuple[Any, ...]]:
    """What the hold releases after each take and at the close, each front's bytes of
    it, and the state the hold and the reader are left in (ids of ours and clocks
    fixed, so that two runs name and date alike)."""
    with patch("toolrelay.formats.base.secrets.token_hex", lambda n: "0" * (2 * n)):
        reader = ChunkReader(
            (lambda: StreamParser()) if parses else None,
            lambda: NativeStream(TOOLS, held=held),
            limit,
        )
        hold = CallHold(TOOLS, pass_invalid=warn)
        released: list[list[Event]] = []
        for chunk in [*chunks, None]:
            out: list[Any] = []
            if chunk is None:
                reader.close(out)
            else:
                reader.take(chunk, out)
            released.append([item for event in out for item in hold.feed(event)])
    state = (
        hold.accepted,
        hold.coerced,
        hold.problems,
        hold.released,
        hold.content,
        reader.calls,
        reader.cut,
        reader.dropped,
        reader.rejected,
        reader.saw_text,
        reader.raw,
        reader.finish,
    )
    return released, _front_bytes([event for events in released for event in events]), state


def _front_bytes(events: list[Event]) -> list[bytes]:
    """What each front writes of ``events``: Chat Completions' chunks, Messages' and
    Responses' events."""
    with _numbered_ids(), patch("toolrelay.server.chat.wire.unique_hex", lambda: "c"):
        chat = ChunkEncoder("m", False)
        messages = MessageEncoder("m", False)
        responses = ResponseBuilder("m", {}, False)
        return [
            b"".join(filter(None, map(chat.event, events))),
            messages.start() + b"".join(filter(None, map(messages.event, events))),
            responses.start() + b"".join(filter(None, map(responses.stream_event, events))),
        ]


@settings(max_examples=500, deadline=None)
@given(
    chunks=_streams(),
    parses=st.booleans(),
    limit=st.sampled_from([None, None, 1]),
    warn=st.booleans(),
)
def test_a_held_reader_releases_what_its_fragments_release(
    chunks: list[Any], parses: bool, limit: int | None, warn: bool
) -> None:
    held = _run(chunks, held=True, parses=parses, limit=limit, warn=warn)
    fragments = _run(chunks, held=False, parses=parses, limit=limit, warn=warn)
    assert held == fragments
    released = [event for events in held[0] for event in events]
    for end in (event for event in released if isinstance(event, ToolCallEnd)):
        deltas = [
            event.text
            for event in released
            if isinstance(event, ToolCallArgumentsDelta) and event.index == end.index
        ]
        assert "".join(deltas) == end.call.arguments_json  # design.md's contract


def _fed(native: NativeStream, chunks: list[Any]) -> list[list[Event]]:
    out = []
    for chunk in chunks:
        entries = chunk["choices"][0]["delta"]["tool_calls"]
        out.append(native.feed(entries))
    return out


_CALL = [
    _chunk({"index": 0, "id": "call_1", "function": {"name": "get_time", "arguments": ""}}),
    *(
        _chunk({"index": 0, "function": {"arguments": piece}})
        for piece in ('{"ci', 'ty":', '"Par', 'is"}')
    ),
]


def test_a_held_call_goes_out_as_its_start_one_delta_and_its_end() -> None:
    kinds = [
        [type(event).__name__ for event in events]
        for events in _fed(NativeStream(TOOLS, held=True), _CALL)
    ]
    assert kinds == [[], ["ToolCallStart"], [], [], ["ToolCallArgumentsDelta", "ToolCallEnd"]]


def test_unheld_each_fragment_goes_out_as_it_comes() -> None:
    fed = _fed(NativeStream(TOOLS), _CALL)
    assert [
        [e.text for e in events if isinstance(e, ToolCallArgumentsDelta)] for events in fed
    ] == [
        [],
        ["{"],
        [],
        ['"city":"Par'],
        ['is"}'],
    ]
    assert isinstance(fed[1][0], ToolCallStart)
