"""Pythonic and DSL formats: pythonic lists, Llama 4 and Llama 3 python tags, OLMo 3,
FunctionGemma, Gemma 4 and Functionary v3.2.

Every text in ``CASES`` is checked twice: its finished parse against what the
format should give, and its stream (one character at a time, in one piece,
and in random chunks) against the finished parse.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolrelay import (
    CallRejected,
    ContentDelta,
    StreamParser,
    ToolCallArgumentsDelta,
    ToolCallEnd,
    ToolCallStart,
    parse_tool_calls,
)
from toolrelay.events import Event

MARKUP = (
    "<|python_start|>",
    "<|python_end|>",
    "<function_calls>",
    "</function_calls>",
    "<|python_tag|>",
    "<|eom_id|>",
    "<start_function_call>",
    "<end_function_call>",
    "<escape>",
    "<|tool_call>",
    "<tool_call|>",
    '<|"|>',
    ">>>",
)


def tool(name: str, **properties: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "parameters": {
                "type": "object",
                "properties": {key: {"type": kind} for key, kind in properties.items()},
            },
        },
    }


WEATHER_TOOLS = [
    tool("get_weather", city="string", days="integer"),
    tool("search", query="string", limit="integer"),
    tool("write_file", path="string", content="string"),
]


@dataclass(frozen=True)
class Case:
    text: str
    calls: list[tuple[str, dict[str, Any]]]
    content: str = ""
    tools: list[dict[str, Any]] | None = None
    fmt: str = "auto"
    markup_free: bool = True  # no format markup may reach content
    tags: tuple[str, ...] = field(default=())


LONG = "x" * 100

CASES: dict[str, Case] = {
    # -- pythonic -------------------------------------------------------------------
    "pythonic_one": Case(
        "[get_weather(city='Oslo', days=3)]", [("get_weather", {"city": "Oslo", "days": 3})]
    ),
    "pythonic_literals": Case(
        '[register(name="Ann", age=37, role=None, ok=True, no=False, n=null, t=true, '
        "address={'city': 'Oslo', 'zip': [1, 2]}, aliases=['A', \"B\"], pair=(1, 2.5), one=(1,), "
        "empty=(), neg=-4, big=1_000, hexa=0x1F, sci=2.5e3)]",
        [
            (
                "register",
                {
                    "name": "Ann",
                    "age": 37,
                    "role": None,
                    "ok": True,
                    "no": False,
                    "n": None,
                    "t": True,
                    "address": {"city": "Oslo", "zip": [1, 2]},
                    "aliases": ["A", "B"],
                    "pair": [1, 2.5],
                    "one": [1],
                    "empty": [],
                    "neg": -4,
                    "big": 1000,
                    "hexa": 31,
                    "sci": 2500.0,
                },
            )
        ],
    ),
    "pythonic_strings": Case(
        "[say(a='Martha\\'s', b=\"say \\\"hi\\\"\", c='line\\nbreak', d='x' \"y\", e=u'ü', "
        "f='{not json}', g='<escape>')]",
        [
            (
                "say",
                {
                    "a": "Martha's",
                    "b": 'say "hi"',
                    "c": "line\nbreak",
                    "d": "xy",
                    "e": "ü",
                    "f": "{not json}",
                    "g": "<escape>",
                },
            )
        ],
        markup_free=False,
    ),
    "pythonic_several": Case(
        "[get_weather(city='Oslo'), get_time(), do(steps=[], extra={})]",
        [("get_weather", {"city": "Oslo"}), ("get_time", {}), ("do", {"steps": [], "extra": {}})],
    ),
    "pythonic_trailing_comma": Case(
        "[get_weather(city='Oslo',), get_time(),] done",
        [("get_weather", {"city": "Oslo"}), ("get_time", {})],
        " done",
    ),
    "pythonic_bad_siblings": Case(
        "[bad(x=b'z'), calc(x=1e999), pos('Oslo'), var(x=city), dup(a=1, a=2), "
        "par(x=(1)), st(x={1, 2}), nan(x=inf), get_weather(city='Oslo')]",
        [("get_weather", {"city": "Oslo"})],
    ),
    "pythonic_not_literals": Case(
        "[f(a={'a': }), g(a=[1 2]), h(a={'k' 1}), k(a=[1, 2,], b={'k': 1,}, c=(1, 2,))]",
        [("k", {"a": [1, 2], "b": {"k": 1}, "c": [1, 2]})],
    ),
    "pythonic_broken_quote_sibling": Case(
        "[get_weather(city='Oslo'), f(a='x 'y', b='z')]", [("get_weather", {"city": "Oslo"})]
    ),
    "pythonic_nothing_readable": Case(
        "[f(a='x 'y' 'z), g(b='p 'q' 'r)]", [], "[f(a='x 'y' 'z), g(b='p 'q' 'r)]"
    ),
    "pythonic_mismatched_bracket": Case("[foo(x=1])]", [], "[foo(x=1])]"),
    "pythonic_prose_without_tools": Case(
        "Use [see(1)] or [get_weather(city='Oslo')] here",
        [],
        "Use [see(1)] or [get_weather(city='Oslo')] here",
    ),
    "pythonic_prose_with_tools": Case(
        "Sure: [get_weather(city='Oslo')] and [search(query='x')]. Done",
        [("get_weather", {"city": "Oslo"}), ("search", {"query": "x"})],
        "Sure:  and . Done",
        tools=WEATHER_TOOLS,
    ),
    "pythonic_undeclared_name_dropped": Case(
        "[launch(target='moon')] ok", [], " ok", tools=WEATHER_TOOLS
    ),
    "pythonic_not_calls_with_tools": Case(
        "See [note(1)], [link](http://x) and [f(x) for x in y].",
        [],
        "See [note(1)], [link](http://x) and [f(x) for x in y].",
        tools=WEATHER_TOOLS,
    ),
    "pythonic_second_list_needs_tools": Case(
        "[get_weather(city='Oslo')] then [get_time()]",
        [("get_weather", {"city": "Oslo"})],
        " then [get_time()]",
    ),
    "pythonic_leading_space_counts_as_start": Case(
        "  \n[get_weather(city='Oslo')]", [("get_weather", {"city": "Oslo"})], "  \n"
    ),
    "pythonic_unclosed_list": Case(
        "[get_weather(city='Oslo') and more", [("get_weather", {"city": "Oslo"})], "and more"
    ),
    "pythonic_truncated_short_call": Case(
        "[get_weather(city='Oslo'), search(query='ab", [("get_weather", {"city": "Oslo"})]
    ),
    "pythonic_long_argument": Case(
        f"[write_file(path='a.py', content='{LONG}')]",
        [("write_file", {"path": "a.py", "content": LONG})],
        tools=WEATHER_TOOLS,
    ),
    "pythonic_long_then_broken": Case(
        f"[write_file(path='a.py', content='{LONG}', mode=b'w'), search(query='x')] ok",
        [("write_file", {"path": "a.py", "content": LONG}), ("search", {"query": "x"})],
        " ok",
        tools=WEATHER_TOOLS,
    ),
    # Cut inside its string: the content would be cut short, so the call (which had
    # started streaming) is rejected, not handed out with the text so far (issue 22).
    "pythonic_long_truncated": Case(f"[write_file(path='a.py', content='{LONG}", []),
    "pythonic_long_cut_after_its_string": Case(
        f"[write_file(path='a.py', content='{LONG}'",
        [("write_file", {"path": "a.py", "content": LONG})],
    ),
    "pythonic_long_undeclared_call": Case(
        f"[launch(payload='{LONG}{LONG}')] ok", [], " ok", tools=WEATHER_TOOLS
    ),
    "pythonic_prose_in_brackets": Case(
        "See [note(this is " + "long " * 80 + "and never closed",
        [],
        "See [note(this is " + "long " * 80 + "and never closed",
        tools=WEATHER_TOOLS,
    ),
    "pythonic_lone_bracket": Case("Let's try this: [", [], "Let's try this: [", WEATHER_TOOLS),
    "pythonic_named_format": Case(
        "[get_weather(city='Oslo')]", [("get_weather", {"city": "Oslo"})], fmt="pythonic"
    ),
    # -- Llama 4 ----------------------------------------------------------------------
    "llama4_wrapped": Case(
        "Checking. <|python_start|>[get_weather(city='LA'), get_time()]<|python_end|> Done.",
        [("get_weather", {"city": "LA"}), ("get_time", {})],
        "Checking.  Done.",
    ),
    "llama4_no_end_tag": Case(
        "<|python_start|>[get_weather(city='LA'),register(name='Doe', age=9)]",
        [("get_weather", {"city": "LA"}), ("register", {"name": "Doe", "age": 9})],
    ),
    "llama4_no_brackets": Case(
        "<|python_start|>get_weather(city='LA')<|python_end|>", [("get_weather", {"city": "LA"})]
    ),
    "llama4_bad_sibling": Case(
        "<|python_start|>[bad(x=b'z'), get_weather(city='LA')]<|python_end|>",
        [("get_weather", {"city": "LA"})],
    ),
    "llama4_broken": Case("<|python_start|>[foo(x=1])]<|python_end|>", []),
    "llama4_named_format": Case(
        "<|python_start|>[get_weather(city='LA')]",
        [("get_weather", {"city": "LA"})],
        fmt="llama4_pythonic",
    ),
    # -- OLMo 3 -----------------------------------------------------------------------
    "olmo3_lines": Case(
        "<function_calls>get_weather(city='SF', metric='celsius')\nget_time()\n"
        "register(role=null, ok=true, tags=['a'])</function_calls>",
        [
            ("get_weather", {"city": "SF", "metric": "celsius"}),
            ("get_time", {}),
            ("register", {"role": None, "ok": True, "tags": ["a"]}),
        ],
    ),
    "olmo3_bad_sibling": Case(
        "<function_calls>calc(x=1e999)\nget_weather(city='SF')</function_calls>",
        [("get_weather", {"city": "SF"})],
    ),
    "olmo3_broken": Case("<function_calls>foo(x=1])</function_calls>", []),
    "olmo3_text_around": Case(
        "Let me look.\n<function_calls>\nget_weather(city='SF')\n</function_calls>\nOK",
        [("get_weather", {"city": "SF"})],
        "Let me look.\n\nOK",
    ),
    # Not OLMo's Python: an <invoke> block is DSML written without its token (issue 22).
    "olmo3_not_python": Case(
        "<function_calls><invoke name='x'/></function_calls>",
        [("x", {})],
        "",
    ),
    # -- Llama 3 after <|python_tag|> -------------------------------------------------
    "llama3_builtin_call": Case(
        '<|python_tag|>brave_search.call(query="weather in Oslo")<|eom_id|>',
        [("brave_search", {"query": "weather in Oslo"})],
    ),
    "llama3_builtin_text_after": Case(
        'Searching. <|python_tag|>wolfram_alpha.call(query="2+2") then',
        [("wolfram_alpha", {"query": "2+2"})],
        "Searching. then",
    ),
    "llama3_json_after_tag": Case(
        '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}};'
        '{"name": "search", "parameters": {"query": "Paris"}}',
        [("get_weather", {"city": "Paris"}), ("search", {"query": "Paris"})],
        tools=WEATHER_TOOLS,
    ),
    "llama3_json_repeated_tag": Case(
        '<|python_tag|>{"name": "get_weather", "parameters": {}}'
        '<|python_tag|>{"name": "search", "parameters": {}}',
        [("get_weather", {}), ("search", {})],
        tools=WEATHER_TOOLS,
    ),
    "llama3_builtin_named_format": Case(
        '<|python_tag|>brave_search.call(query="x")<|eom_id|><|python_tag|>{"name": "f", '
        '"parameters": {}}',
        [("brave_search", {"query": "x"}), ("f", {})],
        fmt="llama3_builtin",
    ),
    "olmo3_named_format": Case(
        "<function_calls>f(a=1)</function_calls>", [("f", {"a": 1})], fmt="olmo3"
    ),
    "llama3_raw_code_after_tag": Case("<|python_tag|>import math<|eom_id|>", [], "import math"),
    "llama4_stray_end_tag": Case(
        "<|python_start|>[get_weather(city='Oslo')] x <|python_end|>",
        [("get_weather", {"city": "Oslo"})],
        "x ",
    ),
    # -- FunctionGemma ----------------------------------------------------------------
    "functiongemma_bad_header": Case(
        "<start_function_call>call:get weather{a:1}<end_function_call>",
        [],
        "call:get weather{a:1}",
    ),
    "functiongemma_one": Case(
        "<start_function_call>call:get_weather{location:<escape>London<escape>}<end_function_call>",
        [("get_weather", {"location": "London"})],
    ),
    "functiongemma_no_commas": Case(
        "Let me check. <start_function_call>call:search{query:<escape>python<escape>"
        "limit:<escape>10<escape>sort:<escape>relevance<escape>,exact:true,page:2}"
        "<end_function_call>",
        [
            (
                "search",
                {"query": "python", "limit": 10, "sort": "relevance", "exact": True, "page": 2},
            )
        ],
        "Let me check. ",
    ),
    "functiongemma_schema_string": Case(
        "<start_function_call>call:search{query:<escape>10<escape>,limit:<escape>5<escape>}"
        "<end_function_call>",
        [("search", {"query": "10", "limit": 5})],
        tools=WEATHER_TOOLS,
    ),
    "functiongemma_delimited_text": Case(
        "<start_function_call>call:note{text:<escape>a, b: {c} [d] <e><escape>,"
        'n:<escape>12 apples<escape>,j:<escape>{"k": 1}<escape>}<end_function_call>',
        [("note", {"text": "a, b: {c} [d] <e>", "n": "12 apples", "j": {"k": 1}})],
    ),
    "functiongemma_delimited_key": Case(
        "<start_function_call>call:f{<escape>city<escape>:<escape>Oslo<escape>}<end_function_call>",
        [("f", {"city": "Oslo"})],
    ),
    "functiongemma_named_format": Case(
        "<start_function_call>call:f{a:1}<end_function_call>",
        [("f", {"a": 1})],
        fmt="functiongemma",
    ),
    "functiongemma_two_calls": Case(
        "<start_function_call>call:get_weather{location:<escape>London<escape>}"
        "<end_function_call><start_function_call>call:get_time{timezone:<escape>UTC<escape>}"
        "<end_function_call>",
        [("get_weather", {"location": "London"}), ("get_time", {"timezone": "UTC"})],
    ),
    "functiongemma_no_arguments": Case(
        "<start_function_call>call:get_time{}<end_function_call>", [("get_time", {})]
    ),
    # A first string that never ends is no value (issue 22): the call is rejected.
    "functiongemma_truncated": Case(
        "<start_function_call>call:get_weather{location:<escape>Lon",
        [],
    ),
    # Cut inside a later string: the value would be cut short, so the call is rejected
    # (issue 22; tests/core/test_cut_strings.py).
    "functiongemma_truncated_inside_a_later_string": Case(
        "<start_function_call>call:get_weather{days:2,location:<escape>Lon", []
    ),
    "functiongemma_truncated_after_a_member": Case(
        "<start_function_call>call:get_weather{days:2,location:<escape>Lon<escape>",
        [("get_weather", {"days": 2, "location": "Lon"})],
    ),
    "functiongemma_not_a_call": Case(
        "<start_function_call>I changed my mind", [], "I changed my mind"
    ),
    "functiongemma_undeclared": Case(
        "<start_function_call>call:launch{x:1}<end_function_call>after",
        [],
        "after",
        tools=WEATHER_TOOLS,
    ),
    # -- Gemma 4 ----------------------------------------------------------------------
    "gemma4_one": Case(
        '<|tool_call>call:get_weather{city:<|"|>Oslo<|"|>,days:3}<tool_call|>',
        [("get_weather", {"city": "Oslo", "days": 3})],
    ),
    "gemma4_nested": Case(
        'Ok. <|tool_call>call:plan{steps:[<|"|>a<|"|>,<|"|>b<|"|>],'
        'opts:{deep:{x:1.5},name:<|"|>n<|"|>},flag:false}<tool_call|> sent',
        [
            (
                "plan",
                {"steps": ["a", "b"], "opts": {"deep": {"x": 1.5}, "name": "n"}, "flag": False},
            )
        ],
        "Ok.  sent",
    ),
    # Gemma 4 delimits every string and nothing else: a delimited 1 is the text "1".
    "gemma4_two_in_one_block": Case(
        '<|tool_call>call:a{x:<|"|>1<|"|>}call:b{}<tool_call|>', [("a", {"x": "1"}), ("b", {})]
    ),
    "gemma4_missing_end": Case(
        '<|tool_call>call:get_weather{city:<|"|>Oslo<|"|>}',
        [("get_weather", {"city": "Oslo"})],
    ),
    "gemma4_named_format": Case(
        '<|tool_call>call:f{a:<|"|>b<|"|>}<tool_call|>', [("f", {"a": "b"})], fmt="gemma4"
    ),
    # -- Functionary v3.2 -------------------------------------------------------------
    "functionary_named_format": Case('>>>f\n{"a": 1}', [("f", {"a": 1})], fmt="functionary_v3_2"),
    "functionary_calls": Case(
        'all\nLet me check.\n>>>get_weather\n{"city": "Oslo"}>>>search\n{"query": "rain"}',
        [("get_weather", {"city": "Oslo"}), ("search", {"query": "rain"})],
        "Let me check.\n",
    ),
    "functionary_all_later": Case(
        '>>>get_weather\n{"city": "Oslo"}\n>>>all\nIt is sunny.',
        [("get_weather", {"city": "Oslo"})],
        "\nIt is sunny.",
    ),
    "functionary_python": Case(
        ">>>python\nimport math\nprint(math.pi)\n\n>>>all\nDone",
        [("python", {"code": "import math\nprint(math.pi)"})],
        "Done",
    ),
    "functionary_all_mid_text_is_prose": Case(
        "We checked them all\nand more", [], "We checked them all\nand more"
    ),
    "functionary_repl_is_prose": Case(
        "Try:\n>>> print(1)\n1\n>>>x = 2", [], "Try:\n>>> print(1)\n1\n>>>x = 2", markup_free=False
    ),
    "functionary_name_without_arguments": Case(
        ">>>hello\nworld", [], ">>>hello\nworld", markup_free=False
    ),
    "functionary_undeclared": Case('>>>launch\n{"x": 1}>>>all\nok', [], "ok", tools=WEATHER_TOOLS),
}


# -- the checks -------------------------------------------------------------------------


def run_stream(text: str, pieces: list[str], tools: Any, fmt: str) -> list[Event]:
    parser = StreamParser(tools, fmt)
    events: list[Event] = []
    for piece in pieces:
        events += parser.feed(piece)
    events += parser.close()
    return events


def cut(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c for c in cuts if 0 < c < len(text)})
    return [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]


def assert_stream_agrees(case: Case, pieces: list[str]) -> list[Event]:
    """The stream gives the finished parse's calls and content, and obeys the event rules."""
    expected = parse_tool_calls(case.text, case.tools, case.fmt)
    events = run_stream(case.text, pieces, case.tools, case.fmt)
    content = "".join(e.text for e in events if isinstance(e, ContentDelta))
    assert content == expected.content
    if case.markup_free:
        for event in events:
            if isinstance(event, ContentDelta):
                assert not any(m in event.text for m in MARKUP), event.text
        assert not any(m in content for m in MARKUP), content
    started: dict[int, str] = {}
    arguments: dict[int, list[str]] = {}
    ended: list[ToolCallEnd] = []
    cut: list[int] = []
    for event in events:
        if isinstance(event, ToolCallStart):
            assert event.index == len(started)
            started[event.index] = event.name
            arguments[event.index] = []
        elif isinstance(event, ToolCallArgumentsDelta):
            assert event.index in started and event.text
            assert event.index not in {e.index for e in ended}
            arguments[event.index].append(event.text)
        elif isinstance(event, ToolCallEnd):
            assert "".join(arguments[event.index]) == event.call.arguments_json
            assert started[event.index] == event.call.name
            ended.append(event)
        elif isinstance(event, CallRejected) and event.index is not None:
            cut.append(event.index)  # started, then its text ended inside a string
    assert len(ended) + len(cut) == len(started)
    got = [(e.call.name, e.call.arguments, e.call.arguments_json) for e in ended]
    assert got == [(c.name, c.arguments, c.arguments_json) for c in expected.calls]
    return events


@pytest.mark.parametrize("name", list(CASES))
def test_finished_parse(name: str) -> None:
    case = CASES[name]
    result = parse_tool_calls(case.text, case.tools, case.fmt)
    assert [(c.name, c.arguments) for c in result.calls] == case.calls
    assert result.content == case.content


@pytest.mark.parametrize("name", list(CASES))
def test_one_character_at_a_time_and_whole(name: str) -> None:
    case = CASES[name]
    assert_stream_agrees(case, list(case.text))
    assert_stream_agrees(case, [case.text])


@pytest.mark.parametrize("name", list(CASES))
@settings(max_examples=30, deadline=None)
@given(cuts=st.lists(st.integers(min_value=1, max_value=300), max_size=25))
def test_random_chunks(name: str, cuts: list[int]) -> None:
    case = CASES[name]
    assert_stream_agrees(case, cut(case.text, cuts))


# -- streaming behaviour ------------------------------------------------------------------


def test_long_argument_streams_before_the_call_is_complete() -> None:
    text = f"[write_file(path='a.py', content='{LONG}')]"
    parser = StreamParser(WEATHER_TOOLS)
    events = parser.feed(text[: text.index(LONG) + 50])
    assert any(isinstance(e, ToolCallStart) and e.name == "write_file" for e in events)
    streamed = "".join(e.text for e in events if isinstance(e, ToolCallArgumentsDelta))
    assert streamed.startswith('{"path":"a.py","content":"xxxx')


def test_short_call_is_held_until_its_closing_parenthesis() -> None:
    text = "[get_weather(city='Oslo', days=3)]"
    parser = StreamParser(WEATHER_TOOLS)
    assert not any(isinstance(e, ToolCallStart) for e in parser.feed(text[:-2]))
    events = parser.feed(text[-2:]) + parser.close()
    assert [type(e) for e in events] == [ToolCallStart, ToolCallArgumentsDelta, ToolCallEnd]


def test_string_argument_streams_once_it_cannot_be_a_number() -> None:
    # The call starts once its first member is read: a string after it streams.
    text = "<start_function_call>call:note{id:1,text:<escape>hello there, world<escape>}"
    parser = StreamParser()
    events = parser.feed(text[: text.index("there")])
    streamed = "".join(e.text for e in events if isinstance(e, ToolCallArgumentsDelta))
    assert streamed == '{"id":1,"text":"hello '


def test_python_code_streams() -> None:
    parser = StreamParser()
    events = parser.feed(">>>python\nprint(1)\n")
    streamed = "".join(e.text for e in events if isinstance(e, ToolCallArgumentsDelta))
    assert streamed == '{"code":"print(1)'


def test_sniff_decides_within_the_name() -> None:
    parser = StreamParser(WEATHER_TOOLS)
    events = parser.feed("See [link")
    assert "".join(e.text for e in events if isinstance(e, ContentDelta)) == "See "
    events = parser.feed("](x)")
    assert "".join(e.text for e in events if isinstance(e, ContentDelta)) == "[link](x)"


def test_prose_in_brackets_is_not_held_to_the_end() -> None:
    parser = StreamParser(WEATHER_TOOLS)
    events = parser.feed("See [note(this is " + "long " * 80)
    content = "".join(e.text for e in events if isinstance(e, ContentDelta))
    assert content.startswith("See [note(this is long long")


def test_a_bracket_in_prose_skipped_past_a_marker_stays_prose_in_a_stream() -> None:
    # The list breaks at once and is skipped as prose up to a limit; the bracket
    # inside that stretch is prose too, after the Harmony marker in it fell back.
    text = "See [f(x <|channel|>analysis<|end|> [get_weather(city='" + "x" * 300
    case = Case(text, [], tools=WEATHER_TOOLS, markup_free=False)
    assert parse_tool_calls(text, WEATHER_TOOLS).calls == []
    assert_stream_agrees(case, list(text))
    assert_stream_agrees(case, [text[:40], text[40:]])
