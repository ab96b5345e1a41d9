"""The C decoder's path gives exactly what the lenient reader gives, or stands aside.

A finished parse reads a well-formed call with ``json``'s C scanner; a stream
of small deltas never has a whole value at hand and reads it token by token.
Every text here is parsed both ways and must agree to the character: the
cases are the ones where a C decoder and the lenient writer could differ.
"""

from __future__ import annotations

import itertools
import json
import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scaled import examples  # type: ignore[import-not-found]
from streamcheck import check_stream  # type: ignore[import-not-found]

from tests.strategies import json_trees
from toolrelay import parse_tool_calls
from toolrelay.repair import MAX_DEPTH, JsonLexer, JsonWriter, lex_value
from toolrelay.strictjson import read_member, strict_json

TRICKY_ARGUMENTS = [
    '{"a": 1, "a": 2}',  # a duplicate key
    '{"a": {"b": 1, "b": 2}, "c": [{"d": 1, "d": 1}]}',
    '{"a\\u003a": 1, "a:": 2}',  # an escaped colon in a duplicate key
    '{"x": "\\\\u003a", "y": 1}',  # text that looks like an escaped colon
    '{"a": 1e999}',  # beyond a double
    '{"a": -1e999, "b": null}',
    '{"a": "null", "b": 1e400}',
    '{"a": NaN}',
    '{"a": Infinity}',
    '{"a": -0, "b": -0.0, "c": 1E5, "d": 2.50, "e": 1e-400}',
    '{"a": 123456789012345678901234567890}',  # beyond 64 bits
    '{"a": ' + "7" * 5000 + "}",  # beyond Python's digit limit
    '{"a": "\\ud800"}',  # a lone surrogate
    '{"a": "\\udc00\\ud83d\\ude00\\ud83d"}',
    '{"a": "\\u00e9\\n\\t\\"\\/\\b\\f\\r"}',
    '{"a": ' + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "}",
    '{"a": ' + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "}",  # one level too deep
    '{"a": ' + "[" * 300 + "]" * 300 + "}",
    '{"a": "' + "x" * 3000 + '"}',
    '{"rows": [' + ", ".join(f'{{"id": {i}, "v": {i}.5, "n": null}}' for i in range(40)) + "]}",
    '{"rows": [' + ", ".join(f'{{"id": {i}, "id": {i}}}' for i in range(40)) + "]}",
    '{"rows": [' + ", ".join(f'{{"id": {i}, "v": 1e999}}' for i in range(40)) + "]}",
    "{}",
    '{"": ""}',
]

WRAPPERS = [
    '<tool_call>{{"name": "f", "arguments": {args}}}</tool_call>',
    '<tool_call>{{"arguments": {args}, "name": "f", "id": "c1"}}</tool_call>',
    '<tool_call>[{{"name": "f", "arguments": {args}}}, {{"name": "g", "arguments": {args}}}]'
    "</tool_call>",
    '<tool_call>{{"function": {{"name": "f", "arguments": {args}}}, "type": "function"}}'
    "</tool_call>",
    '{{"tool_calls": [{{"name": "f", "arguments": {args}}}]}}',
    'Sure: {{"name": "f", "parameters": {args}}} done',
    '[TOOL_CALLS] [{{"name": "f", "arguments": {args}}}]',
    "[TOOL_CALLS]f{args}",
    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{args}<｜tool▁call▁end｜>",
    "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{args}<|call|>",
    '<tool_call>{{"name": "f", "name": "g", "arguments": {args}}}</tool_call>',
    '<tool_call>{{"name": "f", "arguments": {args}, "arguments": {{"z": 1}}}}</tool_call>',
    '<tool_call>{{"name": "f", "arguments": {args}, "extra": 1}}</tool_call>',
    '{{"name": "f", "arguments": {args}, "note": "x"}}',
]


@pytest.mark.parametrize("wrapper", WRAPPERS)
@pytest.mark.parametrize("arguments", TRICKY_ARGUMENTS)
def test_whole_and_streamed_agree(wrapper: str, arguments: str) -> None:
    text = wrapper.format(args=arguments)
    step = max(1, len(text) // 40)
    check_stream(text, list(range(0, len(text), step)))
    check_stream(text, [len(text) // 2])


def _strict_text(text: str) -> str | None:
    decoded = strict_json(text, 0)
    return None if decoded is None else decoded.text.decode()


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1, "a": 2}',
        '{"a": 1e999}',
        '{"a": NaN}',
        '{"a": 123456789012345678901234567890}',
        '{"a": "\\ud800"}',
        '{"a": ' + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "}",
        '{"a": ',
        "{'a': 1}",
    ],
)
def test_what_the_c_path_refuses(text: str) -> None:
    assert _strict_text(text) is None
    assert _strict_text('{"rows": [' + ",".join([text] * 20) + "]}") is None  # counted, too


def test_what_the_c_path_takes() -> None:
    assert _strict_text('{"a" : [1, 2.50, -0, 1E5, true, null, "\\u00e9"]}') == (
        '{"a":[1,2.5,0,100000.0,true,null,"é"]}'
    )


def test_the_c_path_takes_values_nested_deep_within_the_limit() -> None:
    # Longer than 2 * MAX_DEPTH, so checked for depth by orjson's own limit (found by the
    # mutation check: a broken check there only sent such values to the slow path).
    for inner in ("[" * (MAX_DEPTH - 2) + "]" * (MAX_DEPTH - 2), '{"a": ' * 5 + "1" + "}" * 5):
        text = '{"a": ' + inner + ', "pad": "' + "x" * 300 + '"}'
        assert _strict_text(text) == json.dumps(json.loads(text), separators=(",", ":"))


def test_objects_written_member_by_member_nest_at_most_max_depth() -> None:
    # Call objects (holding "arguments") are written member by member, each checked for
    # depth on the way: MAX_DEPTH of them nested is a value, one more is refused and
    # left to the lenient reader, which ends the value at its limit (the mutation
    # check: `level > MAX_DEPTH` let the deeper one by).
    def nested(count: int) -> str:
        return '{"arguments": ' * count + "1" + "}" * count

    apart = frozenset({"arguments"})
    assert strict_json(nested(MAX_DEPTH), 0, apart=apart) is not None
    assert strict_json(nested(MAX_DEPTH + 1), 0, apart=apart) is None


def test_the_c_path_checks_depth_in_a_thread_of_its_own() -> None:
    # The lists that pad a deep value are made once per thread: a thread's first deep
    # value makes them (the mutation check: a broken cache only failed in a new thread).
    text = (
        '{"a": ' + "[" * (MAX_DEPTH - 2) + "]" * (MAX_DEPTH - 2) + ', "pad": "' + "x" * 300 + '"}'
    )
    read: list[str | None] = []
    thread = threading.Thread(target=lambda: read.append(_strict_text(text)))
    thread.start()
    thread.join()
    assert read == [json.dumps(json.loads(text), separators=(",", ":"))]


def test_the_c_path_takes_many_small_objects_it_counts() -> None:
    # Sixteen keys and more near the value's start: duplicates and overflow are found by
    # counting ':' (and its escapes, of both cases) and 'null' in the value's own text,
    # not before or after it (the mutation check: a count taken over the wrong stretch,
    # or none, sent such values to the slow path or crashed).
    rows = ", ".join(f'{{"k{i}\\u003{"aAa"[i % 3]}": null, "t": "a:b null"}}' for i in range(20))
    text = '{"rows": [' + rows + "]}"
    before = ("", 'said \\u003a\\u003A: {"x": null} ')
    for prefix, suffix in itertools.product(before, ("", " then \\u003A\\u003a: null")):
        decoded = strict_json(prefix + text + suffix, len(prefix))
        assert decoded is not None
        assert decoded.value == json.loads(text)
        assert decoded.text == json.dumps(json.loads(text), separators=(",", ":")).encode()


def test_values_of_any_length_and_where_they_stop() -> None:
    # Read from a slice that widens: each value is read whole, however long, and
    # a value followed by text ends where json.raw_decode says it ends.
    for size in (10, 4_000, 4_100, 40_000, 300_000):
        for text in (
            '{"a": "' + "x" * size + '"}',
            '{"a": [' + ", ".join(["1"] * (size // 3)) + "]}",
            '{"a": 1.' + "5" * min(size, 5_000) + "}",  # a number across the slice's end
            "[" + "[1], " * (size // 5) + "2]",
        ):
            # Near the buffer's start it is read as it is; further on, from the slice.
            for prefix, after in itertools.product(
                ("prefix ", "p" * 5_000 + " "), ("", " tail", "\n<|end|>")
            ):
                buf = prefix + text + after
                decoded = strict_json(buf, len(prefix))
                assert decoded is not None, text[:40]
                value, end = json.JSONDecoder().raw_decode(buf, len(prefix))
                assert (decoded.value, decoded.end) == (value, end)
    long_string = '{"a": "' + "x" * 50_000
    assert strict_json(long_string, 0) is None  # never closed
    assert strict_json(long_string + '"}', 0) is not None


json_values = json_trees(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    st.text(max_size=6),
    leaves=20,
    width=4,
    object_width=None,
)


@settings(max_examples=examples(300), deadline=None)
@given(
    arguments=st.dictionaries(st.text(max_size=6), json_values, max_size=6), indent=st.booleans()
)
def test_any_arguments_read_at_once_as_token_by_token(
    arguments: dict[str, Any], indent: bool
) -> None:
    body = json.dumps({"name": "f", "arguments": arguments}, indent=2 if indent else None)
    text = "<tool_call>" + body + "</tool_call>"
    (call,) = parse_tool_calls(text).calls
    assert call.arguments == json.loads(call.arguments_json)
    check_stream(text, list(range(0, len(text), 5)))


def _written(text: str, step: int, members: Any) -> str:
    """``text`` fed to a writer ``step`` characters at a time, as a stream parser feeds it."""
    lexer, writer = JsonLexer(), JsonWriter()
    out: list[str] = []
    held = ""
    for start in range(0, len(text), step):
        buf = held + text[start : start + step]
        pos, _ = lex_value(lexer, writer, buf, 0, False, members)
        held = buf[pos:]
        out.append(writer.take())
    lex_value(lexer, writer, held, 0, True, members)
    writer.finish()
    return "".join(out) + writer.take()


HELD_MEMBERS = [
    *TRICKY_ARGUMENTS,
    '{"rows": [' + ", ".join(['{"a": "}]", "b": [1, {"c": "{"}]}'] * 30) + "]}",
    '{"rows": [{"a": 1}, {"b": ' + '"' + "y" * 700 + '"}, [' + "1, " * 300 + "2]]}",
    '{"a": [1, 2, {"b": broken}, 3], "c": {"d": 1,}}',
    '{"a": [' + "[" * (MAX_DEPTH - 2) + "]" * (MAX_DEPTH - 2) + "]}",
    '{"a": [' + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "]}",
    '{"a": [{"b": 1}, {"b": 2}',  # cut off
]


@pytest.mark.parametrize("step", [1, 4, 17])
@pytest.mark.parametrize("text", HELD_MEMBERS)
def test_members_read_whole_are_written_as_their_tokens(text: str, step: int) -> None:
    assert _written(text, step, read_member) == _written(text, len(text), None)


@settings(max_examples=examples(200), deadline=None)
@given(
    arguments=st.dictionaries(st.text(max_size=6), json_values, max_size=6),
    step=st.integers(1, 9),
    indent=st.booleans(),
)
def test_any_members_read_whole_as_token_by_token(
    arguments: dict[str, Any], step: int, indent: bool
) -> None:
    text = json.dumps(arguments, indent=2 if indent else None)
    assert _written(text, step, read_member) == _written(text, len(text), None)


@pytest.mark.parametrize("step", [1, 4, 17])
@pytest.mark.parametrize("arguments", HELD_MEMBERS)
def test_members_read_whole_in_a_streamed_call(arguments: str, step: int) -> None:
    text = '<tool_call>{"name": "f", "arguments": ' + arguments + "}</tool_call> after"
    check_stream(text, list(range(0, len(text), step)))


LONG_RESTS = [
    '{"rows": [' + ", ".join(['{"a": 1, "b": [2, "]"]}'] * 200),  # cut off
    '{"rows": [' + ", ".join(['{"a": 1}'] * 100) + ', {"a": broken}, ' + '{"b": [2]}, ' * 100,
    '{"rows": [' + ", ".join(['{"a": "' + "x" * 600 + '"}'] * 3) + "]}",
    '{"rows": [[' + "1, " * 400 + "2]",  # cut off inside a long member
]


@pytest.mark.parametrize("text", [*HELD_MEMBERS, *LONG_RESTS])
def test_members_with_a_long_rest_read_as_token_by_token(text: str) -> None:
    # All the text at once: every member has the rest of it after it (no waiting).
    assert _written(text, len(text), read_member) == _written(text, len(text), None)
