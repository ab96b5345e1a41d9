"""Text toolrelay injected is removed from the answer when the model echoes it."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from streamcheck import pieces  # type: ignore[import-not-found]

from toolrelay import parse_tool_calls
from toolrelay.echo import EchoFilter, markup_removed, remove_echoes
from toolrelay.rescue import directive, render_tools_prompt

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
LISTING = render_tools_prompt([WEATHER])
DIRECTIVE = directive([WEATHER], None)
STRICT = directive([WEATHER], "required", strength="strict")
INJECTED = (LISTING, DIRECTIVE, STRICT)


def answer(text: str) -> str:
    """What the gateway does with a rescued answer: parse, then remove echoes."""
    return remove_echoes(parse_tool_calls(text, [WEATHER]).content, INJECTED)


def test_an_echoed_directive_leaves_only_the_answer() -> None:
    text = f"Hello! Nice to meet you.\n\n{DIRECTIVE}"
    assert answer(text).strip() == "Hello! Nice to meet you."


def test_the_strict_directive_and_the_listing_go_too() -> None:
    text = f"{STRICT}\n{LISTING}\nIt is sunny."
    assert answer(text).strip() == "It is sunny."


def test_the_listing_line_by_line_with_other_spacing() -> None:
    text = (
        "### get_weather\nGet the current   weather for a city.\n  Parameters: "
        + (LISTING.split("Parameters: ", 1)[1].split("\n", 1)[0])
    )
    assert answer(text) == ""


def test_a_line_broken_off_is_an_echo_when_long_enough() -> None:
    line = next(line for line in DIRECTIVE.splitlines() if line.startswith("If a tool"))
    assert answer("Hi.\n" + line[:40]) == "Hi.\n"  # the token limit
    assert answer(line[:40] + "\nHi.") == "Hi."  # the model's own break
    assert answer("Hi.\nIf a") == "Hi.\nIf a"  # too short to tell
    assert answer("If a\nHi.") == "If a\nHi."


@pytest.mark.parametrize(
    "text",
    [
        "The weather in Oslo is mild.",
        "If a tool is needed, I will say so.",  # starts like the directive, then differs
        "# Tools are great\n## Available tools: none",
        "",
        "\n\n",
    ],
)
def test_answers_that_only_resemble_the_prompt_stay(text: str) -> None:
    assert remove_echoes(text, INJECTED) == text


def test_nothing_injected_nothing_removed() -> None:
    assert remove_echoes(DIRECTIVE, []) == DIRECTIVE
    assert not EchoFilter([])


def test_a_line_that_diverges_is_released_at_once() -> None:
    echo = EchoFilter(INJECTED)
    assert echo.feed("If a tool") == ""  # could still be the directive
    # No injected line goes on like this, but a rewording of one still could.
    assert echo.feed(" were") == ""
    assert echo.feed(" in Oslo") == ""  # "Oslo" may go on: the word is not complete
    # A second word the prompt never uses: it cannot be a rewording either.
    assert echo.feed(" today") == "If a tool were in Oslo today"
    assert echo.feed(" again") == " again"


TEXTS = st.sampled_from(
    [
        f"Sure.\n{DIRECTIVE}\nBye.",
        f"{LISTING}\n\nThe answer is 4.",
        "Plain answer.\nWith two lines.",
        f"{STRICT}",
        "If a tool (get_weather) is needed to answer, I" + " would" * 5,
    ]
)


@settings(max_examples=200, deadline=None)
@given(TEXTS, st.lists(st.integers(min_value=1, max_value=2000), max_size=20))
def test_any_chunking_gives_the_whole_answer(text: str, cuts: list[int]) -> None:
    content = parse_tool_calls(text, [WEATHER]).content
    echo = EchoFilter(INJECTED)
    out = [echo.feed(piece) for piece in pieces(content, cuts)]
    out.append(echo.close())
    assert "".join(out) == remove_echoes(content, INJECTED)


def test_markup_removed_keeps_the_words_of_an_answer_that_is_all_markup() -> None:
    echoed = "[TOOL_RESULT name=get_weather id=c1]\nsunny, 21 C\n[/TOOL_RESULT]\n["
    assert markup_removed(echoed) == "sunny, 21 C"
    wrapped = "<tool_call>\nParis is the capital.\n</tool_call><|im_end|>"
    assert markup_removed(wrapped).startswith("Paris is the capital.")
    # Toolrelay's own lines go, the model's stay.
    listing = render_tools_prompt([WEATHER])
    assert markup_removed(f"{listing}\n\nParis.", [listing]) == "Paris."


_MARKERS = ["[TOOL_CALL]", "[/TOOL_CALL]", "<tool_call>", "</tool_call>",
            "[SYSTEM DIRECTIVE]", "[TOOL CALL ERRORS]", "[TOOL_RESULT name=f id=1]",
            "[/TOOL_RESULT]", "<think>"]  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from(_MARKERS),
            st.text(alphabet="abc xyz.,\n", min_size=1, max_size=12),
        ),
        max_size=12,
    )
)
def test_markup_removed_leaves_no_marker_and_every_word(pieces: list[str]) -> None:
    kept = markup_removed("".join(pieces))
    assert not any(marker in kept for marker in _MARKERS)
    words = "".join(piece for piece in pieces if piece not in _MARKERS).strip()
    assert kept == re.sub(r"\n{3,}", "\n\n", words).strip()
