"""A model that rewords the rescue prompt instead of answering (issue 24).

SmolLM2-135M on llama-server, asked "What is the capital of France?" with a tool
declared (rescue path, tool_choice auto), answered with a sentence of the late
directive in its own words, twice, and a copy of the example call. Today's
answer: that sentence reached the client in a stream. The simulator plays it two
ways: the real answer word for word, and ``reword_prompt`` (the directive reworded
deterministically from the prompt it was sent). Both go through the openai SDK,
streamed and not, and must end as the question asked direct does.
"""

from __future__ import annotations

import pytest

from tests.gateway.support import stack
from tests.gateway.test_never_worse import (
    CAPITAL,
    PARIS,
    RESCUE,
    WEATHER_MODEL,
    _ask,
    _clean,
    _completions,
)

REAL = "To call multiple tools, write a single block, with only the JSON object inside it."
COPIED_CALL = '[TOOL_CALL]{"name": "get_weather", "arguments": {"city": "<city>"}}[/TOOL_CALL]'
# With the tools in its prompt (the rescue round) the model rewords the directive.
SMOLLM = {
    "rules": [
        {"match": {"tools": "prompt"},
         "answer": {"content": f"{REAL}\n{REAL}\n{COPIED_CALL}"}},
        *WEATHER_MODEL["rules"],
    ]
}  # fmt: skip


def _no_rewording(text: str) -> None:
    _clean(text)
    for words in ("JSON object", "single block", "a single call", "multiple blocks", "placeholder"):
        assert words not in text, f"a rewording of toolrelay's prompt reached the client: {text!r}"


@pytest.mark.parametrize("stream", [False, True])
def test_the_real_models_reworded_directive_never_reaches_the_client(stream: bool) -> None:
    with stack(SMOLLM, gateway_settings=RESCUE, chunk=3) as (sim, gw):
        text, finish, calls, warning = _ask(gw.client(), CAPITAL, stream)
        _no_rewording(text)
        assert (text.strip(), finish, calls) == (PARIS, "stop", 0)
        assert warning is not None and "without the tool listing" in warning
        assert "tools" not in _completions(sim)[-1]


@pytest.mark.parametrize("stream", [False, True])
def test_a_directive_reworded_from_the_prompt_is_asked_again_without_the_listing(
    stream: bool,
) -> None:
    with stack(WEATHER_MODEL, reword_prompt=True, gateway_settings=RESCUE) as (sim, gw):
        text, finish, calls, warning = _ask(gw.client(), CAPITAL, stream)
        _no_rewording(text)
        assert (text.strip(), finish, calls) == (PARIS, "stop", 0)
        assert warning is not None and "without the tool listing" in warning
        # The rescue round got the rewording; the re-ask was the question direct.
        first, last = _completions(sim)[0], _completions(sim)[-1]
        assert "[SYSTEM DIRECTIVE]" in str(first["messages"])
        assert last["messages"] == CAPITAL


# Told its copied call cannot be used, the model answers in words: unless the
# re-ask is constrained to a call, which a decoder under a JSON schema must write.
CORRECTED_IN_WORDS = {
    "rules": [
        {"match": {"repair": True}, "answer": {"content": PARIS}},
        *SMOLLM["rules"],
    ]
}


@pytest.mark.parametrize("stream", [False, True])
def test_a_copied_example_on_a_question_that_needs_no_tool_is_not_made_a_call(
    stream: bool,
) -> None:
    """On llama.cpp, which decodes under a JSON schema, the correction re-ask of a
    copied example was constrained to a call: the model, free to answer in words
    (the correction says so), could only call, and the question that needs no tool
    got a false call (SmolLM2-135M: get_weather for "What is the capital of
    France?"). A copy under `auto` is corrected with words left open."""
    settings = {**RESCUE, "backend_kind": "llamacpp"}
    with stack(CORRECTED_IN_WORDS, gateway_settings=settings) as (sim, gw):
        text, finish, calls, _ = _ask(gw.client(), CAPITAL, stream)
        sent = _completions(sim)
    _no_rewording(text)
    assert (text.strip(), finish, calls) == (PARIS, "stop", 0)
    assert "TOOL CALL ERRORS" in str(sent[1]["messages"])
    assert not any("response_format" in body for body in sent)
