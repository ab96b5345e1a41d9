"""Weak models through the gateway: copied examples, echoed prompts, echoed results.

The simulator plays the weak model: ``echo_example`` answers with the rescue
prompt's example call, ``echo_directive`` repeats the late directive, and
the ``{example_call}``, ``{directive}`` and ``{system}`` placeholders put
those texts wherever a rule wants them.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from tests.gateway.support import GatewayServer, stack
from tests.weather import ASK_WEATHER, WEATHER_TOOL
from toolrelay.events import CallRejected
from toolrelay.io.backends import Backend
from toolrelay.io.counters import Counters
from toolrelay.io.round import RoundRequest, complete_round, stream_round
from toolrelay.io.settings import BackendConfig
from toolrelay.simulator import Simulator, SimulatorConfig

SAY_HELLO = [{"role": "user", "content": "Say hello to me."}]
RESCUE = {"tool_mode": "rescue", "backend_kind": "openai"}
PROMPT_MARKUP = ("[TOOL_CALL]", "[SYSTEM DIRECTIVE]", "[TOOL_RESULT", "<tool_call>", "### get_")


def ask(gw: GatewayServer, stream: bool, **request: Any) -> tuple[str, list[Any], str]:
    """Content, tool calls and finish reason of one request, streamed or not."""
    client = gw.client()
    if stream:
        with client.chat.completions.stream(model="toolrelay-sim", **request) as helper:
            reply = helper.get_final_completion()
    else:
        reply = client.chat.completions.create(model="toolrelay-sim", **request)
    choice = reply.choices[0]
    return choice.message.content or "", choice.message.tool_calls or [], choice.finish_reason


def assert_clean(content: str) -> None:
    for markup in PROMPT_MARKUP:
        assert markup not in content, content


# --- 1. a copied example is never a call ---------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("messages", [SAY_HELLO, ASK_WEATHER])
@pytest.mark.parametrize("validation", ["off", "repair"])
def test_a_copied_example_is_never_returned(messages: Any, stream: bool, validation: str) -> None:
    settings = {**RESCUE, "validation": validation}
    with stack(echo_example=True, gateway_settings=settings) as (sim, gw):
        content, calls, finish = ask(gw, stream, messages=messages, tools=[WEATHER_TOOL])
        sent = [r for r in sim.requests if r.path.endswith("/chat/completions")]
    assert calls == []
    assert finish == "stop"
    assert_clean(content)
    # The copy is a rejected call: with validation the self-repair asks once more
    # (and is answered with a copy again). A rescue round that leaves nothing is
    # then asked without the tool listing, as the server would get it directly,
    # and this model answers that (issue 24).
    assert len(sent) == (2 if validation == "off" else 3)
    assert "tools" not in sent[-1].body
    assert "[TOOL_CALL]" not in json.dumps(sent[-1].body["messages"])
    assert content.startswith(("This is the toolrelay simulator", "Which city"))


def test_the_copy_is_a_rejected_call_for_the_self_repair() -> None:
    async def run(sim: Simulator) -> tuple[Any, list[Any]]:
        backend = Backend(BackendConfig(url=sim.openai_url, kind="openai", tool_mode="rescue"))
        body = {"model": "toolrelay-sim", "messages": SAY_HELLO, "tools": [WEATHER_TOOL]}
        try:
            # Unchecked (validate off): the rejected call as the self-repair receives it.
            req = RoundRequest.from_body(body, validate="off")
            reply = await complete_round(backend, req, Counters())
            streamed = [
                item async for batch in stream_round(backend, req, Counters()) for item in batch
            ]
        finally:
            await backend.aclose()
        return reply, streamed

    with Simulator(SimulatorConfig.load(None, echo_example=True)) as sim:
        reply, streamed = asyncio.run(run(sim))
    assert reply.calls == []
    [rejected] = reply.rejected
    assert rejected.name == "get_weather"
    assert "copied from the tool's description or example" in rejected.reason
    assert "<city>" in rejected.reason
    [event] = [item for item in streamed if isinstance(item, CallRejected)]
    assert event.call.reason == rejected.reason


# --- 2. required and named choices reach the strict re-ask ---------------------------

STRICT_REASK = {
    "rules": [
        {
            # Only the strict re-ask's directive makes this weak model write a real call.
            "match": {
                "directive": "tool call blocks only",
                "last_user": "(?i)weather in (?P<city>\\w+)",
            },
            "answer": {
                "content": '[TOOL_CALL]{"name": "get_weather", "arguments": {"city": "{city}"}}'
                "[/TOOL_CALL]"
            },
        },
        {"match": {"tools": "prompt"}, "answer": {"content": "{example_call}"}},
        {"answer": {"content": "ok"}},
    ]
}
NAMED = {"type": "function", "function": {"name": "get_weather"}}


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("choice", ["required", NAMED])
def test_required_and_named_choices_reach_the_strict_reask(choice: Any, stream: bool) -> None:
    with stack(STRICT_REASK, gateway_settings=RESCUE) as (sim, gw):
        content, calls, _ = ask(
            gw, stream, messages=ASK_WEATHER, tools=[WEATHER_TOOL], tool_choice=choice
        )
        sent = [r for r in sim.requests if r.path.endswith("/chat/completions")]
    [call] = calls
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    assert len(sent) == 2  # the copied example, then the strict re-ask
    assert_clean(content)


REPAIRED = {
    "rules": [
        {
            "match": {"repair": True, "last_user": "(?i)weather in (?P<city>\\w+)"},
            "answer": {
                "content": '[TOOL_CALL]{"name": "get_weather", "arguments": {"city": "{city}"}}'
                "[/TOOL_CALL]"
            },
        },
        {"match": {"tools": "prompt"}, "answer": {"content": "{example_call}"}},
    ]
}


def test_the_reask_after_a_stream_survives_the_server_closing_it() -> None:
    # llama-server closes the connection after every stream without saying so:
    # the re-ask, sent the moment the stream ends, must not go into that socket
    # and fail (the copy was dropped and the model's correction lost).
    with stack(REPAIRED, close_after_stream=True, gateway_settings=RESCUE) as (sim, gw):
        for _ in range(3):
            content, calls, finish = ask(gw, True, messages=ASK_WEATHER, tools=[WEATHER_TOOL])
            [call] = calls
            assert json.loads(call.function.arguments) == {"city": "Paris"}
            assert finish == "tool_calls"
            assert_clean(content)
        sent = [r for r in sim.requests if r.path.endswith("/chat/completions")]
    # Each copy, then its re-ask; a re-ask the server read just before it
    # closed (it never answered) is sent once more, so at most once each.
    assert 6 <= len(sent) <= 9


# --- 5. what toolrelay wrote into the prompt never comes back ------------------------


HELLO = {
    "rules": [
        {
            "match": {"tools": "prompt", "last_user": "(?i)weather in (?P<city>\\w+)"},
            "answer": {
                "content": '[TOOL_CALL]{"name": "get_weather", "arguments": {"city": "{city}"}}'
                "[/TOOL_CALL]"
            },
        },
        {"answer": {"content": "Hello there!"}},
    ]
}


@pytest.mark.parametrize("stream", [False, True])
def test_an_echoed_directive_is_removed(stream: bool) -> None:
    with stack(HELLO, echo_directive=True, gateway_settings=RESCUE) as (_, gw):
        content, calls, _ = ask(gw, stream, messages=SAY_HELLO, tools=[WEATHER_TOOL])
        weather, weather_calls, _ = ask(gw, stream, messages=ASK_WEATHER, tools=[WEATHER_TOOL])
    assert calls == []
    assert content.strip() == "Hello there!"
    assert "If a tool" not in content and "placeholder" not in content
    assert_clean(content)
    assert [c.function.name for c in weather_calls] == ["get_weather"]
    assert weather.strip() == ""


ECHO_PROMPT = {
    "rules": [
        {
            "match": {"tools": "prompt", "directive": "tool call blocks only"},
            "answer": {
                "content": "{directive}\n{system}\n"
                '[TOOL_CALL]{"name": "get_weather", "arguments": {"city": "Oslo"}}[/TOOL_CALL]'
            },
        },
        {"match": {"tools": "prompt"}, "answer": {"content": "{system}\n{directive}"}},
    ]
}


@pytest.mark.parametrize("stream", [False, True])
def test_the_strict_directive_and_the_tool_listing_are_removed(stream: bool) -> None:
    with stack(ECHO_PROMPT, gateway_settings=RESCUE) as (_, gw):
        content, calls, _ = ask(
            gw, stream, messages=ASK_WEATHER, tools=[WEATHER_TOOL], tool_choice="required"
        )
    assert [json.loads(c.function.arguments) for c in calls] == [{"city": "Oslo"}]
    for echoed in ("### get_weather", "Parameters:", "# Tools", "You must call", "placeholder"):
        assert echoed not in content
    assert_clean(content)


# --- 6. an echoed tool-result wrapper is markup --------------------------------------

RESULT_ECHO = {
    "rules": [
        {
            "match": {"tool_result": True},
            "answer": {"content": '<tool_response>\n{"temperature": 21}\n\nIt is 21 °C in Paris.'},
        },
        {
            "match": {"tools": "native"},
            "answer": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
        },
    ]
}
ROUND_TWO = [
    *ASK_WEATHER,
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": '{"temperature": 21}'},
]


@pytest.mark.parametrize("stream", [False, True])
def test_an_echoed_result_wrapper_is_removed_from_a_native_answer(stream: bool) -> None:
    with stack(RESULT_ECHO, gateway_settings={"backend_kind": "openai"}) as (_, gw):
        content, calls, _ = ask(gw, stream, messages=ROUND_TWO, tools=[WEATHER_TOOL])
    assert calls == []
    assert content.strip() == "It is 21 °C in Paris."


# --- 4. the stuck detector's final round is parsed and cleaned -----------------------

LOOPED = [
    *ASK_WEATHER,
    *(
        message
        for i in range(3)
        for message in (
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{i}",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": f"call_{i}", "content": "18 C"},
        )
    ),
]
MARKUP_AFTER_LOOP = {
    "rules": [
        {
            "match": {"tool_result": True},
            "answer": {
                "content": "It is 18 C in Paris.\n"
                '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>\n'
                "[TOOL_RESULT name=get_weather id=call_9]\n18 C\n[/TOOL_RESULT]\n\n"
                "{last_tool_result}"
            },
        },
        {"answer": {"content": "ok"}},
    ]
}


@pytest.mark.parametrize("tool_mode", ["auto", "rescue"])
@pytest.mark.parametrize("stream", [False, True])
def test_the_final_round_after_a_loop_is_cleaned(tool_mode: str, stream: bool) -> None:
    settings = {"backend_kind": "openai", "tool_mode": tool_mode}
    with stack(MARKUP_AFTER_LOOP, gateway_settings=settings) as (sim, gw):
        content, calls, finish = ask(gw, stream, messages=LOOPED, tools=[WEATHER_TOOL])
        sent = sim.requests[-1].body
    assert "tools" not in sent and "tool_choice" not in sent
    assert calls == [] and finish == "stop"
    assert content.startswith("It is 18 C in Paris.")
    assert "tool_call" not in content and "TOOL_RESULT" not in content
    # The loop note, echoed back with the result it was attached to, is ours too.
    assert "loop" not in content.lower()


# --- 7. --tool-mode native never sends a rescue round --------------------------------


def test_native_mode_reasks_natively() -> None:
    silent = {"rules": [{"answer": {"content": "I would rather chat."}}]}
    # Unconstrained: a constrained first attempt is a call, and there is no re-ask.
    settings = {"backend_kind": "llamacpp", "tool_mode": "native", "constrain": "off"}
    with stack(silent, gateway_settings=settings, ignore_tool_choice=True) as (sim, gw):
        _, calls, _ = ask(
            gw, False, messages=ASK_WEATHER, tools=[WEATHER_TOOL], tool_choice="required"
        )
        sent = [r.body for r in sim.requests if r.path.endswith("/chat/completions")]
    assert calls == []
    assert len(sent) >= 2
    for body in sent:
        assert body["tools"] == [WEATHER_TOOL]
        assert "[TOOL_CALL]" not in json.dumps(body["messages"])
    assert "You must call" in json.dumps(sent[-1]["messages"])
