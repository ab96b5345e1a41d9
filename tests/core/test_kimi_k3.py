"""Kimi K3's XTML tools channel, written from its chat template (``Kimi-K3.jinja``) and
the servers' parsers' reading of it (the facts only; no text here is copied from another
project's tests). The template round trip (``test_template_roundtrip.py``) renders
generated calls with the real template; these are the cases its definition singles out.

Every text is checked whole and streamed one character at a time and in larger cuts.
"""

from __future__ import annotations

import pytest
from issue10 import INTEGER, STRING, TOOLS, parsed, tool  # type: ignore[import-not-found]
from streamcheck import stream  # type: ignore[import-not-found]

from toolrelay import ContentDelta, StreamParser, ToolCallArgumentsDelta, ToolCallEnd, ToolCallStart
from toolrelay.formats import format_names
from toolrelay.repair import STRING_HOLD

OP, CL, SP = "<|open|>", "<|close|>", "<|sep|>"
END = f"{CL}message{SP}<|end_of_msg|>"
SEARCH = tool("search", ("q",), q=STRING, limit=INTEGER, filters={"type": "object"})
ALL = [*TOOLS, SEARCH]


def call(name: str, *arguments: tuple[str, str, str], index: int = 1) -> str:
    body = "".join(
        f'{OP}argument key="{key}" type="{kind}"{SP}{value}{CL}argument{SP}'
        for key, kind, value in arguments
    )
    return f'{OP}call tool="{name}" index="{index}"{SP}{body}{CL}call{SP}'


def channel(*calls: str) -> str:
    return f"{OP}tools{SP}{''.join(calls)}{CL}tools{SP}"


@pytest.mark.parametrize("fmt", ["auto", "kimi_k3"])
def test_a_turn_as_the_template_writes_it(fmt: str) -> None:
    # Thinking off: the prompt opened the response channel, the model goes on in it.
    text = (
        f"Checking both.{CL}response{SP}"
        + channel(
            call("get_weather", ("city", "string", "Oslo"), ("days", "number", "3")),
            call(
                "search", ("q", "string", 'say "hi"\n'), ("filters", "object", '{"a": [1, null]}')
            ).replace('index="1"', 'index="2"'),
        )
        + END
    )
    parsed(
        text,
        ALL,
        calls=[
            ("get_weather", {"city": "Oslo", "days": 3}),
            ("search", {"q": 'say "hi"\n', "filters": {"a": [1, None]}}),
        ],
        content="Checking both.",
        fmt=fmt,
    )


def test_thinking_channel_is_reasoning() -> None:
    text = (
        f"{OP}think{SP}Need Oslo.{CL}think{SP}{OP}response{SP}{CL}response{SP}"
        + channel(call("get_weather", ("city", "string", "Oslo")))
        + END
    )
    parsed(text, calls=[("get_weather", {"city": "Oslo"})], content="", reasoning="Need Oslo.")


def test_string_values_are_raw_whatever_tags_they_hold() -> None:
    # The template writes a string as it is: every tag in it but the argument's own
    # closing one is its text, the call's and the channel's closers included.
    value = f'a {CL}call{SP} b {CL}tools{SP} {OP}argument key="x"{SP} &quot; \\n "'
    text = channel(call("get_weather", ("city", "string", value)))
    parsed(text, calls=[("get_weather", {"city": value})], content="")


def test_attribute_escapes_are_decoded() -> None:
    text = channel(
        f'{OP}call tool="a&amp;b&quot;c" index="1"{SP}'
        f'{OP}argument key="k&quot;&amp;" type="boolean"{SP}true{CL}argument{SP}{CL}call{SP}'
    )
    parsed(text, None, calls=[('a&b"c', {'k"&': True})], content="")


def test_every_json_type_the_template_tags() -> None:
    text = channel(
        call(
            "search",
            ("q", "string", ""),
            ("limit", "number", "-1.5e3"),
            ("exact", "boolean", "false"),
            ("none", "null", "null"),
            ("tags", "array", '["x", {"y": "\\u00e9"}]'),
        )
    )
    parsed(
        text,
        None,
        calls=[
            (
                "search",
                {
                    "q": "",
                    "limit": -1500.0,
                    "exact": False,
                    "none": None,
                    "tags": ["x", {"y": "é"}],
                },
            )
        ],
    )


def test_arguments_given_as_a_json_string_are_one_json_block() -> None:
    text = channel(
        f'{OP}call tool="get_weather" index="1"{SP}{OP}json type="object"{SP}'
        f'{{"city": "Oslo {CL}json{SP}", "days": 2}}{CL}json{SP}{CL}call{SP}'
    )
    parsed(text, calls=[("get_weather", {"city": f"Oslo {CL}json{SP}", "days": 2})], content="")


def test_a_call_without_arguments_is_an_empty_object() -> None:
    parsed(channel(call("current_time")), calls=[("current_time", {})], content="")


def test_calls_without_the_channel_tags() -> None:
    text = "Now: " + call("current_time") + call("get_weather", ("city", "string", "Rome"), index=2)
    parsed(text, calls=[("current_time", {}), ("get_weather", {"city": "Rome"})], content="Now: ")


def test_call_tag_in_prose_that_never_closes_stays_text() -> None:
    text = f"Write {OP}call tool= and then nothing."
    parsed(text, calls=[], content=text)


def test_untyped_argument_reads_by_the_schema() -> None:
    text = channel(
        f'{OP}call tool="get_weather"{SP}{OP}argument key="city"{SP}Oslo{CL}argument{SP}'
        f'{OP}argument key="days"{SP}4{CL}argument{SP}{CL}call{SP}'
    )
    parsed(text, calls=[("get_weather", {"city": "Oslo", "days": 4})])


# -- never {} , never invented ------------------------------------------------------------


def test_a_first_value_that_never_ends_is_rejected() -> None:
    text = (
        f"{OP}tools{SP}"
        + f'{OP}call tool="get_weather"{SP}{OP}argument key="city" type="string"{SP}Oslo'
    )
    result = parsed(text, calls=[], content="")
    assert "never ends" in result.rejected[0].reason


def test_a_call_that_names_no_tool_is_rejected() -> None:
    argument = f'{OP}argument key="city" type="string"{SP}Oslo{CL}argument{SP}'
    text = channel(f'{OP}call index="1"{SP}{argument}{CL}call{SP}')
    result = parsed(text, calls=[], content="")
    assert result.rejected[0].name is None


def test_a_first_typed_value_that_is_not_json_is_rejected() -> None:
    text = channel(call("get_weather", ("days", "number", "two"), ("city", "string", "Oslo")))
    result = parsed(text, calls=[], content="")
    assert "'days'" in result.rejected[0].reason


def test_a_later_typed_value_that_is_not_json_keeps_its_text() -> None:
    # The call streams from its first complete argument on and is never taken back: a
    # later value that is not the JSON its type says stays the text the model wrote,
    # for the schema check to name (never a value it did not write).
    text = channel(call("get_weather", ("city", "string", "Oslo"), ("days", "number", "two")))
    parsed(text, calls=[("get_weather", {"city": "Oslo", "days": "two"})], content="")


def test_a_body_of_other_tags_is_rejected_not_given_empty_arguments() -> None:
    text = channel(f'{OP}call tool="get_weather"{SP}<city>Paris</city>{CL}call{SP}')
    result = parsed(text, calls=[], content="")
    assert "not argument tags" in result.rejected[0].reason


def test_an_undeclared_tool_is_rejected() -> None:
    result = parsed(channel(call("launch", ("x", "string", "1"))), calls=[], content="")
    assert result.rejected[0].name == "launch"


def test_one_bad_call_leaves_the_next_one() -> None:
    text = channel(
        call("get_weather", ("days", "number", "soon")),
        call("current_time", index=2),
    )
    result = parsed(text, calls=[("current_time", {})], content="")
    assert len(result.rejected) == 1


# -- streaming ---------------------------------------------------------------------------


def test_the_call_starts_when_its_first_argument_is_complete() -> None:
    head = channel()[: -len(f"{CL}tools{SP}")] + f'{OP}call tool="get_weather"{SP}'
    parser = StreamParser(TOOLS, "kimi_k3")
    events = parser.feed(head + f'{OP}argument key="city" type="string"{SP}Os')
    assert not any(isinstance(e, ToolCallStart) for e in events)
    events = parser.feed(f"lo{CL}argument{SP}")
    assert [type(e) for e in events] == [ToolCallStart, ToolCallArgumentsDelta]


def test_a_long_first_string_streams_before_it_ends() -> None:
    head = (
        f'{OP}tools{SP}{OP}call tool="edit_file"{SP}{OP}argument key="new_string" type="string"{SP}'
    )
    parser = StreamParser(TOOLS, "kimi_k3")
    events = parser.feed(head + "x" * (STRING_HOLD + 10))
    assert any(isinstance(e, ToolCallStart) for e in events)
    events += parser.feed(f"{CL}argument{SP}{CL}call{SP}{CL}tools{SP}") + parser.close()
    ended = [e.call for e in events if isinstance(e, ToolCallEnd)]
    assert ended[0].arguments == {"new_string": "x" * (STRING_HOLD + 10)}


def test_markers_split_anywhere_never_reach_content() -> None:
    text = f"Hi{CL}response{SP}" + channel(call("current_time")) + END
    for cut in range(1, len(text)):
        events = stream(text, [cut], TOOLS, "kimi_k3")
        assert "".join(e.text for e in events if isinstance(e, ContentDelta)) == "Hi"


def test_registered() -> None:
    assert "kimi_k3" in format_names()
