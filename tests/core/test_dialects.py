"""Dialects written from each family's current chat template and its servers' parsers.

Every text is the model's side of a turn as the template renders an assistant
message (or as llama.cpp's and vLLM's parsers accept it); none is copied from
another project's tests. Each is checked whole and streamed one character at
a time (``issue10.parsed``).
"""

from __future__ import annotations

import pytest
from issue10 import TOOLS, WEATHER, parsed  # type: ignore[import-not-found]

# -- LFM2 / LFM2.5: Python calls between its tool-call tokens -----------------------


def test_lfm2_python_calls_are_calls_not_deleted() -> None:
    # The LFM2 templates render tools between <|tool_list_start|>…; the model answers
    # with a Python list, JSON literals allowed (llama.cpp's lfm2 parser).
    text = (
        'Checking both.<|tool_call_start|>[get_weather(city="Oslo", days=2), '
        "current_time()]<|tool_call_end|>Done."
    )
    parsed(
        text,
        calls=[("get_weather", {"city": "Oslo", "days": 2}), ("current_time", {})],
        content="Checking both.Done.",
    )


def test_lfm2_json_literals_and_the_json_mode() -> None:
    parsed(
        '<|tool_call_start|>[get_weather(city="Rome", days=null)]<|tool_call_end|>',
        calls=[("get_weather", {"city": "Rome", "days": None})],
        content="",
    )
    parsed(
        '<|tool_call_start|>[{"name": "get_weather", "arguments": {"city": "Rome"}}]'
        "<|tool_call_end|>",
        calls=[("get_weather", {"city": "Rome"})],
        content="",
    )


def test_lfm2_a_broken_call_is_rejected_not_lost() -> None:
    result = parsed(
        "<|tool_call_start|>[get_weather(city=Oslo)]<|tool_call_end|>", calls=[], content=""
    )
    assert [r.name for r in result.rejected] == ["get_weather"]
    assert "literal" in result.rejected[0].reason


# -- Mistral / Magistral / Ministral 3 -------------------------------------------------


def test_mistral_small_32_call_id_between_name_and_arguments() -> None:
    # Mistral-Small-3.2's template: '[TOOL_CALLS]' + name + '[CALL_ID]' + id + '[ARGS]' + json.
    text = (
        '[TOOL_CALLS]get_weather[CALL_ID]a1B2c3D4e[ARGS]{"city": "Oslo"}'
        "[TOOL_CALLS]current_time[CALL_ID]f5G6h7I8j[ARGS]{}"
    )
    result = parsed(
        text, calls=[("get_weather", {"city": "Oslo"}), ("current_time", {})], content=""
    )
    assert [c.id for c in result.calls] == ["a1B2c3D4e", "f5G6h7I8j"]


def test_ministral_3_thinks_in_think_tokens_then_calls() -> None:
    # Ministral-3 Reasoning: '[THINK]' + thinking + '[/THINK]', then '[TOOL_CALLS]' name '[ARGS]'.
    parsed(
        '[THINK]The user wants Oslo.[/THINK]On it.[TOOL_CALLS]get_weather[ARGS]{"city": "Oslo"}',
        calls=[("get_weather", {"city": "Oslo"})],
        content="On it.",
        reasoning="The user wants Oslo.",
    )


def test_mistral_closing_tool_calls_token_is_markup() -> None:
    parsed(
        '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Oslo"}}][/TOOL_CALLS] ok',
        calls=[("get_weather", {"city": "Oslo"})],
        content=" ok",
    )
    parsed(
        '[TOOL_CALLS]get_weather[ARGS]{"city": "Oslo"}[/TOOL_CALLS]',
        calls=[("get_weather", {"city": "Oslo"})],
        content="",
    )


def test_mistral_name_without_arguments_is_a_call_to_a_tool_without_parameters() -> None:
    parsed("[TOOL_CALLS]current_time", calls=[("current_time", {})], content="")
    parsed(
        "[TOOL_CALLS]current_time[TOOL_CALLS]current_time[/TOOL_CALLS]",
        calls=[("current_time", {}), ("current_time", {})],
        content="",
    )
    # A word after the marker that no call shape follows is prose: nothing is lost.
    parsed("[TOOL_CALLS]Sorry, no tool fits.", calls=[], content="Sorry, no tool fits.")


# -- DeepSeek --------------------------------------------------------------------------


def test_deepseek_r1_tokens_with_ascii_bars() -> None:
    # The R1 shape (function<sep>NAME, fenced JSON) as some Ollama templates spell it.
    text = (
        "Let me check.<|tool▁calls▁begin|><|tool▁call▁begin|>function<|tool▁sep|>get_weather\n"
        '```json\n{"city": "Oslo"}\n```<|tool▁call▁end|><|tool▁calls▁end|>'
    )
    parsed(text, calls=[("get_weather", {"city": "Oslo"})], content="Let me check.")


def test_deepseek_v31_tokens_with_ascii_bars() -> None:
    text = (
        "<|tool▁calls▁begin|><|tool▁call▁begin|>get_weather<|tool▁sep|>"
        '{"city": "Oslo"}<|tool▁call▁end|><|tool▁calls▁end|>'
    )
    parsed(text, calls=[("get_weather", {"city": "Oslo"})], content="")


@pytest.mark.parametrize("block", ["function_calls", "tool_calls"])
def test_dsml_blocks_named_function_calls_or_tool_calls(block: str) -> None:
    # V3.2's template writes <｜DSML｜function_calls>; V4's writes <｜DSML｜tool_calls>.
    text = (
        f"I'll look.\n\n<｜DSML｜{block}>\n"
        '<｜DSML｜invoke name="get_weather">\n'
        '<｜DSML｜parameter name="city" string="true">Oslo</｜DSML｜parameter>\n'
        '<｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>\n'
        f"</｜DSML｜invoke>\n</｜DSML｜{block}>"
    )
    parsed(text, calls=[("get_weather", {"city": "Oslo", "days": 3})], content="I'll look.\n\n")


# -- Kimi K2 ---------------------------------------------------------------------------


def test_kimi_calls_without_section_markers_and_without_the_last_end() -> None:
    # llama.cpp's kimi-k2 parser: the section markers and the call's end are optional.
    text = (
        "Sure.<|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
        '{"city": "Oslo"}<|tool_call_end|><|tool_call_begin|>functions.current_time:1'
        "<|tool_call_argument_begin|>{}"
    )
    result = parsed(
        text, calls=[("get_weather", {"city": "Oslo"}), ("current_time", {})], content="Sure."
    )
    assert [c.id for c in result.calls] == ["functions.get_weather:0", "functions.current_time:1"]


# -- Harmony (gpt-oss) -----------------------------------------------------------------


def test_harmony_recipient_after_the_channel() -> None:
    text = (
        "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant"
        "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
        '{"city": "Oslo"}<|call|>'
    )
    parsed(
        text, calls=[("get_weather", {"city": "Oslo"})], content="", reasoning="Need the weather."
    )


def test_harmony_output_that_starts_with_the_recipient() -> None:
    # The prompt ends with <|start|>assistant: the model's first words are the role header's.
    text = ' to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Oslo"}<|call|>'
    parsed(text, calls=[("get_weather", {"city": "Oslo"})], content="")


def test_harmony_final_right_after_analysis_without_end() -> None:
    text = (
        "<|channel|>analysis<|message|>Simple question."
        "<|start|>assistant<|channel|>final<|message|>It is 4.<|return|>"
    )
    parsed(text, calls=[], content="It is 4.", reasoning="Simple question.")
    parsed(
        "<|channel|>analysis<|message|>Simple.<|channel|>final<|message|>4",
        calls=[],
        content="4",
        reasoning="Simple.",
    )


def test_harmony_spacing_of_fine_tunes_and_stray_commentary() -> None:
    text = (
        "<|channel|> commentary  to = functions.get_weather <|constrain|> json <|message|>"
        '{"city": "Oslo"}<|call|>'
    )
    parsed(text, calls=[("get_weather", {"city": "Oslo"})], content="")
    # llama.cpp's "stray commentary": to=assistant names no tool.
    parsed(
        "<|channel|>commentary to=assistant<|channel|>final<|message|>Hello.",
        calls=[],
        content="Hello.",
    )


def test_harmony_answer_is_read_for_markup_and_its_tokens_dropped() -> None:
    parsed(
        "<|channel|>final<|message|>See [THINK]x[/THINK]it.<|end|>",
        calls=[],
        content="See it.",
        reasoning="x",
    )


# -- Gemma 4 ---------------------------------------------------------------------------


def test_gemma4_thought_channel_then_call() -> None:
    # Gemma 4's template: '<|channel>thought\n' … '<channel|>'; calls as <|tool_call>call:…
    text = (
        "<|channel>thought\nThe user asks about Oslo.<channel|>"
        '<|tool_call>call:get_weather{city:<|"|>Oslo<|"|>}<tool_call|>'
    )
    parsed(
        text,
        calls=[("get_weather", {"city": "Oslo"})],
        content="",
        reasoning="The user asks about Oslo.",
    )


def test_gemma4_empty_channels_are_markup() -> None:
    parsed("<|channel><|channel>thought\nhm<channel|>Hi", calls=[], content="Hi", reasoning="hm")


# -- Command R / Command A -------------------------------------------------------------


def test_command_a_answer_in_start_text() -> None:
    # Cohere2's template: <|START_THINKING|>…<|END_THINKING|><|START_TEXT|>…<|END_TEXT|>.
    parsed(
        "<|START_THINKING|>Just greet.<|END_THINKING|><|START_TEXT|>Hello!<|END_TEXT|>"
        "<|END_OF_TURN_TOKEN|>",
        calls=[],
        content="Hello!",
        reasoning="Just greet.",
    )
    # Thinking that the answer ends without <|END_THINKING|> (llama.cpp's cohere2 parser).
    parsed(
        "<|START_THINKING|>Just greet.<|START_TEXT|>Hello!<|END_TEXT|>",
        calls=[],
        content="Hello!",
        reasoning="Just greet.",
    )


def test_command_a_action() -> None:
    text = (
        "<|START_THINKING|>Weather.<|END_THINKING|><|START_ACTION|>"
        '[{"tool_call_id": "0", "tool_name": "get_weather", "parameters": {"city": "Oslo"}}]'
        "<|END_ACTION|>"
    )
    parsed(text, [WEATHER], calls=[("get_weather", {"city": "Oslo"})], content="")


def test_every_dialect_is_recognised_in_a_pinned_format_too() -> None:
    cases = {
        "lfm2": '<|tool_call_start|>[get_weather(city="Oslo")]<|tool_call_end|>',
        "mistral": '[TOOL_CALLS]get_weather[CALL_ID]abcdefghi[ARGS]{"city": "Oslo"}',
        "deepseek": (
            "<|tool▁calls▁begin|><|tool▁call▁begin|>get_weather<|tool▁sep|>"
            '{"city": "Oslo"}<|tool▁call▁end|><|tool▁calls▁end|>'
        ),
        "kimi_k2": (
            '<|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{"city": "Oslo"}'
        ),
        "harmony": 'to=functions.get_weather<|channel|>commentary<|message|>{"city": "Oslo"}',
        "deepseek_v32": (
            '<｜DSML｜tool_calls><｜DSML｜invoke name="get_weather">'
            '<｜DSML｜parameter name="city" string="true">Oslo</｜DSML｜parameter>'
            "</｜DSML｜invoke></｜DSML｜tool_calls>"
        ),
    }
    for fmt, text in cases.items():
        parsed(text, TOOLS, calls=[("get_weather", {"city": "Oslo"})], content="", fmt=fmt)
