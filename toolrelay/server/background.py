"""Serving an ASGI app from a background thread on a free port: for the demo and tests."""

from __future__ import annotations

import threading
import time
from types import TracebackType
from typing import Any

import uvicorn

from toolrelay.simulator.runner import base_url, listening_socket

_START_TIMEOUT = 10.0
_STOP_TIMEOUT = 5.0


class BackgroundServer:
    """``with BackgroundServer(app) as server: server.url`` — uvicorn in a daemon thread."""

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0) -> None:
        sock = listening_socket(host, port)
        self.url = base_url(host, sock.getsockname()[1])
        config = uvicorn.Config(
            app, log_config=None, log_level="warning", access_log=False, timeout_graceful_shutdown=1
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, daemon=True
        )

    def __enter__(self) -> BackgroundServer:
        self._thread.start()
        deadline = time.monotonic() + _START_TIMEOUT
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the server at {self.url} did not start")
            time.sleep(0.005)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.should_exit = True
        self._thread.join(_STOP_TIMEOUT)
