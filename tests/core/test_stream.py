"""StreamParser's own promises: bounded memory, short hold-back, no leaks, close()."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from streamcheck import check_stream, stream  # type: ignore[import-not-found]

from toolrelay import (
    CallRejected,
    ContentDelta,
    StreamParser,
    ToolCallArgumentsDelta,
    ToolCallEnd,
    ToolCallStart,
    parse_tool_calls,
)
from toolrelay.formats import FORMATS, opener_table
from toolrelay.formats.markers import MarkerSearch

CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'
LONGEST_MARKER = opener_table("auto").longest


def test_released_prose_is_not_kept() -> None:
    parser = StreamParser()
    sentence = "The quick brown fox jumps over the lazy dog. "
    for _ in range(20_000):
        parser.feed(sentence)
        assert len(parser._buf) < LONGEST_MARKER
    assert not [e for e in parser.close() if not isinstance(e, ContentDelta)]


def test_a_long_argument_streams_while_it_arrives() -> None:
    parser = StreamParser()
    parser.feed('<tool_call>{"name": "write", "arguments": {"text": "')
    streamed = 0
    for _ in range(1_000):
        events = parser.feed("0123456789" * 10)
        streamed += sum(len(e.text) for e in events if isinstance(e, ToolCallArgumentsDelta))
        assert len(parser._buf) < LONGEST_MARKER
    assert streamed >= 100 * 1_000
    events = parser.feed('"}}</tool_call>') + parser.close()
    (end,) = [e for e in events if isinstance(e, ToolCallEnd)]
    assert len(end.call.arguments["text"]) == 100_000


def test_only_a_possible_partial_marker_is_held_back() -> None:
    parser = StreamParser()
    assert parser.feed("Hello <tool_") == [ContentDelta("Hello ")]
    assert parser.feed("ca") == []
    assert parser.feed("ke> is not a marker") == [ContentDelta("<tool_cake> is not a marker")]


@pytest.mark.parametrize("pieces", [1, 2, 3, 5, 10])
def test_a_marker_split_over_many_deltas_never_leaks(pieces: int) -> None:
    text = "Checking. " + CALL + " Done."
    size = max(1, len("<tool_call>") // pieces)
    start = len("Checking. ")
    cuts = [*range(start, start + len("<tool_call>"), size), start + 30]
    events = stream(text, cuts)
    assert "".join(e.text for e in events if isinstance(e, ContentDelta)) == "Checking.  Done."
    for event in events:
        if isinstance(event, ContentDelta):
            assert "<" not in event.text and "tool_call" not in event.text


def test_name_comes_once_complete_and_arguments_as_prefixes() -> None:
    events = stream(CALL, list(range(1, len(CALL))))
    starts = [e for e in events if isinstance(e, ToolCallStart)]
    assert [(s.index, s.name) for s in starts] == [(0, "get_weather")]
    deltas = "".join(e.text for e in events if isinstance(e, ToolCallArgumentsDelta))
    (end,) = [e for e in events if isinstance(e, ToolCallEnd)]
    assert deltas == end.call.arguments_json == '{"city":"Oslo"}'


def test_arguments_that_need_repair_still_concatenate_to_the_final_json() -> None:
    text = "<tool_call>{'name': 'f', 'arguments': {'a': True, 'b': [1, 2,], 'c': None,}"
    check_stream(text, list(range(1, len(text))))
    (end,) = [e for e in stream(text, []) if isinstance(e, ToolCallEnd)]
    assert end.call.arguments == {"a": True, "b": [1, 2], "c": None}


def test_close_flushes_held_text_and_finishes_an_open_call() -> None:
    parser = StreamParser()
    assert parser.feed("almost <tool_c") == [ContentDelta("almost ")]
    assert parser.close() == [ContentDelta("<tool_c")]
    parser = StreamParser()
    parser.feed('[TOOL_CALL]{"name": "f", "arguments": {"n": 1, "q": "finished"')
    (end,) = [e for e in parser.close() if isinstance(e, ToolCallEnd)]
    assert end.call.arguments == {"n": 1, "q": "finished"}
    # Cut inside a string, the value would be cut short: the started call is rejected.
    parser = StreamParser()
    parser.feed('[TOOL_CALL]{"name": "f", "arguments": {"n": 1, "q": "unfinished')
    closed = parser.close()
    assert not any(isinstance(e, ToolCallEnd) for e in closed)
    (cut,) = [e for e in closed if isinstance(e, CallRejected)]
    assert cut.index == 0 and "never ends" in cut.call.reason


def test_feed_after_close_is_an_error() -> None:
    parser = StreamParser()
    parser.close()
    with pytest.raises(RuntimeError):
        parser.feed("more")
    assert parser.close() == []


@settings(max_examples=200, deadline=None)
@given(
    prose=st.text(alphabet=st.characters(blacklist_characters="<[{`>af"), max_size=50),
    cuts=st.lists(st.integers(1, 200), max_size=20),
)
def test_calls_between_prose_in_any_chunking(prose: str, cuts: list[int]) -> None:
    text = prose + CALL + prose + '[TOOL_CALL]{"name": "g", "arguments": {}}[/TOOL_CALL]'
    check_stream(text, cuts)
    events = stream(text, cuts)
    assert [e.call.name for e in events if isinstance(e, ToolCallEnd)] == ["get_weather", "g"]


@pytest.mark.parametrize(
    ("text", "names", "reasoning"),
    [
        ('<think>plan <tool_call>{"name": "f", "arguments": {}}</tool_call></think>ok', [], None),
        ('<think>plan <tool_call>\n{"name": "f", "arguments": {"a": 1}}', ["f"], "plan "),
        ("<think>plan <function=f><parameter=a>1", ["f"], "plan "),
        ('<think>x</think>{"name": "g", "arguments": {}}', ["g"], "x"),
    ],
)
def test_reasoning_policy(text: str, names: list[str], reasoning: str | None) -> None:
    check_stream(text, list(range(1, len(text))))
    result = parse_tool_calls(text)
    assert [c.name for c in result.calls] == names
    if reasoning is not None:
        assert result.reasoning == reasoning
    else:
        assert "<tool_call>" in (result.reasoning or "")


@pytest.mark.parametrize(
    "head",
    [
        '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{"text": "',
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0"
        '<|tool_call_argument_begin|>{"text": "',
        '[TOOL_CALLS]f{"text": "',
        '<|channel|>commentary to=functions.f <|constrain|>json<|message|>{"text": "',
        '<tool_call>{"name": "f", "arguments": {"text": "',
        "<tool_call>\n<function=f>\n<parameter=text>\n",
    ],
)
def test_arguments_stream_before_the_call_closes(head: str) -> None:
    parser = StreamParser(
        [
            {
                "type": "function",
                "function": {
                    "name": "f",
                    "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
                },
            }
        ]
    )
    events = parser.feed(head) + parser.feed("abc" * 100)
    assert [e.name for e in events if isinstance(e, ToolCallStart)] == ["f"]
    streamed = "".join(e.text for e in events if isinstance(e, ToolCallArgumentsDelta))
    assert streamed.endswith("abc" * 99)


CODE = 'def f(x):\n    """Say "hi"."""\n\treturn x + "\\\\n"  # é 😀\n' * 40


@pytest.mark.parametrize("size", [7, 64, 1000, 100_000])
@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>{"name": "write", "arguments": {"text": ' + json.dumps(CODE) + "}}</tool_call>",
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>write<｜tool▁sep｜>"
        + json.dumps({"text": CODE})
        + "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
        "[write(text=" + json.dumps(CODE) + ")]",
        "<tool_call>\n<function=write>\n<parameter=text>\n" + CODE + "\n</parameter>\n</function>",
    ],
    ids=["hermes", "deepseek", "pythonic", "xml"],
)
def test_escapes_do_not_multiply_events(text: str, size: int) -> None:
    """A feed gives at most one arguments delta per call, however many escapes it holds."""
    parser = StreamParser([{"type": "function", "function": {"name": "write"}}])
    arguments = ""
    for start in range(0, len(text), size):
        events = parser.feed(text[start : start + size])
        deltas = [e for e in events if isinstance(e, ToolCallArgumentsDelta)]
        assert len(deltas) <= 1
        arguments += "".join(d.text for d in deltas)
    events = parser.close()
    assert len([e for e in events if isinstance(e, ToolCallArgumentsDelta)]) <= 1
    arguments += "".join(e.text for e in events if isinstance(e, ToolCallArgumentsDelta))
    assert json.loads(arguments)["text"].rstrip("\n") == CODE.rstrip("\n")


@settings(max_examples=300, deadline=None)
@given(
    pieces=st.lists(
        st.sampled_from(sorted(opener_table("auto").openers))
        | st.sampled_from(["a", "functools", "all", "to", "\n", " ", "x", "=", "<", "[", "{"]),
        max_size=60,
    ),
)
def test_the_anchored_search_finds_what_the_pattern_finds(pieces: list[str]) -> None:
    table = opener_table("auto")
    text = "".join(pieces) * 8  # long enough for the anchored search
    search = MarkerSearch(table)
    pos = 0
    while True:
        expected = table.search(text, pos)
        assert search.anchored(text, pos) == expected
        if expected is None:
            break
        pos = expected[0] + 1


@pytest.mark.parametrize(
    "text",
    [
        "<minimax:tool_call>functools[ x",  # a marker whose last character begins others
        "<minimax:tool_call>see [TOOL_CALLS]f{}",
    ],
)
def test_a_marker_in_prose_after_a_section_is_found_however_cut(text: str) -> None:
    check_stream(text, list(range(1, len(text))))


FOLLOWING = st.text(alphabet=" \t\n\u00a0\u2003\"'{[(]})aZ_9.-=", max_size=40)


@settings(max_examples=400, deadline=None)
@given(following=FOLLOWING | st.sampled_from(["", " ", '"a"', "f(", "a" * 130 + "("]))
def test_a_marker_is_passed_over_only_where_no_sniff_could_claim_it(following: str) -> None:
    # ``follows`` lets the marker search pass a bracket over in C: it must match
    # wherever the marker's sniff could say anything but no.
    openers = [o for f in FORMATS for o in f.openers if o.follows is not None]
    assert openers
    for opener in openers:
        assert opener.sniff is not None
        if opener.sniff(following) is not False:
            assert re.match(opener.follows, following), (opener.marker, following)


def test_bare_brackets_in_prose_cost_no_region() -> None:
    prose = "The quick (brown) fox [jumps] over {the} lazy <dog>. " * 20
    search = MarkerSearch(opener_table("auto"))
    assert search.anchored(prose, 0) is None
    assert search.search(prose, 0, True) is None
    assert parse_tool_calls(prose).content == prose
