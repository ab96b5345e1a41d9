"""Markup never survives, around broken blocks too; seed 000's fenced fallback (issue 10)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from issue10 import TOOLS, parsed  # type: ignore[import-not-found]
from streamcheck import check_stream  # type: ignore[import-not-found]

from toolrelay import parse_tool_calls
from toolrelay.formats import FORMATS, opener_table
from toolrelay.formats.reasoning import FORMAT as REASONING

TOKENS = sorted(opener_table("auto").tokens)


def test_the_never_in_content_list_covers_every_new_dialect() -> None:
    for token in (
        "[THINK]",
        "[/THINK]",
        "<|channel>",
        "<channel|>",
        "[CALL_ID]",
        "[ARGS]",
        "[/TOOL_CALLS]",
        "<|START_TEXT|>",
        "<|END_TEXT|>",
        "<|end|>",
        "<|return|>",
        "<|message|>",
        "<|constrain|>",
        "<｜DSML｜tool_calls>",
        "[/TOOL_CALL]",
    ):
        assert token in TOKENS, token
    # Each format that has special tokens lists them.
    named = {f.name for f in (REASONING, *FORMATS) if f.tokens}
    assert {"harmony", "mistral", "command_r7b", "gemma4", "lfm2", "bracket"} <= named


@settings(max_examples=600, deadline=None)
@given(
    pieces=st.lists(
        st.one_of(
            st.sampled_from(TOKENS),
            st.sampled_from(["hi ", "{", "}", '"name": "get_weather"', "\n", "x(y=1)", "]"]),
        ),
        max_size=12,
    ),
    cuts=st.lists(st.integers(1, 200), max_size=8),
)
def test_special_tokens_never_reach_content(pieces: list[str], cuts: list[int]) -> None:
    text = "".join(pieces)
    for tools in (None, TOOLS):
        result = parse_tool_calls(text, tools)
        for token in TOKENS:
            assert token not in result.content, (token, text)
        check_stream(text, cuts, tools)


def test_a_broken_block_leaves_no_closing_tag() -> None:
    result = parsed("[TOOL_CALL]not json[/TOOL_CALL] Done.", calls=[], content=" Done.")
    assert [(r.name, r.raw) for r in result.rejected] == [(None, "[TOOL_CALL]not json[/TOOL_CALL]")]
    parsed(
        '[TOOL_CALL]{"name": "get_weather", "arguments": {"city": "Oslo"}} sorry[/TOOL_CALL]',
        calls=[("get_weather", {"city": "Oslo"})],
        content="",
    )


def test_leaked_arguments_tags_in_a_call_object() -> None:
    for text in (
        '{"name": "get_weather", <arguments>{"city": "Oslo"}</arguments>}',
        '[TOOL_CALL]{"name": "get_weather", <arguments>{"city": "Oslo"}</arguments>}[/TOOL_CALL]',
        '[TOOL_CALL]{"get_weather", "arguments": <arguments>{"city": "Oslo"}</arguments>}'
        "[/TOOL_CALL]",
    ):
        parsed(text, calls=[("get_weather", {"city": "Oslo"})], content="")


def test_a_block_whose_end_is_left_out_keeps_the_prose_after_it() -> None:
    parsed(
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}\n\nI will wait.',
        calls=[("get_weather", {"city": "Oslo"})],
        content="I will wait.",
    )
    parsed(
        '[TOOL_CALL]{"name": "get_weather", "arguments": {"city": "Oslo"}} then '
        '[TOOL_CALL]{"name": "current_time"}[/TOOL_CALL]',
        calls=[("get_weather", {"city": "Oslo"}), ("current_time", {})],
        content="then ",
    )


FENCE = '```json\n{"tool": "get_weather", "input": {"city": "Bergen"}}\n```'
BLOCK = '[TOOL_CALL]{"name": "get_weather", "arguments": {"city": "Oslo"}}[/TOOL_CALL]'


def test_a_fenced_call_is_a_call_when_there_is_no_block() -> None:
    parsed(f"Here: {FENCE} ok", calls=[("get_weather", {"city": "Bergen"})], content="Here:  ok")


def test_a_fence_next_to_a_block_is_an_example_not_a_second_call() -> None:
    parsed(
        f"For example {FENCE}. Now: {BLOCK}",
        calls=[("get_weather", {"city": "Oslo"})],
        content=f"For example {FENCE}. Now: ",
    )
    parsed(
        f"{BLOCK} as in {FENCE}",
        calls=[("get_weather", {"city": "Oslo"})],
        content=f" as in {FENCE}",
    )


def test_calls_between_a_held_fence_and_a_block_keep_their_order() -> None:
    hermes = '<tool_call>{"name": "current_time", "arguments": {}}</tool_call>'
    # (check_stream checks the streamed calls are numbered 0, 1 with the fence given back.)
    parsed(
        f"{FENCE} {hermes} {BLOCK}",
        calls=[("current_time", {}), ("get_weather", {"city": "Oslo"})],
        content=f"{FENCE}  ",
    )
