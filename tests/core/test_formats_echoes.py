"""Echoed prompt framing is markup: tool-result wrappers and the [SYSTEM DIRECTIVE] marker.

Each text is also checked streamed, one character at a time and in random
chunks, against the finished parse.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.core.streamcheck import check_stream
from toolrelay import parse_tool_calls
from toolrelay.formats.echoes import WRAPPERS

WEATHER = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]

CASES = [
    # A native round 2 on a ChatML/Qwen template: the result's wrapper, echoed, never closed.
    ('<tool_response>\n{"temperature": 21}', ""),
    ('<tool_response>\n{"temperature": 21}\n</tool_response>\nIt is 21 °C.', "\nIt is 21 °C."),
    ('<tool_response>\n{"temperature": 21}\n\nIt is 21 °C in Oslo.', "\n\nIt is 21 °C in Oslo."),
    # The rescue path's own result block, as the stuck detector's final round met it.
    ("Done. [TOOL_RESULT name=get_weather id=call_1]\nsunny\n[/TOOL_RESULT]", "Done. "),
    ('[TOOL_RESULTS]{"content": "sunny"}[/TOOL_RESULTS]Sunny.', "Sunny."),
    ('<|START_TOOL_RESULT|>[{"x": 1}]<|END_TOOL_RESULT|>ok', "ok"),
    (
        "<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>9<｜tool▁output▁end｜>"
        "<｜tool▁outputs▁end｜>ok",
        "ok",
    ),
    ("a stray </tool_response> closer", "a stray  closer"),
    # The directive's marker is toolrelay's: dropped wherever it stands.
    ("Hello! [SYSTEM DIRECTIVE]\nAnswer in plain text.", "Hello! \nAnswer in plain text."),
    # Prose that merely names a wrapper without its markers stays.
    ("A tool_response holds the result.", "A tool_response holds the result."),
]


@pytest.mark.parametrize(("text", "content"), CASES)
def test_echoed_framing_is_removed(text: str, content: str) -> None:
    result = parse_tool_calls(text, WEATHER)
    assert result.content == content
    assert result.calls == []
    check_stream(text, list(range(len(text))), WEATHER)


def test_a_call_after_an_echoed_result_is_still_a_call() -> None:
    text = (
        '<tool_response>\n{"temperature": 21}\n</tool_response>\n'
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'
    )
    result = parse_tool_calls(text, WEATHER)
    assert [call.arguments for call in result.calls] == [{"city": "Oslo"}]
    assert "tool_response" not in result.content


@pytest.mark.parametrize(("opening", "closing"), WRAPPERS)
def test_every_wrapper_is_dropped_whole(opening: str, closing: str) -> None:
    text = f"before {opening}result text{closing} after"
    assert parse_tool_calls(text, WEATHER).content == "before  after"


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from([text for text, _ in CASES]),
    st.lists(st.integers(min_value=1, max_value=120), max_size=12),
)
def test_any_chunking_gives_the_finished_parse(text: str, cuts: list[int]) -> None:
    check_stream(text, cuts, WEATHER)
