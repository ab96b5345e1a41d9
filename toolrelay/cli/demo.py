"""``toolrelay demo``: the whole loop offline, with no model.

Three real HTTP servers start on free 127.0.0.1 ports: the model-server
simulator (a test double for a model, behind a proxy that strips ``tools``
like the one in seed 000), the toolrelay gateway in front of it in rescue
mode, and a small weather service the tool calls. The demo then asks the
gateway a question that needs the tool, runs the tool call it gets back
against the weather service, and streams the final answer.
"""

from __future__ import annotations

import argparse
from typing import Any

import httpx
import orjson
from rich.console import Console
from rich.panel import Panel
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city. Call it whenever the user asks about weather.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name"}},
            "required": ["city"],
        },
    },
}
QUESTION = "What's the weather in Paris right now?"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--question", default=QUESTION, help="what to ask (default: %(default)s)")


def run(args: argparse.Namespace) -> int:
    from toolrelay.io.settings import Settings
    from toolrelay.server import create_app
    from toolrelay.server.background import BackgroundServer
    from toolrelay.simulator import Simulator, SimulatorConfig

    console = Console()
    simulator_config = SimulatorConfig.load(None, strip_tools=True, chunk=6)
    with (
        Simulator(simulator_config) as simulator,
        BackgroundServer(_weather_service()) as weather,
        BackgroundServer(
            create_app(Settings(backend=simulator.openai_url, tool_mode="rescue"))
        ) as gateway,
    ):
        console.print(
            Panel.fit(
                f"model server (simulator, strips tools): {simulator.openai_url}\n"
                f"toolrelay gateway (rescue mode):        {gateway.url}/v1\n"
                f"weather service (the tool):             {weather.url}",
                title="toolrelay demo",
            )
        )
        return _conversation(console, gateway.url + "/v1", weather.url, args.question)


def _conversation(console: Console, gateway: str, weather: str, question: str) -> int:
    messages: list[dict[str, Any]] = [{"role": "user", "content": question}]
    console.print(f"[bold]user[/bold]  {question}")
    with httpx.Client(base_url=gateway, timeout=30) as client:
        first = client.post(
            "/chat/completions",
            json={"model": "demo", "messages": messages, "tools": [WEATHER_TOOL]},
        )
        first.raise_for_status()
        message = first.json()["choices"][0]["message"]
        calls = message.get("tool_calls") or []
        if not calls:
            # A question the tool cannot help with gets a plain answer: show it.
            console.print(f"[bold]assistant[/bold]  {message.get('content') or ''}")
            console.print("[dim](no tool call: the model answered directly)[/dim]")
            return 0
        messages.append(message)
        for call in calls:
            arguments = orjson.loads(call["function"]["arguments"])
            console.print(
                f"[bold cyan]tool call[/bold cyan]  {call['function']['name']}({arguments})"
            )
            result = httpx.get(f"{weather}/weather/{arguments.get('city', '')}", timeout=10).text
            console.print(f"[bold green]tool result[/bold green]  {result}")
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
        console.print("[bold]assistant[/bold]  ", end="")
        body = {"model": "demo", "messages": messages, "tools": [WEATHER_TOOL], "stream": True}
        with client.stream("POST", "/chat/completions", json=body) as answer:
            answer.raise_for_status()
            for line in answer.iter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                for choice in orjson.loads(line[6:]).get("choices", []):
                    console.print(choice["delta"].get("content") or "", end="")
        console.print()
    return 0


def _weather_service() -> Starlette:
    async def weather(request: Request) -> PlainTextResponse:
        # The weather only: the model's answer names the city already.
        return PlainTextResponse("18°C, light rain, wind 12 km/h")

    return Starlette(routes=[Route("/weather/{city}", weather)])
