"""``toolrelay demo``: the whole loop offline, with no model.

Three real HTTP servers start on free 127.0.0.1 ports: the model-server
simulator (a test double for a model, behind a proxy that strips ``tools``
like the one in seed 000), a small weather service, and the toolrelay gateway
in front of the simulator in rescue mode, with a tools file that makes the
weather service its ``get_weather`` tool (a declarative HTTP tool,
docs/agent.md). The demo asks a question that needs the tool: toolrelay asks
the model, runs the HTTP tool itself, and streams the answer.

``--api`` picks how the demo talks to the gateway: the agent's WebSocket
session (the default: it reports each call and result as they happen), or
Chat Completions, Anthropic Messages or OpenAI Responses (they receive the
answer only; the weather service says which request toolrelay made).
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
from rich.console import Console
from rich.panel import Panel
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

QUESTION = "What's the weather in Paris right now?"
WEATHER = "18°C, light rain, wind 12 km/h"


def weather_tool(service_url: str) -> dict[str, Any]:
    """The tools-file entry that makes the weather service a tool."""
    return {
        "name": "get_weather",
        "description": "Current weather for a city. Call it whenever the user asks about weather.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name"}},
            "required": ["city"],
        },
        "url": service_url + "/weather/{city}",
        "method": "GET",
    }


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--question", default=QUESTION, help="what to ask (default: %(default)s)")
    parser.add_argument(
        "--api",
        choices=("ws", *sorted(_APIS)),
        default="ws",
        help="how to talk to the gateway: ws (the agent's WebSocket session), chat (Chat "
        "Completions), anthropic (Messages) or responses (OpenAI Responses) "
        "(default: %(default)s)",
    )


def run(args: argparse.Namespace) -> int:
    from toolrelay.io.settings import Settings
    from toolrelay.server import create_app
    from toolrelay.server.background import BackgroundServer
    from toolrelay.simulator import Simulator, SimulatorConfig

    console = Console()
    requests: list[str] = []
    simulator_config = SimulatorConfig.load(None, strip_tools=True, chunk=6)
    with (
        tempfile.TemporaryDirectory(prefix="toolrelay-demo-") as folder,
        Simulator(simulator_config) as simulator,
        BackgroundServer(_weather_service(console, requests, quiet=args.api == "ws")) as weather,
    ):
        tools_file = Path(folder) / "tools.json"
        tools_file.write_bytes(
            orjson.dumps([weather_tool(weather.url)], option=orjson.OPT_INDENT_2)
        )
        settings = Settings(
            backend=simulator.openai_url, tool_mode="rescue", tools_file=str(tools_file)
        )
        with BackgroundServer(create_app(settings)) as gateway:
            console.print(
                Panel.fit(
                    f"model server (simulator, strips tools): {simulator.openai_url}\n"
                    f"toolrelay gateway (rescue mode):        {gateway.url} ({args.api})\n"
                    f"weather service (the get_weather tool): {weather.url}\n"
                    f"tools file:                             {tools_file}",
                    title="toolrelay demo",
                )
            )
            console.print(f"[bold]user[/bold]  {args.question}")
            if args.api == "ws":
                called = _session(console, gateway.url, args.question)
            else:
                _print_answer(console, _APIS[args.api](gateway.url, args.question))
                called = bool(requests)
    if not called:
        console.print("[dim](no tool call: the model answered directly)[/dim]")
    return 0


def _session(console: Console, gateway: str, question: str) -> bool:
    """Talk to ``WS /ws`` and print its events; whether a tool was called."""
    from websockets.sync.client import connect

    called = False
    line_open = False  # an assistant line is being written
    ends_line = True  # the last text written ended with a line break
    with connect("ws" + gateway.removeprefix("http") + "/ws", open_timeout=30) as ws:
        ws.send(orjson.dumps({"type": "user_text", "text": question}).decode())
        while True:
            event = orjson.loads(ws.recv(timeout=60))
            kind = event["type"]
            if kind == "assistant_delta":
                if not line_open:
                    console.print("[bold]assistant[/bold]  ", end="")
                    line_open = True
                console.print(event["text"], end="", markup=False, highlight=False)
                ends_line = event["text"].endswith("\n")
                continue
            if line_open and not ends_line:
                console.print()
            line_open = False
            if kind == "tool_call":
                called = True
                console.print(
                    f"[bold cyan]tool call[/bold cyan]  {event['name']}({event['arguments']})"
                )
            elif kind == "tool_result":
                console.print(f"[bold green]tool result[/bold green]  {event['content']}")
            elif kind == "error":
                console.print(f"[red]{event['message']}[/red]")
            elif kind == "assistant_end":
                return called


def _print_answer(console: Console, deltas: Iterator[str]) -> None:
    started = False
    for text in deltas:
        if not text:
            continue
        if not started:
            console.print("[bold]assistant[/bold]  ", end="")
            started = True
        console.print(text, end="", markup=False, highlight=False)
    console.print()


def _chat(gateway: str, question: str) -> Iterator[str]:
    body = {"model": "demo", "messages": [{"role": "user", "content": question}], "stream": True}
    for event in _stream(gateway + "/v1/chat/completions", body):
        for choice in event.get("choices", []):
            yield choice["delta"].get("content") or ""


def _anthropic(gateway: str, question: str) -> Iterator[str]:
    body = {
        "model": "demo",
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": question}],
        "stream": True,
    }
    for event in _stream(gateway + "/v1/messages", body):
        if event.get("type") == "content_block_delta":
            yield event["delta"].get("text", "")


def _responses(gateway: str, question: str) -> Iterator[str]:
    body = {"model": "demo", "input": question, "stream": True}
    for event in _stream(gateway + "/v1/responses", body):
        if event.get("type") == "response.output_text.delta":
            yield event["delta"]


_APIS: dict[str, Callable[[str, str], Iterator[str]]] = {
    "chat": _chat,
    "anthropic": _anthropic,
    "responses": _responses,
}


def _stream(url: str, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The JSON payloads of a server-sent event stream."""
    with httpx.stream("POST", url, json=body, timeout=60) as answer:
        answer.raise_for_status()
        for line in answer.iter_lines():
            if line.startswith("data: {"):
                yield orjson.loads(line[6:])


def _weather_service(console: Console, requests: list[str], *, quiet: bool) -> Starlette:
    async def weather(request: Request) -> PlainTextResponse:
        requests.append(request.url.path)
        if not quiet:
            # Seen from the service: the clients of these APIs only get the answer.
            console.print(
                f"[bold cyan]tool call[/bold cyan]  get_weather, run by toolrelay: "
                f"GET {request.url.path}"
            )
            console.print(f"[bold green]tool result[/bold green]  {WEATHER}")
        # The weather only: the model's answer names the city already.
        return PlainTextResponse(WEATHER)

    return Starlette(routes=[Route("/weather/{city}", weather)])
