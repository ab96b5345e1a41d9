"""Behaviour no test held until the mutation check (``scripts/mutation``) changed it.

Each case is a mutant that survived the fast core tests and would have been a
real bug: text lost or shifted, a rejection without its text, a crash on an
odd list. Parsed finished and streamed one character at a time.
"""

from __future__ import annotations

from typing import Any

import pytest
from streamcheck import check_stream  # type: ignore[import-not-found]

from toolrelay import ParseResult, StreamParser, ToolCallEnd, parse_tool_calls

TOOLS = [{"type": "function", "function": {"name": name}} for name in ("f", "g")]


def _both(text: str, tools: Any = TOOLS) -> ParseResult:
    check_stream(text, list(range(1, len(text))), tools)
    return parse_tool_calls(text, tools)


def _calls(result: ParseResult) -> list[tuple[str, dict[str, Any]]]:
    return [(call.name, call.arguments) for call in result.calls]


@pytest.mark.parametrize("quote", ['"', "'"])
def test_an_escape_json_does_not_know_keeps_its_backslash_and_what_follows(quote: str) -> None:
    # A Windows path: \u without four hex digits after it, \m and \x are no JSON escapes.
    path = "C:\\users\\me\\x.txt"
    q = quote
    text = f"<tool_call>{{{q}name{q}: {q}f{q}, {q}arguments{q}: {{{q}path{q}: {q}{path}{q}, "
    text += f"{q}n{q}: 1}}}}</tool_call>"
    result = _both(text)
    assert _calls(result) == [("f", {"path": path, "n": 1})]
    assert result.content == ""


ESCAPED_SURROGATES = {
    "\\ud83d\\ude00": "\U0001f600",  # a pair: one character
    "\\ud800\\udc00": "\U00010000",  # the first pair
    "\\ud83d\\ue000": "\ufffd\ue000",  # U+E000 is no low surrogate
    "\\ud83d\\udbff": "\ufffd\ufffd",  # two high ones
    "\\ude00x": "\ufffdx",  # a lone low one
    "\\ud83dx": "\ufffdx",  # a lone high one
}


@pytest.mark.parametrize("quote", ['"', "'"])
@pytest.mark.parametrize(("escaped", "value"), ESCAPED_SURROGATES.items())
def test_escaped_surrogates_pair_up_or_are_replaced(quote: str, escaped: str, value: str) -> None:
    # A single-quoted string is read by the lexer's own escape code, not the C decoder's.
    q = quote
    text = f"<tool_call>{{{q}name{q}: {q}f{q}, {q}arguments{q}: {{{q}s{q}: {q}{escaped}{q}}}}}"
    result = _both(text + "</tool_call>")
    assert _calls(result) == [("f", {"s": value})]


def test_an_escaped_pair_does_not_hold_the_stream() -> None:
    # The pair is complete once its twelve characters are in: the call ends before the
    # output does, not when the stream is closed.
    parser = StreamParser(TOOLS)
    text = "<tool_call>{'name': 'f', 'arguments': {'s': '\\ud83d\\ude00'}}</tool_call>"
    events = [event for char in text for event in parser.feed(char)]
    assert any(isinstance(event, ToolCallEnd) for event in events)
    parser.close()


def test_a_list_of_calls_holding_other_values_keeps_its_calls() -> None:
    text = (
        '<tool_call>[{"name": "f", "arguments": {"a": 1}}, "oops", 5, [null], '
        '{"name": "g", "arguments": {"b": 2}}]</tool_call> after'
    )
    result = _both(text)
    assert _calls(result) == [("f", {"a": 1}), ("g", {"b": 2})]
    assert result.content == " after"


@pytest.mark.parametrize("prefix", ["", "Hi ", "Some words first.\n" * 20])
def test_a_block_with_no_call_is_rejected_with_its_text(prefix: str) -> None:
    block = "[TOOL_CALL]not json[/TOOL_CALL]"
    result = _both(prefix + block + " bye")
    assert result.calls == []
    assert [(r.name, r.raw, r.reason) for r in result.rejected] == [
        (None, block, "the block holds no tool call")
    ]
    assert result.content == prefix + " bye"


@pytest.mark.parametrize("separator", [";", "; ", ";\n"])
def test_llama3_bare_calls_after_a_semicolon_are_read_whole(separator: str) -> None:
    first = '{"name": "f", "parameters": {"a": 1}}'
    second = '{"name": "g", "parameters": {"b": "x"}}'
    for text in (first + separator + second, "<|python_tag|>" + first + separator + second):
        result = _both(text)
        assert _calls(result) == [("f", {"a": 1}), ("g", {"b": "x"})], text
        assert result.content == ""


TEXT_IN_A_BLOCK = {
    "prose after a blank line is content": (
        "[TOOL_CALL]not json\n\nSome prose[/TOOL_CALL] bye",
        [],
        "not json\n\nSome prose bye",
    ),
    "another format's call ends the text": (
        '[TOOL_CALL]not json <tool_call>{"name": "f", "arguments": {}}</tool_call>[/TOOL_CALL] bye',
        [("f", {})],
        "not json  bye",
    ),
    "a stray '<' in a call object is skipped": (
        '<tool_call>{"name": "f", "arguments": {"a": 1} <b</tool_call> after',
        [("f", {"a": 1})],
        " after",
    ),
    "text after a call is markup up to the end marker": (
        '[TOOL_CALL]{"name": "f", "arguments": {"a": 1}} and then some more text[/TOOL_CALL] after',
        [("f", {"a": 1})],
        " after",
    ),
}


@pytest.mark.parametrize(
    ("text", "calls", "content"), TEXT_IN_A_BLOCK.values(), ids=TEXT_IN_A_BLOCK.keys()
)
def test_text_in_a_block_that_is_not_json(
    text: str, calls: list[tuple[str, dict[str, Any]]], content: str
) -> None:
    result = _both(text)
    assert _calls(result) == calls
    assert result.content == content
