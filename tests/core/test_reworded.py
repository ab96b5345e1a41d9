"""A model's rewording of toolrelay's own prompt is an echo; ordinary prose is not.

The rewordings are made from the prompt text itself (every sentence of the
listing's preamble, both directives and the correction's fixed lines): words
dropped, punctuation and case changed, function words swapped.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from streamcheck import pieces  # type: ignore[import-not-found]
from test_echo import WEATHER  # type: ignore[import-not-found]

from toolrelay.correction import CORRECTION_HEADER, CORRECTION_TAIL
from toolrelay.echo import EchoFilter, remove_echoes
from toolrelay.parse import parse_tool_calls
from toolrelay.rescue import directive, render_tools_prompt
from toolrelay.reworded import (
    MIN_SHARED,
    MIN_WORDS,
    RewordFilter,
    content_words,
    could_become,
    own_sentences,
    remove_rewordings,
    shared_words,
    subsequence_step,
)

INJECTED = (
    render_tools_prompt([WEATHER]),
    directive([WEATHER], None),
    directive([WEATHER], None, strength="strict"),
    directive([WEATHER], "required", strength="strict"),
    CORRECTION_HEADER,
    CORRECTION_TAIL,
)
# SmolLM2-135M's streamed answer on llama-server (rescue path, tool_choice auto,
# "What is the capital of France?").
REAL = "To call multiple tools, write a single block, with only the JSON object inside it."


def _sentences() -> list[str]:
    """Every sentence toolrelay wrote, as text, with enough words to be taken."""
    found = []
    for text in INJECTED:
        ours = parse_tool_calls(text).content.split("\n### ", 1)[0]
        for line in ours.splitlines():
            found += re.split(r"(?<=[.!?:;])\s+", line.strip(" -"))
    return sorted({s for s in found if len(content_words(s)) >= MIN_WORDS + 1})


SENTENCES = _sentences()
_SWAPS = {"the": "a", "several": "multiple", "one": "a single", "to": "in order to",
          "with": "having", "is": "will be", "each": "every", "your": "the"}  # fmt: skip


def _reword(sentence: str, drop: int, case: str, stop: str) -> str:
    """``sentence`` with its ``drop``-th content word left out, function words
    swapped, commas gone, its case and its final stop changed."""
    words = sentence.rstrip(".:;!?").replace(",", "").split()
    content = [i for i, word in enumerate(words) if content_words(word)]
    del words[content[drop % len(content)]]
    swapped = " ".join(_SWAPS.get(word.lower(), word) for word in words)
    return {"lower": swapped.lower(), "upper": swapped.upper(), "title": swapped.title()}[
        case
    ] + stop


def test_there_are_sentences_to_reword() -> None:
    assert len(SENTENCES) >= 12


@pytest.mark.parametrize("sentence", SENTENCES)
def test_each_prompt_sentence_reworded_is_removed(sentence: str) -> None:
    for drop in range(3):
        copy = _reword(sentence, drop, "lower", ".")
        assert remove_echoes(f"{copy}\nParis is the capital of France.", INJECTED) == (
            "Paris is the capital of France."
        ), copy


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(SENTENCES),
    st.integers(min_value=0, max_value=20),
    st.sampled_from(["lower", "upper", "title"]),
    st.sampled_from([".", "!", "", " :)"]),
)
def test_any_rewording_of_a_prompt_sentence_is_removed(
    sentence: str, drop: int, case: str, stop: str
) -> None:
    copy = _reword(sentence, drop, case, stop)
    assert remove_rewordings(f"Hello.\n{copy}\nBye.", INJECTED) == "Hello.\nBye."


def test_the_real_models_answer_is_removed_and_the_answer_kept() -> None:
    text = f"{REAL}\n{REAL}\nParis is the capital of France."
    assert remove_echoes(text, INJECTED) == "Paris is the capital of France."
    # Within a line of the model's own, only the rewording goes.
    mixed = f"Paris is the capital of France. {REAL} Bye now.\nOK."
    assert remove_echoes(mixed, INJECTED) == "Paris is the capital of France. Bye now.\nOK."


@pytest.mark.parametrize(
    ("text", "left"),
    [
        (
            f"Sure. {REAL}\nParis is the capital of France.",
            "Sure.\nParis is the capital of France.",
        ),
        (f"{REAL} Sure!\nParis.", "Sure!\nParis."),
        (f"Sure, here it is. {REAL}", "Sure, here it is."),
        (f"OK. {REAL}", "OK."),
    ],
)
def test_a_filler_sentence_on_the_line_of_a_rewording_stays(text: str, left: str) -> None:
    assert remove_echoes(text, INJECTED) == left
    echo = EchoFilter(INJECTED)
    assert "".join([*(echo.feed(c) for c in text), echo.close()]) == left


def test_a_filler_inside_the_rewordings_own_sentence_goes_with_it() -> None:
    # The known limit (docs/gateway.md): one sentence is kept or removed whole.
    assert remove_echoes(f"Sure, {REAL[0].lower()}{REAL[1:]}\nParis.", INJECTED) == "Paris."


ANSWERS = [
    "Paris is the capital of France.",
    "Paris is the capital.",
    "It is sunny and 21 degrees in Paris today.",
    "I don't need to call a tool to answer this question.",
    "I will call the get_weather tool to get the weather in Paris.",
    "The capital of France is Paris, a city of about two million people on the Seine.",
    'Sure! Here is a JSON object: {"a": 1}.',
    "To answer your question: the results show rain in Oslo tomorrow.",
    "Write the code in a single block, then run the tests again.",
    "One more thing: the next message will have the details you asked for.",
    "Use the weather tool when you need a forecast for your trip to Rome.",
    "1. Preheat the oven.\n2. Mix the flour and the eggs.\n3. Bake for forty minutes.",
]


@pytest.mark.parametrize("text", ANSWERS)
def test_real_looking_answers_stay(text: str) -> None:
    assert remove_echoes(text, INJECTED) == text


_EVERYDAY = [
    "paris", "france", "capital", "city", "weather", "sunny", "rain", "tomorrow", "river",
    "museum", "bread", "coffee", "train", "ticket", "holiday", "mountain", "friend", "music",
    "garden",
]  # fmt: skip
_PROMPT_WORDS = sorted({w for s in SENTENCES for w in s.lower().rstrip(".:").split()})
_PROSE_WORD = st.one_of(st.sampled_from(_EVERYDAY), st.sampled_from(_PROMPT_WORDS))


@st.composite
def _prose(draw: st.DrawFn) -> str:
    """Sentences about something else: at least two everyday words in each,
    mixed with any words of the prompt, and arbitrary text between them."""
    sentences = []
    for _ in range(draw(st.integers(1, 4))):
        words = draw(st.lists(_PROSE_WORD, min_size=0, max_size=12))
        words += draw(st.lists(st.sampled_from(_EVERYDAY), min_size=2, max_size=3, unique=True))
        sentences.append(" ".join(draw(st.permutations(words))).capitalize() + ".")
    noise = draw(st.text(max_size=20))
    return draw(st.sampled_from([" ", "\n"])).join(sentences) + noise


@settings(max_examples=300, deadline=None)
@given(st.one_of(_prose(), st.text(max_size=200)))
def test_prose_is_never_removed(text: str) -> None:
    assert remove_rewordings(text, INJECTED) == text


_STREAMED = st.one_of(
    _prose(),
    st.builds(
        lambda sentence, drop, before, after: (
            f"{before}{_reword(sentence, drop, 'lower', '.')}{after}"
        ),
        st.sampled_from(SENTENCES),
        st.integers(0, 5),
        st.sampled_from(["", "Sure. ", "Hello.\n", "Paris is the capital of France. "]),
        st.sampled_from(["", "\n", " Bye.", "\nParis.\n", f"\n{REAL}"]),
    ),
)


@settings(max_examples=300, deadline=None)
@given(_STREAMED, st.lists(st.integers(min_value=1, max_value=400), max_size=30))
def test_streamed_equals_finished_over_any_chunking(text: str, cuts: list[int]) -> None:
    echo = EchoFilter(INJECTED)
    out = [echo.feed(piece) for piece in pieces(text, cuts)]
    out.append(echo.close())
    assert "".join(out) == remove_echoes(text, INJECTED)


def test_a_sentence_of_prose_is_held_only_until_its_second_word_the_prompt_never_uses() -> None:
    echo = EchoFilter(INJECTED)
    assert echo.feed("Paris is the ") == ""  # could still go on as a rewording
    assert echo.feed("capital of France.") == "Paris is the capital of France."
    assert echo.feed(" It is") == " "  # a new sentence: it could be one again
    assert echo.feed(" big and sunny.") == "It is big and sunny."


def test_the_hold_ends_after_a_bounded_number_of_words() -> None:
    # Only the prompt's own words, in an order no sentence of it has: the hold
    # ends once more words could no longer make half of them shared.
    echo = EchoFilter(INJECTED)
    fed = 0
    while not echo.feed("block tool "):
        fed += 1
        assert fed < 40, "held for 80 words"
    assert fed >= 2


# --- the fast paths against the textbook -------------------------------------------


def _table_lcs(mine: list[str], theirs: tuple[str, ...]) -> int:
    """The longest common subsequence's length, by the textbook table."""
    row = [0] * (len(theirs) + 1)
    for word in mine:
        diagonal = row[0]
        for i, other in enumerate(theirs, start=1):
            above = row[i]
            row[i] = diagonal + 1 if other == word else max(row[i - 1], above)
            diagonal = above
    return row[-1]


_LETTERS = st.lists(st.sampled_from("abcde"), max_size=40)


@settings(max_examples=500, deadline=None)
@given(_LETTERS, st.lists(st.sampled_from("abcde"), min_size=1, max_size=40))
def test_the_bit_parallel_subsequence_equals_the_table(mine: list[str], theirs: list[str]) -> None:
    size = len(theirs)
    state = (1 << size) - 1
    for word in mine:
        matches = sum(1 << i for i, other in enumerate(theirs) if other == word)
        state = subsequence_step(state, matches, size)
    assert shared_words(state, size) == _table_lcs(mine, tuple(theirs))


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 60), st.integers(1, 60), st.integers(0, 60))
def test_could_become_rises_with_what_is_shared_and_the_size(
    shared: int, size: int, words: int
) -> None:
    # What the filter's shortcut rests on: a sentence with no word in the answer is
    # judged by the prompt's longest sentence alone.
    shared = min(shared, size)
    if could_become(shared, size, words):
        assert could_become(min(shared + 1, size), size, words)
        assert could_become(shared, size + 1, words)


_SLOW_SENTENCES = tuple(
    dict.fromkeys(tuple(words) for words in own_sentences(INJECTED) if len(words) >= MIN_SHARED)
)
_VOCABULARY = sorted({word for words in own_sentences(INJECTED) for word in words})


def _slow_possible(words: list[str]) -> bool:
    """The hold's definition, over every sentence of the prompt, by the table."""
    if sum(word not in _VOCABULARY for word in words) > 1:
        return False
    k = len(words)
    for sentence in _SLOW_SENTENCES:
        shared, size = _table_lcs(words, sentence), len(sentence)
        x = max(size - shared, MIN_WORDS - k, MIN_SHARED - shared, 0)
        if 2 * min(shared + x, size) >= k + x:
            return True
    return False


def _slow_reworded(words: list[str]) -> bool:
    """The removal's definition, by the table."""
    if len(words) < MIN_WORDS or sum(word not in _VOCABULARY for word in words) > 1:
        return False
    return any(
        (shared := _table_lcs(words, sentence)) >= MIN_SHARED and 2 * shared >= len(words)
        for sentence in _SLOW_SENTENCES
    )


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.one_of(st.sampled_from(_VOCABULARY), st.sampled_from(["paris", "coffee", "the"])),
        max_size=30,
    )
)
def test_the_filter_holds_and_removes_as_the_definition_says(words: list[str]) -> None:
    text = " ".join(words) + " "
    counted = content_words(text)
    held = all(_slow_possible(counted[: i + 1]) for i in range(len(counted)))
    reworded = RewordFilter(INJECTED)
    out = reworded.feed(text)
    assert (out == "") == held, counted
    out += reworded.close()
    assert (out == "") == (held and _slow_reworded(counted)), counted
