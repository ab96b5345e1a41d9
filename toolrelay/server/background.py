"""Serving an ASGI app on a socket that already listens, in a background thread.

The simulator, the demo and the tests all need a real server on a free
127.0.0.1 port that answers while the caller's own event loop is busy; this
is that, once.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from types import TracebackType
from typing import Any, TypeVar

import uvicorn

_Server = TypeVar("_Server", bound="BackgroundServer")
# Generous: on a loaded machine (CI, a test suite beside others) a start is slow.
_START_TIMEOUT = 60.0
_STOP_TIMEOUT = 10.0


def listening_socket(host: str, port: int) -> socket.socket:
    """A bound, listening socket; port 0 picks a free one."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        # Deep enough for a thousand clients connecting at once (bench/load_bench.py).
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    return sock


def base_url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def quiet_server(app: Any, log_config: dict[str, Any] | None = None) -> uvicorn.Server:
    config = uvicorn.Config(
        app,
        log_config=log_config,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=1,
    )
    return uvicorn.Server(config)


class BackgroundServer:
    """``with BackgroundServer(app) as server: server.url`` — uvicorn in a daemon thread.

    ``async with`` works too, without blocking the caller's event loop.

    ``start()`` returns once the server accepts connections; ``stop()``
    asks it to finish and waits for its thread.
    """

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0) -> None:
        self.app = app
        self.host = host
        self.port = port
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._server is not None

    @property
    def url(self) -> str:
        return base_url(self.host, self.port)

    @property
    def active_requests(self) -> int:
        """Requests still being answered, streams included (uvicorn's own count)."""
        return 0 if self._server is None else len(self._server.server_state.tasks)

    def start(self) -> str:
        if self._server is not None:
            raise RuntimeError(f"the server at {self.url} is already running")
        sock = listening_socket(self.host, self.port)
        self.port = sock.getsockname()[1]
        server = quiet_server(self.app)
        thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, name=f"server:{self.port}", daemon=True
        )
        self._server, self._thread = server, thread
        thread.start()
        deadline = time.monotonic() + _START_TIMEOUT
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the server at {self.url} did not start")
            time.sleep(0.002)
        return self.url

    def stop(self) -> None:
        if self._server is None or self._thread is None:
            return
        self._server.should_exit = True
        self._thread.join(_STOP_TIMEOUT)
        self._server = None
        self._thread = None

    def __enter__(self: _Server) -> _Server:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self: _Server) -> _Server:
        await asyncio.to_thread(self.start)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await asyncio.to_thread(self.stop)
