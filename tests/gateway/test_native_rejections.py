"""Native calls that cannot be used are reported, not lost: streamed or whole,
an unknown or ambiguous name, arguments that are not a JSON object."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolrelay.events import CallRejected, Event, RejectedCall, ToolCall, ToolCallEnd
from toolrelay.io.backends.native import NativeStream, message_calls
from toolrelay.names import ToolSet

TOOLS = ToolSet(
    [
        {"type": "function", "function": {"name": name}}
        for name in ("get_weather", "weather__forecast", "almanac__forecast")
    ]
)

# name, arguments as upstream sends them -> the call, or the start of the reason
CASES: list[tuple[str | None, Any, dict[str, Any] | str]] = [
    ("get_weather", '{"city": "Oslo"}', {"city": "Oslo"}),
    ("get_weather", "", {}),
    ("get_weather", '"{\\"city\\": \\"Oslo\\"}"', {"city": "Oslo"}),  # double-encoded
    ("get_weather", {"city": "Oslo"}, {"city": "Oslo"}),
    ("get_wether", '{"city": "Oslo"}', "there is no tool named 'get_wether'"),
    ("forecast", "{}", "the tool name 'forecast' is ambiguous"),
    (None, '{"city": "Oslo"}', "the call names no tool"),
    ("get_weather", '"Oslo"', "the arguments are not a JSON object"),
    ("get_weather", "[1, 2]", "the arguments are not a JSON object"),
]


def _outcome(calls: list[ToolCall], rejected: list[RejectedCall]) -> dict[str, Any] | str:
    if calls:
        assert not rejected
        return calls[0].arguments
    [one] = rejected
    return one.reason


@pytest.mark.parametrize(("name", "arguments", "expected"), CASES)
def test_whole_messages(name: str | None, arguments: Any, expected: Any) -> None:
    function: dict[str, Any] = {"arguments": arguments} | ({"name": name} if name else {})
    calls, rejected = message_calls({"tool_calls": [{"id": "c1", "function": function}]}, TOOLS)
    outcome = _outcome(calls, rejected)
    if isinstance(expected, str):
        assert isinstance(outcome, str) and outcome.startswith(expected)
        # The model is shown its attempt as it was sent.
        assert rejected[0].name == name
        assert orjson.loads(rejected[0].raw) == {"name": name, "arguments": arguments}
    else:
        assert outcome == expected


def _stream(name: str | None, arguments: Any, cuts: list[int]) -> list[Event]:
    native = NativeStream(TOOLS)
    first: dict[str, Any] = {"index": 0, "id": "c1", "function": {"arguments": ""}}
    if name:
        first["function"]["name"] = name
    events = native.feed([first])
    if isinstance(arguments, dict):
        events += native.feed([{"index": 0, "function": {"arguments": arguments}}])
    else:
        start = 0
        for cut in [*sorted(c for c in set(cuts) if 0 < c < len(arguments)), len(arguments)]:
            piece = arguments[start:cut]
            start = cut
            events += native.feed([{"index": 0, "function": {"arguments": piece}}])
    return events + native.close()


@settings(max_examples=60, deadline=None)
@given(case=st.sampled_from(CASES), cuts=st.lists(st.integers(0, 40), max_size=5))
def test_streamed_calls_end_as_the_whole_message_would(
    case: tuple[str | None, Any, Any], cuts: list[int]
) -> None:
    name, arguments, _ = case
    events = _stream(name, arguments, cuts)
    ended = [e.call for e in events if isinstance(e, ToolCallEnd)]
    rejected = [e.call for e in events if isinstance(e, CallRejected)]
    function: dict[str, Any] = {"arguments": arguments} | ({"name": name} if name else {})
    whole = message_calls({"tool_calls": [{"id": "c1", "function": function}]}, TOOLS)
    assert _outcome(ended, rejected) == _outcome(*whole)
    for call in ended:
        assert orjson.loads(call.arguments_json) == call.arguments
