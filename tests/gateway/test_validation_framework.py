"""A pydantic-ai tool loop that fails on a model's invalid call, and completes
through the gateway, which has the model correct the call before the
framework sees it.

The simulated model calls ``get_weather`` with ``town`` instead of ``city``
and, given pydantic-ai's own retry prompt, does it again; told by the
gateway's re-ask what is wrong, it corrects itself.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from pydantic_ai import Agent
from pydantic_ai.exceptions import UnexpectedModelBehavior
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from tests.gateway.support import gateway
from toolrelay.simulator import Simulator, SimulatorConfig

SCENARIO = {
    "rules": [
        {
            "match": {"tool_result": "(?i)sunny"},
            "answer": {"content": "Here is the weather: {last_tool_result}"},
        },
        {
            "match": {
                "repair": "'city' is required",
                "tools": "native",
                "last_user": "weather in (?P<city>\\w+)",
            },
            "answer": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "{city}"}}]},
        },
        {
            "match": {"repair": "'city' is required", "tools": "prompt"},
            "answer": {
                "content": '[TOOL_CALL]{"name": "get_weather", "arguments": {"city": "Paris"}}'
                "[/TOOL_CALL]"
            },
        },
        {
            "match": {"tools": "native"},
            "answer": {"tool_calls": [{"name": "get_weather", "arguments": {"town": "Paris"}}]},
        },
        {
            "match": {"tools": "prompt"},
            "answer": {
                "content": '[TOOL_CALL]{"name": "get_weather", "arguments": {"town": "Paris"}}'
                "[/TOOL_CALL]"
            },
        },
    ]
}


def _agent(base_url: str, calls: list[str]) -> Agent[None, str]:
    model = OpenAIChatModel("sim", provider=OpenAIProvider(base_url=base_url, api_key="none"))
    agent: Agent[None, str] = Agent(model, retries=1)

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        calls.append(city)
        return f"18 C and sunny in {city}"

    return agent


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator(SimulatorConfig.load(SCENARIO)) as simulator:
        yield simulator


def test_without_the_gateway_the_framework_gives_up(sim: Simulator) -> None:
    calls: list[str] = []
    with pytest.raises(UnexpectedModelBehavior, match="exceeded max retries"):
        _agent(sim.openai_url, calls).run_sync("What's the weather in Paris?")
    assert calls == []


@pytest.mark.parametrize("tool_mode", ["native", "rescue"])
def test_through_the_gateway_the_loop_completes(sim: Simulator, tool_mode: str) -> None:
    calls: list[str] = []
    with gateway(sim.openai_url, tool_mode=tool_mode) as gw:
        result = _agent(gw.url + "/v1", calls).run_sync("What's the weather in Paris?")
    assert calls == ["Paris"]
    assert result.output == "Here is the weather: 18 C and sunny in Paris"


def test_the_repair_is_counted(sim: Simulator) -> None:
    with gateway(sim.openai_url, tool_mode="native") as gw:
        _agent(gw.url + "/v1", []).run_sync("What's the weather in Oslo?")
        health = httpx.get(gw.url + "/health").json()
        metrics = httpx.get(gw.url + "/metrics").text
    assert health["counters"]["validation"] == {"repaired": 1}
    assert 'toolrelay_validation_total{outcome="repaired"} 1.0' in metrics
