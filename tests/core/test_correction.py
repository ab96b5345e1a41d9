"""Self-repair bookkeeping: which calls stand, what the model is told, held streams."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st
from streamcheck import pieces  # type: ignore[import-not-found]

from tests.strategies import json_trees
from toolrelay.correction import (
    CORRECTION_MARKER,
    CallHold,
    CheckedCalls,
    Problem,
    check_calls,
    correction_messages,
    new_calls,
    settle,
    warning,
)
from toolrelay.events import (
    CallRejected,
    ContentDelta,
    Event,
    RejectedCall,
    ToolCall,
    ToolCallArgumentsDelta,
    ToolCallEnd,
    ToolCallStart,
)
from toolrelay.names import ToolSet

TOOLS = ToolSet(
    [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                    "required": ["city"],
                },
            },
        },
        {"type": "function", "function": {"name": "get_time"}},
    ]
)


def call(arguments: dict[str, Any], name: str = "get_weather", call_id: str = "c1") -> ToolCall:
    return ToolCall(call_id, name, arguments, orjson.dumps(arguments).decode())


def test_calls_are_sorted_into_accepted_and_problems() -> None:
    checked = check_calls(
        [call({"city": "Oslo", "days": "2"}), call({}, call_id="c2"), call({}, "get_time", "c3")],
        [
            RejectedCall(
                "get_wether", '{"name": "get_wether"}', "there is no tool named 'get_wether'"
            )
        ],
        TOOLS,
    )
    assert [c.arguments for c in checked.accepted] == [{"city": "Oslo", "days": 2}, {}]
    assert checked.coerced == 1
    assert [str(p) for p in checked.problems] == [
        "get_weather: 'city' is required",
        "get_wether: there is no tool named 'get_wether'",
    ]
    assert [c.id for c in checked.passed] == ["c1", "c2", "c3"]


def test_the_re_ask_shows_the_attempt_and_names_each_problem() -> None:
    problem = Problem("get_weather", '{"name":"get_weather","arguments":{}}', "'city' is required")
    question = [{"role": "user", "content": "weather in Oslo?"}]
    messages = correction_messages(
        question, "Let me look.", [problem.written], [problem], [call({}, "get_time")]
    )
    assert messages[0] == question[0] and messages[0] is not question[0]
    assert messages[1] == {
        "role": "assistant",
        "content": 'Let me look.\n{"name":"get_weather","arguments":{}}',
    }
    directive = messages[2]["content"]
    assert messages[2]["role"] == "user" and directive.startswith(CORRECTION_MARKER)
    assert "- get_weather: 'city' is required" in directive
    assert "(get_time) were accepted: do not repeat them" in directive


def test_a_re_ask_adds_only_new_calls_and_drops_what_is_still_wrong() -> None:
    stood = call({"city": "Oslo"})
    first = CheckedCalls((stood,), 0, (Problem("x", "x", "wrong"),))
    fixed = call({"city": "Rome"}, call_id="c1")  # a server that reuses ids
    again = CheckedCalls((stood, fixed), 0, ())
    settled = settle(first, again)
    assert [c.arguments for c in settled.added] == [{"city": "Rome"}]
    assert settled.added[0].id != "c1"
    assert settled.dropped == ()
    # Nothing corrected: the first attempt's problems are what was dropped.
    assert settle(first, CheckedCalls((stood,), 0, ())).dropped == first.problems
    still = Problem("x", "x", "still wrong")
    assert settle(first, CheckedCalls((), 0, (still,))).dropped == (still,)
    assert new_calls([stood, stood], []) == [stood]


def test_warnings_say_what_was_dropped_and_what_was_passed_on() -> None:
    invalid = Problem("get_weather", "{}", "'city' is required", call({}))
    rejected = Problem(None, "{}", "the call names no tool")
    assert warning([]) is None
    assert warning([invalid, rejected]) == (
        "dropped 2 invalid tool calls: get_weather: 'city' is required; "
        "a call without a tool name: the call names no tool"
    )
    assert warning([invalid, rejected], passed=True) == (
        "dropped 1 invalid tool call: a call without a tool name: the call names no tool"
        " | passed on 1 invalid tool call: get_weather: 'city' is required"
    )


def _streamed(index: int, the_call: ToolCall, pieces: list[str]) -> list[Event]:
    return [
        ToolCallStart(index, the_call.id, the_call.name),
        *(ToolCallArgumentsDelta(index, piece) for piece in pieces),
        ToolCallEnd(index, the_call),
    ]


def _feed(hold: CallHold, events: list[Event]) -> list[Event]:
    out: list[Event] = []
    for event in events:
        out.extend(hold.feed(event))
    return out


def test_a_held_call_goes_out_whole_renumbered_and_content_passes_at_once() -> None:
    hold = CallHold(TOOLS)
    bad = call({}, call_id="bad")
    good = call({"city": "Oslo"}, call_id="good")
    assert hold.feed(ContentDelta("Hi")) == [ContentDelta("Hi")]
    assert _feed(hold, _streamed(0, bad, ["{", "}"])) == []
    out = _feed(
        hold,
        [
            *_streamed(1, good, ['{"city":', '"Oslo"}']),
            CallRejected(RejectedCall(None, "?", "no name")),
        ],
    )
    assert out == _streamed(0, good, ['{"city":"Oslo"}'])
    assert [str(p) for p in hold.problems] == [
        "get_weather: 'city' is required",
        "a call without a tool name: no name",
    ]
    assert hold.content == ["Hi"] and hold.released == 1


def test_warn_releases_an_invalid_call_as_it_came() -> None:
    hold = CallHold(TOOLS, pass_invalid=True)
    bad = call({}, call_id="bad")
    assert _feed(hold, _streamed(3, bad, ["{", "}"])) == _streamed(0, bad, ["{}"])
    assert len(hold.problems) == 1 and hold.accepted == []


@settings(max_examples=200, deadline=None)
@given(
    days=st.integers(min_value=-(10**6), max_value=10**6),
    city=st.text(max_size=12),
    cuts=st.lists(st.integers(min_value=1, max_value=40), max_size=6),
)
def test_a_coerced_call_goes_out_in_one_delta(days: int, city: str, cuts: list[int]) -> None:
    sent = {"city": city, "days": str(days)}
    text = orjson.dumps(sent).decode()
    came = pieces(text, cuts)
    out = _feed(CallHold(TOOLS), _streamed(0, call(sent), came))
    deltas = [e.text for e in out if isinstance(e, ToolCallArgumentsDelta)]
    end = out[-1]
    assert isinstance(end, ToolCallEnd)
    assert end.call.arguments == {"city": city, "days": days}
    assert deltas == [end.call.arguments_json]
    assert orjson.loads(end.call.arguments_json) == {"city": city, "days": days}


class _CheckedAnew(CallHold):
    """Every call checked in full and its events made anew: the general path."""

    as_sent = False


_ARGUMENTS = st.sampled_from(
    [{"city": "Oslo"}, {"city": "Oslo", "days": 2}, {"city": "Oslo", "days": "2"}, {}, {"x": 1}]
)


@st.composite
def _held_events(draw: st.DrawFn) -> list[Event]:
    """Calls as a stream's layers hand them on: numbered in order or not, with or
    without their start or deltas, valid, coercible or not, cut short, between content."""
    events: list[Event] = []
    for number in range(draw(st.integers(0, 4))):
        index = draw(st.sampled_from([number, number, number + 1, 0]))
        arguments = draw(_ARGUMENTS)
        name = draw(st.sampled_from(["get_weather", "get_weather", "get_time"]))
        the_call = call(arguments, name, draw(st.sampled_from([f"c{number}", "c0"])))
        start_id = draw(st.sampled_from([the_call.id, the_call.id, "other"]))
        if draw(st.integers(0, 5)):
            events.append(ToolCallStart(index, start_id, the_call.name))
        text = the_call.arguments_json
        if draw(st.integers(0, 4)):
            events += [ToolCallArgumentsDelta(index, p) for p in pieces(text, draw(_CUTS))]
        if draw(st.integers(0, 5)):
            events.append(ToolCallEnd(index, the_call))
        else:
            events.append(CallRejected(RejectedCall(name, text, "cut"), index))
        if draw(st.booleans()):
            events.append(ContentDelta(draw(st.sampled_from(["", " ", "Hi"]))))
    return events


_CUTS = st.lists(st.integers(min_value=0, max_value=30), max_size=4)


@settings(max_examples=400, deadline=None)
@given(events=_held_events(), pass_invalid=st.booleans())
def test_a_call_valid_as_sent_goes_out_as_the_general_path_releases_it(
    events: list[Event], pass_invalid: bool
) -> None:
    fast = CallHold(TOOLS, pass_invalid=pass_invalid)
    general = _CheckedAnew(TOOLS, pass_invalid=pass_invalid)
    assert [fast.feed(event) for event in events] == [general.feed(event) for event in events]
    for part in ("accepted", "coerced", "problems", "released", "content"):
        assert getattr(fast, part) == getattr(general, part)


# Text heavy in what JSON escapes, for keys and values.
_TEXT = st.text(alphabet=st.sampled_from(list('ab é"\\\u2028{}:,')), max_size=8)
# get_time's arguments (it declares no parameters: any object stands) ...
_ANY_OBJECT = json_trees(
    st.one_of(_TEXT, st.integers(-(2**63), 2**63 - 1), st.booleans(), st.none()), _TEXT, leaves=6
).map(lambda tree: tree if isinstance(tree, dict) else {"value": tree})
# ... and get_weather's: valid, coercible ("days" a numeral) or invalid.
_WEATHER = st.one_of(
    st.builds(lambda city: {"city": city}, _TEXT),
    st.builds(lambda city, days: {"city": city, "days": str(days)}, _TEXT, st.integers(-99, 99)),
    st.sampled_from([{}, {"days": 2}, {"city": 3}]),
)


@st.composite
def _calls_as_they_came(draw: st.DrawFn) -> tuple[list[Event], list[ToolCall]]:
    """Calls as a stream's layers hand them on (numbered as they came, each its start,
    its fragments cut anywhere and its end, or cut short), content between; and the
    calls that ended, in order."""
    events: list[Event] = []
    ended: list[ToolCall] = []
    for index in range(draw(st.integers(0, 3))):
        if draw(st.booleans()):
            events.append(ContentDelta(draw(_TEXT)))
        name = draw(st.sampled_from(["get_time", "get_weather"]))
        arguments = draw(_ANY_OBJECT if name == "get_time" else _WEATHER)
        the_call = call(arguments, name, f"call_{index}")
        text = the_call.arguments_json
        events.append(ToolCallStart(index, the_call.id, name))
        events += [ToolCallArgumentsDelta(index, p) for p in pieces(text, draw(_CUTS))]
        if draw(st.integers(0, 5)):
            events.append(ToolCallEnd(index, the_call))
            ended.append(the_call)
        else:
            events.append(CallRejected(RejectedCall(name, text, "cut short"), index))
    return events, ended


@settings(max_examples=400, deadline=None)
@given(came=_calls_as_they_came(), pass_invalid=st.booleans())
def test_each_call_goes_out_checked_in_one_delta_of_its_whole_arguments(
    came: tuple[list[Event], list[ToolCall]], pass_invalid: bool
) -> None:
    """Call for call, what the checks make of the calls that came, numbered 0, 1, ...
    as they go out, each in one delta: its ``arguments_json``, which for a call that
    stands as it came is the concatenation of its fragments."""
    events, ended = came
    out = _feed(CallHold(TOOLS, pass_invalid=pass_invalid), events)
    expected: list[ToolCall] = []
    for the_call in ended:
        checked = check_calls([the_call], (), TOOLS)
        if checked.accepted:
            expected.append(checked.accepted[0])
        elif pass_invalid:
            expected.append(the_call)
    went: list[ToolCall] = []
    for position, event in enumerate(out):
        if isinstance(event, ToolCallStart):
            number = len(went)
            end = out[position + 2]
            assert isinstance(end, ToolCallEnd)
            assert out[position : position + 3] == _streamed(
                number, end.call, [end.call.arguments_json]
            )
            went.append(end.call)
    assert went == expected
    # Content passes as it came; nothing else goes out.
    assert len(out) == 3 * len(went) + sum(isinstance(e, ContentDelta) for e in events)
    for the_call in went:
        if the_call in ended:  # as it came: its one delta is its fragments' concatenation
            fragments = [
                e.text
                for e in events
                if isinstance(e, ToolCallArgumentsDelta) and f"call_{e.index}" == the_call.id
            ]
            assert "".join(fragments) == the_call.arguments_json
