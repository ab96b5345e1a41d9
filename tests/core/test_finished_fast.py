"""The finished parse's fast path (``toolrelay.finished``) gives exactly what the replay gives.

Every generated text is parsed both ways: ``parse_output`` (which takes the
fast path when it can) and ``replay_output`` (the stream parser, always). The
calls (name, arguments, their text, the shape of the id), the content, the
reasoning, the rejections and the reasoning flag must be equal. The texts are
the common case and its near misses: single-quoted (Python) dicts, single
quotes inside strings, text after the call, two calls, a string never closed,
markup and the end marker inside strings, keys reordered or renamed, JSON that
``strict_json`` refuses, reasoning before the call, names the tools do not
declare. Clean calls must also take the fast path and match ``json.loads``.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scaled import examples  # type: ignore[import-not-found]

from tests.strategies import json_trees
from toolrelay.events import ParseResult
from toolrelay.finished import parse_one_call
from toolrelay.parse import parse_output, replay_output

TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    for name in ("write_file", "get_weather", "github__create_issue")
]
TOOL_SETS: list[Any] = [None, TOOLS, []]
NAMES = ["write_file", "get_weather", "create_issue", "functions.get_weather", " write_file ", ""]
NAMES += ["rm_rf", "a'b", 'q"uote', "<tool_call>"]
# Strings a model writes in arguments, the awkward ones above all.
AWKWARD = [
    "it's",
    "'single'",
    '"double"',
    "</tool_call>",
    "<tool_call>",
    "[/TOOL_CALL]",
    "[TOOL_CALL]",
    "</parameter>",
    "<think>",
    "</think>",
    "back\\slash",
    "tab\there",
    "new\nline",
    "\u00e9\u4e2d\U0001f600",
    "\ud800",
    "{",
    "}]",
    "",
]
strings = st.one_of(st.sampled_from(AWKWARD), st.text(max_size=12))
json_values = json_trees(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | strings,
    strings,
    leaves=8,
)
arguments = st.dictionaries(strings, json_values, max_size=4)
CLEAN_PREFIXES = ["", "\n", "Sure.\n\n", "I'll write it: ", "<think>plan</think>\n"]
CLEAN_PREFIXES += ["\n<think>\nplan it\n</think>\n\n", "plan\n</think>\n\n", "</think>"]
PREFIXES = ["{", "[1] ", "```json\n", "Use <b>bold</b> ", "\u00a0", "functools"]
PREFIXES += ["x<think>plan</think>", "<think>a{b}</think>", "<think>a<think>b</think>"]
PREFIXES += ["a</think>b</think>", "<think>plan", "<thinking>plan</thinking>", "x</thinking>"]
PREFIXES += ["<think></think>", "<think>a</think><think>b</think>", "\u00a0<think>a</think>"]
CLEAN_SUFFIXES = ["", "\n", " \n\t"]
SUFFIXES = [" done", "<tool_call>", "</tool_call>", "\u00a0", "\x0b", "\n<tool_call>{}"]
CLEAN_BLANKS = ["", "\n", " \t", "\r\n"]
BLANKS = [" " * 70, "\u00a0", "\x0b"]
DAMAGES = ["cut", "unterminated", "second", "swap", "python", "reordered", "extra", "renamed"]
DAMAGES += ["prefix", "suffix", "lead", "trail", "two blocks", "mismatched", "unclosed"]
BLOCKS = [("<tool_call>", "</tool_call>"), ("[TOOL_CALL]", "[/TOOL_CALL]")]


def _write(value: dict[str, Any], style: str) -> str:
    if style == "python":  # single quotes: not JSON, the slow path's repair reads it
        return repr(value)
    if style == "ascii":
        return json.dumps(value)
    if style == "compact":
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return json.dumps(value, ensure_ascii=False, indent=2)


@st.composite
def call_texts(draw: st.DrawFn) -> str:
    """A clean call (half the time), or one with one or two of the near misses."""
    name = draw(st.sampled_from(NAMES))
    args = draw(arguments)
    damages = set(draw(st.lists(st.sampled_from(DAMAGES), max_size=2)))
    if "reordered" in damages:
        call: dict[str, Any] = {"arguments": args, "name": name}
    elif "extra" in damages:
        call = {"name": name, "arguments": args, "id": "c1"}
    elif "renamed" in damages:
        call = {"name": name, "parameters": args}
    else:
        call = {"name": name, "arguments": args}
    style = draw(st.sampled_from(["ascii", "compact", "indent"]))
    if "python" in damages:
        style = "python"
    body = _write(call, style)
    if "cut" in damages:  # the text ends inside the call
        body = body[: draw(st.integers(0, max(0, len(body) - 1)))]
    if "unterminated" in damages:  # a string that never closes
        body = body.replace('"}', "}", 1)
    if "second" in damages:  # two calls in one block
        body = f"{body}, {body}"
    if "swap" in damages:  # single quotes where the JSON has double ones
        body = body.replace('"', "'", draw(st.integers(1, 3)))
    lead = draw(st.sampled_from(BLANKS if "lead" in damages else CLEAN_BLANKS))
    trail = draw(st.sampled_from(BLANKS if "trail" in damages else CLEAN_BLANKS))
    opening, closing = draw(st.sampled_from(BLOCKS))
    if "mismatched" in damages:
        closing = draw(st.sampled_from([c for _, c in BLOCKS if c != closing]))
    if "unclosed" in damages:  # a server that stops on the closing marker
        closing = ""
    text = f"{opening}{lead}{body}{trail}{closing}"
    if "two blocks" in damages:
        text += f"\n{opening}{body}{closing}"
    prefix = draw(st.sampled_from(PREFIXES if "prefix" in damages else CLEAN_PREFIXES))
    suffix = draw(st.sampled_from(SUFFIXES if "suffix" in damages else CLEAN_SUFFIXES))
    return prefix + text + suffix


_ID = re.compile(r"call_[0-9a-f]{16}\d+")


def _comparable(result: ParseResult) -> tuple[Any, ...]:
    """The result with each generated id reduced to its shape (the prefix is random per
    parse) and its index; ids a model wrote stay as written."""
    calls = [
        (
            f"generated {c.id[21:]}" if _ID.fullmatch(c.id) else c.id,
            c.name,
            json.dumps(c.arguments, sort_keys=True),
            c.arguments_json,
        )
        for c in result.calls
    ]
    return calls, result.content, result.reasoning, result.rejected, result.formats


def _assert_same(text: str, tools: Any, format: str, reasoning_open: bool | None) -> None:
    fast, fast_opened = parse_output(text, tools, format, reasoning_open=reasoning_open)
    slow, slow_opened = replay_output(text, tools, format, reasoning_open=reasoning_open)
    assert _comparable(fast) == _comparable(slow), text
    assert fast_opened == slow_opened


@settings(max_examples=examples(1500), deadline=None)
@given(
    text=call_texts(),
    tools=st.sampled_from(TOOL_SETS),
    format=st.sampled_from(["auto", "auto", "auto", "hermes", "bracket", "qwen3_coder"]),
    reasoning_open=st.sampled_from([None, None, None, False, True]),
)
def test_fast_path_equals_the_replay(
    text: str, tools: Any, format: str, reasoning_open: bool | None
) -> None:
    _assert_same(text, tools, format, reasoning_open)


@settings(max_examples=examples(400), deadline=None)
@given(
    args=arguments,
    name=st.sampled_from(["write_file", "get_weather", "functions.get_weather"]),
    style=st.sampled_from(["ascii", "compact", "indent"]),
    block=st.sampled_from(BLOCKS),
    prefix=st.sampled_from(CLEAN_PREFIXES[:4]),
    suffix=st.sampled_from(CLEAN_SUFFIXES),
)
def test_clean_calls_take_the_fast_path(
    args: dict[str, Any], name: str, style: str, block: tuple[str, str], prefix: str, suffix: str
) -> None:
    """A clean call is read by the fast path (or refused by ``strict_json`` for a value a
    dict cannot carry as written), and its arguments are what ``json.loads`` reads."""
    body = _write({"name": name, "arguments": args}, style)
    text = f"{prefix}{block[0]}\n{body}\n{block[1]}{suffix}"
    quick = parse_one_call(text, TOOLS, "auto", None)
    _assert_same(text, TOOLS, "auto", None)
    if quick is None:
        # Only values strict_json refuses (lone surrogates, non-finite or huge numbers)
        # and the end marker inside a string may turn the fast path away.
        assert not _plain(args), text
        return
    result, opened = quick
    (call,) = result.calls
    assert call.name == name.removeprefix("functions.")
    assert call.arguments == json.loads(body)["arguments"]
    assert json.loads(call.arguments_json) == call.arguments
    assert (result.content, result.reasoning, opened) == (prefix + suffix, None, False)


def _plain(value: Any) -> bool:
    """Nothing in ``value`` that strict_json refuses, nor the end marker."""
    if isinstance(value, dict):
        return all(_plain(k) and _plain(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    if isinstance(value, str):
        closers = ("</tool_call>", "[/TOOL_CALL]")
        return not any(c in value for c in closers) and not any(
            0xD800 <= ord(c) <= 0xDFFF for c in value
        )
    if isinstance(value, float):
        return value - value == 0.0
    if isinstance(value, int) and not isinstance(value, bool):
        return -(2**63) <= value < 2**64
    return True


@pytest.mark.parametrize(
    "text",
    [
        "<tool_call>{'name': 'write_file', 'arguments': {'text': 'it''s'}}</tool_call>",
        "<tool_call>{'name': 'write_file', 'arguments': {'text': \"it's\"}}</tool_call>",
        '<tool_call>{"name": "write_file", "arguments": {"text": "it\'s \'quoted\'"}}</tool_call>',
        '<tool_call>{"name": "write_file", "arguments": {"text": "</tool_call>"}}</tool_call>',
        '<tool_call>{"name": "write_file", "arguments": {"text": "a}</tool_call>',
        '<tool_call>{"name": "write_file", "arguments": {}}</tool_call> and then',
        '<think>x</think><tool_call>{"name": "write_file", "arguments": {}}</tool_call>',
        'x</think><tool_call>{"name": "write_file", "arguments": {}}</tool_call>',
        '<tool_call>{"name": "rm_rf", "arguments": {}}</tool_call>',
        '[TOOL_CALL]{"name": "write_file", "arguments": {"a": "[/TOOL_CALL]"}}[/TOOL_CALL]',
        '[TOOL_CALL]{"name": "write_file", "arguments": {}}</tool_call>',
        '```json\n{"a": 1}\n```\n[TOOL_CALL]{"name": "write_file", "arguments": {}}[/TOOL_CALL]',
    ],
)
def test_near_misses(text: str) -> None:
    for tools in TOOL_SETS:
        for reasoning_open in (None, True):
            _assert_same(text, tools, "auto", reasoning_open)


def test_single_quotes_in_strings_survive() -> None:
    text = '<tool_call>{"name": "write_file", "arguments": {"text": "it\'s"}}</tool_call>'
    quick = parse_one_call(text, TOOLS, "auto", None)
    assert quick is not None
    assert quick[0].calls[0].arguments == {"text": "it's"}
    assert quick[0].calls[0].arguments_json == '{"text":"it\'s"}'


@pytest.mark.parametrize(
    ("prefix", "reasoning_open", "reasoning", "content", "opened"),
    [
        ("<think>\nplan\n</think>\n\n", None, "\nplan\n", "\n\n", False),
        ("\n<think>plan</think>", False, "plan", "\n", False),
        ("plan\n</think>\n\n", True, "plan\n", "\n\n", True),
        ("plan\n</think>\n\n", None, "plan\n", "\n\n", True),  # the orphan says it
        ("</think>Sure. ", None, None, "Sure. ", True),
    ],
)
def test_reasoning_then_a_call_takes_the_fast_path(
    prefix: str, reasoning_open: bool | None, reasoning: str | None, content: str, opened: bool
) -> None:
    text = prefix + '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'
    quick = parse_one_call(text, TOOLS, "auto", reasoning_open)
    assert quick is not None
    result, was_opened = quick
    assert (result.reasoning, result.content, was_opened) == (reasoning, content, opened)
    assert result.calls[0].arguments == {"city": "Oslo"}
    _assert_same(text, TOOLS, "auto", reasoning_open)


@pytest.mark.parametrize("block", ["<tool_call>", "[TOOL_CALL]"])
def test_a_call_whose_closing_marker_was_left_out_takes_the_fast_path(block: str) -> None:
    text = f'Sure.\n{block}\n{{"name": "get_weather", "arguments": {{"city": "Oslo"}}}}\n \n'
    quick = parse_one_call(text, TOOLS, "auto", None)
    assert quick is not None
    assert (quick[0].content, quick[0].calls[0].arguments) == ("Sure.\n", {"city": "Oslo"})
    _assert_same(text, TOOLS, "auto", None)
