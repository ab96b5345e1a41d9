"""Running a simulator: in-process for tests and the demo, or in the foreground for the CLI."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import uvicorn

from toolrelay.server.background import BackgroundServer, base_url, listening_socket, quiet_server
from toolrelay.simulator.app import build_app
from toolrelay.simulator.config import SimulatorConfig
from toolrelay.simulator.state import RecordedRequest, SimulatorState
from toolrelay.simulator.streaming import silence_drop_tracebacks

__all__ = ["Simulator", "base_url", "listening_socket", "serve_forever"]


class Simulator(BackgroundServer):
    """A simulator served on 127.0.0.1 (a free port by default) from a background thread.

    Use it as ``with Simulator(config) as sim:`` or ``async with``; inside,
    ``sim.url`` is the base URL (``sim.openai_url`` adds ``/v1``) and
    ``sim.requests`` lists what it received. Its own thread and event loop
    keep it answering while the caller's loop is busy or blocked.
    """

    def __init__(
        self, config: SimulatorConfig | None = None, *, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.config = config or SimulatorConfig()
        super().__init__(build_app(self.config), host, port)

    @property
    def url(self) -> str:
        if not self.running:
            raise RuntimeError("the simulator is not running")
        return super().url

    @property
    def openai_url(self) -> str:
        return self.url + "/v1"

    @property
    def requests(self) -> deque[RecordedRequest]:
        state: SimulatorState = self.app.state.simulator
        return state.requests

    def start(self) -> str:
        """Serve in a background thread; returns the base URL once it accepts connections."""
        silence_drop_tracebacks()
        return super().start()


def serve_forever(
    config: SimulatorConfig,
    host: str = "127.0.0.1",
    port: int = 0,
    on_listening: Callable[[str], None] = print,
) -> None:
    """Serve in the foreground until interrupted; `on_listening` gets the URL first."""
    sock = listening_socket(host, port)
    silence_drop_tracebacks()
    server = quiet_server(build_app(config), log_config=uvicorn.config.LOGGING_CONFIG)
    # The socket already listens, so the URL works from the moment it is announced.
    on_listening(base_url(host, sock.getsockname()[1]))
    server.run(sockets=[sock])
