"""Driving the agent loop against the simulator (a test double for a model) and
a real local HTTP service for its tools."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from tests.weather import WEATHER_TOOL
from toolrelay.io.backends import Backend
from toolrelay.io.engine import AgentEvent, LoopConfig, TurnEnd, run_turn
from toolrelay.io.round import RoundRequest
from toolrelay.io.settings import BackendConfig, ToolMode
from toolrelay.io.tools import HttpTool, HttpToolClient, Toolbox, parse_definitions


def weather_tool(service_url: str) -> dict[str, Any]:
    """tests/weather.py's tool as an HTTP tool served by ``service_url``."""
    return {
        **WEATHER_TOOL["function"],
        "url": service_url + "/weather/{city}",
        "method": "GET",
    }


def ask(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def run_events(
    backend_url: str,
    definitions: Sequence[dict[str, Any]],
    messages: list[dict[str, Any]],
    config: LoopConfig | None = None,
    *,
    client_tools: list[dict[str, Any]] | None = None,
    tool_mode: ToolMode = "auto",
    max_chars: int = 2000,
    timeout: float = 5.0,
    body: dict[str, Any] | None = None,
) -> list[AgentEvent]:
    """One turn; every event it yielded, the TurnEnd last."""

    async def main() -> list[AgentEvent]:
        client = HttpToolClient(timeout=timeout)
        backend = Backend(BackendConfig(url=backend_url, tool_mode=tool_mode))
        tools = parse_definitions(definitions) if definitions else ()
        toolbox = Toolbox([HttpTool(tool, client) for tool in tools], max_chars=max_chars)
        request_body: dict[str, Any] = {"model": "toolrelay-sim", "messages": messages}
        if client_tools:
            request_body["tools"] = client_tools
        request_body.update(body or {})
        request = RoundRequest.from_body(request_body)
        try:
            return [event async for event in run_turn(backend, request, toolbox, config)]
        finally:
            await client.aclose()
            await backend.aclose()

    return asyncio.run(asyncio.wait_for(main(), 30))


def of_type(events: Sequence[AgentEvent], kind: type) -> list[Any]:
    return [event for event in events if isinstance(event, kind)]


def turn_end(events: Sequence[AgentEvent]) -> TurnEnd:
    last = events[-1]
    assert isinstance(last, TurnEnd)
    return last


def completions(simulator: Any) -> list[dict[str, Any]]:
    """The bodies of the chat completion requests the simulator received, in order."""
    return [r.body for r in simulator.requests if r.path.endswith("/chat/completions")]
