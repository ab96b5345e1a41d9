"""Server tools beside client tools, through the gateway's fronts and the official SDKs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from tests.engine.support import completions, weather_tool
from tests.gateway.support import TIME_TOOL, GatewayServer, gateway
from tests.tools.service import Service
from toolrelay.simulator import Simulator, SimulatorConfig

# Server tool first, then the client's, then the answer from both results.
MIXED = {
    "rules": [
        {
            "match": {"tool_result": r"^\d\d:\d\d$"},
            "answer": {"content": "It is {last_tool_result} in Oslo."},
        },
        {
            "match": {"tool_result": "ok GET /weather"},
            "answer": {
                "content": "Now the time.",
                "tool_calls": [{"name": "get_time", "arguments": {"tz": "CET"}}],
            },
        },
        {
            "match": {"tools": "native"},
            "answer": {
                "content": "Let me look outside.",
                "tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}],
            },
        },
        {"answer": {"content": "no tools offered"}},
    ]
}
QUESTION = [{"role": "user", "content": "Weather and time in Oslo?"}]


@pytest.fixture(scope="module")
def stack(
    service: Service, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Simulator, GatewayServer]]:
    path = Path(tmp_path_factory.mktemp("tools")) / "tools.json"
    path.write_text(json.dumps([weather_tool(service.url)]), encoding="utf-8")
    with (
        Simulator(SimulatorConfig.load(MIXED, chunk=3)) as sim,
        gateway(sim.openai_url, tools_file=str(path)) as gw,
    ):
        yield sim, gw


def follow_up(call_id: str) -> list[dict[str, Any]]:
    """The client's next request: its tool's call and result appended."""
    call = {
        "id": call_id,
        "type": "function",
        "function": {"name": "get_time", "arguments": '{"tz": "CET"}'},
    }
    return [
        *QUESTION,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "content": "14:05"},
    ]


def test_mixed_request_without_streaming(
    stack: tuple[Simulator, GatewayServer], service: Service
) -> None:
    sim, gw = stack
    client = gw.client()
    before = len(service.recorder.requests)
    first = client.chat.completions.create(
        model="toolrelay-sim", messages=QUESTION, tools=[TIME_TOOL]
    )
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls or []
    assert (call.function.name, json.loads(call.function.arguments)) == ("get_time", {"tz": "CET"})
    assert choice.message.content == "Now the time."
    # toolrelay ran its own tool in between, and offered both to the model.
    assert [seen.target for seen in service.recorder.requests[before:]] == ["/weather/Oslo"]
    offered = [tool["function"]["name"] for tool in completions(sim)[-1]["tools"]]
    assert offered == ["get_weather", "get_time"]
    second = client.chat.completions.create(
        model="toolrelay-sim", messages=follow_up(call.id), tools=[TIME_TOOL]
    )
    assert second.choices[0].message.content == "It is 14:05 in Oslo."
    assert second.choices[0].finish_reason == "stop"
    assert not second.choices[0].message.tool_calls


def test_mixed_request_streamed(stack: tuple[Simulator, GatewayServer], service: Service) -> None:
    _, gw = stack
    client = gw.client()
    before = len(service.recorder.requests)
    chunks = list(
        client.chat.completions.create(
            model="toolrelay-sim", messages=QUESTION, tools=[TIME_TOOL], stream=True
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    # The server tool's round (its prose included) is not shown.
    assert text == "Now the time."
    calls = [tc for c in chunks if c.choices for tc in c.choices[0].delta.tool_calls or []]
    names = [tc.function.name for tc in calls if tc.function and tc.function.name]
    assert names == ["get_time"]
    arguments = "".join(tc.function.arguments or "" for tc in calls if tc.function)
    assert json.loads(arguments) == {"tz": "CET"}
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"
    assert [seen.target for seen in service.recorder.requests[before:]] == ["/weather/Oslo"]
    with client.chat.completions.stream(
        model="toolrelay-sim", messages=follow_up(calls[0].id or "call_1"), tools=[TIME_TOOL]
    ) as stream:
        final = stream.get_final_completion()
    assert final.choices[0].message.content == "It is 14:05 in Oslo."


def test_a_name_clash_is_a_400_naming_the_tool(stack: tuple[Simulator, GatewayServer]) -> None:
    _, gw = stack
    clash = {"type": "function", "function": {"name": "get_weather", "parameters": {}}}
    for stream in (False, True):
        with pytest.raises(openai.BadRequestError) as caught:
            gw.client().chat.completions.create(
                model="toolrelay-sim", messages=QUESTION, tools=[clash], stream=stream
            )
        error = caught.value.body
        assert isinstance(error, dict)
        assert error["param"] == "tools"
        assert "'get_weather'" in error["message"]


def test_server_tools_alone_answer_in_one_request(stack: tuple[Simulator, GatewayServer]) -> None:
    sim, gw = stack
    scenario_free = gw.client().chat.completions.create(
        model="toolrelay-sim", messages=[{"role": "user", "content": "hi"}], tool_choice="none"
    )
    # tool_choice "none": a plain round, no tool offered.
    assert scenario_free.choices[0].message.content == "no tools offered"
    assert "tools" not in completions(sim)[-1]


def test_the_anthropic_front_gets_server_tools_too(
    stack: tuple[Simulator, GatewayServer], service: Service
) -> None:
    _, gw = stack
    client = anthropic.Anthropic(base_url=gw.url, api_key="unused", max_retries=0)
    before = len(service.recorder.requests)
    message = client.messages.create(
        model="toolrelay-sim",
        max_tokens=200,
        messages=[{"role": "user", "content": "Weather and time in Oslo?"}],
        tools=[
            {
                "name": "get_time",
                "description": "Current time in a time zone",
                "input_schema": TIME_TOOL["function"]["parameters"],
            }
        ],
    )
    assert message.stop_reason == "tool_use"
    uses = [block for block in message.content if block.type == "tool_use"]
    assert [(use.name, use.input) for use in uses] == [("get_time", {"tz": "CET"})]
    assert [seen.target for seen in service.recorder.requests[before:]] == ["/weather/Oslo"]


def test_a_halted_loop_is_reported_in_toolrelay_stuck(service: Service, tmp_path: Path) -> None:
    stubborn = {
        "rules": [
            {"match": {"tools": "none"}, "answer": {"content": "I could not finish."}},
            {"answer": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}]}},
        ]
    }
    path = tmp_path / "tools.json"
    path.write_text(json.dumps([weather_tool(service.url)]), encoding="utf-8")
    with (
        Simulator(SimulatorConfig.load(stubborn)) as sim,
        gateway(sim.openai_url, tools_file=str(path), tool_max_iterations=8) as gw,
    ):
        answer = gw.client().chat.completions.create(model="m", messages=QUESTION)
        chunks = list(
            gw.client().chat.completions.create(model="m", messages=QUESTION, stream=True)
        )
    assert answer.choices[0].message.content == "I could not finish."
    stuck = (answer.model_extra or {})["toolrelay_stuck"]
    assert (stuck["pattern"], stuck["level"]) == ("identical_call", "halt")
    last = chunks[-1].model_extra or {}
    assert last["toolrelay_stuck"]["pattern"] == "identical_call"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "I could not finish."
