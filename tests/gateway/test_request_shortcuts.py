"""A request's reading and its answered stage, their shortcuts held to the paths
they skip (issue 29, thirteenth round).

- ``turn_headers``: the stuck-mode header and the client's credentials in one
  pass over the headers, against ``header`` and the two-lookup ``client_auth``
  it replaces (kept here as the reference).
- ``own_options``: a body holding none of toolrelay's own fields is not asked
  for them, against its own general path, which asks for each.
- ``_Answered.batch``: the notes appended only when there are some, and the
  record's call only for a recorded round, against ``_recorded(out + held)``.
- ``_Answered.last``: the stream's end made without ``_stream_end``'s coroutine
  when nothing is to be asked again, against that coroutine awaited every time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from toolrelay.correction import NOTHING_USABLE
from toolrelay.events import ContentDelta, ToolCall, ToolCallEnd, ToolCallStart
from toolrelay.io.backends import BackendError
from toolrelay.io.counters import Counters
from toolrelay.io.round import answered
from toolrelay.io.round.answered import _Answered
from toolrelay.io.round.request import Finish, Reply, RoundRequest, StreamItem
from toolrelay.io.settings import Settings
from toolrelay.server.asgi import client_auth, header, turn_headers
from toolrelay.server.chat import request as chat_request
from toolrelay.server.errors import APIError, invalid
from toolrelay.server.reading import (
    own_options,
)

# --- the headers -------------------------------------------------------------

_NAMES = st.sampled_from(
    [b"x-toolrelay-stuck-mode", b"authorization", b"x-api-key", b"host", b"x-api-keys", b"accept"]
)
_VALUES = st.binary(max_size=6) | st.sampled_from(
    [b"", b"warn", b"Bearer k", "é".encode("latin-1")]
)
_HEADERS = st.lists(st.tuples(_NAMES, _VALUES), max_size=8)


def _client_auth_by_lookups(headers: list[tuple[bytes, bytes]]) -> str | None:
    """``client_auth`` as it was: two lookups through ``header``."""
    auth = header(headers, b"authorization")
    if auth is None:
        key = header(headers, b"x-api-key")
        if key:
            auth = "Bearer " + key
    return auth


@settings(max_examples=400, deadline=None)
@given(headers=_HEADERS, as_lists=st.booleans())
def test_turn_headers_are_the_lookups_one_by_one(
    headers: list[tuple[bytes, bytes]], as_lists: bool
) -> None:
    """As tuples or as two-item lists (the ASGI spec allows either: the compiled
    reading must take both), the headers read in one pass are those looked up."""
    pairs: list[Any] = [list(pair) if as_lists else pair for pair in headers]
    general = (header(pairs, b"x-toolrelay-stuck-mode"), _client_auth_by_lookups(pairs))
    assert turn_headers(pairs) == general
    assert client_auth(pairs) == general[1]


# --- toolrelay's own options ---------------------------------------------------


class _AskedForEachField(dict[str, Any]):
    """A body that seems to hold one of toolrelay's own fields to ``own_options``'s
    test for them (its keys iterate with ``toolrelay_profile`` among them), while
    its values are the body's: ``own_options`` takes its general path, asking the
    body for each field, and must come to what its shortcut comes to."""

    def __iter__(self) -> Iterator[str]:
        yield from super().__iter__()
        yield "toolrelay_profile"


_OWN_VALUES = st.none() | st.sampled_from(["", 1, True, ["warn"]])
_BODIES = st.fixed_dictionaries(
    {"messages": st.just([{"role": "user", "content": "hi"}])},
    optional={
        "model": st.just("bench"),
        "stream": st.booleans(),
        "toolrelay_profile": _OWN_VALUES
        | st.sampled_from(["graded", "vendor", "antiloop", "nonesuch"]),
        "toolrelay_stuck_mode": _OWN_VALUES | st.sampled_from(["off", "warn", "enforce", "loud"]),
        "toolrelay_validate": _OWN_VALUES | st.sampled_from(["repair", "warn", "off", "strict"]),
        "toolrelay_constrain": _OWN_VALUES | st.sampled_from(["auto", "off", "grammar", "no"]),
    },
)
_OVERRIDES = st.fixed_dictionaries(
    {},
    optional={
        "profile": st.sampled_from(["graded", "vendor"]),
        "validation": st.sampled_from(["repair", "warn", "off"]),
        "constrain": st.sampled_from(["auto", "off", "grammar"]),
        "format": st.sampled_from(["auto", "hermes"]),
    },
)


def _outcome(make: Any) -> Any:
    try:
        options = make()
    except APIError as exc:
        return ("error", exc.status, str(exc), exc.to_dict())
    return (options.stuck_mode, list(options.round_options.items()))


@settings(max_examples=400, deadline=None)
@given(
    body=_BODIES,
    override=st.none() | _OVERRIDES,
    global_profile=st.none() | st.sampled_from(["graded", "vendor"]),
    stuck_header=st.none() | st.sampled_from(["", "warn", "enforce", "loud"]),
)
def test_own_options_are_the_fields_asked_one_by_one(
    body: dict[str, Any],
    override: dict[str, Any] | None,
    global_profile: str | None,
    stuck_header: str | None,
) -> None:
    gateway_settings = Settings(
        model="bench",
        profile=global_profile,
        models={"bench": override} if override is not None else {},
    )
    fast = _outcome(lambda: own_options(dict(body), gateway_settings, "bench", stuck_header))
    general = _outcome(
        lambda: own_options(_AskedForEachField(body), gateway_settings, "bench", stuck_header)
    )
    assert fast == general


# --- the answered stage's batch -----------------------------------------------

_CALL = ToolCall("call_1", "get_weather", {"city": "Paris"}, '{"city":"Paris"}')
_ITEMS = st.sampled_from(
    [
        ToolCallStart(0, "call_1", "get_weather"),
        ToolCallEnd(0, _CALL),
        ContentDelta("Paris is sunny."),
        ContentDelta("   "),
        ContentDelta(""),
        ContentDelta("<tool_call>"),
        ContentDelta(NOTHING_USABLE),  # toolrelay's note: held to the batch's end
        ContentDelta(" " + NOTHING_USABLE + " (get_weather)"),
        ContentDelta("\n"),
        ContentDelta("ok"),
    ]
)


class _Record:
    """What a recorded round notes of its answer."""

    def __init__(self) -> None:
        self.notes: list[tuple[int, str | None]] = []

    def answer_out(self, calls: int, warning: str | None) -> None:
        self.notes.append((calls, warning))


_TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {}}}


class _Reasked(_Answered):
    """The stage with its re-ask answered by ``again`` (None: the re-ask fails)."""

    __slots__ = ("again", "asked")

    def __init__(self, req: RoundRequest, again: Reply | None) -> None:
        super().__init__(SimpleNamespace(name="b"), req, Counters())  # type: ignore[arg-type]
        self.again = again
        self.asked = 0

    async def _ask(self, again: RoundRequest) -> Reply:
        self.asked += 1
        if self.again is None:
            raise BackendError(502, "down", reason="down")
        return self.again


def _stage(
    recorded: bool, tools: bool = False, choice: str = "auto", again: Reply | None = None
) -> _Reasked:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    if tools:
        body |= {"tools": [_TOOL], "tool_choice": choice}
    stage = _Reasked(RoundRequest.from_body(body), again)
    stage.record = _Record() if recorded else None  # type: ignore[assignment]
    return stage


def _batch_as_it_was(stage: _Answered, batch: list[StreamItem]) -> list[StreamItem]:
    out, held = stage._watched(batch)
    return stage._recorded(out + held)


@settings(max_examples=400, deadline=None)
@given(
    batches=st.lists(st.lists(_ITEMS, max_size=6), min_size=1, max_size=4),
    recorded=st.booleans(),
    finished=st.booleans(),
)
def test_a_batch_is_the_general_paths(
    batches: list[list[StreamItem]], recorded: bool, finished: bool
) -> None:
    fast, general = _stage(recorded), _stage(recorded)
    for batch in batches:
        if finished:  # a Finish inside a batch (the last one's is the stage's ``last``)
            batch = [*batch, Finish("stop")]
        assert fast.batch(list(batch)) == _batch_as_it_was(general, list(batch))
        assert (fast.spoke, fast.calls) == (general.spoke, general.calls)
        if recorded:
            assert fast.record.notes == general.record.notes  # type: ignore[union-attr]


async def _last_as_it_was(stage: _Answered, batch: list[StreamItem]) -> list[StreamItem]:
    """The stage's last batch as it was: ``_stream_end`` awaited for every stream,
    its own first step the check that nothing is to be asked again."""
    finish = batch[-1]
    assert isinstance(finish, Finish)
    out, held = stage._watched(batch[:-1])
    if stage.spoke or not answered._empty_handed(stage.req, False, None):
        end: list[StreamItem] = [*held, finish]
    else:
        end = await answered._stream_end("b", stage.req, finish, held, stage._ask, stage.counters)
    return stage._recorded(out + end)


_AGAIN = st.sampled_from(
    [
        None,
        Reply("The weather is fine.", None, [], "stop", None, "native"),
        Reply(None, None, [_CALL], "tool_calls", None, "native"),
        Reply("", None, [], "stop", None, "native"),
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    batches=st.lists(st.lists(_ITEMS, max_size=6), max_size=3),
    last=st.lists(_ITEMS, max_size=6),
    finish=st.sampled_from(
        [Finish("stop"), Finish("length", None, "cut", None, "<tool_call>", "rescue")]
    ),
    recorded=st.booleans(),
    tools=st.booleans(),
    choice=st.sampled_from(["auto", "none", "required"]),
    again=_AGAIN,
)
def test_the_last_batch_is_the_general_paths(
    batches: list[list[StreamItem]],
    last: list[StreamItem],
    finish: Finish,
    recorded: bool,
    tools: bool,
    choice: str,
    again: Reply | None,
) -> None:
    """The last batch's end made without ``_stream_end``'s coroutine when nothing is
    to be asked again, against that coroutine awaited for every stream: the same
    items, the same re-asks, the same record."""
    fast = _stage(recorded, tools, choice, again)
    general = _stage(recorded, tools, choice, again)
    for batch in batches:
        assert fast.batch(list(batch)) == general.batch(list(batch))
    made = asyncio.run(fast.last([*last, finish]))
    assert made == asyncio.run(_last_as_it_was(general, [*last, finish]))
    assert (fast.spoke, fast.calls, fast.asked) == (general.spoke, general.calls, general.asked)
    if recorded:
        assert fast.record.notes == general.record.notes  # type: ignore[union-attr]


# --- a Chat Completions body's messages ----------------------------------------


def _check_messages_with_paths(value: Any) -> None:
    """``_check_messages`` as it was: each message's path written before its checks
    (and a role that is no string answered, where a list or an object crashed it)."""
    if not isinstance(value, list) or not value:
        raise invalid("'messages' is required and must be a non-empty array.", "messages")
    for i, message in enumerate(value):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise invalid(f"'{where}' must be an object.", where)
        role = message.get("role")
        if not isinstance(role, str) or role not in chat_request._ROLES:
            raise invalid(
                f"'{where}.role' must be one of {', '.join(sorted(chat_request._ROLES))}.",
                where + ".role",
            )
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            chat_request._content_parts(content, where + ".content")
        if "tool_calls" in message and message["tool_calls"] is not None:
            chat_request._tool_calls(message["tool_calls"], where + ".tool_calls")
        for key in ("name", "tool_call_id"):
            if message.get(key) is not None and not isinstance(message[key], str):
                raise invalid(f"'{where}.{key}' must be a string.", f"{where}.{key}")


_ODD = st.sampled_from([None, 1, True, [], {}, "x"])
_PARTS = st.lists(
    st.fixed_dictionaries(
        {}, optional={"type": st.sampled_from(["text", "image_url", 3]), "text": _ODD}
    ),
    max_size=2,
)
_CALLS = st.lists(
    st.fixed_dictionaries(
        {},
        optional={
            "id": _ODD,
            "function": st.fixed_dictionaries(
                {}, optional={"name": _ODD | st.just(""), "arguments": _ODD}
            )
            | _ODD,
        },
    )
    | _ODD,
    max_size=2,
)
_MESSAGE = st.fixed_dictionaries(
    {},
    optional={
        "role": st.sampled_from(["user", "assistant", "tool", "system", "robot"]) | _ODD,
        "content": _ODD | _PARTS,
        "tool_calls": _ODD | _CALLS,
        "name": _ODD,
        "tool_call_id": _ODD,
    },
)
_MESSAGES = st.lists(_MESSAGE | _ODD, max_size=4) | _ODD


def _error_of(check: Any, value: Any) -> Any:
    try:
        check(value)
    except APIError as exc:
        return (exc.status, str(exc), exc.to_dict())
    return None


@settings(max_examples=600, deadline=None)
@given(messages=_MESSAGES)
def test_messages_are_checked_as_with_their_paths(messages: Any) -> None:
    assert _error_of(chat_request._check_messages, messages) == _error_of(
        _check_messages_with_paths, messages
    )
