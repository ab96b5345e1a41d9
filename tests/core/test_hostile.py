"""Hostile model output: nothing the model writes crashes the parser or makes it slow.

Any reply of the model reaches the parser, so any user prompt can. Each case
here once raised (RecursionError, Python's int-string limit) or took time
quadratic in its length; the parse must finish, within a budget far above
what a linear parser needs, and stream exactly as it parses.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from budget import within  # type: ignore[import-not-found]
from streamcheck import check_stream  # type: ignore[import-not-found]

from toolrelay import StreamParser, parse_tool_calls
from toolrelay.repair import MAX_DEPTH

CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'
OPENERS = ["<think>", "<seed:think>", "<|START_THINKING|>", "<|inner_prefix|>"]


def _feed(text: str, size: int) -> None:
    parser = StreamParser()
    for start in range(0, len(text), size):
        parser.feed(text[start : start + size])
    parser.close()


def _depth(value: object) -> int:
    """Nesting depth of a JSON value (a scalar is 0), without recursion."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, level + 1) for child in children)
    return deepest


# -- depth -------------------------------------------------------------------------


@pytest.mark.parametrize("opener", OPENERS)
def test_unclosed_reasoning_openers_nest_no_deeper_than_their_kinds(opener: str) -> None:
    text = opener * 250 + CALL
    result = parse_tool_calls(text)
    assert [c.name for c in result.calls] == ["get_weather"]
    # An opener inside an unclosed block of its own kind can never close: it is text.
    assert result.reasoning == opener * 249
    check_stream(text, list(range(0, len(text), 5)))


def test_every_reasoning_kind_unclosed_inside_the_others() -> None:
    text = "".join(OPENERS) * 100 + CALL
    result = parse_tool_calls(text)
    assert [c.name for c in result.calls] == ["get_weather"]
    check_stream(text, list(range(0, len(text), 13)))


NESTED_ARGUMENTS = {
    "hermes objects": '<tool_call>{"name": "f", "arguments": ' + '{"a": ' * 1000,
    "hermes arrays": '<tool_call>{"name": "f", "arguments": {"a": ' + "[" * 1000,
    "hermes closed": '<tool_call>{"name": "f", "arguments": {"a": '
    + "[" * 1000
    + "]" * 1000
    + "}}</tool_call>",
    "deepseek": "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>" + '{"a": ' * 1000,
    "mistral": '[TOOL_CALLS]f{"a": ' + "[" * 1000,
    "pythonic": "[f(a=" + "[" * 1000,
    "qwen3 xml": "<tool_call>\n<function=f>\n<parameter=a>\n"
    + "[" * 1000
    + "]" * 1000
    + "\n</parameter>",
}


@pytest.mark.parametrize("text", NESTED_ARGUMENTS.values(), ids=NESTED_ARGUMENTS.keys())
def test_arguments_nested_past_the_limit_are_cut_there(text: str) -> None:
    result = parse_tool_calls(text)
    for call in result.calls:
        assert _depth(call.arguments) <= MAX_DEPTH
        assert json.loads(call.arguments_json) == call.arguments
    check_stream(text, list(range(0, len(text), 3)))


def test_arguments_at_the_limit_are_kept_whole() -> None:
    inner = "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1)
    text = '<tool_call>{"name": "f", "arguments": {"a": ' + inner + "}}</tool_call>"
    (call,) = parse_tool_calls(text).calls
    assert call.arguments_json == '{"a":' + inner + "}"
    check_stream(text, list(range(0, len(text), 2)))


def test_a_wrapper_nested_a_thousand_deep_is_not_a_crash() -> None:
    text = '<tool_call>{"function": ' * 1000
    parse_tool_calls(text)
    check_stream(text, list(range(0, len(text), 7)))


# -- numbers -----------------------------------------------------------------------


@pytest.mark.parametrize("digits", [4_301, 100_000])
def test_a_huge_integer_keeps_its_digits(digits: int) -> None:
    # Longer than Python's json.loads reads: a string of its digits (docs/formats.md).
    number = "7" * digits
    text = '<tool_call>{"name": "f", "arguments": {"n": ' + number + "}}</tool_call>"
    (call,) = parse_tool_calls(text).calls
    assert call.arguments_json == '{"n":"' + number + '"}'
    assert call.arguments["n"] == number
    check_stream(text, list(range(0, len(text), 997)))


@pytest.mark.parametrize(
    "text",
    [
        "<tool_call>\n<function=f>\n<parameter=n>\n" + "7" * 5_000 + "\n</parameter>",
        "[f(n=" + "7" * 5_000 + ")]",
        '<tool_call>{"name": "f", "arguments": {"n": +' + "7" * 5_000 + "}}</tool_call>",
        '<tool_call>{"name": "f", "arguments": "{\\"n\\": ' + "7" * 5_000 + '}"}</tool_call>',
    ],
    ids=["xml", "pythonic", "loose", "stringified"],
)
def test_huge_integers_in_every_engine_are_not_a_crash(text: str) -> None:
    result = parse_tool_calls(text)
    for call in result.calls:
        assert "7" * 5_000 in call.arguments_json
    check_stream(text, list(range(0, len(text), 499)))


# -- time ---------------------------------------------------------------------------

# Each family at a size a linear parser reads in well under a second and a
# quadratic one in minutes; (text, delta size: 0 for a finished parse).
FAMILIES: dict[str, tuple[Callable[[], str], int]] = {
    "digits then a letter in arguments": (
        lambda: '<tool_call>{"name": "f", "arguments": {"a": ' + "1" * 100_000 + "a}}",
        0,
    ),
    "digits then a letter, pythonic": (lambda: "[f(a=" + "1" * 100_000 + "a)]", 0),
    "'{\"name\":' repeated": (lambda: '{"name":' * 16_000, 0),
    "'{\"name\":' repeated, streamed": (lambda: '{"name":' * 8_000, 64),
    "'{\"arguments\": {' repeated": (lambda: '{"arguments": {' * 8_000, 0),
    "a long number, one character at a time": (
        lambda: '<tool_call>{"name": "f", "arguments": {"a": ' + "1" * 256_000 + "}}",
        1,
    ),
    "a long bare word, one character at a time": (
        lambda: '<tool_call>{"name": "f", "arguments": {"a": ' + "x" * 256_000 + "}}",
        1,
    ),
    "long blanks in arguments, one character at a time": (
        lambda: '<tool_call>{"name": "f", "arguments": {"a": ' + " " * 256_000 + "1}}",
        1,
    ),
    "a bare call held in prose, small deltas": (
        lambda: 'Here: {"name": "f", "arguments": {"a": "' + "x" * 1_000_000,
        8,
    ),
    "<|channel|> repeated": (lambda: "<|channel|>" * 100_000, 0),
    "<|start|>assistant repeated": (lambda: "<|start|>assistant" * 60_000, 0),
    "DeepSeek openers repeated": (lambda: "<｜tool▁calls▁begin｜>" * 100_000, 0),
    "a wrapper nested deep": (lambda: '{"function": ' * 40_000, 0),
}


@pytest.mark.parametrize("family", FAMILIES.values(), ids=FAMILIES.keys())
def test_adversarial_families_take_linear_time(family: tuple[Callable[[], str], int]) -> None:
    make, delta = family

    def work() -> None:
        text = make()
        if delta:
            _feed(text, delta)
        else:
            parse_tool_calls(text)

    within(8.0, work)
