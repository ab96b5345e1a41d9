"""Calls are never dropped, invented or guessed (issue 10, item 5).

A call that is recognised but cannot be used is listed in
``ParseResult.rejected`` (and streamed as ``CallRejected``) with the name as
written, the call's text and a reason; it never becomes a call with ``{}``
and never goes to a tool chosen by the shape of its arguments.
"""

from __future__ import annotations

from typing import Any

import pytest
from issue10 import EDIT, TIME, TOOLS, WEATHER, parsed, tool  # type: ignore[import-not-found]
from streamcheck import check_stream  # type: ignore[import-not-found]

from toolrelay import CallRejected, RejectedCall, StreamParser, ToolCallStart, parse_tool_calls


def only_rejection(text: str, tools: Any = TOOLS) -> RejectedCall:
    result = parsed(text, tools, calls=[])
    assert len(result.rejected) == 1, result.rejected
    return result.rejected[0]


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>{"name": "current_time"}</tool_call>',
        '[TOOL_CALL]{"name": "current_time"}[/TOOL_CALL]',
        '<|tool_call_start|>[{"name": "current_time"}]<|tool_call_end|>',
        '<TOOLCALL>[{"name": "current_time"}]</TOOLCALL>',
        '[TOOL_CALLS] [{"name": "current_time"}]',
        '{"name": "current_time"}',
        "[TOOL_CALLS]current_time",
    ],
)
def test_a_call_to_a_tool_without_parameters_may_leave_arguments_out(text: str) -> None:
    parsed(text, calls=[("current_time", {})], content="")


def test_leaving_out_arguments_a_tool_requires_is_rejected() -> None:
    rejected = only_rejection('<tool_call>{"name": "get_weather"}</tool_call>')
    assert rejected.name == "get_weather"
    assert "requires city" in rejected.reason
    # Without declared tools nothing says the call needs no arguments.
    assert only_rejection('<tool_call>{"name": "x"}</tool_call>', None).name == "x"


def test_unreadable_arguments_are_not_made_an_empty_object() -> None:
    text = '<tool_call>{"name": "get_weather", "parameters": {invalid json}</tool_call>'
    rejected = only_rejection(text)
    assert rejected.name == "get_weather"
    assert rejected.raw.startswith('<tool_call>{"name": "get_weather"')
    assert "could not be read" in rejected.reason
    for unreadable in (
        "[TOOL_CALLS]get_weather[ARGS]{city}",
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
        "<|tool_call_argument_begin|>{Oslo}<|tool_call_end|><|tool_calls_section_end|>",
        "<|channel|>commentary to=functions.get_weather<|message|>{oslo}<|call|>",
        '<tool_call>{"name": "get_weather", "arguments": "city=Oslo"}</tool_call>',
        '<tool_call>{"name": "get_weather", "arguments": [1, 2]}</tool_call>',
    ):
        assert only_rejection(unreadable).name == "get_weather", unreadable


def test_arguments_broken_after_a_value_keep_what_was_read() -> None:
    # Truncation and trailing garbage are repaired: what was written stands.
    parsed(
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo", oops}</tool_call>',
        calls=[("get_weather", {"city": "Oslo"})],
    )
    parsed(
        '[TOOL_CALL]{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "c"',
        calls=[("get_weather", {"city": "Oslo", "unit": "c"})],
    )


def test_a_later_value_that_never_ends_rejects_the_call() -> None:
    # Cut inside a string after the call started: the value would be cut short.
    for text in (
        '[TOOL_CALL]{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "c',
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "c</tool_call>',
    ):
        rejected = only_rejection(text)
        assert rejected.name == "get_weather" and "never ends" in rejected.reason


def test_a_first_value_that_never_ends_makes_the_arguments_unreadable() -> None:
    # An unterminated string swallows whatever follows, the block's end marker
    # included: that is no value, and the call is not made out of it.
    for text in (
        '[TOOL_CALL]{"name": "get_weather", "arguments": {"city": "Os',
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris}</tool_call>',
        "<tool_call>{'name': 'get_weather', 'arguments': {'city': 'Paris}</tool_call>",
    ):
        rejected = only_rejection(text)
        assert rejected.name == "get_weather" and "could not be read" in rejected.reason


def test_a_model_that_restarts_the_call_object() -> None:
    text = '{"name": "get_weather", "parameters": {{"name": "get_weather", "parameters": {}}'
    result = parsed(text, calls=[("get_weather", {})], content="")
    assert [r.name for r in result.rejected] == ["get_weather"]


def test_unknown_and_ambiguous_names_are_rejected_with_the_declared_ones() -> None:
    rejected = only_rejection('<tool_call>{"name": "rm_rf", "arguments": {}}</tool_call>')
    assert rejected.name == "rm_rf"
    assert "get_weather" in rejected.reason and "edit_file" in rejected.reason
    twins = [tool("github__create_issue"), tool("jira__create_issue")]
    rejected = only_rejection(
        '<tool_call>{"name": "create_issue", "arguments": {}}</tool_call>', twins
    )
    assert "ambiguous" in rejected.reason and "jira__create_issue" in rejected.reason


def test_a_nameless_call_is_not_given_to_a_tool_by_its_shape() -> None:
    # A Kimi id without its function name ("0", not "functions.NAME:0") names no
    # tool, even when one declared tool alone could take the arguments.
    text = (
        "<|tool_calls_section_begin|><|tool_call_begin|>0<|tool_call_argument_begin|>"
        '{"city": "Oslo"}<|tool_call_end|><|tool_calls_section_end|>'
    )
    for tools in ([WEATHER, TIME], [WEATHER]):
        rejected = only_rejection(text, tools)
        assert rejected.name is None and "names no tool" in rejected.reason
    assert only_rejection('<tool_call>{"arguments": {"city": "Oslo"}}</tool_call>').name is None


def test_every_format_reports_its_unusable_calls() -> None:
    texts = [
        '<tool_call>{"name": "nope", "arguments": {}}</tool_call>',
        '[TOOL_CALL]{"name": "nope", "arguments": {}}[/TOOL_CALL]',
        '[TOOL_CALLS]nope[ARGS]{"a": 1}',
        '[TOOL_CALLS] [{"name": "nope", "arguments": {}}]',
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>nope<｜tool▁sep｜>{}<｜tool▁call▁end｜>"
        "<｜tool▁calls▁end｜>",
        '<|channel|>commentary to=functions.nope<|message|>{"a": 1}<|call|>',
        "<tool_call>\n<function=nope>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>",
        "<tool_call>nope\n<arg_key>a</arg_key>\n<arg_value>1</arg_value>\n</tool_call>",
        '<minimax:tool_call><invoke name="nope"><parameter name="a">1</parameter></invoke>'
        "</minimax:tool_call>",
        "[nope(a=1)]",
        "<|python_start|>[nope(a=1)]<|python_end|>",
        "<function_calls>nope(a=1)</function_calls>",
        "<start_function_call>call:nope{a:1}<end_function_call>",
        '<|tool_call>call:nope{a:<|"|>x<|"|>}<tool_call|>',
        '>>>nope\n{"a": 1}',
        '<|tool_call_start|>[nope(a="x")]<|tool_call_end|>',
    ]
    for text in texts:
        rejected = only_rejection(text)
        assert rejected.name == "nope", text
        assert "nope" in rejected.raw and rejected.reason, text


def test_a_rejected_call_with_a_long_name_shows_all_of_it() -> None:
    # A name longer than the lexer holds back (64 characters) leaves the buffer
    # while it is read; the rejection still shows the call as written.
    name = "lookup_" + "x" * 90
    for text in (
        f'<|tool_call_start|>[{name}(a="x")]<|tool_call_end|>',
        f"<|python_start|>[{name}(a=1)]<|python_end|>",
        f"<|tool_call_start|>[{name}",  # cut off before its '('
    ):
        rejected = only_rejection(text)
        assert rejected.name in (name, None), text
        assert rejected.raw.startswith(name), text


def test_the_stream_reports_a_rejection_once_the_call_is_over() -> None:
    parser = StreamParser(TOOLS)
    events = parser.feed('Sure.<tool_call>{"name": "nope", "arguments": {"a": ')
    assert not any(isinstance(e, (CallRejected, ToolCallStart)) for e in events)
    events = parser.feed("1}}</tool_call> done") + parser.close()
    rejected = [e.call for e in events if isinstance(e, CallRejected)]
    assert rejected == [
        RejectedCall(
            "nope",
            '<tool_call>{"name": "nope", "arguments": {"a": 1}}',
            "there is no tool named 'nope'; the tools are get_weather, current_time, edit_file",
        )
    ]


def test_a_call_starts_only_once_it_can_no_longer_be_rejected() -> None:
    parser = StreamParser(TOOLS)
    assert not any(
        isinstance(e, ToolCallStart)
        for e in parser.feed('<tool_call>{"name": "get_weather", "arguments": {')
    )
    # The first value must be complete: until its string ends it may never end.
    assert not any(isinstance(e, ToolCallStart) for e in parser.feed('"city": "O'))
    assert any(isinstance(e, ToolCallStart) for e in parser.feed('slo", "unit'))


def test_prose_that_only_looks_like_a_call_is_neither_call_nor_rejection() -> None:
    result = parsed('He said {"name": "Bob", "arguments": {"age": 3}} twice.', TOOLS, calls=[])
    assert result.rejected == []
    assert result.content == 'He said {"name": "Bob", "arguments": {"age": 3}} twice.'
    result = parsed("Lists like [foo(x=1]) are odd.", TOOLS, calls=[])
    assert result.rejected == []


def test_edit_tool_arguments_round_trip() -> None:
    text = (
        '<tool_call>{"name": "edit_file", "arguments": {"path": "a.py", '
        '"old_string": "x = 1\\n", "new_string": "x = 2\\n"}}</tool_call>'
    )
    parsed(
        text,
        [EDIT],
        calls=[("edit_file", {"path": "a.py", "old_string": "x = 1\n", "new_string": "x = 2\n"})],
    )


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>{"name": "f", "arguments": {"a": 1}}, {"name": "nope", "arguments": {}}'
        "</tool_call>",
        '<tool_call>[{"name": "f", "arguments": {"a": 1}}, {"name": "nope", "arguments": {"b": 2}}]'
        "</tool_call>",
        '[TOOL_CALLS] [{"name": "f", "arguments": {"a": 1}}, {"name": "nope", "arguments": {}}]',
    ],
)
@pytest.mark.parametrize("step", [1, 3, 64])
def test_a_call_rejected_after_one_streamed_shows_its_own_text(text: str, step: int) -> None:
    # Once a call streams its text is no longer kept; the next one keeps its own.
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    check_stream(text, list(range(0, len(text), step)), tools)
    (rejected,) = parse_tool_calls(text, tools).rejected
    assert rejected.raw.startswith('{"name": "nope"')
