"""The Responses front reads its typed optional fields (``max_output_tokens``,
``stream``, ``store``, ``instructions``, ``previous_response_id``, ...) only when
the request sends one of them (``_TYPED``): a usual request sends none, and each
reads as absent without being looked at. Held here to the reader that looks at
every one, for generated requests, valid and not (strings and item lists of
every kind, instructions, previous_response_id chains, a wrong value now and
then): the same turn, or the same error (its text, its field, its status)."""

from __future__ import annotations

from typing import Any
from unittest.mock import patch

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from toolrelay.io.settings import Settings
from toolrelay.server.errors import APIError
from toolrelay.server.responses import request
from toolrelay.server.responses.request import read_responses
from toolrelay.server.responses.store import ResponseStore
from toolrelay.server.responses.wire import _ECHOED

SETTINGS = Settings()
TEXT = st.text(alphabet=st.sampled_from(list(' \n"é{ab')), max_size=5)
# What a field may wrongly hold instead of what it should.
JUNK = st.sampled_from([None, 1, True, 2.5, "x", [], {}, ["x"], {"text": "x"}])


def or_wrong(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``valid``, and now and then (one in twelve) something wrong in its place."""
    # The last choice, not the first, which hypothesis draws more often.
    return st.sampled_from(range(12)).flatmap(lambda n: JUNK if n == 11 else valid)


PARTS = st.lists(
    st.fixed_dictionaries(
        {"type": st.sampled_from(["input_text", "output_text", "text"]), "text": or_wrong(TEXT)}
    )
    | st.just({"type": "refusal", "refusal": "no"})
    | st.just({"type": "input_image", "image_url": "http://x/a.png"})
    | st.just({"type": "input_file"}),
    max_size=3,
)
MESSAGE = st.fixed_dictionaries(
    {"role": or_wrong(st.sampled_from(["user", "assistant", "system", "developer"]))},
    optional={"type": st.just("message"), "content": or_wrong(TEXT | PARTS)},
)
CALL = st.fixed_dictionaries(
    {
        "type": st.just("function_call"),
        "call_id": or_wrong(st.sampled_from(["c0", "c1"])),
        "name": or_wrong(st.sampled_from(["f", "g"])),
    },
    optional={"arguments": or_wrong(st.just('{"a": 1}')), "namespace": st.just("mcp")},
)
OUTPUT = st.fixed_dictionaries(
    {
        "type": st.sampled_from(["function_call_output", "custom_tool_call_output"]),
        "call_id": or_wrong(st.just("c0")),
        "output": or_wrong(TEXT | st.lists(st.just({"type": "input_text", "text": "r"}))),
    }
)
CUSTOM_CALL = st.fixed_dictionaries(
    {
        "type": st.just("custom_tool_call"),
        "call_id": st.just("c2"),
        "name": st.just("h"),
        "input": or_wrong(TEXT),
    }
)
OTHER_ITEMS = st.sampled_from(
    [
        {"type": "reasoning", "summary": []},
        {"type": "web_search_call", "id": "w"},
        {"type": "compaction", "encrypted_content": "e"},
        {"type": "additional_tools", "tools": [{"type": "function", "name": "extra"}]},
        {"type": "telepathy_call"},
        "not an item",
    ]
)
INPUT = or_wrong(TEXT | st.lists(MESSAGE | CALL | OUTPUT | CUSTOM_CALL | OTHER_ITEMS, max_size=5))
TOOLS = st.lists(
    st.sampled_from(
        [
            {"type": "function", "name": "f", "parameters": {"type": "object"}},
            {"type": "custom", "name": "h"},
            {"type": "namespace", "name": "mcp", "tools": [{"type": "function", "name": "g"}]},
            {"type": "web_search"},
        ]
    ),
    max_size=3,
)
# Tools this front refuses and tools the round refuses (a name twice) among the usual.
ODD_TOOLS = st.lists(
    st.sampled_from(
        [
            {"type": "function", "name": "f", "parameters": {"type": "object"}},
            {"type": "function", "name": "f", "description": "again", "strict": True},
            {"type": "function", "name": ""},
            {"type": "function", "name": "g", "parameters": []},
            {"type": "function", "name": "g", "description": 5},
            {"type": "custom", "name": "h", "format": {"type": "text"}},
            {"type": "namespace", "name": "", "tools": [{"type": "function", "name": "g"}]},
            {"type": "web_search"},
            "not a tool",
        ]
    ),
    max_size=4,
)
# Every field the reader reads, each with what a request may send in it.
FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "max_output_tokens": or_wrong(st.integers(1, 99)),
    "temperature": or_wrong(st.floats(0, 2) | st.integers(0, 2)),
    "top_p": or_wrong(st.floats(0, 1)),
    "stream": or_wrong(st.booleans()),
    "store": or_wrong(st.booleans()),
    "instructions": or_wrong(TEXT),
    "previous_response_id": or_wrong(st.sampled_from(["resp_a", "resp_b", "resp_gone"])),
    "parallel_tool_calls": or_wrong(st.booleans()),
    "metadata": or_wrong(st.just({}) | st.just({"k": "v"})),
    "reasoning": or_wrong(st.just({}) | st.just({"summary": "auto"}) | st.just({"effort": "low"})),
    "tools": or_wrong(TOOLS),
    "tool_choice": or_wrong(st.sampled_from(["auto", "none", "required"])),
    "text": or_wrong(st.just({}) | st.just({"format": {"type": "json_object"}})),
    "toolrelay_validate": or_wrong(st.sampled_from(["off", "strict"])),
    "background": st.booleans(),
}
# A few fields at a time, so that a request sending one typed field alone is common.
SOME_FIELDS = st.lists(
    st.one_of([st.tuples(st.just(key), value) for key, value in FIELDS.items()]), max_size=4
).map(dict)


@st.composite
def bodies(draw: st.DrawFn) -> dict[str, Any]:
    body: dict[str, Any] = {"model": draw(or_wrong(st.just("m")))}
    if draw(st.integers(0, 15)) != 15:
        body["input"] = draw(INPUT)
    return {**body, **draw(SOME_FIELDS)}


def chained_store() -> ResponseStore:
    """A store holding ``resp_a`` and ``resp_b``, the second continuing the first."""
    store = ResponseStore(8)
    first = read_responses({"model": "m", "input": "one"}, SETTINGS, store)
    store.put({"id": "resp_a", "output": [_said("a")]}, first.history)
    body = {"model": "m", "input": "two", "previous_response_id": "resp_a"}
    second = read_responses(body, SETTINGS, store)
    store.put({"id": "resp_b", "output": [_said("b")]}, second.history)
    return store


def _said(text: str) -> dict[str, Any]:
    """A response's message item of ``text``."""
    part = {"type": "output_text", "text": text, "annotations": []}
    return {"id": "msg_" + text, "type": "message", "role": "assistant", "content": [part]}


def outcome(body: dict[str, Any], store: ResponseStore) -> Any:
    """What reading ``body`` gives: the turn as plain values, or the error."""
    try:
        turn = read_responses(body, SETTINGS, store, None, None)
    except APIError as error:
        return ("error", error.status, error.message, error.param, error.code)
    return (
        turn.round.body,
        turn.stream,
        turn.stuck_mode,
        turn.warning,
        orjson.dumps(turn.echo),
        turn.reasoning,
        turn.summary,
        turn.store,
        turn.history,
        turn.custom,
        turn.namespaced,
    )


@settings(max_examples=600, deadline=None)
@given(bodies(), st.sampled_from([0, 8]))
def test_a_request_reads_as_with_every_field_looked_at(body: dict[str, Any], capacity: int) -> None:
    store = chained_store() if capacity else ResponseStore(0)
    read = outcome(body, store)
    # The general reader: every field the request sends is taken for a typed one, so
    # each is looked at (a global, which a compiled module reads at each use).
    with patch.object(request, "_TYPED", frozenset(body)):
        assert read == outcome(body, store)


def fresh_tools(key: bytes) -> Any:
    """The reference for ``_kept_tools``: the top-level tool list read afresh, no
    read kept (a decorated function, which a compiled module calls by its name)."""
    toolset = request._ToolSet()
    toolset.read(orjson.loads(key), "tools")
    return toolset


def tools_outcome(body: dict[str, Any]) -> Any:
    """``outcome`` and the round's reading of its tools (the declared specs, the plan)."""
    try:
        plan = read_responses(body, SETTINGS, ResponseStore(0), None, None).round.plan
    except APIError:
        plan = None
    return outcome(body, ResponseStore(0)), plan


@settings(max_examples=400, deadline=None)
@given(
    or_wrong(ODD_TOOLS | TOOLS),
    or_wrong(TEXT | st.lists(MESSAGE | OTHER_ITEMS, max_size=3)),
    st.sampled_from([None, "auto", "required", {"type": "function", "name": "f"}]),
)
def test_a_kept_tool_read_reads_as_a_fresh_one(tools: Any, items: Any, choice: Any) -> None:
    """A top-level tool list's read is kept by its JSON: a request reads (twice:
    the second from what the first kept) as with its tools read afresh, the
    response's echo written the same."""
    body: dict[str, Any] = {"model": "m", "input": items, "tools": tools}
    if choice is not None:
        body["tool_choice"] = choice
    kept = [tools_outcome(body), tools_outcome(body)]
    with patch.object(request, "_kept_tools", fresh_tools):
        assert kept == [tools_outcome(body)] * 2


def echo_as_written(echo: dict[str, Any]) -> bytes:
    """The reference for a turn's ``echoed``: the echoed fields, ``echo``'s or
    their defaults, in the response's order, as orjson writes them in it."""
    return orjson.dumps({key: echo.get(key, value) for key, value in _ECHOED.items()})[1:-1]


@settings(max_examples=400, deadline=None)
@given(bodies(), or_wrong(TOOLS), st.booleans(), st.sampled_from([0, 8]))
def test_a_read_writes_the_echo_ahead_for_a_kept_tool_list_alone(
    body: dict[str, Any], tools: Any, with_tools: bool, capacity: int
) -> None:
    """The echo's JSON a read gives its turn (for the response's start) is the
    echo as the response writes it, given exactly when the echo is a kept tool
    list's (its JSON) alone."""
    if with_tools:
        body["tools"] = tools
    try:
        turn = read_responses(body, SETTINGS, chained_store() if capacity else ResponseStore(0))
    except APIError:
        return
    kept_alone = list(turn.echo) == ["tools"] and type(turn.echo["tools"]) is orjson.Fragment
    assert turn.echoed == (echo_as_written(turn.echo) if kept_alone else b"")


def test_the_usual_request_with_tools_has_its_echo_written_ahead() -> None:
    tools = [{"type": "function", "name": "f", "parameters": {"type": "object"}}]
    body = {"model": "m", "input": "x", "stream": True, "tools": tools}
    turn = read_responses(body, SETTINGS, ResponseStore(8))
    assert turn.echoed == echo_as_written({"tools": tools})
