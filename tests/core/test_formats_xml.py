"""The XML-parameter formats: Qwen3-Coder, Seed-OSS, GLM-4.5, MiniMax-M2, DSML, Step-3.

Every text here is also checked streamed: one character at a time and in
random chunks, the events must give what ``parse_tool_calls`` gives, no
content delta may hold markup, and each call's argument deltas must
concatenate to its ``arguments_json``.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolrelay import StreamParser, parse_tool_calls
from toolrelay.events import (
    ContentDelta,
    Event,
    ToolCallArgumentsDelta,
    ToolCallEnd,
    ToolCallStart,
)

MARKUP = (
    "<tool_call",
    "</tool_call",
    "<function",
    "</function",
    "<parameter",
    "</parameter",
    "<arg_key",
    "</arg_key",
    "<arg_value",
    "</arg_value",
    "<invoke",
    "</invoke",
    "minimax:tool_call",
    "seed:tool_call",
    "DSML",
    "steptml",
    "｜tool_call",
    "｜tool_sep",
)


def tool(name: str, **properties: Any) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "parameters": {"type": "object", "properties": properties},
        },
    }


STRING = {"type": "string"}
INTEGER = {"type": "integer"}
NUMBER = {"type": "number"}
BOOLEAN = {"type": "boolean"}
OBJECT = {"type": "object"}
ARRAY = {"type": "array"}

EDIT = tool("edit_file", path=STRING, old=STRING, count=INTEGER, ratio=NUMBER, dry=BOOLEAN)
TYPED = tool(
    "typed",
    i=INTEGER,
    n=NUMBER,
    b=BOOLEAN,
    o=OBJECT,
    a=ARRAY,
    s=STRING,
    maybe={"anyOf": [{"type": "integer"}, {"type": "null"}]},
    listed={"type": ["integer", "null"]},
)
WEATHER = tool("get_weather", city=STRING, days=INTEGER)


@dataclass(frozen=True)
class Case:
    id: str
    text: str
    calls: list[tuple[str, dict[str, Any]]]
    content: str
    tools: list[dict[str, Any]] | None = None
    format: str = "auto"


CASES = [
    # -- Qwen3-Coder ----------------------------------------------------------------
    Case(
        "qwen-typed",
        "<tool_call>\n<function=typed>\n<parameter=i>\n42\n</parameter>\n"
        "<parameter=n>\n2.5\n</parameter>\n<parameter=b>\nfalse\n</parameter>\n"
        '<parameter=o>\n{"k": [1, 2]}\n</parameter>\n<parameter=a>\n["x", 3]\n</parameter>\n'
        "<parameter=s>\n42\n</parameter>\n<parameter=maybe>\nnull\n</parameter>\n"
        "<parameter=listed>\n7\n</parameter>\n</function>\n</tool_call>",
        [
            (
                "typed",
                {
                    "i": 42,
                    "n": 2.5,
                    "b": False,
                    "o": {"k": [1, 2]},
                    "a": ["x", 3],
                    "s": "42",
                    "maybe": None,
                    "listed": 7,
                },
            )
        ],
        "",
        [TYPED],
    ),
    Case(
        "qwen-schemaless",
        "<tool_call>\n<function=anything>\n<parameter=n>\n42\n</parameter>\n"
        '<parameter=flag>\ntrue\n</parameter>\n<parameter=obj>\n{"a": null}\n</parameter>\n'
        "<parameter=text>\nhello world\n</parameter>\n</function>\n</tool_call>",
        [("anything", {"n": 42, "flag": True, "obj": {"a": None}, "text": "hello world"})],
        "",
    ),
    Case(
        "qwen-string-whitespace",
        "<tool_call>\n<function=edit_file>\n<parameter=old>\n    if x:\n        pass\n\n"
        "</parameter>\n<parameter=path>  spaced  </parameter>\n</function>\n</tool_call>",
        [("edit_file", {"old": "    if x:\n        pass\n", "path": "  spaced  "})],
        "",
        [EDIT],
    ),
    Case(
        "qwen-indented-markup",
        "<tool_call>\n    <function=get_weather>\n    <parameter=city>\n    Oslo\n"
        "    </parameter>\n    <parameter=days>\n    3\n    </parameter>\n"
        "    </function>\n    </tool_call>",
        [("get_weather", {"city": "Oslo", "days": 3})],
        "",
        [WEATHER],
    ),
    Case(
        "qwen-content-around",
        "Checking.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n"
        "</function>\n</tool_call>\nBetween.\n<tool_call>\n<function=get_weather>\n"
        "<parameter=city>\nBergen\n</parameter>\n</function>\n</tool_call>\nDone.",
        [("get_weather", {"city": "Oslo"}), ("get_weather", {"city": "Bergen"})],
        "Checking.\n\nBetween.\n\nDone.",
        [WEATHER],
    ),
    Case(
        "qwen-missing-closers",
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n<parameter=days>\n2",
        [("get_weather", {"city": "Oslo", "days": 2})],
        "",
        [WEATHER],
    ),
    Case(
        "qwen-undeclared-dropped",
        "Sure.<tool_call>\n<function=delete_all>\n<parameter=city>\nOslo\n</parameter>\n"
        "</function>\n</tool_call><tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n"
        "</parameter>\n</function>\n</tool_call>",
        [("get_weather", {"city": "Rome"})],
        "Sure.",
        [WEATHER],
    ),
    Case(
        "qwen-broken-sibling",
        "<tool_call>\n<function=broken\n</function>\n</tool_call>\n<tool_call>\n"
        "<function=get_weather>\n<parameter=city>Oslo</parameter>\n</function>\n</tool_call>",
        [("get_weather", {"city": "Oslo"})],
        "\n",
    ),
    Case(
        "qwen-bare-function",
        "Let me look.\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</function>\n"
        "</tool_call>",
        [("get_weather", {"city": "Oslo"})],
        "Let me look.\n",
    ),
    Case(
        "functionary-json-body",
        'Here: <function=get_weather>{"city": "Oslo", "days": 2}</function> ok',
        [("get_weather", {"city": "Oslo", "days": 2})],
        "Here:  ok",
    ),
    Case(
        # JSON arguments only right after the name: not after stray text, whatever the
        # chunking; a body that is neither is not read, and not made {} (issue 22).
        "functionary-json-only-first",
        '<function=get_weather>junk {"city": "Oslo"}</function>',
        [],
        "",
    ),
    Case(
        "qwen-hermes-still-json",
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>',
        [("get_weather", {"city": "Oslo"})],
        "",
    ),
    Case(
        "qwen-empty-call",
        "<tool_call>\n<function=get_weather>\n</function>\n</tool_call>",
        [("get_weather", {})],
        "",
        [WEATHER],
    ),
    Case(
        "qwen-special-characters",
        '<tool_call>\n<function=edit_file>\n<parameter=old>\na -> b "q" \\ <b>x</b>\n'
        "</parameter>\n</function>\n</tool_call>",
        [("edit_file", {"old": 'a -> b "q" \\ <b>x</b>'})],
        "",
        [EDIT],
    ),
    # -- Seed-OSS --------------------------------------------------------------------
    Case(
        "seed",
        # Seed-OSS's template writes values inline: every character of a string is data.
        "<seed:think>plan</seed:think>On it.<seed:tool_call>\n<function=edit_file>\n"
        "<parameter=path>/tmp/a b</parameter>\n<parameter=old>\n    if x:\n        pass\n\n"
        "</parameter>\n<parameter=count> 3 </parameter>\n</function>\n</seed:tool_call>",
        [("edit_file", {"path": "/tmp/a b", "old": "\n    if x:\n        pass\n\n", "count": 3})],
        "On it.",
        [EDIT],
    ),
    Case(
        "seed-truncated",
        "<seed:tool_call>\n<function=edit_file>\n<parameter=old>line one\nline",
        [("edit_file", {"old": "line one\nline"})],
        "",
        [EDIT],
        "seed_oss",
    ),
    # -- GLM-4.5 ---------------------------------------------------------------------
    Case(
        "glm-typed",
        "<tool_call>typed\n<arg_key>i</arg_key>\n<arg_value>5</arg_value>\n"
        '<arg_key>o</arg_key>\n<arg_value>{"x": 1}</arg_value>\n<arg_key>s</arg_key>\n'
        "<arg_value>\n 5 \n</arg_value>\n</tool_call>",
        [("typed", {"i": 5, "o": {"x": 1}, "s": "\n 5 \n"})],  # GLM writes values inline
        "",
        [TYPED],
    ),
    Case(
        "glm-glued-name",
        "I'll check.<tool_call>get_weather<arg_key>city</arg_key><arg_value>Oslo</arg_value>"
        "</tool_call>",
        [("get_weather", {"city": "Oslo"})],
        "I'll check.",
        [WEATHER],
    ),
    Case(
        "glm-literal-newlines",
        "<tool_call>typed\\n<arg_key>a</arg_key>\\n"
        '<arg_value>[{\\"id\\": \\"1\\"}]</arg_value>\\n</tool_call>',
        [("typed", {"a": [{"id": "1"}]})],
        "",
        [TYPED],
    ),
    Case(
        "glm-missing-closer",
        "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n"
        "<arg_key>days</arg_key>\n<arg_value>4",
        [("get_weather", {"city": "Oslo", "days": 4})],
        "",
        [WEATHER],
    ),
    Case(
        "glm-undeclared",
        "A<tool_call>rm_rf\n<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n</tool_call>B"
        "<tool_call>get_weather\n</tool_call>",
        [("get_weather", {})],
        "AB",
        [WEATHER],
    ),
    Case(
        "glm-content-between",
        "First.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n"
        "</tool_call>\nThen.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n"
        "<arg_value>Rome</arg_value>\n</tool_call>",
        [("get_weather", {"city": "Oslo"}), ("get_weather", {"city": "Rome"})],
        "First.\n\nThen.\n",
    ),
    Case(
        "glm-json-body",
        '<tool_call>get_weather\n{"city": "Oslo", "days": 2}\n</tool_call>',
        [("get_weather", {"city": "Oslo", "days": 2})],
        "",
        [WEATHER],
    ),
    # -- MiniMax-M2 --------------------------------------------------------------------
    Case(
        "minimax",
        'Sure.\n<minimax:tool_call>\n<invoke name="get_weather">\n'
        '<parameter name="city">Oslo</parameter>\n<parameter name="days">2</parameter>\n'
        '</invoke>\n<invoke name="nope">\n<parameter name="city">X</parameter>\n</invoke>\n'
        '<invoke name="get_weather">\n<parameter name="city">\nRome\n</parameter>\n</invoke>\n'
        "</minimax:tool_call>\nThe weather will be...",
        # MiniMax-M2's template writes values inline: the line breaks are the model's.
        [("get_weather", {"city": "Oslo", "days": 2}), ("get_weather", {"city": "\nRome\n"})],
        "Sure.\n\nThe weather will be...",
        [WEATHER],
    ),
    Case(
        "minimax-prose-inside-section",
        '<minimax:tool_call>\n<invoke name="a"></invoke>\nAnd next:\n<invoke name="b">'
        '<parameter name="x">1</parameter></invoke>\n</minimax:tool_call>',
        [("a", {}), ("b", {"x": 1})],
        "\nAnd next:\n",
    ),
    Case(
        "minimax-schemaless",
        '<minimax:tool_call><invoke name="f"><parameter name="n">3</parameter>'
        '<parameter name="s">three</parameter></invoke></minimax:tool_call>',
        [("f", {"n": 3, "s": "three"})],
        "",
    ),
    # -- DeepSeek-V3.2 DSML ----------------------------------------------------------
    Case(
        "dsml-string-attribute",
        '<｜DSML｜function_calls>\n<｜DSML｜invoke name="f">\n'
        '<｜DSML｜parameter name="s" string="true"> 42 </｜DSML｜parameter>\n'
        '<｜DSML｜parameter name="j" string="false">[1, {"a": true}]</｜DSML｜parameter>\n'
        '<｜DSML｜parameter name="n" string="false">7</｜DSML｜parameter>\n'
        "</｜DSML｜invoke>\n</｜DSML｜function_calls>",
        [("f", {"s": " 42 ", "j": [1, {"a": True}], "n": 7})],
        "",
    ),
    Case(
        "dsml-schema-wins",
        '<｜DSML｜function_calls><｜DSML｜invoke name="get_weather">'
        '<｜DSML｜parameter name="days" string="true">3</｜DSML｜parameter>'
        '<｜DSML｜parameter name="city" string="false">Oslo</｜DSML｜parameter>'
        "</｜DSML｜invoke></｜DSML｜function_calls>",
        [("get_weather", {"days": 3, "city": "Oslo"})],
        "",
        [WEATHER],
    ),
    Case(
        "dsml-unwrap",
        'Ok <｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n'
        '<｜DSML｜parameter name="arguments" string="false">{"city": "Oslo"}</｜DSML｜parameter>\n'
        "</｜DSML｜invoke>\n</｜DSML｜function_calls>",
        [("get_weather", {"city": "Oslo"})],
        "Ok ",
        [WEATHER],
    ),
    Case(
        "dsml-wrapper-with-sibling-kept",
        '<｜DSML｜function_calls><｜DSML｜invoke name="get_weather">'
        '<｜DSML｜parameter name="input" string="true">{"city": "Oslo"}</｜DSML｜parameter>'
        '<｜DSML｜parameter name="days" string="false">1</｜DSML｜parameter>'
        "</｜DSML｜invoke></｜DSML｜function_calls>",
        [("get_weather", {"input": {"city": "Oslo"}, "days": 1})],
        "",
        [WEATHER],
    ),
    Case(
        "dsml-undeclared-and-truncated",
        '<｜DSML｜function_calls><｜DSML｜invoke name="nope"></｜DSML｜invoke>'
        '<｜DSML｜invoke name="get_weather"><｜DSML｜parameter name="city" string="true">Os',
        [("get_weather", {"city": "Os"})],
        "",
        [WEATHER],
    ),
    # -- Step-3 ------------------------------------------------------------------------
    Case(
        "step3-whitespace",
        "<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜>edit_file\n"
        '<steptml:invoke name="edit_file"><steptml:parameter name="old">  x = 1\n'
        '</steptml:parameter><steptml:parameter name="count"> 4 </steptml:parameter>'
        '<steptml:parameter name="dry"> true </steptml:parameter></steptml:invoke>'
        "<｜tool_call_end｜><｜tool_calls_end｜>",
        [("edit_file", {"old": "  x = 1\n", "count": 4, "dry": True})],
        "",
        [EDIT],
    ),
    Case(
        "step3-parallel",
        "Looking.\n<｜tool_calls_begin｜><｜tool_call_begin｜>"
        '<steptml:invoke name="get_weather"><steptml:parameter name="city">Oslo'
        "</steptml:parameter></steptml:invoke><｜tool_call_end｜><｜tool_sep｜>"
        '<｜tool_call_begin｜><steptml:invoke name="clock"><steptml:parameter name="tz">'
        "UTC</steptml:parameter></steptml:invoke><｜tool_call_end｜><｜tool_calls_end｜>\nDone.",
        [("get_weather", {"city": "Oslo"}), ("clock", {"tz": "UTC"})],
        "Looking.\n\nDone.",
    ),
    Case(
        "step3-no-section-token",
        'Hm.<｜tool_call_begin｜><steptml:invoke name="f"></steptml:invoke><｜tool_call_end｜> ok',
        [("f", {})],
        "Hm. ok",
    ),
    Case(
        "step3-schemaless-literals",
        '<｜tool_calls_begin｜><｜tool_call_begin｜><steptml:invoke name="f">'
        '<steptml:parameter name="n">null</steptml:parameter>'
        '<steptml:parameter name="s">hello </steptml:parameter></steptml:invoke>'
        "<｜tool_call_end｜><｜tool_calls_end｜>",
        [("f", {"n": None, "s": "hello "})],
        "",
    ),
]

# Texts whose opener is not a call: it stays content.
NOT_CALLS = [
    Case(
        "prose-tool-call-tag",
        "Wrap calls in a <tool_call> tag.",
        [],
        "Wrap calls in a <tool_call> tag.",
    ),
    Case(
        "prose-function-tag", "Write <function=a b> like so.", [], "Write <function=a b> like so."
    ),
]


def _by_id(cases: list[Case]) -> Any:
    return pytest.mark.parametrize("case", cases, ids=[c.id for c in cases])


def stream(text: str, chunks: list[str], tools: Any = None, format: str = "auto") -> list[Event]:
    parser = StreamParser(tools, format)
    events: list[Event] = []
    for chunk in chunks:
        events += parser.feed(chunk)
    return events + parser.close()


def assert_streams_like_whole(
    text: str, chunks: list[str], tools: Any = None, format: str = "auto", markup: bool = True
) -> None:
    """Streamed in ``chunks``, ``text`` gives what ``parse_tool_calls`` gives, cleanly."""
    assert "".join(chunks) == text
    whole = parse_tool_calls(text, tools, format)
    events = stream(text, chunks, tools, format)
    content = "".join(e.text for e in events if isinstance(e, ContentDelta))
    assert content == whole.content
    if markup:
        assert not any(m in content for m in MARKUP), content
    ended = [e.call for e in events if isinstance(e, ToolCallEnd)]
    assert [(c.name, c.arguments_json) for c in ended] == [
        (c.name, c.arguments_json) for c in whole.calls
    ]
    started: dict[int, str] = {}
    arguments: dict[int, str] = {}
    for event in events:
        if isinstance(event, ToolCallStart):
            started[event.index] = event.name
        elif isinstance(event, ToolCallArgumentsDelta):
            assert event.index in started, "arguments before the call started"
            arguments[event.index] = arguments.get(event.index, "") + event.text
        elif isinstance(event, ToolCallEnd):
            assert arguments.get(event.index, "") == event.call.arguments_json
            assert json.loads(event.call.arguments_json) == event.call.arguments


@_by_id(CASES + NOT_CALLS)
def test_parse(case: Case) -> None:
    result = parse_tool_calls(case.text, case.tools, case.format)
    assert [(c.name, c.arguments) for c in result.calls] == case.calls
    assert result.content == case.content


@_by_id(CASES + NOT_CALLS)
def test_one_character_at_a_time(case: Case) -> None:
    assert_streams_like_whole(
        case.text, list(case.text), case.tools, case.format, markup=bool(case.calls)
    )


@_by_id(CASES + NOT_CALLS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_chunks(case: Case, data: st.DataObject) -> None:
    text = case.text
    cuts = data.draw(st.lists(st.integers(1, max(1, len(text) - 1)), max_size=24))
    bounds = [0, *sorted(set(cuts)), len(text)]
    chunks = [text[a:b] for a, b in itertools.pairwise(bounds) if b > a]
    assert_streams_like_whole(text, chunks, case.tools, case.format, markup=bool(case.calls))


def test_identical_events_whatever_the_chunking() -> None:
    case = CASES[0]

    def shape(events: list[Event]) -> list[Any]:
        out: list[Any] = []
        for event in events:
            if isinstance(event, ToolCallStart):
                out.append(("start", event.index, event.name))
            elif isinstance(event, ToolCallEnd):
                out.append(("end", event.index, event.call.arguments_json))
            elif isinstance(event, ToolCallArgumentsDelta):
                out.append(("args", event.index))
        return out

    one = stream(case.text, list(case.text), case.tools)
    whole = stream(case.text, [case.text], case.tools)
    calls_only = [e for e in shape(one) if e[0] != "args"]
    assert calls_only == [e for e in shape(whole) if e[0] != "args"]


def test_string_parameter_streams_before_its_closing_tag() -> None:
    parser = StreamParser([EDIT])
    events = parser.feed("<tool_call>\n<function=edit_file>\n<parameter=old>\nfirst line\nsec")
    assert any(isinstance(e, ToolCallStart) and e.name == "edit_file" for e in events)
    streamed = "".join(e.text for e in events if isinstance(e, ToolCallArgumentsDelta))
    # The line break before "sec" is certain once "sec" follows it.
    assert streamed == '{"old":"first line\\nsec'
    events = parser.feed("ond\n</param")
    streamed += "".join(e.text for e in events if isinstance(e, ToolCallArgumentsDelta))
    assert streamed == '{"old":"first line\\nsecond'  # the last line break may be trimmed
    events = parser.feed("eter>\n</function>\n</tool_call>") + parser.close()
    streamed += "".join(e.text for e in events if isinstance(e, ToolCallArgumentsDelta))
    assert streamed == '{"old":"first line\\nsecond"}'


def test_typed_parameter_is_held_until_complete() -> None:
    parser = StreamParser([EDIT])
    events = parser.feed("<tool_call>\n<function=edit_file>\n<parameter=count>\n12")
    assert not any(isinstance(e, ToolCallArgumentsDelta) for e in events)
    events = parser.feed("\n</parameter>\n")
    streamed = "".join(e.text for e in events if isinstance(e, ToolCallArgumentsDelta))
    assert streamed == '{"count":12'


def test_call_starts_once_its_name_is_complete_and_its_first_value_opens() -> None:
    # A call starts only when it can no longer be rejected: its name is complete and
    # declared, and its arguments have begun (a broken JSON body is rejected instead).
    parser = StreamParser([WEATHER])
    assert not any(
        isinstance(e, ToolCallStart) for e in parser.feed("<tool_call>\n<function=get_wea")
    )
    assert not any(isinstance(e, ToolCallStart) for e in parser.feed("ther>\n"))
    assert any(isinstance(e, ToolCallStart) for e in parser.feed("<parameter=city>\nOs"))
    parser = StreamParser([WEATHER])
    assert not any(isinstance(e, ToolCallStart) for e in parser.feed("<tool_call>get_weat"))
    assert not any(isinstance(e, ToolCallStart) for e in parser.feed("her\n<arg_key>ci"))
    assert any(isinstance(e, ToolCallStart) for e in parser.feed("ty</arg_key><arg_value>"))


@pytest.mark.parametrize(
    ("format", "text"),
    [
        ("qwen3_coder", "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</function>"),
        ("seed_oss", "<seed:tool_call><function=f><parameter=a>1</parameter></function>"),
        ("glm45", "<tool_call>f\n<arg_key>a</arg_key><arg_value>1</arg_value></tool_call>"),
        ("minimax_m2", '<minimax:tool_call><invoke name="f"><parameter name="a">1</parameter>'),
        (
            "deepseek_v32",
            '<｜DSML｜function_calls><｜DSML｜invoke name="f">'
            '<｜DSML｜parameter name="a" string="false">1</｜DSML｜parameter>',
        ),
        (
            "step3",
            '<｜tool_calls_begin｜><steptml:invoke name="f"><steptml:parameter name="a">1'
            "</steptml:parameter>",
        ),
    ],
)
def test_each_format_by_name(format: str, text: str) -> None:
    result = parse_tool_calls(text, format=format)
    assert [(c.name, c.arguments) for c in result.calls] == [("f", {"a": 1})]
    assert result.content == ""
