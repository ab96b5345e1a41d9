"""A Messages or Responses stream's fixed events written from byte templates
(the start; a text block opened where none is open, ``Blocks.event_bytes``;
the last block's close and the finish, ``finish_bytes``) are the general
path's, the builder's events each through ``sse``, byte for byte and event for
event, for generated streams (text with blanks anywhere, reasoning, calls,
custom and namespaced calls, blank text only), every finish reason, usage of
every shape, stop sequences, toolrelay's own keys or none, and an error
mid-stream; the builder is left holding the same message or response, and a
streamed response is stored with the conversation the general reader makes
of its output."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from unittest.mock import patch

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fronts.replies import EXTRA, INT, REASONS, TEXT, USAGE
from tests.fronts.segments import arguments, events_of
from toolrelay.events import ContentDelta, Event, ToolCallStart
from toolrelay.io.round import Finish
from toolrelay.server.anthropic.wire import PING, MessageEncoder
from toolrelay.server.blocks import Blocks, sse
from toolrelay.server.errors import APIError
from toolrelay.server.responses.request import input_messages, output_messages
from toolrelay.server.responses.wire import (
    _COUNT_WRITTEN,
    _ECHOED,
    ResponseBuilder,
    _open_call_item,
    _open_message_item,
    _outcome,
    _response,
    _started_response,
    _usage_json,
    echo_json,
)

PLAN = st.lists(
    st.one_of(
        st.tuples(st.just("text"), TEXT),
        st.tuples(st.just("reasoning"), TEXT),
        st.tuples(st.just("call"), arguments),
    ),
    max_size=5,
)
FINISH = st.builds(Finish, REASONS, USAGE, st.none(), stop_sequence=st.none() | TEXT)
ERROR = st.builds(APIError, st.sampled_from([400, 500, 502]), TEXT)
MODEL = st.sampled_from(["m", 'a "quoted" model', "modèle/é"])


def _events(plan: list[Any], cuts: list[int], more: list[str]) -> list[Event]:
    # More text after the plan: a stream most often ends in text.
    return [*events_of(plan, cuts), *(ContentDelta(text) for text in more)]


EVENTS = st.builds(
    _events, PLAN, st.lists(st.integers(0, 40), max_size=4), st.lists(TEXT, max_size=3)
)
# A stream ends in its finish, or now and then in an error.
END = st.one_of(FINISH, FINISH, ERROR)


def _general(builder: Blocks, event: Event) -> bytes | None:
    events = builder.event(event)
    return b"".join(map(sse, events)) if events else None


@contextmanager
def _numbered_ids() -> Iterator[None]:
    """Ids numbered from 0 in each run, and one clock, so that two runs name
    their items alike and date their responses alike."""
    numbers = itertools.count()

    def number() -> str:
        return f"{next(numbers):032x}"

    with (
        patch("toolrelay.server.responses.wire.unique_hex", number),
        patch("toolrelay.server.anthropic.wire.unique_hex", number),
        patch("toolrelay.server.responses.wire.time.time", lambda: 1_800_000_000.5),
    ):
        yield


def _messages_stream(
    fast: bool,
    model: str,
    thinking: bool,
    events: list[Event],
    end: Finish | APIError,
    extra: dict[str, Any],
) -> tuple[list[bytes | None], dict[str, Any]]:
    with _numbered_ids():
        encoder = MessageEncoder(model, thinking)
    builder = encoder.builder
    if fast:
        written: list[bytes | None] = [encoder.start()]
        written += [encoder.event(event) for event in events]
    else:
        snapshot = {**builder.message, "content": []}
        written = [sse({"type": "message_start", "message": snapshot}) + PING]
        written += [_general(builder, event) for event in events]
    if isinstance(end, APIError):
        written.append(encoder.error(end))
    elif fast:
        written.append(encoder.finish(end, extra))
    else:
        written.append(b"".join(map(sse, builder.finish(end, extra))))
    return written, orjson.loads(orjson.dumps(builder.message))


@settings(max_examples=400, deadline=None)
@given(EVENTS, MODEL, st.booleans(), END, EXTRA)
def test_a_messages_stream_is_the_general_bytes(
    events: list[Event], model: str, thinking: bool, end: Finish | APIError, extra: dict[str, Any]
) -> None:
    fast = _messages_stream(True, model, thinking, events, end, extra)
    assert fast == _messages_stream(False, model, thinking, events, end, extra)


def _responses_stream(
    fast: bool,
    builder_of: Callable[[], ResponseBuilder],
    events: list[Event],
    end: Finish | APIError,
    extra: dict[str, Any],
) -> tuple[list[bytes | None], dict[str, Any]]:
    with _numbered_ids():
        builder = builder_of()
        if fast:
            written: list[bytes | None] = [builder.start()]
            written += [builder.stream_event(event) for event in events]
        else:
            snapshot = {**builder.response, "output": []}
            started = [
                {"type": kind, "sequence_number": number, "response": snapshot}
                for number, kind in enumerate(["response.created", "response.in_progress"])
            ]
            written = [b"".join(map(sse, started))]
            builder._sequence = 2
            written += [_general(builder, event) for event in events]
        if isinstance(end, APIError):
            written.append(sse(builder.failed(end)))
        elif fast:
            written.append(builder.finish_bytes(end, extra))
        else:
            written.append(b"".join(map(sse, builder.finish(end, extra))))
    return written, orjson.loads(orjson.dumps(builder.response))


@settings(max_examples=400, deadline=None)
@given(
    EVENTS,
    MODEL,
    st.booleans(),
    st.booleans(),
    st.sampled_from(["plain", "custom", "namespaced"]),
    END,
    EXTRA,
)
def test_a_responses_stream_is_the_general_bytes(
    events: list[Event],
    model: str,
    reasoning: bool,
    summary: bool,
    calls: str,
    end: Finish | APIError,
    extra: dict[str, Any],
) -> None:
    echo = {"instructions": "be brief", "tools": [{"type": "function", "name": "get_weather"}]}

    def builder_of() -> ResponseBuilder:
        return ResponseBuilder(
            model,
            echo,
            reasoning,
            frozenset({"get_weather"} if calls == "custom" else ()),
            namespaced={"get_weather": ("mcp", "weather")} if calls == "namespaced" else None,
            summary=summary,
        )

    fast = _responses_stream(True, builder_of, events, end, extra)
    assert fast == _responses_stream(False, builder_of, events, end, extra)


@settings(max_examples=300, deadline=None)
@given(PLAN, st.lists(st.integers(0, 40), max_size=4), st.lists(TEXT, max_size=3), st.booleans())
def test_a_streamed_response_is_stored_with_the_readers_conversation(
    plan: list[Any], cuts: list[int], more: list[str], reasoning: bool
) -> None:
    builder = ResponseBuilder("m", {}, reasoning)
    builder.start()
    for event in _events(plan, cuts, more):
        builder.stream_event(event)
    builder.finish_bytes(Finish("stop"), {})
    output = orjson.loads(orjson.dumps(builder.response))["output"]
    assert output_messages(output) == input_messages(output, "output")


# A response's echo of every shape the reader makes (any of the echoed keys,
# the tools as a kept read's JSON or as a list) and strings holding the keys the
# completed response's writing looks for in the started one, escaped or nested.
MARKED = st.sampled_from(
    ['"status":', '"incomplete_details":null,', ',"output":[],"user":null}', "status", "}"]
)
KEY = st.sampled_from(["status", "incomplete_details", "output", "model", "x"]) | TEXT
JSON = st.recursive(
    st.none() | st.booleans() | INT | TEXT | MARKED,
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(KEY, inner, max_size=2),
    max_leaves=6,
)
ECHO = st.dictionaries(
    st.sampled_from(sorted(_ECHOED)),
    JSON | st.builds(lambda value: orjson.Fragment(orjson.dumps(value)), JSON),
)


@settings(max_examples=400, deadline=None)
@given(ECHO, MODEL | MARKED, EVENTS, FINISH, EXTRA)
def test_a_completed_response_writes_its_echo_as_the_started_one(
    echo: dict[str, Any], model: str, events: list[Event], end: Finish, extra: dict[str, Any]
) -> None:
    """The completed response's event, which reuses the started response's head
    and echo, is the general path's for any echo and model."""

    def builder_of() -> ResponseBuilder:
        return ResponseBuilder(model, echo, False)

    fast = _responses_stream(True, builder_of, events, end, extra)
    assert fast == _responses_stream(False, builder_of, events, end, extra)


@settings(max_examples=400, deadline=None)
@given(ECHO, MODEL | MARKED, EVENTS, FINISH, EXTRA)
def test_a_response_started_around_its_echo_written_ahead_is_the_general_bytes(
    echo: dict[str, Any], model: str, events: list[Event], end: Finish, extra: dict[str, Any]
) -> None:
    """A response given its echo's JSON ahead (a kept tool list's read gives it)
    starts, and completes, as the general path writes it, for any echo and model."""

    def builder_of() -> ResponseBuilder:
        return ResponseBuilder(model, echo, False, echoed=echo_json(echo))

    fast = _responses_stream(True, builder_of, events, end, extra)
    assert fast == _responses_stream(False, builder_of, events, end, extra)


@settings(max_examples=200, deadline=None)
@given(ECHO, MODEL | MARKED)
def test_a_started_response_is_the_general_one_in_progress(
    echo: dict[str, Any], model: str
) -> None:
    """A stream's response as it starts, copied from its own skeleton, is the
    general one with the outcome in progress: the same keys in the same order."""
    with _numbered_ids():
        started = _started_response("resp_0", model, echo)
        general = _response("resp_0", model, echo, [], ("in_progress", None, None))
        built = ResponseBuilder(model, echo, False).response
    assert list(started.items()) == list(general.items())
    assert list(built.items()) == list({**general, "id": built["id"]}.items())


@settings(max_examples=200, deadline=None)
@given(TEXT, TEXT, TEXT)
def test_an_opened_item_is_its_literal(item_id: str, call_id: str, name: str) -> None:
    """The items a stream opens, copied from their skeletons, are the literals
    they stand for (the same keys in the same order), each message with a
    content list of its own."""
    call = _open_call_item(item_id, ToolCallStart(0, call_id, name))
    assert list(call.items()) == [
        ("id", item_id),
        ("type", "function_call"),
        ("call_id", call_id),
        ("name", name),
        ("arguments", ""),
        ("status", "in_progress"),
    ]
    message, other = _open_message_item(item_id), _open_message_item(item_id)
    assert list(message.items()) == [
        ("id", item_id),
        ("type", "message"),
        ("role", "assistant"),
        ("content", []),
        ("status", "in_progress"),
    ]
    assert message["content"] is not other["content"]


def _streamed(builder: ResponseBuilder, events: list[Event], end: Finish) -> bytes:
    """The bytes of a whole stream of ``events`` ended by ``end``."""
    written = [builder.start(), *(builder.stream_event(event) for event in events)]
    return b"".join(filter(None, written)) + builder.finish_bytes(end, {})


@settings(max_examples=400, deadline=None)
@given(EVENTS, st.booleans(), st.sampled_from(["plain", "custom", "namespaced"]), FINISH)
def test_a_first_item_kept_as_its_close_wrote_it_is_its_json(
    events: list[Event], reasoning: bool, calls: str, end: Finish
) -> None:
    """The first output item's JSON kept at its close (for a stream of it alone
    to complete with) is orjson's encoding of the item as the stream ends, for
    any stream: every later event leaves it as it was."""
    builder = ResponseBuilder(
        "m",
        {},
        reasoning,
        frozenset({"get_weather"} if calls == "custom" else ()),
        namespaced={"get_weather": ("mcp", "weather")} if calls == "namespaced" else None,
    )
    _streamed(builder, events, end)
    if builder._first_item:
        assert builder._first_item == orjson.dumps(builder.response["output"][0])


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.tuples(st.just("text"), TEXT.filter(str.strip)), st.tuples(st.just("call"), arguments)
    ),
    st.lists(st.integers(0, 40), max_size=4),
    FINISH,
)
def test_a_stream_of_one_item_completes_with_the_item_as_its_close_wrote_it(
    item: tuple[str, Any], cuts: list[int], end: Finish
) -> None:
    """The usual stream, one message or one call, keeps its item's JSON at its
    close (the completed output is then written from it, not encoded again), and
    its bytes are the general path's (``test_a_responses_stream_is_the_general_bytes``
    holds every other stream to them too)."""
    events = events_of([item], cuts)

    def builder_of() -> ResponseBuilder:
        return ResponseBuilder("m", {"tools": [{"type": "function", "name": "get_weather"}]}, False)

    with _numbered_ids():
        builder = builder_of()
        streamed = _streamed(builder, events, end)
    output = builder.response["output"]
    assert len(output) == 1
    assert builder._first_item == orjson.dumps(output[0])
    fast, _ = _responses_stream(True, builder_of, events, end, {})
    general, _ = _responses_stream(False, builder_of, events, end, {})
    assert b"".join(filter(None, fast)) == streamed
    assert fast == general


# Counts of every size: the usual, those at and around the largest one written
# in place and at orjson's bounds, and beyond them (which orjson refuses).
EDGE = st.sampled_from(
    [
        _COUNT_WRITTEN - 1,
        _COUNT_WRITTEN,
        _COUNT_WRITTEN + 1,
        -1,
        -(2**63),
        -(2**63) - 1,
        2**63,
        2**64 - 1,
        2**64,
    ]
)
COUNTS = (
    st.none()
    | st.integers(0, 10**6)
    | EDGE
    | INT
    | st.integers()
    | st.booleans()
    | st.floats()
    | st.text(max_size=2)
)


@settings(max_examples=500, deadline=None)
@given(
    REASONS,
    st.fixed_dictionaries({}, optional={"prompt_tokens": COUNTS, "completion_tokens": COUNTS}),
)
def test_a_usage_written_in_place_is_orjsons(reason: str, usage: dict[str, Any]) -> None:
    """A finished response's usage written from its template is orjson's bytes
    for any counts: the usual ones written in place, any other through orjson,
    which refuses what it refused (an int beyond its range)."""
    counts = _outcome(reason, usage)[2]
    try:
        expected = orjson.dumps(counts)
    except orjson.JSONEncodeError:
        with pytest.raises(orjson.JSONEncodeError):
            _usage_json(counts)
        return
    assert _usage_json(counts) == expected
