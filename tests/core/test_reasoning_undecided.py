"""Streaming before the reasoning-open flag is known (toolrelay.undecided, issue 23
item 9): the stream agrees with the finished parse, and holds back no more than
its bound."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from toolrelay import ContentDelta, ReasoningDelta, StreamParser, ToolCallEnd, parse_tool_calls
from toolrelay.undecided import HOLD_CHARS, UndecidedStreamParser

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]
DRAFT = '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'
words = st.text(st.sampled_from("abc xyz.\n"), max_size=200)


def fed(parser: object, text: str, step: int) -> tuple[str, str, list[str]]:
    events = []
    for at in range(0, len(text), step):
        events += parser.feed(text[at : at + step])  # type: ignore[attr-defined]
    events += parser.close()  # type: ignore[attr-defined]
    content = "".join(e.text for e in events if isinstance(e, ContentDelta))
    reasoning = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
    return content, reasoning, [e.call.name for e in events if isinstance(e, ToolCallEnd)]


@settings(max_examples=200, deadline=None)
@given(thought=words, answer=words, draft=st.booleans(), step=st.integers(1, 50))
def test_streamed_and_finished_agree_without_the_flag(
    thought: str, answer: str, draft: bool, step: int
) -> None:
    text = thought + (DRAFT if draft else "") + "</think>" + answer
    expected = parse_tool_calls(text, TOOLS)
    content, reasoning, calls = fed(UndecidedStreamParser(TOOLS), text, step)
    assert (content, reasoning or None, calls) == (
        expected.content,
        expected.reasoning,
        [call.name for call in expected.calls],
    )
    assert calls == []  # a call drafted in the reasoning is never one
    # What the old default (reasoning_open=False) streamed instead: the draft as a call.
    if draft:
        assert fed(StreamParser(TOOLS), text, step)[2] == ["get_weather"]


def test_output_that_opens_its_own_reasoning_is_decided_at_once() -> None:
    parser = UndecidedStreamParser(TOOLS)
    events = parser.feed("<think>plan")
    assert parser.decided and parser.opened is False
    assert "".join(e.text for e in events if isinstance(e, ReasoningDelta)) == "plan"


def test_no_more_than_the_bound_is_held_back() -> None:
    parser = UndecidedStreamParser(TOOLS)
    out = []
    for _ in range(HOLD_CHARS // 64):
        out += parser.feed("x" * 64)
    assert out == [] and not parser.decided  # everything so far may still be reasoning
    out += parser.feed("x")
    assert parser.decided and parser.opened is False
    assert "".join(e.text for e in out if isinstance(e, ContentDelta)) == "x" * (HOLD_CHARS + 1)


def test_an_orphan_tag_past_the_bound_is_where_stream_and_finished_parse_differ() -> None:
    # Documented: past HOLD_CHARS the stream has let the text go as content.
    text = "y" * (HOLD_CHARS + 10) + "</think>answer"
    content, reasoning, _ = fed(UndecidedStreamParser(TOOLS), text, 100)
    assert content == "y" * (HOLD_CHARS + 10) + "answer" and reasoning == ""
    assert parse_tool_calls(text, TOOLS).content == "answer"
