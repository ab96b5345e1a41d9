"""The match keys for self-repair: ``repair`` (the gateway's re-ask) and a
``tool_result`` pattern."""

from __future__ import annotations

from typing import Any

import openai

from tests.simulator.conftest import StartSimulator
from tests.weather import WEATHER_TOOL
from toolrelay.correction import CORRECTION_MARKER
from toolrelay.rescue import DIRECTIVE_MARKER

SCENARIO = {
    "rules": [
        {
            "match": {"repair": "'city' is required", "last_user": "in (?P<city>\\w+)"},
            "answer": {"content": "fixed {city}"},
        },
        {"match": {"repair": True}, "answer": {"content": "told, about {last_user}"}},
        {
            "match": {"tool_result": "(?i)sunny"},
            "answer": {"content": "result: {last_tool_result}"},
        },
        {"match": {"tool_result": True}, "answer": {"content": "another result"}},
        {
            "match": {"repair": False, "last_user": "weather in (?P<city>\\w+)"},
            "answer": {"content": "asked about {city}"},
        },
    ]
}


def _answer(sim: Any, messages: list[dict[str, Any]]) -> str | None:
    client = openai.OpenAI(base_url=sim.openai_url, api_key="none")
    reply = client.chat.completions.create(model="m", messages=messages, tools=[WEATHER_TOOL])  # type: ignore[arg-type]
    client.close()
    return reply.choices[0].message.content


ASK = {"role": "user", "content": "weather in Oslo"}
ATTEMPT = {"role": "assistant", "content": '{"name": "get_weather", "arguments": {}}'}


def test_the_re_ask_is_recognised_and_the_question_still_matches(
    start_simulator: StartSimulator,
) -> None:
    sim = start_simulator(SCENARIO)
    directive = f"{CORRECTION_MARKER} ...\n- get_weather: 'city' is required"
    assert _answer(sim, [ASK]) == "asked about Oslo"
    assert _answer(sim, [ASK, ATTEMPT, {"role": "user", "content": directive}]) == "fixed Oslo"
    # On the rescue path the late directive follows; it is cut off as for a question.
    rescued = f"{CORRECTION_MARKER} - unit: bad\n\n{DIRECTIVE_MARKER} call tools"
    assert _answer(sim, [ASK, ATTEMPT, {"role": "user", "content": rescued}]) == (
        "told, about weather in Oslo"
    )


def test_a_tool_result_pattern_reads_the_results(start_simulator: StartSimulator) -> None:
    sim = start_simulator(SCENARIO)
    called = {
        "role": "assistant",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
        ],
    }
    sunny = {"role": "tool", "tool_call_id": "c1", "content": "18 C and sunny"}
    retry = {"role": "tool", "tool_call_id": "c1", "content": "Fix the errors and try again."}
    assert _answer(sim, [ASK, called, sunny]) == "result: 18 C and sunny"
    assert _answer(sim, [ASK, called, retry]) == "another result"
