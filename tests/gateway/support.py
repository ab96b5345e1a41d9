"""Fixtures: the gateway on a free 127.0.0.1 port in a background thread, in
front of a simulator (a test double for a model), and openai SDK clients."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import openai
import uvicorn

from toolrelay.io.settings import Settings
from toolrelay.server import create_app
from toolrelay.simulator import Simulator, SimulatorConfig
from toolrelay.simulator.runner import listening_socket

WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
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
ASK_WEATHER = [{"role": "user", "content": "What's the weather in Paris?"}]


_S = TypeVar("_S", bound="Served")


class Served:
    """An ASGI app served by uvicorn from a background thread on a free port."""

    def __init__(self, app: Any) -> None:
        self.app = app
        sock = listening_socket("127.0.0.1", 0)
        self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            app, log_level="warning", access_log=False, timeout_graceful_shutdown=1
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, daemon=True
        )

    def start(self: _S) -> _S:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the server did not start")
            time.sleep(0.002)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(10)

    def __enter__(self: _S) -> _S:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


class GatewayServer(Served):
    """The real gateway app."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(create_app(settings))

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
