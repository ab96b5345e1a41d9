"""A string that never ends is never a value: the call is rejected, not cut short.

Issue 22: a later string value left unterminated (the output cut inside it, or
the block's end marker written before its closing quote) made a call whose
value was cut short, or swallowed the markup after it. Now the call is
rejected with a reason, even once it has started streaming, and a block's end
marker inside a string ends the block unless the string's closing quote
follows within ``MARKER_WINDOW`` characters. Each case is parsed finished and
streamed one character at a time; the property checks every JSON-object
format of the registry (``test_reference.WRAPPERS``) at every cut.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from streamcheck import check_stream  # type: ignore[import-not-found]
from test_reference import _STRINGS, _VALUES, PROFILE, WRAPPERS  # type: ignore[import-not-found]

from toolrelay import (
    CallRejected,
    ParseResult,
    StreamParser,
    ToolCallArgumentsDelta,
    ToolCallEnd,
    ToolCallStart,
    parse_tool_calls,
)
from toolrelay.formats.jsoncalls import MARKER_WINDOW
from toolrelay.formats.pythonic import COMMIT_AFTER

ADD = {
    "type": "function",
    "function": {
        "name": "add",
        "parameters": {
            "type": "object",
            "properties": {"n": {"type": "integer"}, "label": {"type": "string"}},
        },
    },
}
TOOLS = [ADD]
F = [{"type": "function", "function": {"name": "f"}}]  # the tool test_reference.WRAPPERS call


def _both(text: str, tools: Any = TOOLS) -> ParseResult:
    check_stream(text, list(range(1, len(text))), tools)
    return parse_tool_calls(text, tools)


def _started_then_rejected(head: str) -> None:
    """``head`` is rejected, finished and streamed; streamed, its call had started: the
    stream sent its start, then ends it with the rejection (its index), not an end."""
    _only_rejected(_both(head))
    parser = StreamParser(TOOLS)
    events = parser.feed(head)
    assert [type(e) for e in events if isinstance(e, ToolCallStart)] == [ToolCallStart]
    closed = parser.close()
    assert not any(isinstance(e, ToolCallEnd) for e in closed)
    (cut,) = [e for e in closed if isinstance(e, CallRejected)]
    assert cut.index == 0


def _only_rejected(result: ParseResult, name: str = "add") -> None:
    assert result.calls == []
    assert [r.name for r in result.rejected] == [name]
    (rejected,) = result.rejected
    assert "never ends" in rejected.reason and rejected.raw


# Each family's call to add with {"n": 1, "label": "e…"}, the string cut after "e":
# (the text up to the cut, what the format writes after a call when it has an end marker).
FAMILIES = {
    "hermes": ('<tool_call>{"name": "add", "arguments": {"n": 1, "label": "e', "</tool_call>"),
    "hermes, single quotes": (
        "<tool_call>{'name': 'add', 'arguments': {'n': 1, 'label': 'e",
        "</tool_call>",
    ),
    "qwen (hermes blocks, a line each)": (
        '<tool_call>\n{"name": "add", "arguments": {"n": 1, "label": "e',
        "</tool_call>",
    ),
    "[TOOL_CALL] rescue block": (
        '[TOOL_CALL]{"name": "add", "arguments": {"n": 1, "label": "e',
        "[/TOOL_CALL]",
    ),
    "[TOOL_CALL], single quotes": (
        "[TOOL_CALL]{'name': 'add', 'arguments': {'n': 1, 'label': 'e",
        "[/TOOL_CALL]",
    ),
    "mistral [TOOL_CALLS] list": (
        '[TOOL_CALLS] [{"name": "add", "arguments": {"n": 1, "label": "e',
        "",
    ),
    "mistral [TOOL_CALLS] list, single quotes": (
        "[TOOL_CALLS] [{'name': 'add', 'arguments': {'n': 1, 'label': 'e",
        "",
    ),
    "mistral v11 [ARGS]": ('[TOOL_CALLS]add[ARGS]{"n": 1, "label": "e', ""),
    "mistral v11 [ARGS], single quotes": ("[TOOL_CALLS]add[ARGS]{'n': 1, 'label': 'e", ""),
    "llama3 json": ('{"name": "add", "parameters": {"n": 1, "label": "e', ""),
    "llama3 json, single quotes": ("{'name': 'add', 'parameters': {'n': 1, 'label': 'e", ""),
    "llama3 <|python_tag|>": (
        '<|python_tag|>{"name": "add", "parameters": {"n": 1, "label": "e',
        "",
    ),
    "nemotron": ('<TOOLCALL>[{"name": "add", "arguments": {"n": 1, "label": "e', "</TOOLCALL>"),
    "jamba": ('<tool_calls>[{"name": "add", "arguments": {"n": 1, "label": "e', "</tool_calls>"),
    "gemma 4": ('<|tool_call>call:add{n:1,label:<|"|>e', "<tool_call|>"),
    "functiongemma": ("<start_function_call>call:add{n:1,label:<escape>e", "<end_function_call>"),
}


@pytest.mark.parametrize(("head", "end"), FAMILIES.values(), ids=FAMILIES.keys())
def test_a_later_string_cut_by_the_end_of_the_output_rejects_the_call(head: str, end: str) -> None:
    _started_then_rejected(head)


@pytest.mark.parametrize(
    ("head", "end"),
    [v for v in FAMILIES.values() if v[1]],
    ids=[k for k, v in FAMILIES.items() if v[1]],
)
def test_a_later_string_cut_by_the_end_marker_rejects_the_call(head: str, end: str) -> None:
    result = _both(head + end + " Done.")
    _only_rejected(result)
    assert end not in result.content
    assert result.content.strip() in ("", "Done.")


# The Python-call formats start a call once its arguments pass COMMIT_AFTER characters
# (so that a long value streams): a string longer than that, cut, has started its call.
LONG = "e" * (COMMIT_AFTER + 20)
PYTHONIC = {
    "pythonic": f"[add(n=1, label='{LONG}",
    "pythonic, double quotes": f'[add(n=1, label="{LONG}',
    "llama 4": f"<|python_start|>[add(n=1, label='{LONG}",
    "olmo 3": f"<function_calls>add(n=1, label='{LONG}",
}


@pytest.mark.parametrize("head", PYTHONIC.values(), ids=PYTHONIC.keys())
def test_a_python_call_cut_inside_a_long_string_is_rejected_once_started(head: str) -> None:
    _started_then_rejected(head)


@pytest.mark.parametrize("head", PYTHONIC.values(), ids=PYTHONIC.keys())
def test_a_python_call_whose_long_string_ended_keeps_its_value(head: str) -> None:
    # Cut after the string's closing quote: the value is whole, and what streamed stands.
    quote = "'" if head.endswith("'" + LONG) else '"'
    (call,) = _both(head + quote).calls
    assert call.arguments == {"n": 1, "label": LONG}


NEXT_DOUBLE = '<tool_call>{"name": "add", "arguments": {"n": 2}}</tool_call>'
NEXT_SINGLE = "<tool_call>{'name': 'add', 'arguments': {'n': 2}}</tool_call>"


@pytest.mark.parametrize(
    ("head", "end", "after"),
    [
        (*FAMILIES["hermes"], NEXT_SINGLE),
        (*FAMILIES["hermes, single quotes"], NEXT_DOUBLE),
        (*FAMILIES["[TOOL_CALL] rescue block"], NEXT_SINGLE),
    ],
)
def test_the_text_after_an_end_marker_that_ends_the_block_is_read_again(
    head: str, end: str, after: str
) -> None:
    # The string never closes (no quote of its kind follows): the block ended at its
    # marker, and what follows is output again, the next call included.
    result = _both(head + end + " Next: " + after)
    assert [(c.name, c.arguments) for c in result.calls] == [("add", {"n": 2})]
    assert [r.name for r in result.rejected] == ["add"]
    assert result.content == " Next: "


def test_an_end_marker_inside_a_string_is_held_until_the_string_decides() -> None:
    parser = StreamParser(TOOLS)
    events = parser.feed(
        '<tool_call>{"name": "add", "arguments": {"n": 1, "label": "e</tool_call> Do'
    )
    sent = "".join(e.text for e in events if isinstance(e, ToolCallArgumentsDelta))
    assert sent == '{"n":1,"label":"e'  # nothing from the marker on, yet
    events = parser.feed('ne."}}</tool_call>') + parser.close()
    (end,) = [e for e in events if isinstance(e, ToolCallEnd)]
    assert end.call.arguments == {"n": 1, "label": "e</tool_call> Done."}


def test_a_marker_the_string_holds_is_data_when_its_quote_comes_within_the_window() -> None:
    filler = "x" * (MARKER_WINDOW - 10)
    text = (
        '<tool_call>{"name": "add", "arguments": {"n": 1, "label": "a</tool_call>'
        + filler
        + '"}}</tool_call>'
    )
    (call,) = _both_cheaply(text).calls
    assert call.arguments == {"n": 1, "label": "a</tool_call>" + filler}


def test_a_marker_is_data_once_a_window_of_text_follows_it_without_the_quote() -> None:
    filler = "x" * (MARKER_WINDOW + 10)
    closed = (
        '<tool_call>{"name": "add", "arguments": {"n": 1, "label": "a</tool_call>'
        + filler
        + '"}}</tool_call>'
    )
    (call,) = _both_cheaply(closed).calls
    assert call.arguments["label"] == "a</tool_call>" + filler
    # Never closed, the string runs past the marker (data) to the end: rejected.
    _only_rejected(_both_cheaply(closed[: -len('"}}</tool_call>')]))


def test_a_marker_just_short_of_the_window_ends_the_block_when_no_quote_follows() -> None:
    filler = "x" * (MARKER_WINDOW - 1)
    text = '<tool_call>{"name": "add", "arguments": {"n": 1, "label": "a</tool_call>' + filler
    result = _both_cheaply(text)
    _only_rejected(result)
    assert result.content == filler


def _both_cheaply(text: str) -> ParseResult:
    """Long texts: streamed in 1-character deltas around the marker, 97 elsewhere."""
    marker = text.find("</tool_call>")
    cuts = list(range(0, len(text), 97)) + list(range(marker - 3, marker + 16))
    check_stream(text, cuts, TOOLS)
    return parse_tool_calls(text, TOOLS)


# -- the property ------------------------------------------------------------------------


def _single_quoted(text: str) -> str:
    """``text`` as the inside of a single-quoted string (JSON's escapes, ' escaped)."""
    return json.dumps(text, ensure_ascii=False)[1:-1].replace('\\"', '"').replace("'", "\\'")


@PROFILE
@given(
    wrapper=st.sampled_from(sorted(WRAPPERS)),
    first=st.tuples(_STRINGS, _VALUES),
    later=st.lists(st.tuples(_STRINGS, _VALUES), max_size=2),
    key=_STRINGS,
    value=_STRINGS,
    single=st.booleans(),
    tail=st.booleans(),
    data=st.data(),
)
def test_a_string_cut_anywhere_is_never_a_value(
    wrapper: str,
    first: tuple[str, Any],
    later: list[tuple[str, Any]],
    key: str,
    value: str,
    single: bool,
    tail: bool,
    data: st.DataObject,
) -> None:
    """Any call text cut inside a later string value (at any character of it), the
    output ending there or the format's closing text written after it: no call
    comes out with that value cut short, or at all; the call is rejected."""
    members = [first, *later]
    written = ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in members)
    inside = _single_quoted(value) if single else json.dumps(value, ensure_ascii=False)[1:-1]
    cut = data.draw(st.integers(0, len(inside)))  # anywhere, inside an escape too
    quote = "'" if single else '"'
    arguments = "{" + written + ", " + json.dumps(key) + ": " + quote + inside[:cut]
    head, after = WRAPPERS[wrapper]("\x00").split("\x00")
    text = head + arguments + ("}" + after if tail else "")
    assert quote not in after  # (the closing text never closes the string)
    result = parse_tool_calls(text, F)
    assert result.calls == [], (wrapper, text)
    assert [r.name for r in result.rejected] == ["f"], (wrapper, text)
    check_stream(text, data.draw(st.lists(st.integers(1, len(text)), max_size=12)), F)
