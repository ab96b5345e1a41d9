"""The anthropic SDK against ``toolrelay serve`` in front of ``toolrelay simulate``."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx
import orjson
import pytest

from tests.fronts.rules import check_messages_stream
from tests.fronts.support import ANTHROPIC_TOOL, ASK, SCENARIO
from tests.gateway.support import GatewayServer, stack
from toolrelay.simulator import Simulator

Pair = tuple[Simulator, GatewayServer]


def _client(gw: GatewayServer, key: str = "sk-test") -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=gw.url, api_key=key, max_retries=0, timeout=20)


def _ask(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def test_create_with_tools(pair: Pair) -> None:
    _, gw = pair
    message = _client(gw).messages.create(
        model="toolrelay-sim", max_tokens=200, messages=_ask(ASK), tools=[ANTHROPIC_TOOL]
    )
    assert message.type == "message" and message.role == "assistant"
    assert message.model == "toolrelay-sim" and message.id.startswith("msg_")
    assert message.stop_reason == "tool_use"
    call = message.content[-1]
    assert call.type == "tool_use" and call.name == "get_weather"
    assert call.input == {"city": "Paris"} and call.id
    # Rescued, the model's words before the call stay, without the markup.
    for block in message.content[:-1]:
        assert block.type == "text" and block.text == "Let me look."
    assert message.usage.input_tokens > 0 and message.usage.output_tokens > 0


def test_stream_and_final_message(pair: Pair) -> None:
    _, gw = pair
    with _client(gw).messages.stream(
        model="toolrelay-sim", max_tokens=200, messages=_ask(ASK), tools=[ANTHROPIC_TOOL]
    ) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_message()
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert "input_json" in kinds
    assert final.stop_reason == "tool_use"
    assert final.content[-1].type == "tool_use"
    assert final.content[-1].input == {"city": "Paris"}
    assert final.usage.input_tokens > 0 and final.usage.output_tokens > 0


def test_two_round_tool_loop(pair: Pair) -> None:
    sim, gw = pair
    client = _client(gw)
    messages: list[dict[str, Any]] = _ask(ASK)
    first = client.messages.create(
        model="toolrelay-sim", max_tokens=200, messages=messages, tools=[ANTHROPIC_TOOL]
    )
    call = first.content[-1]
    assert call.type == "tool_use"
    messages.append({"role": "assistant", "content": [b.model_dump() for b in first.content]})
    result = {"type": "tool_result", "tool_use_id": call.id, "content": "18°C and rain"}
    messages.append({"role": "user", "content": [result]})
    with client.messages.stream(
        model="toolrelay-sim", max_tokens=200, messages=messages, tools=[ANTHROPIC_TOOL]
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "The get_weather tool says: 18°C and rain"
    assert final.stop_reason == "end_turn" and final.content[0].text == text
    # What the model server got (natively): the call, then its result.
    sent = sim.requests[-1].body["messages"]
    if "tools" in sim.requests[-1].body:
        assert sent[-2]["tool_calls"][0]["id"] == call.id
        assert sent[-1] == {"role": "tool", "tool_call_id": call.id, "content": "18°C and rain"}


def test_streams_follow_the_rules(pair: Pair) -> None:
    _, gw = pair
    cases = [
        ({"messages": _ask(ASK), "tools": [ANTHROPIC_TOOL]}, "tool_use"),
        ({"messages": _ask("hello")}, "end_turn"),
        ({"messages": _ask("think"), "thinking": {"type": "enabled", "budget_tokens": 64}}, None),
        ({"messages": _ask("a long one")}, "max_tokens"),
    ]
    for body, reason in cases:
        raw = httpx.post(
            gw.url + "/v1/messages",
            json={"model": "toolrelay-sim", "max_tokens": 100, "stream": True, **body},
            timeout=20,
        ).content
        message = check_messages_stream(raw)
        assert reason is None or message.stop_reason == reason


def test_thinking_blocks_only_when_enabled(pair: Pair) -> None:
    _, gw = pair
    client = _client(gw)
    thinking = client.messages.create(
        model="toolrelay-sim",
        max_tokens=100,
        messages=_ask("think"),
        thinking={"type": "enabled", "budget_tokens": 64},
    )
    assert [b.type for b in thinking.content] == ["thinking", "text"]
    assert thinking.content[0].thinking == "The user wants a thought."
    plain = client.messages.create(model="toolrelay-sim", max_tokens=100, messages=_ask("think"))
    assert [b.type for b in plain.content] == ["text"]
    with client.messages.stream(
        model="toolrelay-sim",
        max_tokens=100,
        messages=_ask("think"),
        thinking={"type": "enabled", "budget_tokens": 64},
    ) as stream:
        final = stream.get_final_message()
    assert final.content[0].type == "thinking"
    assert final.content[0].thinking == "The user wants a thought."


def test_request_reaches_the_backend_translated(pair: Pair) -> None:
    sim, gw = pair
    _client(gw).messages.create(
        model="toolrelay-sim",
        max_tokens=77,
        system=[{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Be kind."}],
        messages=_ask("hello"),
        stop_sequences=["END"],
        extra_body={"temperature": 0.5},
        metadata={"user_id": "u1"},
    )
    body = sim.requests[-1].body
    assert body["max_tokens"] == 77 and body["temperature"] == 0.5 and body["stop"] == ["END"]
    assert body["messages"][0] == {"role": "system", "content": "Be brief.\nBe kind."}
    assert "metadata" not in body
    # x-api-key is the client's credential: it reaches the backend as a bearer token.
    assert sim.requests[-1].headers["authorization"] == "Bearer sk-test"


def test_tool_choice(pair: Pair) -> None:
    sim, gw = pair
    client = _client(gw)
    for choice, sent in (
        ({"type": "any"}, "required"),
        (
            {"type": "tool", "name": "get_weather"},
            {"type": "function", "function": {"name": "get_weather"}},
        ),
    ):
        message = client.messages.create(
            model="toolrelay-sim",
            max_tokens=100,
            messages=_ask(ASK),
            tools=[ANTHROPIC_TOOL],
            tool_choice=choice,  # type: ignore[arg-type]
        )
        assert message.stop_reason == "tool_use"
        if "tools" in sim.requests[-1].body:
            assert sim.requests[-1].body["tool_choice"] == sent
    message = client.messages.create(
        model="toolrelay-sim",
        max_tokens=100,
        messages=_ask(ASK),
        tools=[ANTHROPIC_TOOL],
        tool_choice={"type": "none"},
    )
    assert all(block.type == "text" for block in message.content)
    client.messages.create(
        model="toolrelay-sim",
        max_tokens=100,
        messages=_ask("hello"),
        tools=[ANTHROPIC_TOOL],
        tool_choice={"type": "auto", "disable_parallel_tool_use": True},
    )
    if "tools" in sim.requests[-1].body:
        assert sim.requests[-1].body["parallel_tool_calls"] is False


def test_errors_have_anthropics_shape(pair: Pair) -> None:
    _, gw = pair
    client = _client(gw)
    with pytest.raises(anthropic.BadRequestError) as bad:
        client.messages.create(model="toolrelay-sim", max_tokens=0, messages=_ask("hi"))
    assert bad.value.body == {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": bad.value.body["error"]["message"]},
    }
    assert "max_tokens" in bad.value.body["error"]["message"]
    with pytest.raises(anthropic.InternalServerError) as upstream:
        client.messages.create(model="toolrelay-sim", max_tokens=10, messages=_ask("fail"))
    assert upstream.value.status_code == 502
    assert upstream.value.body["error"]["type"] == "api_error"
    raw = httpx.post(gw.url + "/v1/messages", content=b"{nope", timeout=10)
    assert raw.status_code == 400 and raw.json()["type"] == "error"


def test_failure_mid_stream_is_an_error_event() -> None:
    with stack(SCENARIO, gateway_settings={"backend_kind": "openai"}, fail_after_chunks=2) as (
        _,
        gw,
    ):
        client = _client(gw)
        with (
            pytest.raises(anthropic.APIStatusError) as failed,
            client.messages.stream(
                model="toolrelay-sim", max_tokens=100, messages=_ask("hello there")
            ) as stream,
        ):
            stream.get_final_message()
        assert failed.value.body["type"] == "error"
        assert failed.value.body["error"]["type"] == "api_error"


def test_count_tokens_is_an_estimate(pair: Pair) -> None:
    _, gw = pair
    client = _client(gw)
    short = client.messages.count_tokens(model="toolrelay-sim", messages=_ask("hi"))
    longer = client.messages.count_tokens(
        model="toolrelay-sim", messages=_ask("hi " * 400), tools=[ANTHROPIC_TOOL]
    )
    assert 0 < short.input_tokens < 10
    assert 300 < longer.input_tokens < 600
    raw = httpx.post(gw.url + "/v1/messages/count_tokens", json={"model": "m"}, timeout=10)
    assert raw.status_code == 400 and orjson.loads(raw.content)["error"]["type"] == (
        "invalid_request_error"
    )


def test_a_stop_sequence_is_reported(pair: Pair) -> None:
    _, gw = pair
    client = _client(gw)
    ask = {"model": "toolrelay-sim", "max_tokens": 100, "stop_sequences": ["STOP", "rain"]}
    message = client.messages.create(messages=_ask("hello rain world"), **ask)  # type: ignore[arg-type]
    assert message.stop_reason == "stop_sequence" and message.stop_sequence == "rain"
    assert message.content[0].text == "You said: hello"
    with client.messages.stream(messages=_ask("hello rain world"), **ask) as stream:  # type: ignore[arg-type]
        final = stream.get_final_message()
    assert final.stop_reason == "stop_sequence" and final.stop_sequence == "rain"
    plain = client.messages.create(messages=_ask("hello world"), **ask)  # type: ignore[arg-type]
    assert plain.stop_reason == "end_turn" and plain.stop_sequence is None
