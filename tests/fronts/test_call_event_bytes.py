"""A call's events on the Messages and Responses fronts written from byte
templates (``Blocks.stream_event`` for a call's start, its argument fragments
and its end: ``call_open_bytes``, ``call_delta_bytes``, ``call_close_bytes``)
are the general path's, the builder's events each through ``sse``, byte for
byte and event for event, for generated streams heavy in calls: several calls,
custom and namespaced ones on Responses, ids, names and arguments with escapes
and characters beyond ASCII, fragments cut anywhere (empty ones too), calls
that end, that are cut short (``CallRejected``) or left open for the next
block or the finish to close, stray fragments and ends, text and reasoning
before and between them, every finish and an error mid-stream; the builder is
left holding the same message or response. A streamed response's output of
calls alone is stored with the conversation the general reader makes of it."""

from __future__ import annotations

import itertools
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fronts.replies import EXTRA, TEXT
from tests.fronts.segments import arguments
from tests.fronts.test_stream_ends import END, MODEL, _messages_stream, _responses_stream
from toolrelay.events import (
    CallRejected,
    ContentDelta,
    Event,
    ReasoningDelta,
    RejectedCall,
    ToolCall,
    ToolCallArgumentsDelta,
    ToolCallEnd,
    ToolCallStart,
)
from toolrelay.io.round import Finish
from toolrelay.server.errors import APIError
from toolrelay.server.responses.request import input_messages, output_messages
from toolrelay.server.responses.wire import ResponseBuilder

# A plain tool, one whose name JSON escapes, a custom one and a namespaced one
# (the last two plain calls on Messages).
PLAIN, ESCAPED, CUSTOM, NAMESPACED = "get_weather", 'say "hi"\\é\u2028', "run_code", "lookup"
NAMES = st.sampled_from([PLAIN, ESCAPED, CUSTOM, NAMESPACED])
CALL_ID = st.sampled_from(["call_0", 'id "q" \\ é%d']) | TEXT
# A call's fragments: its arguments' JSON (escapes and characters beyond ASCII
# in them), or text that is no JSON object, as a call cut short may leave.
WRITTEN = st.one_of(
    arguments.map(lambda value: orjson.dumps(value).decode()),
    st.text(alphabet=st.sampled_from(list('{}":,\\ a1é\u2028\n%')), max_size=12),
)
# How a call ends: with its call, whose JSON may not be its fragments' (a call
# repaired or coerced), cut short, or not at all.
ENDS = st.sampled_from(["end", "end", "end repaired", "rejected", "open"])


@st.composite
def _call(draw: st.DrawFn, index: int) -> list[Event]:
    """One call's events: its start, its fragments cut anywhere, and its end
    (or none: the next block or the finish closes it)."""
    name, call_id, written = draw(NAMES), draw(CALL_ID), draw(WRITTEN)
    cuts = sorted(draw(st.lists(st.integers(0, len(written)), max_size=5)))
    bounds = [0, *cuts, len(written)]
    # Empty fragments too (cuts may meet): the general path says nothing of them.
    pieces = [written[a:b] for a, b in itertools.pairwise(bounds)]
    out: list[Event] = [ToolCallStart(index, call_id, name)]
    out += [ToolCallArgumentsDelta(index, piece) for piece in pieces]
    end = draw(ENDS)
    if end == "rejected":
        out.append(CallRejected(RejectedCall(name, written, "cut short"), index))
    elif end != "open":
        value = orjson.loads(written) if _is_object(written) else {}
        if end == "end repaired":
            value = {**value, "repaired": 'é\n"%'}
        out.append(ToolCallEnd(index, ToolCall(call_id, name, value, orjson.dumps(value).decode())))
    return out


def _is_object(text: str) -> bool:
    try:
        return isinstance(orjson.loads(text), dict)
    except orjson.JSONDecodeError:
        return False


STRAY = st.sampled_from(
    [
        ToolCallArgumentsDelta(9, '{"stray":1}'),
        ToolCallEnd(9, ToolCall("call_9", PLAIN, {}, "{}")),
        CallRejected(RejectedCall(PLAIN, "{", "cut short"), None),
    ]
)


@st.composite
def streams(draw: st.DrawFn) -> list[Event]:
    """Text, reasoning, calls and stray call events, in any order."""
    out: list[Event] = []
    for index, kind in enumerate(
        draw(st.lists(st.sampled_from(["text", "reasoning", "call", "call", "stray"]), max_size=6))
    ):
        if kind == "text":
            out += [ContentDelta(text) for text in draw(st.lists(TEXT, min_size=1, max_size=3))]
        elif kind == "reasoning":
            out.append(ReasoningDelta(draw(TEXT)))
        elif kind == "call":
            out += draw(_call(index))
        else:
            out.append(draw(STRAY))
    return out


@settings(max_examples=500, deadline=None)
@given(streams(), MODEL, st.booleans(), END, EXTRA)
def test_a_messages_streams_calls_are_the_general_bytes(
    events: list[Event], model: str, thinking: bool, end: Finish | APIError, extra: dict[str, Any]
) -> None:
    fast = _messages_stream(True, model, thinking, events, end, extra)
    assert fast == _messages_stream(False, model, thinking, events, end, extra)


@settings(max_examples=500, deadline=None)
@given(streams(), MODEL, st.booleans(), st.booleans(), END, EXTRA)
def test_a_responses_streams_calls_are_the_general_bytes(
    events: list[Event],
    model: str,
    reasoning: bool,
    summary: bool,
    end: Finish | APIError,
    extra: dict[str, Any],
) -> None:
    def builder_of() -> ResponseBuilder:
        return _builder(model, reasoning, summary)

    fast = _responses_stream(True, builder_of, events, end, extra)
    assert fast == _responses_stream(False, builder_of, events, end, extra)


def _builder(model: str, reasoning: bool, summary: bool) -> ResponseBuilder:
    return ResponseBuilder(
        model,
        {"tools": [{"type": "function", "name": PLAIN}]},
        reasoning,
        frozenset({CUSTOM}),
        namespaced={NAMESPACED: ("mcp", "lookup_tool")},
        summary=summary,
    )


@settings(max_examples=300, deadline=None)
@given(streams(), st.booleans(), st.booleans())
def test_a_streamed_response_of_calls_is_stored_with_the_readers_conversation(
    events: list[Event], reasoning: bool, summary: bool
) -> None:
    builder = _builder("m", reasoning, summary)
    builder.start()
    for event in events:
        builder.stream_event(event)
    builder.finish_bytes(Finish("tool_calls"), {})
    output = orjson.loads(orjson.dumps(builder.response))["output"]
    assert output_messages(output) == input_messages(output, "output")
