"""The ``# TOOL_CALL`` heading a weak model writes over its call, fenced or not.

A heading that a call follows is read with the call (no heading, no emptied
fence left in content); one that no call follows is content as written.
Every text is also streamed one character at a time and in one piece.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from streamcheck import check_stream  # type: ignore[import-not-found]

from toolrelay import parse_tool_calls

WEATHER: list[dict[str, Any]] = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {}}},
]
CALL = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
TOOL_INPUT = '{"tool": "get_weather", "input": {"city": "Paris"}}'
PARIS = [("get_weather", {"city": "Paris"})]

# (text, [(name, arguments)], content)
READ: list[tuple[str, list[tuple[str, dict[str, Any]]], str]] = [
    (f"```\n# TOOL_CALL\n{CALL}\n```", PARIS, ""),
    (f"```json\n# TOOL_CALL\n{CALL}\n```", PARIS, ""),
    (f"```tool_call\n# TOOL_CALL\n{TOOL_INPUT}\n```", PARIS, ""),
    (f"```\n# TOOL_CALL {CALL}\n```", PARIS, ""),
    (f"```json\n\n  # TOOL_CALL\n\n{CALL}\n```", PARIS, ""),
    (f"# TOOL_CALL\n{CALL}", PARIS, ""),
    (f"# TOOL_CALL {CALL}", PARIS, ""),
    (f"# TOOL_CALL [{CALL}, {CALL}]", PARIS * 2, ""),
    (f"Checking.\n```\n# TOOL_CALL {CALL}\n```\nOne moment.", PARIS, "Checking.\n\nOne moment."),
    (f"Checking.\n# TOOL_CALL\n{CALL}", PARIS, "Checking.\n"),
]

# Headings that no call follows: prose, as written.
KEPT: list[str] = [
    "# TOOL_CALL\nI need no tool for this: Paris is sunny.",
    "```\n# TOOL_CALL\nnot json\n```",
    '```\n# TOOL_CALL\n{"city": "Paris"}\n```',
    '# TOOL_CALL {"city": "Paris"}',
    'Say: # TOOL_CALL {"name": "send_mail", "arguments": {}}',  # not a declared tool
    "# TOOL_CALLS are listed below.",
    "# TOOL_CALL",
    "```\n# TOOL_CALL\n```",
    "## Notes\n# TOOL_CALLing convention\nno calls here",
]


@pytest.mark.parametrize(("text", "calls", "content"), READ)
def test_heading_read_with_its_call(
    text: str, calls: list[tuple[str, dict[str, Any]]], content: str
) -> None:
    result = parse_tool_calls(text, WEATHER)
    assert [(c.name, c.arguments) for c in result.calls] == calls
    assert result.content == content
    assert "TOOL_CALL" not in result.content and "```" not in result.content
    check_stream(text, list(range(1, len(text))), WEATHER)
    check_stream(text, [], WEATHER)


@pytest.mark.parametrize("text", KEPT)
def test_heading_without_call_is_content(text: str) -> None:
    result = parse_tool_calls(text, WEATHER)
    assert result.calls == [] and result.rejected == []
    assert result.content == text
    check_stream(text, list(range(1, len(text))), WEATHER)
    check_stream(text, [], WEATHER)


def test_heading_over_an_undeclared_call_is_rejected_as_written() -> None:
    """As a bare call opening the output: reported with its text, never run."""
    text = '# TOOL_CALL {"name": "send_mail", "arguments": {}}'
    result = parse_tool_calls(text, WEATHER)
    assert result.calls == [] and result.content == ""
    assert [(r.name, r.raw) for r in result.rejected] == [("send_mail", text)]
    check_stream(text, list(range(1, len(text))), WEATHER)


def test_headed_fence_before_a_bracket_block_is_given_back() -> None:
    """Seed 000's fallback: next to a ``[TOOL_CALL]`` block, a fence is content as written."""
    fence = f"```\n# TOOL_CALL\n{CALL}\n```\n"
    text = f"{fence}[TOOL_CALL]{CALL}[/TOOL_CALL]"
    result = parse_tool_calls(text, WEATHER)
    assert [(c.name, c.arguments) for c in result.calls] == PARIS
    assert result.content == fence
    check_stream(text, list(range(1, len(text))), WEATHER)


@given(
    st.sampled_from([t for t, _, _ in READ] + KEPT),
    st.lists(st.integers(min_value=1, max_value=120), max_size=8),
)
def test_any_cut_streams_as_finished(text: str, cuts: list[int]) -> None:
    check_stream(text, cuts, WEATHER)
