"""Running a simulator: in-process for tests and the demo, or in the foreground for the CLI."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

import uvicorn
from starlette.applications import Starlette

from toolrelay.simulator.app import build_app
from toolrelay.simulator.config import SimulatorConfig
from toolrelay.simulator.state import RecordedRequest, SimulatorState
from toolrelay.simulator.streaming import silence_drop_tracebacks

_START_TIMEOUT = 10.0
_STOP_TIMEOUT = 10.0


class Simulator:
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
        self.host = host
        self.port = port
        self._app = build_app(self.config)
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the simulator is not running")
        return base_url(self.host, self.port)

    @property
    def openai_url(self) -> str:
        return self.url + "/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        state: SimulatorState = self._app.state.simulator
        return state.requests

    def start(self) -> str:
        """Serve in a background thread; returns the base URL once it accepts connections."""
        if self._server is not None:
            raise RuntimeError("the simulator is already running")
        sock = listening_socket(self.host, self.port)
        self.port = sock.getsockname()[1]
        server = _server(self._app, log_config=None)
        self._server = server
        self._thread = threading.Thread(
            target=server.run,
            kwargs={"sockets": [sock]},
            name=f"simulator:{self.port}",
            daemon=True,
        )
        self._thread.start()
        deadline = time.monotonic() + _START_TIMEOUT
        while not server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the simulator did not start")
            time.sleep(0.002)
        return self.url

    def stop(self) -> None:
        if self._server is None or self._thread is None:
            return
        self._server.should_exit = True
        self._thread.join(_STOP_TIMEOUT)
        self._server = None
        self._thread = None

    def __enter__(self) -> Simulator:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> Simulator:
        await asyncio.to_thread(self.start)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await asyncio.to_thread(self.stop)


def serve_forever(
    config: SimulatorConfig,
    host: str = "127.0.0.1",
    port: int = 0,
    on_listening: Callable[[str], None] = print,
) -> None:
    """Serve in the foreground until interrupted; `on_listening` gets the URL first."""
    sock = listening_socket(host, port)
    server = _server(build_app(config), log_config=uvicorn.config.LOGGING_CONFIG)
    # The socket already listens, so the URL works from the moment it is announced.
    on_listening(base_url(host, sock.getsockname()[1]))
    server.run(sockets=[sock])


def listening_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


def base_url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _server(app: Starlette, log_config: dict[str, Any] | None) -> uvicorn.Server:
    silence_drop_tracebacks()
    config = uvicorn.Config(
        app,
        log_config=log_config,
        log_level="warning",
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=1,
    )
    return uvicorn.Server(config)
