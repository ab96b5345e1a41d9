"""Never worse than the server direct (issue 24): a rescue round that fails is
not an answer, and cleaning never empties one.

The simulator plays the weak model seen on llama-server with SmolLM2-135M:
``copy_prompt`` answers a prompt with tools in it by copying that prompt (and a
correction by copying the correction), ``echo_history`` starts its answer
after a tool result by repeating the ``[TOOL_RESULT]`` blocks it was given.
Asked the question plainly, both answer it. Every answer goes through the
openai SDK, streamed and not.
"""

from __future__ import annotations

from typing import Any

import openai
import pytest

from tests.gateway.support import stack
from tests.weather import ASK_WEATHER, WEATHER_TOOL, weather_loop

CAPITAL = [{"role": "user", "content": "What is the capital of France?"}]
PARIS = "Paris is the capital of France."
RESCUE = {"tool_mode": "rescue", "backend_kind": "openai"}
NATIVE = {"tool_mode": "native", "backend_kind": "openai"}
# Text toolrelay writes into prompts; none of it may reach a client.
OWN_WORDS = (
    "[TOOL CALL ERRORS]",
    "cannot be run",
    "You can call tools",
    "[SYSTEM DIRECTIVE]",
    "[TOOL_CALL]",
    "[TOOL_RESULT",
    "(The model's tool calls could not be used",
    "# Tools",
)
SECOND_ROUND = weather_loop("sunny")
# The model, as SmolLM2-135M answered on llama-server: a last user turn of the
# result alone in words (after an assistant turn telling the call) gets the call
# repeated; the question with its call's result in words gets a sentence; the
# framed result gets the same sentence (after the echo, under echo_history).
REPEATED_CALL = '(called get_weather {"city": "Paris"})'
IN_WORDS = '(get_weather {"city": "Paris"} returned: sunny)'
WEATHER_MODEL = {
    "rules": [
        {"match": {"last_user": "^get_weather returned:"}, "answer": {"content": REPEATED_CALL}},
        {"match": {"last_user": "returned: (?P<result>[^)]+)\\)"},
         "answer": {"content": "It is {result} in Paris."}},
        {"match": {"tool_result": True}, "answer": {"content": "It is {last_tool_result}."}},
        {"match": {"last_user": "capital"}, "answer": {"content": PARIS}},
        {"answer": {"content": "Hello."}},
    ]
}  # fmt: skip


def _ask(
    client: openai.OpenAI, messages: list[dict[str, Any]], stream: bool, **extra: Any
) -> tuple[str, str | None, int, str | None]:
    """(content, finish_reason, number of calls, toolrelay_warning) of one request."""
    request: dict[str, Any] = {
        "model": "toolrelay-sim",
        "messages": messages,
        "tools": [WEATHER_TOOL],
        **extra,
    }
    if not stream:
        reply = client.chat.completions.create(**request)
        choice = reply.choices[0]
        warning = (reply.model_extra or {}).get("toolrelay_warning")
        return (
            choice.message.content or "",
            choice.finish_reason,
            len(choice.message.tool_calls or ()),
            warning,
        )
    text, finish, calls, warning = "", None, 0, None
    for chunk in client.chat.completions.create(**request, stream=True):
        warning = warning or (chunk.model_extra or {}).get("toolrelay_warning")
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        text += delta.content or ""
        calls += sum(1 for call in delta.tool_calls or () if call.id)
        finish = chunk.choices[0].finish_reason or finish
    return text, finish, calls, warning


def _completions(sim: Any) -> list[dict[str, Any]]:
    return [r.body for r in sim.requests if r.path.endswith("/chat/completions")]


def _clean(text: str) -> None:
    for words in OWN_WORDS:
        assert words not in text, f"toolrelay's own text {words!r} reached the client: {text!r}"


@pytest.mark.parametrize("stream", [False, True])
def test_a_failed_rescue_round_is_asked_again_without_the_listing(stream: bool) -> None:
    with stack(WEATHER_MODEL, copy_prompt=True, gateway_settings=RESCUE) as (sim, gw):
        text, finish, calls, warning = _ask(gw.client(), CAPITAL, stream)
        assert (text.strip(), finish, calls) == (PARIS, "stop", 0)
        _clean(text)
        assert warning is not None and "without the tool listing" in warning
        # The last request was the question as the server would get it direct.
        last = _completions(sim)[-1]
        assert "tools" not in last
        assert last["messages"] == CAPITAL


@pytest.mark.parametrize("stream", [False, True])
def test_the_correction_header_is_never_an_answer(stream: bool) -> None:
    header = "[TOOL CALL ERRORS] Some tool calls in your last reply cannot be run:"
    echoing = {"rules": [{"answer": {"content": f"{header}\n{PARIS}"}}]}
    with stack(echoing, gateway_settings=RESCUE) as (_, gw):
        text, _, _, _ = _ask(gw.client(), CAPITAL, stream)
        assert text.strip() == PARIS


@pytest.mark.parametrize("stream", [False, True])
def test_an_echoed_history_is_asked_again_in_words_it_does_not_echo(stream: bool) -> None:
    # 15 tokens: the echo of the result block spends the budget.
    with stack(WEATHER_MODEL, echo_history=True, gateway_settings=RESCUE) as (sim, gw):
        text, finish, calls, warning = _ask(gw.client(), SECOND_ROUND, stream, max_tokens=15)
        assert (text.strip(), finish, calls) == ("It is sunny in Paris.", "stop", 0)
        _clean(text)
        assert warning is not None and "asked again" in warning
        again = _completions(sim)[-1]
        assert "[SYSTEM DIRECTIVE]" not in str(again["messages"])
        # The question and its call's result in one user turn: no call turn to repeat.
        assert again["messages"] == [
            {"role": "user", "content": f"{ASK_WEATHER[0]['content']}\n\n{IN_WORDS}"}
        ]
        assert REPEATED_CALL not in text


@pytest.mark.parametrize("stream", [False, True])
def test_failing_that_the_backend_s_words_without_markup_and_length_said(stream: bool) -> None:
    # The re-ask is spent on the echo too: what the model wrote, tags removed.
    echo = "[TOOL_RESULT name=get_weather id=call_1]\nsunny\n[/TOOL_RESULT]\n"
    stubborn = {"rules": [{"answer": {"content": echo * 2}}]}  # cut at 60 characters
    with stack(stubborn, gateway_settings=RESCUE) as (_, gw):
        text, finish, calls, _ = _ask(gw.client(), SECOND_ROUND, stream, max_tokens=15)
        assert (text.strip(), finish, calls) == ("sunny", "length", 0)


@pytest.mark.parametrize("stream", [False, True])
def test_a_native_answer_cleaned_to_nothing_is_asked_again(stream: bool) -> None:
    # A model that answers a result by repeating it in its template's wrapper.
    wrapped = {
        "rules": [
            {"match": {"tool_result": True},
             "answer": {"content": "<tool_response>\n{last_tool_result}\n</tool_response>"}},
            *WEATHER_MODEL["rules"],
        ]
    }  # fmt: skip
    with stack(wrapped, gateway_settings=NATIVE) as (sim, gw):
        text, finish, calls, _ = _ask(gw.client(), SECOND_ROUND, stream)
        assert (text.strip(), finish, calls) == ("It is sunny in Paris.", "stop", 0)
        first, again = _completions(sim)[-2:]
        # The backend's copy is conformed (toolrelay.conform): null content beside
        # tool_calls is sent as "".
        sent = [
            {**m, "content": ""} if m.get("tool_calls") and m.get("content") is None else m
            for m in SECOND_ROUND
        ]
        assert first["messages"] == sent
        assert again["tools"] and again["messages"][-1]["content"].endswith(f"\n\n{IN_WORDS}")


@pytest.mark.parametrize("stream", [False, True])
def test_an_answer_is_left_alone(stream: bool) -> None:
    with stack(WEATHER_MODEL, gateway_settings=RESCUE) as (sim, gw):
        text, finish, _, warning = _ask(gw.client(), CAPITAL, stream)
        assert (text.strip(), finish, warning) == (PARIS, "stop", None)
        assert len(_completions(sim)) == 1
