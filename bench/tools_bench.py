"""What an HTTP tool call costs, side by side with the bare HTTP floor.

A tool service runs in its own process (uvicorn + httptools, raw ASGI):
``/weather/{city}`` answers a short text, ``/big`` a 32 MB body. Measured in
one run, sequential calls, the best mean of 7 interleaved rounds:

- a tool call through ``Toolbox.run`` (schema check, request building, the
  pooled client, the bounded read, truncation);
- the floor: the same GET on a bare pooled aiohttp session;
- no pooling: a new connection per call (an aiohttp session each time);
- request building alone (``build_request``, pure);
- a round of 16 calls to a service that takes 20 ms, run concurrently, against
  the same 16 one after another;
- a 32 MB answer: the tool's bounded read (result limit 2000 characters)
  against reading the whole body.

Run: ``.venv/bin/python bench/tools_bench.py [--write]``; ``--write`` puts the
figures into bench/RESULTS.md under "## HTTP tools".
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from results import write_section

from toolrelay.events import ToolCall
from toolrelay.io.tools import (
    HttpTool,
    HttpToolClient,
    Toolbox,
    build_request,
    parse_definitions,
)

HEADING = "## HTTP tools"
CALLS = 200
ROUNDS = 7
BIG = 32 * 1024 * 1024
LATENCY = 0.02
CHUNK = b"x" * 65536


async def service(scope: Any, receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    headers = [(b"content-type", b"text/plain; charset=utf-8")]
    if scope["path"].startswith("/slow/"):
        await asyncio.sleep(LATENCY)  # a remote service's own latency
    if scope["path"] == "/big":
        headers.append((b"content-length", str(BIG).encode()))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for _ in range(BIG // len(CHUNK)):
            await send({"type": "http.response.body", "body": CHUNK, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
        return
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"Paris: 18\xc2\xb0C, light rain"})


def serve(port: int) -> None:
    import uvicorn

    uvicorn.run(service, host="127.0.0.1", port=port, log_level="warning", http="httptools")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def per_call(run: Callable[[], Awaitable[Any]], count: int) -> float:
    """Mean µs per call of ``count`` sequential calls."""
    started = time.perf_counter()
    for _ in range(count):
        await run()
    return (time.perf_counter() - started) / count * 1e6


async def best_of(
    variants: dict[str, tuple[Callable[[], Awaitable[Any]], int]],
) -> dict[str, float]:
    """Each variant's best mean over ROUNDS rounds, the variants interleaved in
    every round so that a busy moment of the shared machine hits them all."""
    for run, _ in variants.values():
        for _ in range(10):
            await run()
    results: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(ROUNDS):
        for name, (run, count) in variants.items():
            results[name].append(await per_call(run, count))
    return {name: min(values) for name, values in results.items()}


async def measure(base: str) -> dict[str, float]:
    definitions = parse_definitions(
        [
            {
                "name": "get_weather",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                },
                "url": base + "/weather/{city}",
                "method": "GET",
            },
            {"name": "big", "url": base + "/big", "method": "GET"},
            {
                "name": "slow_weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                "url": base + "/slow/{city}",
                "method": "GET",
            },
        ]
    )
    client = HttpToolClient(timeout=30)
    toolbox = Toolbox([HttpTool(tool, client) for tool in definitions], max_chars=2000)
    call = ToolCall("c", "get_weather", {"city": "Paris"})
    session = aiohttp.ClientSession()

    async def bare() -> bytes:
        async with session.get(base + "/weather/Paris") as response:
            return await response.read()

    async def unpooled() -> bytes:
        async with (
            aiohttp.ClientSession() as own,
            own.get(base + "/weather/Paris") as response,
        ):
            return await response.read()

    figures = await best_of(
        {
            "tool": (lambda: toolbox.run(call), CALLS),
            "floor": (bare, CALLS),
            "unpooled": (unpooled, CALLS // 4),
        }
    )

    started = time.perf_counter()
    for _ in range(20000):
        build_request(definitions[0], {"city": "Paris"})
    figures["build"] = (time.perf_counter() - started) / 20000 * 1e6

    calls = [ToolCall(f"c{n}", "slow_weather", {"city": f"City{n}"}) for n in range(16)]

    async def sequential() -> None:
        for one in calls:
            await toolbox.run(one)

    async def concurrent() -> None:
        await asyncio.gather(*(toolbox.run(one) for one in calls))

    big = ToolCall("b", "big", {})

    async def whole() -> bytes:
        async with session.get(base + "/big") as response:
            return await response.read()

    slow = await best_of(
        {
            "round_sequential": (sequential, 2),
            "round_concurrent": (concurrent, 10),
            "big_bounded": (lambda: toolbox.run(big), 10),
            "big_whole": (whole, 2),
        }
    )
    figures.update({name: value / 1000 for name, value in slow.items()})
    output = await toolbox.run(big)
    figures["big_bounded_chars"] = len(output.raw or output.text)
    await session.close()
    await client.aclose()
    return figures


def section(figures: dict[str, float]) -> str:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    overhead = figures["tool"] - figures["floor"]
    return f"""{HEADING}

`bench/tools_bench.py`: declarative HTTP tools against a local tool service in
its own process (uvicorn + httptools), sequential calls; each figure is the
best mean of {ROUNDS} rounds, the variants interleaved within every round.
Python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs
shared with the service (load average {load:.1f} while measuring).

| | per call |
|---|---|
| a GET tool call through `Toolbox.run` (schema check, request, pooled client, \
bounded read, truncation) | {figures["tool"]:.0f} µs |
| the floor: the same GET on a bare, pooled aiohttp session | {figures["floor"]:.0f} µs |
| toolrelay's own work on top of the floor | {overhead:.0f} µs |
| without pooling: a new connection per call | {figures["unpooled"]:.0f} µs |
| building the request alone (`build_request`, pure) | {figures["build"]:.1f} µs |

| | time |
|---|---|
| a round of 16 calls to a service that takes 20 ms, run concurrently (as the \
loop runs them) | {figures["round_concurrent"]:.1f} ms |
| the same 16 calls one after another | {figures["round_sequential"]:.1f} ms |
| a 32 MB answer, read as far as a 2000-character result needs | {figures["big_bounded"]:.2f} ms |
| the same answer read whole | {figures["big_whole"]:.1f} ms |

The shared, pooled client saves {figures["unpooled"] / figures["tool"]:.1f}x per call
against a connection per call; a round's calls run concurrently, 16 in
{figures["round_sequential"] / figures["round_concurrent"]:.1f}x less time than
one by one; and the bounded read keeps a huge answer's cost flat: it stops after
{figures["big_bounded_chars"]:.0f} characters (4 bytes a character of the limit,
plus one) and drops the connection, {figures["big_whole"] / figures["big_bounded"]:.0f}x
faster than reading the 32 MB.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="update bench/RESULTS.md")
    parser.add_argument("--serve", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return
    port = free_port()
    process = subprocess.Popen([sys.executable, __file__, "--serve", str(port)])
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        figures = asyncio.run(measure(f"http://127.0.0.1:{port}"))
    finally:
        process.terminate()
        process.wait(10)
    text = section(figures)
    print(text)
    if args.write:
        write_section(HEADING, text)


if __name__ == "__main__":
    main()
