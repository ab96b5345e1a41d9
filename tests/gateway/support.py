"""Fixtures: the gateway on a free 127.0.0.1 port in a background thread, in
front of a simulator (a test double for a model), and openai SDK clients."""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import openai
import orjson
import websockets

from toolrelay.io.settings import Settings
from toolrelay.server import create_app
from toolrelay.server.background import BackgroundServer
from toolrelay.simulator import Simulator, SimulatorConfig

TIME_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Current time in a time zone",
        "parameters": {
            "type": "object",
            "properties": {"tz": {"type": "string"}},
            "required": ["tz"],
        },
    },
}


class GatewayServer(BackgroundServer):
    """The real gateway app, served from a background thread on a free port.

    Stopping it runs the app's shutdown, which closes its backend connections.
    """

    def __init__(self, settings: Settings) -> None:
        self.gateway_app = create_app(settings)
        super().__init__(self.gateway_app)

    def __enter__(self) -> GatewayServer:
        self.start()
        return self

    def client(self, api_key: str = "none") -> openai.OpenAI:
        return openai.OpenAI(base_url=self.url + "/v1", api_key=api_key, max_retries=0, timeout=20)


def gateway(backend_url: str, **settings: Any) -> GatewayServer:
    return GatewayServer(Settings(backend=backend_url, **settings))


@contextmanager
def stack(
    scenario: Any = None, *, gateway_settings: dict[str, Any] | None = None, **switches: Any
) -> Iterator[tuple[Simulator, GatewayServer]]:
    """A simulator with these switches and a gateway in front of it."""
    with (
        Simulator(SimulatorConfig.load(scenario, **switches)) as sim,
        gateway(sim.openai_url, **(gateway_settings or {})) as gw,
    ):
        yield sim, gw


def silent_backend(closed: threading.Event) -> Any:
    """A model server that streams one piece of text, then thinks forever; sets
    ``closed`` when its client hangs up."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await receive()  # the request body
        chunk = {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": None}],
        }
        headers = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        body = b"data: " + orjson.dumps(chunk) + b"\n\n"
        await send({"type": "http.response.body", "body": body, "more_body": True})
        while (await receive())["type"] != "http.disconnect":
            pass
        closed.set()

    return app


def wait_until_up(url: str, process: subprocess.Popen[str], seconds: float = 120) -> None:
    """Wait for ``url`` to answer, failing at once (with its stderr) if ``process`` exits.

    The window is wide because a gateway that starts MCP servers first serves only once
    they are up: on a loaded CI machine (a Python MCP server importing its SDK) that took
    17 s where it takes 3 s alone. A process that dies fails at once, whatever the window."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.05)
    raise AssertionError(f"{url} did not come up")


async def read_turn(ws: Any, text: str | None = None) -> list[dict[str, Any]]:
    """On a ``/ws`` connection: send ``text`` (when given) as the user's, and read the
    turn's events up to and including ``assistant_end``."""
    if text is not None:
        await ws.send(json.dumps({"type": "user_text", "text": text}))
    events = []
    while True:
        event = json.loads(await asyncio.wait_for(ws.recv(), 30))
        events.append(event)
        if event["type"] == "assistant_end":
            return events


async def ws_turn(url: str, text: str) -> list[dict[str, Any]]:
    """One turn on a new ``/ws`` session of the server at ``url``."""
    async with websockets.connect(url.replace("http", "ws", 1) + "/ws") as ws:
        return await read_turn(ws, text)
