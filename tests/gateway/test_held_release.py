"""A held call's release (``CallHold``: the checked stage, validation on) goes out
as one argument delta holding the call's whole arguments where the call came in
many fragments (tests/core/test_correction.py holds the release to the checks).
Each front's bytes of a release (Chat Completions' chunks, Messages' and
Responses' events) read back, as a client gathers a call from them, to the same
calls as the bytes of the fragments as they came, for generated calls
(arguments of every JSON shape, cut anywhere, text between), and leave the
front's builder holding the same message or response."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fronts.segments import _pieces, arguments
from tests.fronts.test_stream_ends import _numbered_ids
from toolrelay import events as ev
from toolrelay.correction import CallHold
from toolrelay.io.round import Finish
from toolrelay.names import ToolSet
from toolrelay.server.anthropic.wire import MessageEncoder
from toolrelay.server.chat.wire import ChunkEncoder
from toolrelay.server.responses.wire import ResponseBuilder

# Tools without parameters: any arguments object stands as it came.
TOOLS = ToolSet([{"type": "function", "function": {"name": name}} for name in ("a", 'b "é"')])


@st.composite
def _calls(draw: st.DrawFn) -> tuple[list[ev.Event], list[ev.ToolCall]]:
    """Valid calls as they came (numbered 0, 1, ..., each its start, its fragments
    and its end), text between; and the calls."""
    events: list[ev.Event] = []
    calls: list[ev.ToolCall] = []
    for index in range(draw(st.integers(1, 3))):
        if draw(st.booleans()):
            events.append(ev.ContentDelta(draw(st.text(max_size=8))))
        value = draw(arguments)
        name = draw(st.sampled_from(["a", 'b "é"']))
        call = ev.ToolCall(f"call_{index}", name, value, orjson.dumps(value).decode())
        cuts = draw(st.lists(st.integers(0, 80), max_size=5))
        events.append(ev.ToolCallStart(index, call.id, name))
        events += [ev.ToolCallArgumentsDelta(index, p) for p in _pieces(call.arguments_json, cuts)]
        events.append(ev.ToolCallEnd(index, call))
        calls.append(call)
    return events, calls


def _sse_data(written: bytes) -> list[dict[str, Any]]:
    return [
        orjson.loads(line[6:])
        for line in written.split(b"\n")
        if line.startswith(b"data: ") and line != b"data: [DONE]"
    ]


def _chat_calls(events: list[ev.Event]) -> list[list[Any]]:
    """The calls a Chat Completions client gathers from the chunks of ``events``."""
    encoder = ChunkEncoder("m", False)
    written = b"".join(filter(None, map(encoder.event, events)))
    gathered: dict[int, list[Any]] = {}
    for chunk in _sse_data(written):
        for entry in chunk["choices"][0]["delta"].get("tool_calls", []):
            call = gathered.setdefault(entry["index"], [None, None, ""])
            call[0] = entry.get("id", call[0])
            function = entry.get("function", {})
            call[1] = function.get("name", call[1])
            call[2] += function.get("arguments", "")
    return [gathered[number] for number in sorted(gathered)]


def _messages_calls(events: list[ev.Event]) -> tuple[dict[int, list[Any]], Any]:
    """The calls an Anthropic Messages client gathers from the events, and the message."""
    with _numbered_ids():
        encoder = MessageEncoder("m", False)
    written = encoder.start() + b"".join(filter(None, map(encoder.event, events)))
    written += encoder.finish(Finish("tool_calls"), {})
    gathered: dict[int, list[Any]] = {}
    for event in _sse_data(written):
        if event["type"] == "content_block_start" and event["content_block"]["type"] == "tool_use":
            block = event["content_block"]
            gathered[event["index"]] = [block["id"], block["name"], ""]
        elif (
            event["type"] == "content_block_delta" and event["delta"]["type"] == "input_json_delta"
        ):
            gathered[event["index"]][2] += event["delta"]["partial_json"]
    return gathered, orjson.loads(orjson.dumps(encoder.builder.message))


def _responses_calls(events: list[ev.Event]) -> tuple[dict[int, list[Any]], Any]:
    """The calls an OpenAI Responses client gathers from the events, and the response."""
    with _numbered_ids():
        builder = ResponseBuilder("m", {}, False)
        written = builder.start() + b"".join(filter(None, map(builder.stream_event, events)))
        written += builder.finish_bytes(Finish("tool_calls"), {})
    gathered: dict[int, list[Any]] = {}
    for event in _sse_data(written):
        if (
            event["type"] == "response.output_item.added"
            and event["item"]["type"] == "function_call"
        ):
            item = event["item"]
            gathered[event["output_index"]] = [item["call_id"], item["name"], ""]
        elif event["type"] == "response.function_call_arguments.delta":
            gathered[event["output_index"]][2] += event["delta"]
        elif event["type"] == "response.function_call_arguments.done":
            assert event["arguments"] == gathered[event["output_index"]][2]
    return gathered, orjson.loads(orjson.dumps(builder.response))


_FRONTS: list[Callable[[list[ev.Event]], Any]] = [_chat_calls, _messages_calls, _responses_calls]


@settings(max_examples=200, deadline=None)
@given(came=_calls())
def test_every_front_says_the_same_calls_for_a_release_as_for_its_fragments(
    came: tuple[list[ev.Event], list[ev.ToolCall]],
) -> None:
    events, calls = came
    hold = CallHold(TOOLS)
    out = [released for event in events for released in hold.feed(event)]
    assert [e.call for e in out if isinstance(e, ev.ToolCallEnd)] == calls
    for front in _FRONTS:
        assert front(out) == front(events)
    assert _chat_calls(out) == [[call.id, call.name, call.arguments_json] for call in calls]
