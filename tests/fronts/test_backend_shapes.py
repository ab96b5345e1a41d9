"""What a backend receives and what the client gets back: ids, results, one call at a time.

The gateway in front of the simulator, natively and rescuing, with the
official SDKs as the clients.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from tests.fronts.support import ANTHROPIC_TOOL
from tests.gateway.support import GatewayServer, stack
from tests.weather import WEATHER_TOOL
from toolrelay.conform import NO_RESULT
from toolrelay.simulator import Simulator

Pair = tuple[Simulator, GatewayServer]
TWO_CALLS = '{"name": "get_weather", "arguments": {"city": "Oslo"}}'
SCENARIO: dict[str, Any] = {
    "rules": [
        {"match": {"tool_result": True}, "answer": {"content": "Results: {last_tool_result}"}},
        {
            "match": {"tools": "native", "last_user": "(?i)two"},
            "answer": {
                "tool_calls": [
                    {"name": "get_weather", "arguments": {"city": "Oslo"}},
                    {"name": "get_weather", "arguments": {"city": "Rome"}},
                ]
            },
        },
        {
            "match": {"tools": "prompt", "last_user": "(?i)two"},
            "answer": {
                "content": f"[TOOL_CALL]{TWO_CALLS}[/TOOL_CALL]\n"
                '[TOOL_CALL]{"name": "get_weather", "arguments": {"city": "Rome"}}[/TOOL_CALL]'
            },
        },
        {"answer": {"content": "You said: {last_user}"}},
    ]
}


@pytest.fixture(scope="module", params=["native", "rescue"])
def pair(request: pytest.FixtureRequest) -> Iterator[Pair]:
    settings = {"backend_kind": "openai", "tool_mode": request.param}
    with stack(SCENARIO, gateway_settings=settings) as both:
        yield both


@pytest.mark.parametrize("streamed", [False, True])
def test_parallel_tool_calls_false_leaves_one_call_and_says_so(pair: Pair, streamed: bool) -> None:
    _, gw = pair
    client = gw.client()
    ask = [{"role": "user", "content": "weather in two cities"}]
    both = client.chat.completions.create(model="m", messages=ask, tools=[WEATHER_TOOL])
    assert len(both.choices[0].message.tool_calls or []) == 2
    if streamed:
        calls: dict[int, str] = {}
        warning = None
        for chunk in client.chat.completions.create(
            model="m", messages=ask, tools=[WEATHER_TOOL], parallel_tool_calls=False, stream=True
        ):
            for delta in chunk.choices[0].delta.tool_calls or [] if chunk.choices else []:
                calls[delta.index] = calls.get(delta.index, "") + (
                    delta.function.arguments or "" if delta.function else ""
                )
            warning = (chunk.model_extra or {}).get("toolrelay_warning") or warning
        assert list(calls) == [0] and "Oslo" in calls[0]
    else:
        one = client.chat.completions.create(
            model="m", messages=ask, tools=[WEATHER_TOOL], parallel_tool_calls=False
        )
        tool_calls = one.choices[0].message.tool_calls or []
        assert len(tool_calls) == 1 and one.choices[0].finish_reason == "tool_calls"
        warning = (one.model_extra or {}).get("toolrelay_warning")
    assert warning == "parallel_tool_calls is false: left out 1 more call(s) (get_weather)"


def test_anthropic_disable_parallel_tool_use(pair: Pair) -> None:
    _, gw = pair
    client = anthropic.Anthropic(base_url=gw.url, api_key="sk-test", max_retries=0)
    message = client.messages.create(
        model="m",
        max_tokens=100,
        messages=[{"role": "user", "content": "weather in two cities"}],
        tools=[ANTHROPIC_TOOL],
        tool_choice={"type": "auto", "disable_parallel_tool_use": True},
    )
    assert [block.type for block in message.content].count("tool_use") == 1
    assert "left out 1 more call" in (message.model_extra or {})["toolrelay_warning"]


def test_anthropic_results_of_a_parallel_batch_each_pair_with_their_call(pair: Pair) -> None:
    """Two tool_use blocks answered in one user turn, one of them not at all, and
    the ids a Mistral template wants: every call gets exactly one result."""
    sim, gw = pair
    client = anthropic.Anthropic(base_url=gw.url, api_key="sk-test", max_retries=0)
    history: list[Any] = [
        {"role": "user", "content": "weather in two cities"},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_01A",
                    "name": "get_weather",
                    "input": {"city": "Oslo"},
                },
                {
                    "type": "tool_use",
                    "id": "toolu_01B",
                    "name": "get_weather",
                    "input": {"city": "Rome"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01B", "content": "Rome 25C"},
                {"type": "text", "text": "Oslo was cancelled."},
            ],
        },
    ]
    message = client.messages.create(
        model="devstral-small-2507", max_tokens=100, messages=history, tools=[ANTHROPIC_TOOL]
    )
    assert message.content[0].type == "text"
    sent = sim.requests[-1].body["messages"]
    if "tools" not in sim.requests[-1].body:
        return  # rescued: the results are text, ids are not the template's concern
    calls = sent[1]["tool_calls"]
    assert all(re.fullmatch(r"[A-Za-z0-9]{9}", call["id"]) for call in calls)
    assert [m["tool_call_id"] for m in sent[2:4]] == [call["id"] for call in calls]
    # The turn's own text follows the results; a Mistral template wants no user
    # turn between a result and the answer, so it joins the last result.
    assert [m["content"] for m in sent[2:]] == [NO_RESULT, "Rome 25C\n\nOslo was cancelled."]


@pytest.mark.parametrize("streamed", [False, True])
def test_chat_completions_system_message_mid_conversation(pair: Pair, streamed: bool) -> None:
    sim, gw = pair
    messages: list[Any] = [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "Hi."},
        {"role": "system", "content": "The user is in Oslo."},
        {"role": "user", "content": "and now?"},
    ]
    answer = gw.client().chat.completions.create(model="m", messages=messages, stream=streamed)
    text = (
        "".join(c.choices[0].delta.content or "" for c in answer if c.choices)
        if streamed
        else answer.choices[0].message.content
    )
    assert text is not None and text.startswith("You said:") and "and now?" in text
    sent = sim.requests[-1].body["messages"]
    assert sent[0] == {"role": "system", "content": "Be brief."}
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert sent[-1]["content"].endswith("</system-note>\n\nand now?")
