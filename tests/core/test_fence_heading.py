"""The ``# TOOL_CALL`` heading a weak model writes over its call, fenced or not.

The rescue prompt asks for ``[TOOL_CALL]`` blocks; a small model writes the
marker as a Markdown heading instead: inside a fence, on the line above it, or
over a bare call, with one to six ``#``, with or without the space, with a
colon, repeated. A heading that a call follows is read with the call (no
heading, no emptied fence left in content); one that no call follows is
content as written. Every text is also streamed one character at a time and
in one piece, and (property tests) in random pieces among random prose.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from streamcheck import check_stream  # type: ignore[import-not-found]

from toolrelay import parse_tool_calls
from toolrelay.formats import fenced

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
    # Over the fence, not in it.
    (f"# TOOL_CALL\n```json\n{CALL}\n```", PARIS, ""),
    (f"Checking.\n# TOOL_CALL\n\n```\n{CALL}\n```\nOne moment.", PARIS, "Checking.\n\nOne moment."),
    (f"## TOOL_CALL:\n```tool_call\n{TOOL_INPUT}\n```", PARIS, ""),
    # The heading's other spellings, fenced or not.
    (f"## TOOL_CALL\n{CALL}", PARIS, ""),
    (f"#TOOL_CALL {CALL}", PARIS, ""),
    (f"# TOOL_CALL: {CALL}", PARIS, ""),
    (f"###### TOOL_CALL:\n{CALL}", PARIS, ""),
    (f"```\n### TOOL_CALL:\n{CALL}\n```", PARIS, ""),
    # Repeated, as SmolLM2-135M wrote it on llama-server (bench/realmodels_bench.py).
    (
        f"To call a tool:\n```\n# TOOL_CALL\n# TOOL_CALL {CALL}\n```",
        PARIS,
        "To call a tool:\n",
    ),
    (f"# TOOL_CALL\n```\n# TOOL_CALL\n{CALL}\n```", PARIS, ""),
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
    "# TOOL_CALL\n```python\nprint('no call')\n```",
    "# TOOL_CALL\n```\nnot json\n```",
    '## TOOL_CALL:\n```json\n{"city": "Paris"}\n```',
    "#TOOL_CALL: none is needed here.",
    "####### TOOL_CALL is no heading",
    "```\n# TOOL_CALL\n## Notes\n```",
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


# The heading as a weak model varies it: one to six '#', the space or none, a colon or none.
headings = st.builds(
    lambda hashes, space, colon: "#" * hashes + space + "TOOL_CALL" + colon,
    st.integers(min_value=1, max_value=6),
    st.sampled_from(["", " "]),
    st.sampled_from(["", ":"]),
)
# Prose that can hold no call or marker of its own (no brackets, '#', backquotes, '<').
prose = st.text(st.sampled_from(list("abcdefgh XYZ.,!?:;'\n0123456789")), max_size=40).map(
    lambda text: text.strip()
)
blanks = st.sampled_from(["\n", "\n\n", " \n", "\n  "])
fences = st.sampled_from(["```\n", "```json\n", "```json", "```tool_call\n"])
cuts = st.lists(st.integers(min_value=1, max_value=160), max_size=10)


@st.composite
def headed_calls(draw: st.DrawFn) -> str:
    """A call under one or more headings, over a fence, in it, both, or with none."""
    heading = draw(headings)
    inner = draw(st.sampled_from(["", heading + "\n", heading + "\n" + heading + " "]))
    fence = draw(fences)
    return draw(
        st.sampled_from(
            [
                f"{heading} {CALL}",
                f"{heading}\n{CALL}",
                f"{heading}{draw(blanks)}{fence}\n{inner}{CALL}\n```",
                f"{fence}\n{heading}{draw(blanks)}{CALL}\n```",
            ]
        )
    )


@given(prose, headed_calls(), prose, cuts)
def test_any_heading_among_prose_is_read_with_its_call(
    before: str, block: str, after: str, cuts: list[int]
) -> None:
    text = f"{before}\n{block}\n{after}"
    result = parse_tool_calls(text, WEATHER)
    assert [(c.name, c.arguments) for c in result.calls] == PARIS
    assert result.content == f"{before}\n\n{after}"
    check_stream(text, cuts, WEATHER)


@st.composite
def headings_without_call(draw: st.DrawFn) -> str:
    """A heading that no call follows: prose, another fence, a fence of prose, or a
    JSON object that is no call."""
    heading = draw(headings)
    body = draw(st.sampled_from(["", "not json", '{"city": "Paris"}'])) or draw(prose)
    fence = draw(st.sampled_from(["```\n", "```json\n", "```python\n"]))
    return draw(
        st.sampled_from(
            [
                f"{heading}{draw(blanks)}{draw(prose)}",
                f"{heading}{draw(blanks)}{fence}{body}\n```",
                f"{fence}{heading}{draw(blanks)}{body}\n```",
                f"{heading}S and more",  # a word, not the heading
            ]
        )
    )


@given(prose, headings_without_call(), prose, cuts)
def test_a_heading_no_call_follows_is_never_eaten(
    before: str, block: str, after: str, cuts: list[int]
) -> None:
    text = f"{before}\n{block}\n{after}"
    result = parse_tool_calls(text, WEATHER)
    assert result.calls == [] and result.rejected == []
    assert result.content == text
    check_stream(text, cuts, WEATHER)


@given(st.text(st.sampled_from(list(" \t\r\n{[`#:TOOL_CALjsonxy\f")), max_size=24))
def test_the_marker_search_passes_over_only_what_no_sniff_claims(following: str) -> None:
    """A heading opener's ``follows`` (checked in C by the marker search) matches
    wherever its sniff could say anything but no."""
    for opener in fenced.FORMAT.openers:
        if opener.follows is None or opener.sniff is None:
            continue
        if re.match(opener.follows, following) is None:
            assert opener.sniff(following) is False, (opener.marker, following)
