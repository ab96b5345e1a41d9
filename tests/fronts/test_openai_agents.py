"""The OpenAI Agents SDK, with its default model (the Responses API), running a tool
through the gateway; the simulator plays the model, natively and rescued."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from agents import (
    Agent,
    Runner,
    function_tool,
    set_default_openai_api,
    set_default_openai_client,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

from tests.gateway.support import GatewayServer
from toolrelay.simulator import Simulator

Pair = tuple[Simulator, GatewayServer]


@pytest.fixture
def weather_calls(pair: Pair) -> Iterator[list[str]]:
    _, gw = pair
    set_tracing_disabled(True)
    set_default_openai_api("responses")
    client = AsyncOpenAI(base_url=gw.url + "/v1", api_key="none", max_retries=0, timeout=20)
    set_default_openai_client(client, use_for_tracing=False)
    yield []


def _agent(calls: list[str]) -> Agent:
    @function_tool
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        calls.append(city)
        return f"{city}: 18°C, light rain"

    return Agent(
        name="forecaster",
        instructions="Answer questions about the weather.",
        tools=[get_weather],
        model="toolrelay-sim",
    )


def test_agent_runs_a_tool(pair: Pair, weather_calls: list[str]) -> None:
    sim, _ = pair
    result = asyncio.run(Runner.run(_agent(weather_calls), "What's the weather in Paris?"))
    assert weather_calls == ["Paris"]
    assert result.final_output == "The get_weather tool says: Paris: 18°C, light rain"
    # The agent's instructions reached the model as its system message.
    assert (
        sim.requests[-1]
        .body["messages"][0]["content"]
        .startswith("Answer questions about the weather.")
    )


def test_agent_runs_a_tool_streamed(pair: Pair, weather_calls: list[str]) -> None:
    async def run() -> str:
        result = Runner.run_streamed(_agent(weather_calls), "What's the weather in Rome?")
        async for _ in result.stream_events():
            pass
        return str(result.final_output)

    assert asyncio.run(run()) == "The get_weather tool says: Rome: 18°C, light rain"
    assert weather_calls == ["Rome"]
