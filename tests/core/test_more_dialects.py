"""The dialects issue 22 found missing, each written from the family's template and its
server's parser (the facts only; no text here is copied from another project's tests).

Every text is checked whole and streamed one character at a time and in larger cuts
(``issue10.parsed``); each format's pinned name reads it too.
"""

from __future__ import annotations

import pytest
from issue10 import INTEGER, STRING, TOOLS, parsed, tool  # type: ignore[import-not-found]

from toolrelay.formats import format_names

OBJECT = {"type": "object"}
BOOLEAN = {"type": "boolean"}
SEARCH = tool("search", ("q",), q=STRING, limit=INTEGER, filters=OBJECT, exact=BOOLEAN)
ALL = [*TOOLS, SEARCH]

# -- LongCat-Flash: Hermes's JSON in its own tags (vLLM's longcat parser) ---------------


@pytest.mark.parametrize("fmt", ["auto", "longcat"])
def test_longcat_blocks(fmt: str) -> None:
    text = (
        "Checking.\n<longcat_tool_call>\n"
        '{"name": "get_weather", "arguments": {"city": "Oslo </longcat_tool_call>", "days": 2}}'
        "\n</longcat_tool_call>\n<longcat_tool_call>\n"
        '{"name": "current_time", "arguments": {}}\n</longcat_tool_call>'
    )
    parsed(
        text,
        calls=[
            ("get_weather", {"city": "Oslo </longcat_tool_call>", "days": 2}),
            ("current_time", {}),
        ],
        content="Checking.\n\n",
        fmt=fmt,
    )


def test_longcat_block_left_open_at_the_end() -> None:
    parsed(
        '<longcat_tool_call>{"name": "current_time", "arguments": {}}',
        calls=[("current_time", {})],
        content="",
    )


def test_longcat_block_of_prose_is_rejected_not_shown() -> None:
    result = parsed("<longcat_tool_call>not json</longcat_tool_call>", calls=[], content="")
    assert len(result.rejected) == 1


# -- ERNIE-4.5 thinking: the answer wrapped in <response> (vLLM's ernie45 parser) -------


@pytest.mark.parametrize("fmt", ["auto", "ernie45"])
def test_ernie_answer_wrapper_is_markup(fmt: str) -> None:
    parsed(
        "The user greets me.\n</think>\n\n<response>\nHello! How can I help?\n</response>\n",
        calls=[],
        content="\n\n\nHello! How can I help?\n",
        reasoning="The user greets me.\n",
        fmt=fmt,
    )


@pytest.mark.parametrize("fmt", ["auto", "ernie45"])
def test_ernie_calls_after_reasoning(fmt: str) -> None:
    text = (
        "Need the weather.\n</think>\n\n\n<tool_call>\n"
        '{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>\n'
    )
    parsed(text, calls=[("get_weather", {"city": "Oslo"})], reasoning="Need the weather.\n")


def test_response_tags_in_prose_stay_text() -> None:
    text = "Wrap it as <response>ok</response> in your XML, then <response> again."
    parsed(text, calls=[], content=text)
    parsed(text, calls=[], content=text, fmt="ernie45")


# -- DeepSeek R1 / V3.1: a begin token left out ----------------------------------------


def test_deepseek_r1_call_without_its_section_token() -> None:
    text = (
        "Let me check.<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n"
        '```json\n{"city": "Oslo"}\n```<｜tool▁call▁end｜>'
    )
    parsed(text, calls=[("get_weather", {"city": "Oslo"})], content="Let me check.")


def test_deepseek_r1_calls_without_their_own_begin_token() -> None:
    text = (
        "<｜tool▁calls▁begin｜>function<｜tool▁sep｜>get_weather\n"
        '```json\n{"city": "Oslo", "days": 3}\n```<｜tool▁call▁end｜>\n'
        "function<｜tool▁sep｜>current_time\n```json\n{}\n```<｜tool▁call▁end｜>"
        "<｜tool▁calls▁end｜>"
    )
    parsed(
        text,
        calls=[("get_weather", {"city": "Oslo", "days": 3}), ("current_time", {})],
        content="",
        fmt="deepseek",
    )


def test_deepseek_v31_calls_without_begin_tokens() -> None:
    # Neither the section's token nor the call's: the header follows the section token.
    parsed(
        '<｜tool▁calls▁begin｜>get_weather<｜tool▁sep｜>{"city": "Oslo"}<｜tool▁call▁end｜>'
        "<｜tool▁calls▁end｜>",
        calls=[("get_weather", {"city": "Oslo"})],
        content="",
    )
    parsed(
        'Sure. <｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Oslo"}<｜tool▁call▁end｜>'
        "<｜tool▁call▁begin｜>current_time<｜tool▁sep｜>{}<｜tool▁call▁end｜>",
        calls=[("get_weather", {"city": "Oslo"}), ("current_time", {})],
        content="Sure. ",
    )


def test_a_deepseek_token_with_no_call_after_it_keeps_the_text() -> None:
    for text in (
        "a <｜tool▁call▁begin｜> b",
        "<｜tool▁calls▁begin｜>hello there<｜tool▁calls▁end｜>",
    ):
        parsed(text, calls=[], content=text)


# -- DeepSeek DSML written without its ｜DSML｜ token ----------------------------------


@pytest.mark.parametrize("block", ["function_calls", "tool_calls"])
def test_dsml_without_its_token(block: str) -> None:
    text = (
        f'Looking.\n\n<{block}>\n<invoke name="get_weather">\n'
        '<parameter name="city" string="true">Oslo "Fjord" </parameter>\n'
        '<parameter name="days" string="false">3</parameter>\n</invoke>\n'
        f'<invoke name="current_time">\n</invoke>\n</{block}>'
    )
    for fmt in ("auto", "deepseek_v32"):
        parsed(
            text,
            calls=[("get_weather", {"city": 'Oslo "Fjord" ', "days": 3}), ("current_time", {})],
            content="Looking.\n\n",
            fmt=fmt,
        )


def test_blocks_without_invoke_stay_olmo_and_jamba() -> None:
    parsed(
        "<function_calls>get_weather(city='Oslo')</function_calls>",
        calls=[("get_weather", {"city": "Oslo"})],
        content="",
    )
    parsed(
        '<tool_calls>[{"name": "get_weather", "arguments": {"city": "Oslo"}}]</tool_calls>',
        calls=[("get_weather", {"city": "Oslo"})],
        content="",
    )


# -- MiniCPM-5: <function name=…><param name=…>, CDATA and XML escapes ------------------


@pytest.mark.parametrize("fmt", ["auto", "minicpm5"])
def test_minicpm5_calls(fmt: str) -> None:
    # The template: CDATA around a string holding '<', '&' or a line break; other values
    # as Python writes them.
    text = (
        "On it.\n"
        '<function name="search"><param name="q"><![CDATA[a <b> & "c"\n'
        '</param></function>]]></param><param name="limit">5</param>'
        "<param name=\"filters\">{'lang': 'en', 'safe': True, 'since': None}</param>"
        '<param name="exact">False</param></function>\n'
        '<function name="current_time"></function>'
    )
    parsed(
        text,
        ALL,
        calls=[
            (
                "search",
                {
                    "q": 'a <b> & "c"\n</param></function>',
                    "limit": 5,
                    "filters": {"lang": "en", "safe": True, "since": None},
                    "exact": False,
                },
            ),
            ("current_time", {}),
        ],
        content="On it.\n\n",
        fmt=fmt,
    )


def test_minicpm5_entity_escapes_outside_cdata_are_decoded() -> None:
    text = (
        '<function name="search"><param name="q">say &quot;hi&quot; &amp; &#233;&#x21;'
        "</param></function>"
    )
    parsed(text, ALL, calls=[("search", {"q": 'say "hi" & é!'})], content="")
    # An ampersand that begins no escape is text.
    text = '<function name="search"><param name="q">R&D &amp c</param></function>'
    parsed(text, ALL, calls=[("search", {"q": "R&D &amp c"})], content="")


def test_function_name_with_json_body_stays_qwen3_coder_drift() -> None:
    parsed(
        '<function name="get_weather">{"city": "Oslo"}</function>',
        calls=[("get_weather", {"city": "Oslo"})],
        content="",
    )


def test_the_new_formats_are_registered() -> None:
    assert {"longcat", "ernie45", "minicpm5"} <= set(format_names())
