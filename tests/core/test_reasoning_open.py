"""Reasoning the chat template opened (issue 10, item 1).

QwQ, Qwen3-Thinking-2507, DeepSeek-R1 (distills), MiniMax-M2 and Step-3.5
end their generation prompt with ``<think>\\n``; Command A with
``<|START_THINKING|>`` when reasoning is on. The output then starts inside
the reasoning and only the closing tag appears.
"""

from __future__ import annotations

from issue10 import TOOLS, parsed  # type: ignore[import-not-found]

from toolrelay import ContentDelta, ReasoningDelta, StreamParser, ToolCallStart, parse_tool_calls


def test_text_before_an_orphan_closing_tag_is_reasoning() -> None:
    parsed(
        "The user wants a greeting.\n</think>\n\nHello!",
        calls=[],
        content="\n\nHello!",
        reasoning="The user wants a greeting.\n",
    )


def test_a_call_marker_inside_opened_reasoning_is_not_a_call() -> None:
    text = (
        'Maybe <tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>?'
        "</think>It is sunny, I know it."
    )
    parsed(text, calls=[], content="It is sunny, I know it.")
    # The call after the reasoning is one.
    text = (
        "Need weather.</think>"
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'
    )
    parsed(text, calls=[("get_weather", {"city": "Oslo"})], content="", reasoning="Need weather.")


def test_every_family_closing_tag() -> None:
    for closer in ("</think>", "</seed:think>", "<|END_THINKING|>", "[/THINK]", "<channel|>"):
        parsed(f"plan{closer}answer", calls=[], content="answer", reasoning="plan")


def test_a_closing_tag_after_a_closed_block_is_not_an_orphan() -> None:
    parsed("<think>a</think>b</think>c", calls=[], content="bc", reasoning="a")


def test_the_stream_parser_takes_the_flag() -> None:
    parser = StreamParser(TOOLS, reasoning_open=True)
    events = parser.feed("Let me think ") + parser.feed("more.</thi") + parser.feed("nk>Answer.")
    events += parser.close()
    assert "".join(e.text for e in events if isinstance(e, ReasoningDelta)) == "Let me think more."
    assert "".join(e.text for e in events if isinstance(e, ContentDelta)) == "Answer."
    # The reasoning streams as it comes, before the closing tag.
    parser = StreamParser(TOOLS, reasoning_open=True)
    assert parser.feed("Thinking aloud") == [ReasoningDelta("Thinking aloud")]


def test_without_the_flag_a_stream_says_it_met_an_orphan() -> None:
    parser = StreamParser(TOOLS)
    events = parser.feed("Plan.</think>Answer.") + parser.close()
    assert parser.orphan_close
    # What went out before the tag was content: the caller learns the flag for next time.
    assert "".join(e.text for e in events if isinstance(e, ContentDelta)) == "Plan.Answer."
    parser = StreamParser(TOOLS)
    parser.feed("<think>a</think>b</think>")
    assert not parser.orphan_close


def test_reasoning_that_never_closes_keeps_its_prose_and_gives_its_calls() -> None:
    text = (
        'I will call it. <tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}'
        "</tool_call>"
    )
    result = parse_tool_calls(text, TOOLS, reasoning_open=True)
    assert [c.name for c in result.calls] == ["get_weather"]
    assert result.reasoning == "I will call it. "
    assert result.content == ""
    parser = StreamParser(TOOLS, reasoning_open=True)
    events = [e for ch in text for e in parser.feed(ch)] + parser.close()
    assert [e.name for e in events if isinstance(e, ToolCallStart)] == ["get_weather"]


def test_the_finished_rule_can_be_overridden() -> None:
    result = parse_tool_calls("a</think>b", reasoning_open=False)
    assert (result.content, result.reasoning) == ("ab", None)
    result = parse_tool_calls("plain answer", reasoning_open=True)
    assert (result.content, result.reasoning) == ("", "plain answer")
