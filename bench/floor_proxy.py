"""The floor: the least an HTTP gateway in Python on toolrelay's server stack can cost.

A bare ASGI app on uvicorn (uvloop, httptools), one aiohttp session to the
backend, the request body sent on as it came and the answer relayed per read:
nothing parsed, checked or rewritten. ``bench/release_bench.py`` puts it beside
toolrelay so that toolrelay's own cost per request can be read as a multiple of
it. Not a product: no errors mapped, no headers kept beyond the content type.

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
        assert self.session is not None
        url = self.backend + scope["path"]
        headers = {"Content-Type": "application/json"}
        async with self.session.request(scope["method"], url, data=body, headers=headers) as up:
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

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                connector = aiohttp.TCPConnector(limit=0)
                self.session = aiohttp.ClientSession(connector=connector)
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self.session is not None:
                    await self.session.close()
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
