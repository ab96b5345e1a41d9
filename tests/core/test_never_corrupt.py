"""Issue 22's cases: a call is never corrupted, filled with {} or invented.

Each is parsed finished and streamed one character at a time.
"""

from __future__ import annotations

from typing import Any

import pytest
from streamcheck import check_stream  # type: ignore[import-not-found]

from toolrelay import CallRejected, ParseResult, StreamParser, ToolCallStart, parse_tool_calls
from toolrelay.repair import STRING_HOLD, repair_json

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
            "required": ["city"],
        },
    },
}
TOOLS = [WEATHER]


def _both(text: str, tools: Any = TOOLS) -> ParseResult:
    check_stream(text, list(range(1, len(text))), tools)
    return parse_tool_calls(text, tools)


def test_single_quoted_strings_end_at_their_own_quote() -> None:
    text = (
        "<tool_call>{'name': 'get_weather', 'arguments': {'city': 'Paris', 'unit': 'c'}}"
        "</tool_call>"
    )
    result = _both(text)
    assert [(c.name, c.arguments) for c in result.calls] == [
        ("get_weather", {"city": "Paris", "unit": "c"})
    ]
    assert result.content == ""


BODIES_NOT_READ = {
    "DeepSeek DSML invoke holding a JSON object": "<｜DSML｜function_calls>\n"
    '<｜DSML｜invoke name="get_weather">\n{"city": "Paris"}\n</｜DSML｜invoke>\n'
    "</｜DSML｜function_calls>",
    "MiniMax, one tag per parameter": '<minimax:tool_call>\n<invoke name="get_weather">\n'
    "<city>Paris</city>\n</invoke>\n</minimax:tool_call>",
    "<function name=…><param name=…>": '<tool_call>\n<function name="get_weather">\n'
    '<param name="city">Paris</param>\n</function>\n</tool_call>',
    "Qwen3-Coder, prose for a body": "<tool_call>\n<function=get_weather>\ncity is Paris\n"
    "</function>\n</tool_call>",
}


@pytest.mark.parametrize("text", BODIES_NOT_READ.values(), ids=BODIES_NOT_READ.keys())
@pytest.mark.parametrize("tools", [TOOLS, None], ids=["declared", "no tools"])
def test_arguments_that_cannot_be_read_are_rejected_not_made_empty(text: str, tools: Any) -> None:
    result = _both(text, tools)
    assert result.calls == []
    (rejected,) = result.rejected
    assert rejected.name == "get_weather" and "cannot be read" in rejected.reason
    assert result.content.strip() == ""


UNTERMINATED = {
    "Gemma 4": '<|tool_call>call:get_weather{city:<|"|>Paris}<tool_call|>',
    "Hermes, double quotes": '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris}'
    "</tool_call>",
    "Hermes, single quotes": "<tool_call>{'name': 'get_weather', 'arguments': {'city': 'Paris}"
    "</tool_call>",
    "Mistral": '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris}',
}


@pytest.mark.parametrize("text", UNTERMINATED.values(), ids=UNTERMINATED.keys())
def test_a_string_that_never_ends_makes_the_call_unreadable(text: str) -> None:
    result = _both(text)
    assert result.calls == []
    (rejected,) = result.rejected
    assert rejected.name == "get_weather"
    assert result.content == ""


def test_a_long_first_string_streams_and_is_rejected_when_cut() -> None:
    # Past STRING_HOLD characters the call has started; the output then ends inside
    # the string: its value would be cut short, so the started call ends rejected.
    text = '<tool_call>{"name": "get_weather", "arguments": {"city": "' + "a" * 300
    result = _both(text)
    assert result.calls == []
    (rejected,) = result.rejected
    assert rejected.name == "get_weather" and "never ends" in rejected.reason
    # Started, it is shown by its text up to its arguments (however it was streamed).
    assert rejected.raw == '<tool_call>{"name": "get_weather", "arguments": {'
    parser = StreamParser(TOOLS)
    events = parser.feed(text)
    assert any(isinstance(e, ToolCallStart) for e in events)
    (cut,) = [e for e in parser.close() if isinstance(e, CallRejected)]
    assert cut.index == 0 and cut.call == rejected


def test_a_kimi_id_without_a_function_name_names_no_tool() -> None:
    text = (
        "<|tool_calls_section_begin|><|tool_call_begin|>0<|tool_call_argument_begin|>"
        '{"city": "Paris"}<|tool_call_end|><|tool_calls_section_end|>'
    )
    result = _both(text)
    assert result.calls == []
    (rejected,) = result.rejected
    assert rejected.name is None and "names no tool" in rejected.reason


VALUES_HOLDING_A_CLOSER = {
    "GLM <arg_value> holding </tool_call>": (
        "<tool_call>get_weather\n<arg_key>city</arg_key>\n"
        "<arg_value>Paris</tool_call> x</arg_value>\n</tool_call>",
        "Paris</tool_call> x",
    ),
    "Qwen3-Coder parameter holding </function>": (
        "<tool_call>\n<function=get_weather>\n<parameter=city>\na</function>b\n</parameter>\n"
        "</function>\n</tool_call>",
        "a</function>b",
    ),
    "Hermes string holding </tool_call>": (
        '<tool_call>{"name": "get_weather", "arguments": {"city": "a</tool_call>b"}}</tool_call>',
        "a</tool_call>b",
    ),
}


@pytest.mark.parametrize(
    ("text", "value"), VALUES_HOLDING_A_CLOSER.values(), ids=VALUES_HOLDING_A_CLOSER.keys()
)
def test_a_closing_marker_inside_a_value_is_data(text: str, value: str) -> None:
    result = _both(text)
    assert [(c.name, c.arguments) for c in result.calls] == [("get_weather", {"city": value})]
    assert result.content.strip() == ""


def test_a_lost_closing_tag_still_ends_the_value_at_the_next_call() -> None:
    # The value's own closing tag is missing: a later one belongs to the next call.
    text = (
        "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</tool_call>\n"
        "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n"
        "</tool_call>"
    )
    result = _both(text)
    assert [c.arguments for c in result.calls] == [{"city": "Paris"}, {"city": "Oslo"}]


def test_a_call_waits_for_a_first_string_up_to_the_hold() -> None:
    # Exactly STRING_HOLD characters of a first string start the call; one fewer does not.
    head = '<tool_call>{"name": "get_weather", "arguments": {"city": "'
    for length, starts in ((STRING_HOLD - 1, False), (STRING_HOLD, True)):
        parser = StreamParser(TOOLS)
        events = parser.feed(head) + parser.feed("a" * length)
        assert any(isinstance(e, ToolCallStart) for e in events) is starts


def test_only_a_quote_opens_a_string() -> None:
    # Found by the mutation check: '!' (or a control character) taken for a quote.
    for text in ('{"a": !}', '{"a": \x01x}'):
        assert repair_json(text) is None


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>{"name": "get_weather", <|im_end|> "arguments": {"city": "Paris"}}</tool_call>',
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris", <|im_end|> "unit": "c"}}'
        "</tool_call>",
    ],
)
def test_markup_leaked_between_members_is_skipped(text: str) -> None:
    # Found by the mutation check: nothing but the fuzz tests covered it.
    (call,) = _both(text).calls
    assert call.arguments["city"] == "Paris"


def test_arguments_broken_before_a_member_are_one_rejection() -> None:
    # Only '{' where a key belongs is the model beginning the call again; '[' is not.
    text = '<tool_call>{"name": "get_weather", "arguments": {[1]}}</tool_call>'
    result = _both(text)
    assert result.calls == []
    assert [r.name for r in result.rejected] == ["get_weather"]
