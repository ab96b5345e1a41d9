"""Property tests: whatever the text, the parser never raises and keeps its contract."""

from __future__ import annotations

import json
from typing import Any

import orjson
from corpus import load_cases, tools_from_spec  # type: ignore[import-not-found]
from hypothesis import given, settings
from hypothesis import strategies as st
from soup import PIECES  # type: ignore[import-not-found]
from streamcheck import check_stream  # type: ignore[import-not-found]

from tests.strategies import json_trees
from toolrelay import parse_tool_calls
from toolrelay.formats import FORMATS
from toolrelay.repair import repair_json

CASES = load_cases()
MARKERS = sorted({o.marker for f in FORMATS for o in f.openers if len(o.marker) > 3})


def _assert_contract(text: str, tools: Any = None) -> None:
    result = parse_tool_calls(text, tools)
    ids = [c.id for c in result.calls]
    assert len(ids) == len(set(ids)), "ids are unique per result"
    for call in result.calls:
        assert isinstance(orjson.loads(call.arguments_json), dict)
        assert orjson.loads(call.arguments_json) == call.arguments
        assert call.name


markup_text = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=8)), max_size=40).map(
    "".join
)


@settings(max_examples=1000, deadline=None)
@given(text=st.text(max_size=300))
def test_random_text_never_raises(text: str) -> None:
    _assert_contract(text)


# Derandomized: CI runs the same examples every time (new ones come from bench/fuzz_parser.py).
@settings(max_examples=1500, deadline=None, derandomize=True)
@given(text=markup_text, cuts=st.lists(st.integers(1, 300), max_size=20))
def test_random_markup_soup_streams_like_it_parses(text: str, cuts: list[int]) -> None:
    _assert_contract(text)
    check_stream(text, cuts)
    check_stream(text, list(range(1, len(text))))


@settings(max_examples=1000, deadline=None)
@given(case=st.sampled_from(CASES), data=st.data())
def test_random_cuts_of_real_cases(case: dict[str, Any], data: st.DataObject) -> None:
    text = case["text"]
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, len(text)))
    tools = tools_from_spec(case.get("tools"))
    _assert_contract(text[start:end], tools)
    check_stream(text[start:end], data.draw(st.lists(st.integers(1, 200), max_size=10)), tools)


json_values = json_trees(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    st.text(max_size=8),
    leaves=15,
    width=4,
    object_width=None,
)


@settings(max_examples=300, deadline=None)
@given(arguments=st.dictionaries(st.text(max_size=10), json_values, max_size=5))
def test_any_json_arguments_survive_every_wrapper(arguments: dict[str, Any]) -> None:
    body = json.dumps({"name": "tool", "arguments": arguments})
    for text in (
        f"<tool_call>{body}</tool_call>",
        f"[TOOL_CALL]{body}[/TOOL_CALL]",
        f"[TOOL_CALLS] [{body}]",
        body,
    ):
        result = parse_tool_calls(text)
        assert [c.arguments for c in result.calls] == [arguments], text
        assert result.content == ""


@settings(max_examples=300, deadline=None)
@given(value=json_values)
def test_repair_leaves_valid_json_alone(value: Any) -> None:
    assert repair_json(json.dumps(value)) == value


def test_content_never_holds_the_marker_of_a_parsed_call() -> None:
    for case in CASES:
        result = parse_tool_calls(case["text"], tools_from_spec(case.get("tools")))
        if not result.calls:
            continue
        for marker in ("<tool_call>", "[TOOL_CALL]", "[TOOL_CALLS]", "<|tool_call", "<function="):
            if marker in case["text"] and marker not in (case["content"] or ""):
                assert marker not in result.content, case["id"]


# Shrunk from fuzzing: each once broke the agreement between streamed and whole parses.
REGRESSIONS = [
    '{"name""l""parameters"{"",s{',
    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜><｜tool▁call▁end｜><t",
    '{"name": "a", "parameters": {}}\n{"name": "b", "parameters": {}}x',
    '[TOOL_CALLS]h{""""c Y<',
    "[TOOL_CALLS]o.",
    "<function=y>>\n <parameter>\n ",
    "<function=f><parameter=p>\na\r\n</parameter>",
    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜><｜tool▁sep｜>```json```json",
    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜><｜tool▁sep｜>{``````",
    "<start_function_call>call:f{}call:" + "x" * 300,
    '<|channel|>to=n<|message|>"<|end|><',
    '{"name": "get_weather", "parameters": {{"name": "g',
    '```json{""}\n`t',
    # A broken call skipped as prose: where the skip ends does not depend on the cuts.
    '[f(a=<|"|>' + "x" * 90 + "[f(a=" + "0" * 157,
]


def test_fuzz_regressions() -> None:
    tools = [{"type": "function", "function": {"name": "searchTool"}}]
    for text in REGRESSIONS:
        for declared in (None, tools):
            _assert_contract(text, declared)
            check_stream(text, list(range(1, len(text))), declared)
            check_stream(text, [], declared)


def test_lone_surrogates_never_raise() -> None:
    # json.loads of a backend's "\ud800" gives text that orjson refuses to write.
    tools = [
        {
            "type": "function",
            "function": {"name": "f", "parameters": {"properties": {"a": {"type": "integer"}}}},
        }
    ]
    for text in (
        ">>>python\n\ud800\nx",
        "<start_function_call>call:f{a:\ud800}<end_function_call>",
        '<function=f><parameter=a>\ud800\n"</parameter>',
        '<tool_call>{"name": "f", "arguments": {"a": "\ud800\\n"}}</tool_call>',
    ):
        for declared in (None, tools):
            check_stream(text, list(range(1, len(text))), declared)


# -- calls are never invented (issue 10) ---------------------------------------------

DECLARED = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    for name in ("get_weather", "current_time", "github__create_issue")
]
CALL_PIECES = [
    *MARKERS,
    "get_weather",
    "current_time",
    "create_issue",
    "rm_rf",
    "functions.get_weather:0",
    '"name": ',
    '"arguments": ',
    '"city"',
    '"Oslo"',
    "'Rome'",
    "city=",
    "<parameter=city>",
    "</parameter>",
    "{",
    "}",
    "[",
    "]",
    "(",
    ")",
    ":",
    ",",
    "\n",
    "null",
    "42",
]
call_soup = st.lists(st.one_of(st.sampled_from(CALL_PIECES), st.text(max_size=4)), max_size=30).map(
    "".join
)


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [*value.keys(), *(leaf for v in value.values() for leaf in _leaves(v))]
    if isinstance(value, list):
        return [leaf for v in value for leaf in _leaves(v)]
    return [value]


def _written(value: str, text: str) -> bool:
    """The string is in the text as written, or as a JSON or Python string literal writes it."""
    spellings = (
        value,
        json.dumps(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
        repr(value)[1:-1],
    )
    return any(s in text for s in spellings)


@settings(max_examples=800, deadline=None)
@given(text=call_soup, cuts=st.lists(st.integers(1, 300), max_size=10))
def test_no_call_is_invented(text: str, cuts: list[int]) -> None:
    declared = {"get_weather", "current_time", "github__create_issue"}
    result = parse_tool_calls(text, DECLARED)
    for call in result.calls:
        assert call.name in declared, (call, text)
        for leaf in _leaves(call.arguments):
            if isinstance(leaf, str):
                assert _written(leaf, text), (leaf, text)
    for rejected in result.rejected:
        assert rejected.raw and rejected.raw in text, (rejected, text)
    check_stream(text, cuts, DECLARED)
