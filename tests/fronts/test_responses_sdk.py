"""The openai SDK's Responses API against ``toolrelay serve`` in front of ``toolrelay simulate``."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from tests.fronts.rules import check_responses_stream
from tests.fronts.support import ASK, CUSTOM_TOOL, PATCH, RESPONSES_TOOL, SCENARIO
from tests.gateway.support import GatewayServer, stack
from toolrelay.simulator import Simulator

Pair = tuple[Simulator, GatewayServer]


def test_create_with_tools(pair: Pair) -> None:
    _, gw = pair
    response = gw.client().responses.create(
        model="toolrelay-sim", input=ASK, tools=[RESPONSES_TOOL]
    )
    assert response.object == "response" and response.status == "completed"
    assert response.id.startswith("resp_") and response.model == "toolrelay-sim"
    call = response.output[-1]
    assert call.type == "function_call" and call.name == "get_weather"
    assert call.arguments == '{"city":"Paris"}' or call.arguments == '{"city": "Paris"}'
    assert call.call_id and call.status == "completed"
    for item in response.output[:-1]:
        assert item.type == "message" and response.output_text == "Let me look."
    assert response.usage is not None and response.usage.input_tokens > 0
    assert response.tools[0].type == "function"


def test_two_round_loop_streamed(pair: Pair) -> None:
    sim, gw = pair
    client = gw.client()
    items: list[Any] = [{"role": "user", "content": ASK}]
    with client.responses.stream(model="toolrelay-sim", input=items, tools=[RESPONSES_TOOL]) as s:
        kinds = [event.type for event in s]
        first = s.get_final_response()
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert "response.function_call_arguments.delta" in kinds
    call = first.output[-1]
    assert call.type == "function_call"
    items += [item.model_dump(exclude_none=True) for item in first.output]
    items.append({"type": "function_call_output", "call_id": call.call_id, "output": "18°C"})
    with client.responses.stream(model="toolrelay-sim", input=items, tools=[RESPONSES_TOOL]) as s:
        deltas = [e.delta for e in s if e.type == "response.output_text.delta"]
        second = s.get_final_response()
    assert "".join(deltas) == second.output_text == "The get_weather tool says: 18°C"
    sent = sim.requests[-1].body["messages"]
    if "tools" in sim.requests[-1].body:
        assert sent[-2]["tool_calls"][0]["id"] == call.call_id
        assert sent[-1] == {"role": "tool", "tool_call_id": call.call_id, "content": "18°C"}


def test_previous_response_id(pair: Pair) -> None:
    _, gw = pair
    client = gw.client()
    first = client.responses.create(
        model="toolrelay-sim", input=ASK, tools=[RESPONSES_TOOL], instructions="Be brief."
    )
    call = first.output[-1]
    assert call.type == "function_call"
    second = client.responses.create(
        model="toolrelay-sim",
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}],
        tools=[RESPONSES_TOOL],
    )
    assert second.output_text == "The get_weather tool says: sunny"
    assert second.previous_response_id == first.id
    kept = client.responses.retrieve(second.id)
    assert kept.id == second.id and kept.output_text == second.output_text
    client.responses.delete(second.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(second.id)
    unstored = client.responses.create(model="toolrelay-sim", input="hello", store=False)
    with pytest.raises(openai.BadRequestError) as missing:
        client.responses.create(
            model="toolrelay-sim", previous_response_id=unstored.id, input="again"
        )
    assert missing.value.code == "previous_response_not_found"
    assert missing.value.param == "previous_response_id"


def test_streams_follow_the_rules(pair: Pair) -> None:
    _, gw = pair
    cases = [
        ({"input": ASK, "tools": [RESPONSES_TOOL]}, "completed"),
        ({"input": "hello", "instructions": "Be brief."}, "completed"),
        ({"input": "think", "reasoning": {"effort": "low"}}, "completed"),
        ({"input": "a long one"}, "incomplete"),
        ({"input": "fail"}, None),
    ]
    for body, status in cases:
        reply = httpx.post(
            gw.url + "/v1/responses",
            json={"model": "toolrelay-sim", "stream": True, **body},
            timeout=20,
        )
        if status is None:
            assert reply.status_code == 502
            continue
        response = check_responses_stream(reply.content)
        assert response.status == status
    thought = check_responses_stream(
        httpx.post(
            gw.url + "/v1/responses",
            json={"model": "toolrelay-sim", "stream": True, "input": "think", "reasoning": {}},
            timeout=20,
        ).content
    )
    assert [item.type for item in thought.output] == ["reasoning", "message"]


def test_reasoning_only_when_asked(pair: Pair) -> None:
    _, gw = pair
    client = gw.client()
    plain = client.responses.create(model="toolrelay-sim", input="think")
    assert [item.type for item in plain.output] == ["message"]
    asked = client.responses.create(
        model="toolrelay-sim", input="think", reasoning={"effort": "low"}
    )
    reasoning = asked.output[0]
    assert reasoning.type == "reasoning"
    assert reasoning.content is not None
    assert reasoning.content[0].text == "The user wants a thought."


def test_incomplete_at_the_token_limit(pair: Pair) -> None:
    _, gw = pair
    response = gw.client().responses.create(
        model="toolrelay-sim", input="a long one", max_output_tokens=16
    )
    assert response.status == "incomplete"
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "max_output_tokens"
    assert response.max_output_tokens == 16


def test_refusals_are_clear_400s(pair: Pair) -> None:
    _, gw = pair
    client = gw.client()
    refused: list[dict[str, Any]] = [
        {"tools": [RESPONSES_TOOL], "tool_choice": {"type": "web_search_preview"}},
        {"background": True},
        {"input": [{"type": "telepathy_call", "call_id": "c"}]},
        {"tools": [{"type": "namespace", "name": "fs", "tools": [{"type": "function"}]}]},
    ]
    for extra in refused:
        body = {"model": "toolrelay-sim", "input": "hi", **extra}
        with pytest.raises(openai.BadRequestError) as bad:
            client.post("/responses", body=body, cast_to=object)
        assert bad.value.param and bad.value.message


def test_failure_mid_stream_is_response_failed() -> None:
    with stack(SCENARIO, gateway_settings={"backend_kind": "openai"}, fail_after_chunks=2) as (
        _,
        gw,
    ):
        reply = httpx.post(
            gw.url + "/v1/responses",
            json={"model": "toolrelay-sim", "stream": True, "input": "hello there"},
            timeout=20,
        )
        failed = check_responses_stream(reply.content)
        assert failed.status == "failed" and failed.error is not None
        assert failed.error.code == "server_error"


def test_custom_tools_round_trip(pair: Pair) -> None:
    sim, gw = pair
    client = gw.client()
    first = client.responses.create(
        model="toolrelay-sim", input="patch it", tools=[CUSTOM_TOOL, RESPONSES_TOOL]
    )
    call = first.output[-1]
    assert call.type == "custom_tool_call" and call.name == "apply_patch"
    assert call.input == PATCH
    sent = sim.requests[-1].body
    if "tools" in sent:
        # Offered as a function taking the text, its grammar in the description.
        function = sent["tools"][0]["function"]
        assert function["parameters"]["required"] == ["input"]
        assert "lark grammar" in function["description"]
    streamed = check_responses_stream(
        httpx.post(
            gw.url + "/v1/responses",
            json={
                "model": "toolrelay-sim",
                "input": "patch",
                "tools": [CUSTOM_TOOL],
                "stream": True,
            },
            timeout=20,
        ).content
    )
    assert streamed.output[-1].type == "custom_tool_call"
    follow = client.responses.create(
        model="toolrelay-sim",
        input=[
            {"role": "user", "content": "patch it"},
            call.model_dump(exclude_none=True),
            {"type": "custom_tool_call_output", "call_id": call.call_id, "output": "Done!"},
        ],
        tools=[CUSTOM_TOOL],
    )
    assert follow.output_text == "The apply_patch tool says: Done!"
