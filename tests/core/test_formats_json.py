"""The JSON-payload formats, one text per form, each also streamed one character at a time."""

from __future__ import annotations

from typing import Any

import pytest
from streamcheck import check_stream  # type: ignore[import-not-found]

from toolrelay import parse_tool_calls

WEATHER: list[dict[str, Any]] = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {}}},
    {"type": "function", "function": {"name": "github__create_issue", "parameters": {}}},
]

# (text, tools, [(name, arguments)], content)
CASES: list[tuple[str, Any, list[tuple[str, dict[str, Any]]], str]] = [
    ('<tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call>', None, [("f", {"a": 1})], ""),
    ("<tools>{'name': 'f', 'arguments': {'a': True,}}</tools>", None, [("f", {"a": True})], ""),
    (
        '<tool_call>{"name": "f", "arguments": "{\\"a\\": 2}"}</tool_call>',
        None,
        [("f", {"a": 2})],
        "",
    ),
    (
        '<tool_call>{"function": {"name": "f", "arguments": {}}, "type": "function"}</tool_call>',
        None,
        [("f", {})],
        "",
    ),
    (
        '{"tool_calls": [{"name": "a", "arguments": {}}, {"name": "b", "arguments": {}}]}',
        None,
        [("a", {}), ("b", {})],
        "",
    ),
    ('<function name="f">{"q": "x"}</function>', None, [("f", {"q": "x"})], ""),
    (
        '[TOOL_CALL]<tool_call>{"get_weather", "arguments": <arguments>{"city": "Oslo"}'
        "</arguments>}</tool_call>[/TOOL_CALL]",
        WEATHER,
        [("get_weather", {"city": "Oslo"})],
        "",
    ),
    (
        '[TOOL_CALL]{"name": "now"}[/TOOL_CALL]',
        [{"type": "function", "function": {"name": "now"}}],
        [("now", {})],
        "",
    ),
    (
        'Ok ```json\n{"tool": "get_weather", "input": {"city": "Rome"}}\n``` done',
        None,
        [("get_weather", {"city": "Rome"})],
        "Ok  done",
    ),
    ('```json\n{"a": 1}\n```', None, [], '```json\n{"a": 1}\n```'),
    (
        '<tool_call>{"name": "create_issue", "arguments": {"t": "x"}}</tool_call>',
        WEATHER,
        [("github__create_issue", {"t": "x"})],
        "",
    ),
    ('<tool_call>{"name": "rm_rf", "arguments": {}}</tool_call>ok', WEATHER, [], "ok"),
    ('{"name": "Bob", "age": 3}', None, [], '{"name": "Bob", "age": 3}'),
    (
        '[TOOL_CALLS]get_weather[ARGS]{"city": "Oslo"}',
        None,
        [("get_weather", {"city": "Oslo"})],
        "",
    ),
    (
        '[TOOL_CALLS] [{"name": "f", "arguments": {}, "id": "abcdefghi"}]',
        None,
        [("f", {})],
        "",
    ),
    ('<|tool_call|>[{"name": "f", "arguments": {"x": [1]}}]', None, [("f", {"x": [1]})], ""),
    ('<TOOLCALL>[{"name": "f", "arguments": {}}]</TOOLCALL>', None, [("f", {})], ""),
    ('<|tool_call_start|>[{"name": "f", "arguments": {}}]<|tool_call_end|>', None, [("f", {})], ""),
    (
        '<|tools_prefix|>[{"get_weather": {"city": "Oslo"}}]<|tools_suffix|>',
        None,
        [("get_weather", {"city": "Oslo"})],
        "",
    ),
    (
        '<|START_THINKING|>hm<|END_THINKING|><|START_ACTION|>[{"tool_call_id": "0", '
        '"tool_name": "f", "parameters": {"a": 1}}]<|END_ACTION|>',
        None,
        [("f", {"a": 1})],
        "",
    ),
    ("<|START_RESPONSE|>Hello<|END_RESPONSE|>", None, [], "Hello"),
    ('functools[{"name": "f", "arguments": {}}]', None, [("f", {})], ""),
    ("import functools; functools.partial", None, [], "import functools; functools.partial"),
    (
        '<|action_start|><|plugin|>{"name": "f", "parameters": {"a": 1}}<|action_end|>',
        None,
        [("f", {"a": 1})],
        "",
    ),
    (
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n"
        '{"a": 1}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
        None,
        [("f", {"a": 1})],
        "",
    ),
    (
        "<|channel|>analysis<|message|>think<|end|><|start|>assistant<|channel|>commentary "
        'to=functions.f <|constrain|>json<|message|>{"a": 1}<|call|>',
        None,
        [("f", {"a": 1})],
        "",
    ),
    ("<|channel|>final<|message|>Hi there<|return|>", None, [], "Hi there"),
    # MiniMax-M1 and Jamba share <tool_calls>: however far the call sits from it.
    (
        "<tool_calls>" + "\n" * 300 + '{"name": "f", "arguments": {"a": 1}}\n</tool_calls>',
        None,
        [("f", {"a": 1})],
        "",
    ),
]


@pytest.mark.parametrize(("text", "tools", "calls", "content"), CASES)
def test_format(text: str, tools: Any, calls: list[tuple[str, Any]], content: str) -> None:
    result = parse_tool_calls(text, tools)
    assert [(c.name, c.arguments) for c in result.calls] == calls
    assert result.content == content
    check_stream(text, list(range(1, len(text))), tools)


def test_kimi_keeps_its_native_ids() -> None:
    text = (
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>"
        "{}<|tool_call_end|><|tool_call_begin|>functions.f:1<|tool_call_argument_begin|>{}"
        "<|tool_call_end|><|tool_calls_section_end|>"
    )
    assert [c.id for c in parse_tool_calls(text).calls] == ["functions.f:0", "functions.f:1"]


def test_a_pinned_format_parses_only_that_format() -> None:
    text = '<tool_call>{"name": "a", "arguments": {}}</tool_call>[TOOL_CALLS]b{}'
    assert [c.name for c in parse_tool_calls(text, format="mistral").calls] == ["b"]
    assert [c.name for c in parse_tool_calls(text, format="hermes").calls] == ["a"]
    with pytest.raises(ValueError, match="unknown format"):
        parse_tool_calls(text, format="nope")
