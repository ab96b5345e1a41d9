"""What the layers around a front's endpoint cost, per request and per chunk.

The gateway's app (``create_app``) is built as ``serve`` builds it, its fronts'
lanes are replaced by an endpoint that sends a response start and N body
chunks, and its middleware stack is driven in-process with a ``send`` that does
nothing: no server, no socket, no backend, so what is left is the layers' own
work (the request id, the access log, the error safety net, the lanes' choice,
Starlette's entry). The bare endpoint is timed alike and taken off. Variants:
the access log off (as the benches run, ``--log-level warning``), on in text and
in JSON (written to /dev/null; ``serve``'s default is on, in text), and uvicorn's
``ProxyHeadersMiddleware`` in front (what ``--forwarded-allow-ips`` adds). Each
figure is the best of ``--repeats`` runs, the variants alternated.

    .venv/bin/python bench/layers_bench.py [--requests 5000] [--repeats 7]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import time
from typing import Any

from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from toolrelay.io.settings import Settings
from toolrelay.server import create_app
from toolrelay.server.app import FrontLanes
from toolrelay.server.logs import configure_logging

PATH = "/v1/chat/completions"
HEADERS = [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"), (b"accept", b"*/*")]
START = {"type": "http.response.start", "status": 200}
CHUNK = {"type": "http.response.body", "body": b"data: {}\n\n", "more_body": True}
VARIANTS = (
    "bare endpoint",
    "access log off",
    "access log text",
    "access log json",
    "proxy headers",
)


def endpoint(chunks: int) -> Any:
    async def answer(scope: Any, receive: Any, send: Any) -> None:
        await send({**START, "headers": []})
        for _ in range(chunks):
            await send(CHUNK)

    return answer


def stack(chunks: int) -> Any:
    app = create_app(Settings(backend="http://127.0.0.1:9/v1", backend_kind="openai"))
    app.middleware_stack = app.build_middleware_stack()
    layer = app.middleware_stack
    while not isinstance(layer, FrontLanes):
        layer = layer.app
    layer.lanes = {path: endpoint(chunks) for path in layer.lanes}
    return app


async def time_one(app: Any, requests: int) -> float:
    """Seconds per request through ``app``."""

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Any) -> None:
        pass

    started = time.perf_counter()
    for _ in range(requests):
        scope = {"type": "http", "method": "POST", "path": PATH, "root_path": ""}
        scope |= {"headers": list(HEADERS), "client": ("127.0.0.1", 1), "scheme": "http"}
        await app(scope, receive, send)
    return (time.perf_counter() - started) / requests


def run(variant: str, chunks: int, requests: int) -> float:
    if variant.startswith("access log ") and variant != "access log off":
        configure_logging("info", variant.removeprefix("access log "))
        handler = logging.getLogger().handlers[0]
        assert isinstance(handler, logging.StreamHandler)
        handler.setStream(open(os.devnull, "w"))  # noqa: SIM115 (closed with the process)
    else:
        configure_logging("warning", "text")
    app: Any = endpoint(chunks) if variant == "bare endpoint" else stack(chunks)
    if variant == "proxy headers":
        app = ProxyHeadersMiddleware(app, "127.0.0.1")
    asyncio.run(time_one(app, requests // 10))  # warm up
    return asyncio.run(time_one(app, requests))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    best: dict[tuple[str, int], float] = {}
    for _ in range(args.repeats):
        for chunks in (0, 128):
            for variant in VARIANTS:
                took = run(variant, chunks, args.requests)
                best[variant, chunks] = min(took, best.get((variant, chunks), took))
    print("| layers | per request | per chunk | a 128-chunk stream |")
    print("|---|---:|---:|---:|")
    for variant in VARIANTS[1:]:
        alone = (best[variant, 0] - best["bare endpoint", 0]) * 1e6
        stream = (best[variant, 128] - best["bare endpoint", 128]) * 1e6
        print(f"| {variant} | {alone:.1f} µs | {(stream - alone) / 128:.3f} µs | {stream:.1f} µs |")


if __name__ == "__main__":
    main()
