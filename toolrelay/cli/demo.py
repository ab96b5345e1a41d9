"""``toolrelay demo``: the whole loop offline, with no model.

Three real HTTP servers start on free 127.0.0.1 ports: the model-server
simulator (a test double for a model, behind a proxy that strips ``tools``
like the one in seed 000), the toolrelay gateway in front of it in rescue
mode, and a small weather service the tool calls. The demo then asks the
gateway a question that needs the tool, runs the tool call it gets back
against the weather service, and streams the final answer. ``--api`` picks
the API the demo speaks to the gateway: Chat Completions (the default),
Anthropic Messages or OpenAI Responses; the round behind them is the same.
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
    parser.add_argument(
        "--api",
        choices=sorted(_APIS),
        default="chat",
        help="the API to speak to the gateway: chat (Chat Completions), anthropic "
        "(Messages) or responses (OpenAI Responses) (default: %(default)s)",
    )


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
                f"toolrelay gateway (rescue mode):        {gateway.url}/v1 ({args.api})\n"
                f"weather service (the tool):             {weather.url}",
                title="toolrelay demo",
            )
        )
        conversation = _APIS[args.api]
        return conversation(console, gateway.url + "/v1", weather.url, args.question)


def _chat(console: Console, gateway: str, weather: str, question: str) -> int:
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
            return _direct(console, message.get("content"))
        messages.append(message)
        for call in calls:
            arguments = orjson.loads(call["function"]["arguments"])
            result = _run_tool(console, weather, call["function"]["name"], arguments)
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


def _anthropic(console: Console, gateway: str, weather: str, question: str) -> int:
    messages: list[dict[str, Any]] = [{"role": "user", "content": question}]
    function = WEATHER_TOOL["function"]
    tools = [{key: function[key] for key in ("name", "description")}]
    tools[0]["input_schema"] = function["parameters"]
    console.print(f"[bold]user[/bold]  {question}")
    body = {"model": "demo", "max_tokens": 1024, "messages": messages, "tools": tools}
    with httpx.Client(base_url=gateway, timeout=30) as client:
        first = client.post("/messages", json=body)
        first.raise_for_status()
        content = first.json()["content"]
        calls = [block for block in content if block["type"] == "tool_use"]
        if not calls:
            return _direct(console, "".join(b.get("text", "") for b in content))
        results = [
            {
                "type": "tool_result",
                "tool_use_id": call["id"],
                "content": _run_tool(console, weather, call["name"], call["input"]),
            }
            for call in calls
        ]
        messages += [
            {"role": "assistant", "content": content},
            {"role": "user", "content": results},
        ]
        console.print("[bold]assistant[/bold]  ", end="")
        with client.stream("POST", "/messages", json={**body, "stream": True}) as answer:
            answer.raise_for_status()
            for event in _events(answer):
                if event.get("type") == "content_block_delta":
                    console.print(event["delta"].get("text", ""), end="")
        console.print()
    return 0


def _responses(console: Console, gateway: str, weather: str, question: str) -> int:
    function = WEATHER_TOOL["function"]
    tools = [{"type": "function", **function}]
    console.print(f"[bold]user[/bold]  {question}")
    with httpx.Client(base_url=gateway, timeout=30) as client:
        first = client.post("/responses", json={"model": "demo", "input": question, "tools": tools})
        first.raise_for_status()
        response = first.json()
        calls = [item for item in response["output"] if item["type"] == "function_call"]
        if not calls:
            texts = [p["text"] for i in response["output"] for p in i.get("content") or ()]
            return _direct(console, "".join(texts))
        outputs = [
            {
                "type": "function_call_output",
                "call_id": call["call_id"],
                "output": _run_tool(
                    console, weather, call["name"], orjson.loads(call["arguments"])
                ),
            }
            for call in calls
        ]
        console.print("[bold]assistant[/bold]  ", end="")
        # The gateway keeps the first response: the follow-up names it.
        body = {"model": "demo", "previous_response_id": response["id"], "input": outputs}
        with client.stream(
            "POST", "/responses", json={**body, "tools": tools, "stream": True}
        ) as answer:
            answer.raise_for_status()
            for event in _events(answer):
                if event.get("type") == "response.output_text.delta":
                    console.print(event["delta"], end="")
        console.print()
    return 0


_APIS = {"chat": _chat, "anthropic": _anthropic, "responses": _responses}


def _events(answer: httpx.Response) -> Any:
    """The JSON payloads of a server-sent event stream."""
    for line in answer.iter_lines():
        if line.startswith("data: {"):
            yield orjson.loads(line[6:])


def _direct(console: Console, text: str | None) -> int:
    # A question the tool cannot help with gets a plain answer: show it.
    console.print(f"[bold]assistant[/bold]  {text or ''}")
    console.print("[dim](no tool call: the model answered directly)[/dim]")
    return 0


def _run_tool(console: Console, weather: str, name: str, arguments: dict[str, Any]) -> str:
    console.print(f"[bold cyan]tool call[/bold cyan]  {name}({arguments})")
    result = httpx.get(f"{weather}/weather/{arguments.get('city', '')}", timeout=10).text
    console.print(f"[bold green]tool result[/bold green]  {result}")
    return result


def _weather_service() -> Starlette:
    async def weather(request: Request) -> PlainTextResponse:
        # The weather only: the model's answer names the city already.
        return PlainTextResponse("18°C, light rain, wind 12 km/h")

    return Starlette(routes=[Route("/weather/{city}", weather)])
