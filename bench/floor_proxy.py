"""The floor: the least an HTTP gateway in Python on toolrelay's server stack can cost.

A bare ASGI app on uvicorn (uvloop, httptools), one aiohttp session to the
backend, the request body sent on as it came and the answer relayed per read:
nothing parsed, checked or rewritten. ``bench/release_bench.py`` puts it beside
toolrelay so that toolrelay's own cost per request can be read as a multiple of
it. Not a product: no errors mapped, no headers kept beyond the content type.
What any sane proxy on aiohttp does, it does too: a request that went out on a
pooled connection the backend had closed unannounced (at its keep-alive edge,
say) is sent once more on a new connection, as toolrelay does; else a reuse
racing the close escapes as uvicorn's plain 500.

    .venv/bin/python bench/floor_proxy.py --backend http://127.0.0.1:8001/v1 --port 8002
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import aiohttp
import uvicorn

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class FloorProxy:
    """Relays ``POST /v1/...`` (and ``GET``) to the backend, bytes in, bytes out."""

    def __init__(self, backend: str) -> None:
        self.backend = backend.rstrip("/").removesuffix("/v1")
        self.session: aiohttp.ClientSession | None = None
        # Only for the rare second try: a new connection each time, none pooled.
        self.fresh: aiohttp.ClientSession | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        async with await self._send(scope["method"], self.backend + scope["path"], body) as up:
            kind = up.headers.get("Content-Type", "application/json")
            await send(
                {
                    "type": "http.response.start",
                    "status": up.status,
                    "headers": [(b"content-type", kind.encode())],
                }
            )
            async for data in up.content.iter_any():
                await send({"type": "http.response.body", "body": data, "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    async def _send(self, method: str, url: str, body: bytes) -> aiohttp.ClientResponse:
        """The backend's answer, asked once more on a fresh connection when the
        pooled one it went out on was closed before any answer."""
        assert self.session is not None and self.fresh is not None
        headers = {"Content-Type": "application/json"}
        try:
            return await self.session.request(method, url, data=body, headers=headers)
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError):
            return await self.fresh.request(method, url, data=body, headers=headers)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                connector = aiohttp.TCPConnector(limit=0)
                self.session = aiohttp.ClientSession(connector=connector)
                fresh = aiohttp.TCPConnector(limit=0, force_close=True)
                self.fresh = aiohttp.ClientSession(connector=fresh)
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                for session in (self.session, self.fresh):
                    if session is not None:
                        await session.close()
                await send({"type": "lifespan.shutdown.complete"})
                return


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", required=True)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    uvicorn.run(
        FloorProxy(args.backend),
        host="127.0.0.1",
        port=args.port,
        loop="uvloop",
        http="httptools",
        log_level="warning",
        access_log=False,
    )


if __name__ == "__main__":
    main()
