"""A real agent framework running its tool loop through the gateway.

pydantic-ai validates every response against the openai SDK's models and
runs the tools itself; the simulator plays the model.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from tests.gateway.support import GatewayServer, stack
from toolrelay.simulator import Simulator

# The built-in weather demo, except that the rescued call comes without a
# preamble: pydantic-ai's run_stream takes the first text it sees as the final
# output, whatever follows.
SCENARIO = {
    "rules": [
        {
            "match": {"tool_result": True},
            "answer": {"content": "Here is the weather: {last_tool_result}"},
        },
        {
            "match": {"tools": "native", "last_user": "weather in (?P<city>\\w+)"},
            "answer": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "{city}"}}]},
        },
        {
            "match": {"tools": "prompt", "last_user": "weather in (?P<city>\\w+)"},
            "answer": {
                "content": '[TOOL_CALL]{"name": "get_weather", "arguments": {"city": "{city}"}}'
                "[/TOOL_CALL]"
            },
        },
    ]
}


def _agent(gw: GatewayServer, calls: list[str]) -> Agent[None, str]:
    model = OpenAIChatModel(
        "toolrelay-sim", provider=OpenAIProvider(base_url=gw.url + "/v1", api_key="none")
    )
    agent: Agent[None, str] = Agent(model)

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        calls.append(city)
        return f"18 C and sunny in {city}"

    return agent


@pytest.fixture(
    scope="module",
    params=[
        pytest.param({"gateway_settings": {"backend_kind": "openai"}}, id="native"),
        pytest.param(
            {"strip_tools": True, "gateway_settings": {"tool_mode": "rescue"}}, id="rescue"
        ),
    ],
)
def pair(request: pytest.FixtureRequest) -> Iterator[tuple[Simulator, GatewayServer]]:
    with stack(SCENARIO, **request.param) as both:
        yield both


def test_pydantic_ai_tool_loop(pair: tuple[Simulator, GatewayServer]) -> None:
    _, gw = pair
    calls: list[str] = []
    result = _agent(gw, calls).run_sync("What's the weather in Paris?")
    assert calls == ["Paris"]
    assert result.output == "Here is the weather: 18 C and sunny in Paris"


def test_pydantic_ai_streamed_tool_loop(pair: tuple[Simulator, GatewayServer]) -> None:
    _, gw = pair
    calls: list[str] = []

    async def run() -> str:
        async with _agent(gw, calls).run_stream("What's the weather in Rome?") as streamed:
            return await streamed.get_output()

    output = asyncio.run(run())
    assert calls == ["Rome"]
    assert output == "Here is the weather: 18 C and sunny in Rome"
