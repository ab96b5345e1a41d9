"""A non-streamed Responses answer is made whole at once (``whole_response``) and
kept with the conversation before it: both are held here to the general path
they skip, the reply replayed as events through the stream's builder and the
response's output read back as input items by a follow-up, for generated
replies and requests (every finish reason; text with blanks; reasoning as
content or summary; function, custom and namespaced calls; rejected calls)."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest.mock import patch

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fronts.replies import EXTRA, TEXT, replies
from toolrelay.io.round import Finish, Reply, reply_events
from toolrelay.io.settings import Settings
from toolrelay.server.responses import ResponsesFront
from toolrelay.server.responses.request import ResponsesTurn, read_responses
from toolrelay.server.responses.store import ResponseStore
from toolrelay.server.responses.wire import ResponseBuilder

SETTINGS = Settings()
SCHEMA = {"type": "object", "properties": {"input": {}}}
# Tools of every kind the output tells apart: a function and a custom tool at
# the top, the same in a namespace (the default one, an empty name, an MCP server's).
NAMESPACES = st.sampled_from(["functions", "", "mcp"])
# The model's names of those tools, and one no tool has.
CALL_NAMES = ["f", "c", "functions__g", "__g", "mcp__g", "g", "h", "mcp__h", "__h", "other"]
REPLIES = replies(CALL_NAMES)


@st.composite
def requests(draw: st.DrawFn) -> dict[str, Any]:
    """A Responses request body with every kind of tool, and what shapes the output."""
    namespace = draw(NAMESPACES)
    inner = [
        {"type": "function", "name": "g", "parameters": SCHEMA},
        {"type": "custom", "name": "h"},
    ]
    tools = [
        {"type": "function", "name": "f", "parameters": SCHEMA},
        {"type": "custom", "name": "c"},
        {"type": "namespace", "name": namespace, "tools": inner},
    ]
    body: dict[str, Any] = {"model": "m", "tools": tools}
    body["input"] = draw(
        st.just("hi")
        | st.just(
            [
                {"type": "message", "role": "user", "content": "go"},
                {"type": "function_call", "call_id": "c0", "name": "f", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c0", "output": "done"},
            ]
        )
    )
    reasoning = draw(st.sampled_from([None, {}, {"summary": "auto"}, {"effort": "low"}]))
    if reasoning is not None:
        body["reasoning"] = reasoning
    if draw(st.booleans()):
        body["instructions"] = "Be brief."
    return body


@contextmanager
def numbered_ids() -> Iterator[None]:
    """The builder's ids counted from 0, so two runs can be told apart only by
    the order of their ids."""
    numbers = itertools.count()
    with (
        patch("toolrelay.server.responses.wire.unique_hex", lambda: f"{next(numbers):032x}"),
        patch("toolrelay.server.responses.wire.time.time", lambda: 1_700_000_000.5),
    ):
        yield


def renumbered(response: dict[str, Any]) -> bytes:
    """The response's JSON, each id numbered by its first appearance (the stream's
    builder draws an id it never uses for a custom call: a gap, not a difference)."""
    seen: dict[bytes, bytes] = {}

    def number(match: re.Match[bytes]) -> bytes:
        return seen.setdefault(match[0], match[1] + str(len(seen)).encode())

    return re.sub(rb"(resp_|msg_|fc_|ctc_|rs_)[0-9a-f]{32}", number, orjson.dumps(response))


def builders_response(turn: ResponsesTurn, reply: Reply, extra: dict[str, Any]) -> dict[str, Any]:
    """The general path: the reply's events through the stream's builder, then its finish."""
    builder = ResponseBuilder(
        turn.round.model,
        turn.echo,
        turn.reasoning,
        turn.custom,
        namespaced=turn.namespaced,
        summary=turn.summary,
    )
    for event in reply_events(reply):
        builder.event(event)
    builder.finish(Finish(reply.finish_reason, reply.usage, None, reply.stop_sequence), extra)
    return builder.response


@settings(max_examples=500, deadline=None)
@given(requests(), REPLIES, EXTRA)
def test_the_whole_response_is_the_builders(
    body: dict[str, Any], reply: Reply, extra: dict[str, Any]
) -> None:
    turn = read_responses(body, SETTINGS, ResponseStore(4))
    with numbered_ids():
        general = renumbered(builders_response(turn, reply, dict(extra)))
    with numbered_ids():
        front = ResponsesFront(SETTINGS, ResponseStore(4))
        assert renumbered(front.answer(turn, reply, dict(extra))) == general


@settings(max_examples=300, deadline=None)
@given(requests(), REPLIES, st.booleans())
def test_the_kept_conversation_is_the_outputs_read_back(
    body: dict[str, Any], reply: Reply, store: bool
) -> None:
    """The front keeps the conversation before the response and the response,
    and a follow-up naming it reads the same history as one naming the
    builder's response."""
    body = {**body, "store": store}
    kept, general = ResponseStore(4), ResponseStore(4)
    turn = read_responses(body, SETTINGS, kept)
    response = ResponsesFront(SETTINGS, kept).answer(turn, reply, {})
    general_turn = read_responses(body, SETTINGS, general)
    general_response = builders_response(general_turn, reply, {})
    ResponsesFront(SETTINGS, general).keep(general_turn, general_response)
    if not store:
        assert kept.get(response["id"]) is None
        return
    assert kept.get(response["id"]) == (turn.history, response["output"])
    follow = {"model": "m", "input": "and then?", "store": False}
    after = read_responses({**follow, "previous_response_id": response["id"]}, SETTINGS, kept)
    before = read_responses(
        {**follow, "previous_response_id": general_response["id"]}, SETTINGS, general
    )
    assert after.round.body["messages"] == before.round.body["messages"]


ECHOED = ("instructions", "max_output_tokens", "previous_response_id", "temperature", "top_p")
# The request's fields the response echoes, as a request may send them.
ECHO_FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "instructions": st.none() | TEXT,
        "max_output_tokens": st.none() | st.integers(1, 9),
        "temperature": st.none() | st.floats(0, 2) | st.integers(0, 2),
        "top_p": st.none() | st.floats(0, 1),
        "metadata": st.none() | st.just({}) | st.just({"k": "v"}),
        "parallel_tool_calls": st.none() | st.booleans(),
        "reasoning": st.none()
        | st.just({})
        | st.just({"effort": "low"})
        | st.just({"summary": "auto"}),
        "text": st.none()
        | st.just({})
        | st.just({"format": {"type": "text"}})
        | st.just({"format": {"type": "json_object"}}),
        "tool_choice": st.none() | st.sampled_from(["auto", "none"]),
        "store": st.none() | st.booleans(),
    },
)


def echoed(body: dict[str, Any]) -> dict[str, Any]:
    """The response's fields that repeat the request, in the API's order: as sent
    (absent: null), or the API's default."""
    asked = body.get("reasoning") or {}
    return {
        **{key: body.get(key) for key in ECHOED},
        "metadata": body.get("metadata") or {},
        "parallel_tool_calls": body.get("parallel_tool_calls") is not False,
        "reasoning": {"effort": asked.get("effort"), "summary": asked.get("summary")},
        "text": body.get("text") or {"format": {"type": "text"}},
        "tool_choice": body.get("tool_choice") or "auto",
        "tools": body.get("tools") or [],
        "store": body.get("store") is not False,
    }


@settings(max_examples=200, deadline=None)
@given(ECHO_FIELDS)
def test_the_echo_repeats_the_request(fields: dict[str, Any]) -> None:
    """As written in the response: the echo holds what differs from the
    response's defaults, which are kept as their JSON."""
    kept = ResponseStore(4)
    first = read_responses({"model": "m", "input": "x"}, SETTINGS, kept)
    kept.put({"id": "resp_0", "output": []}, [])
    body = {"model": "m", "input": "x", "previous_response_id": "resp_0", **fields}
    assert list(written_echo(read_responses(body, SETTINGS, kept)).items()) == list(
        echoed(body).items()
    )
    assert written_echo(first)["previous_response_id"] is None


def written_echo(turn: ResponsesTurn) -> dict[str, Any]:
    """The response's fields that repeat the request, as its JSON has them."""
    response = orjson.loads(
        orjson.dumps(builders_response(turn, Reply("", None, [], "stop", None, "native"), {}))
    )
    return {key: response[key] for key in echoed({})}


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


@settings(max_examples=300, deadline=None)
@given(requests(), ECHO_FIELDS, REPLIES, EXTRA)
def test_the_response_object_is_the_apis(
    body: dict[str, Any], fields: dict[str, Any], reply: Reply, extra: dict[str, Any]
) -> None:
    """The answer's keys in the API's order, with its constants, the request's
    echo and the usage's details written out whole (the answer copies them from
    prebuilt pieces); its items are held to the builder's above."""
    body = {**body, **fields}
    turn = read_responses(body, SETTINGS, ResponseStore(4))
    answer = ResponsesFront(SETTINGS, ResponseStore(4)).answer(turn, reply, dict(extra))
    usage = reply.usage or {}
    given_in, given_out = _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens"))
    expected = {
        "id": answer["id"],
        "object": "response",
        "created_at": answer["created_at"],
        "status": answer["status"],
        "background": False,
        "error": None,
        "incomplete_details": answer["incomplete_details"],
        **echoed(body),
        "model": "m",
        "output": answer["output"],
        "truncation": "disabled",
        "usage": {
            "input_tokens": given_in,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": given_out,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": given_in + given_out,
        },
        "user": None,
        **extra,
    }
    assert orjson.dumps(answer) == orjson.dumps(expected)
