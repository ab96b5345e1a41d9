"""What the gateway adds: the simulator direct vs through the gateway, one run.

Starts ``toolrelay simulate`` and ``toolrelay serve`` as subprocesses on free
127.0.0.1 ports (so the client, the gateway and the backend do not share a
GIL) and measures, side by side:

* non-streaming latency at concurrency 1 and 16: p50 and p99, direct and
  through the gateway, and the difference (with and without tools);
* 128-chunk streams: the time per streamed chunk the gateway adds when the
  backend streams flat out (chunks that arrive together leave together), and,
  from a paced upstream that stamps each chunk with its send time, the trip
  time the gateway adds to a chunk that arrives alone;
* the HTTP client choice: aiohttp and httpx as clients of the same backend;
* reading a request: the gateway's hand-written checks vs pydantic validating
  the openai SDK's own request type.

Every loop is bounded; traffic stays on loopback. Usage::

    .venv/bin/python bench/gateway_bench.py [--write]   # --write updates bench/RESULTS.md
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import functools
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import httpx
import orjson
from results import write_section

ROOT = Path(__file__).resolve().parent.parent
HEADING = "## Gateway"
TOOLRELAY = [sys.executable, "-m", "toolrelay"]
STREAM_CHUNKS = 128
CHUNK_CHARS = 4
RUNS = 5
C1_REQUESTS = 300
C16_REQUESTS = 1600
STREAMS = 100
PACED_STREAMS = 50
PACED_DELAY_MS = 1

SCENARIO = {
    "models": ["bench"],
    "rules": [
        {"match": {"last_user": "stream"}, "answer": {"content": "abcd" * STREAM_CHUNKS}},
        {
            "match": {"tools": "native"},
            "answer": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
        },
        {"answer": {"content": "Hello, this is a short answer."}},
    ],
}
TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
PLAIN = {"model": "bench", "messages": [{"role": "user", "content": "hi"}]}
WITH_TOOLS = {**PLAIN, "tools": [TOOL]}
STREAM = {"model": "bench", "messages": [{"role": "user", "content": "stream"}], "stream": True}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def process(
    args: list[str],
    ready_url: str,
    cwd: Path | str | None = None,
    env: dict[str, str] | None = None,
    startup: float = 20,
    log: Path | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    """A started subprocess, its stdout and stderr kept in ``log`` (by default a
    file in ``log_dir()``): a traceback it prints under load is evidence."""
    if log is None:
        # Named by the port it serves on, the one the bench's messages name.
        prefix = f"port-{urlsplit(ready_url).port}-"
        log = Path(tempfile.mkstemp(prefix=prefix, suffix=".log", dir=log_dir())[1])
    with log.open("ab") as output:
        proc = subprocess.Popen(
            args,
            cwd=cwd or ROOT,
            stdout=output,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
        )
    try:
        deadline = time.monotonic() + startup
        while True:
            try:
                if httpx.get(ready_url, timeout=1).status_code < 500:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"{args} did not start:\n{log_tail(log)}")
            time.sleep(0.05)
        yield proc
    finally:
        proc.terminate()
        proc.wait(10)


# What a log says when something went wrong: a traceback, or uvicorn's or toolrelay's level.
_TROUBLE = re.compile(rb"Traceback|ERROR|WARNING|CRITICAL")


@functools.cache
def log_dir() -> Path:
    """This run's folder of the started processes' logs: removed at exit when
    none tells of trouble, else kept and the telling ones named on standard error."""
    folder = Path(tempfile.mkdtemp(prefix="toolrelay-bench-logs-"))
    atexit.register(_keep_or_remove, folder)
    return folder


def _keep_or_remove(folder: Path) -> None:
    troubled = sorted(log for log in folder.iterdir() if _TROUBLE.search(log.read_bytes()))
    if not troubled:
        shutil.rmtree(folder)
        return
    for log in troubled:
        print(f"a process logged trouble (kept): {log}", file=sys.stderr)


def log_tail(log: Path, lines: int = 40) -> str:
    """The last ``lines`` lines of a process's log: where its traceback is."""
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:]) or "(empty)"


def failed_request(name: str, error: BaseException, log: Path) -> str:
    """What a bench says when a request to target ``name`` failed: the error
    (status and body, or the connection's exception) and the tail of its log."""
    return (
        f"a request to {name} failed: {error!r}\n"
        f"--- the last lines of {name}'s log, {log} ---\n{log_tail(log)}"
    )


class Refused(AssertionError):
    """A target answered a bench's request with other than 200: the status and the body."""

    def __init__(self, url: str, status: int, body: bytes) -> None:
        super().__init__(f"{url} answered {status}: {body[:2000]!r}")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


Request = Callable[[], Awaitable[None]]


async def latencies(request: Request, total: int, concurrency: int) -> list[float]:
    """Seconds per request, ``total`` requests spread over ``concurrency`` workers."""
    out: list[float] = []
    per_worker = total // concurrency

    async def worker() -> None:
        for _ in range(per_worker):
            start = time.perf_counter()
            await request()
            out.append(time.perf_counter() - start)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return out


def aiohttp_post(session: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> Request:
    data = orjson.dumps(body)
    headers = {"Content-Type": "application/json"}

    async def go() -> None:
        async with session.post(url, data=data, headers=headers) as response:
            payload = await response.read()
            if response.status != 200:
                raise Refused(url, response.status, payload)

    return go


def httpx_post(client: httpx.AsyncClient, url: str, body: dict[str, Any]) -> Request:
    data = orjson.dumps(body)
    headers = {"Content-Type": "application/json"}

    async def go() -> None:
        response = await client.post(url, content=data, headers=headers)
        assert response.status_code == 200, response.text

    return go


def aiohttp_stream(session: aiohttp.ClientSession, url: str) -> Request:
    data = orjson.dumps(STREAM)
    headers = {"Content-Type": "application/json"}

    async def go() -> None:
        chunks = 0
        async with session.post(url, data=data, headers=headers) as response:
            async for line in response.content:
                if line.startswith(b"data: {"):
                    chunks += 1
        assert chunks >= STREAM_CHUNKS, chunks

    return go


async def measure(request: Request, total: int, concurrency: int) -> dict[str, float]:
    """p50/p99 in ms, the median of RUNS runs (after a warm-up)."""
    await latencies(request, min(total, 50), concurrency)
    runs = [await latencies(request, total, concurrency) for _ in range(RUNS)]
    return {
        "p50": statistics.median(percentile(r, 0.50) for r in runs) * 1000,
        "p99": statistics.median(percentile(r, 0.99) for r in runs) * 1000,
    }


def serve_stamps(port: int) -> None:
    """A paced upstream whose every chunk carries its send time (CLOCK_MONOTONIC
    is one clock for all processes), so a client can time each chunk's trip."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route

    async def completions(request: Request) -> Response:
        async def frames() -> AsyncIterator[bytes]:
            for _ in range(STREAM_CHUNKS):
                await asyncio.sleep(PACED_DELAY_MS / 1000)
                delta = {"content": str(time.monotonic_ns())}
                chunk = {
                    "object": "chat.completion.chunk",
                    "choices": [{"index": 0, "delta": delta}],
                }
                yield b"data: " + orjson.dumps(chunk) + b"\n\n"
            yield b"data: [DONE]\n\n"

        return StreamingResponse(frames(), media_type="text/event-stream")

    async def models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": "bench"}]})

    routes = [
        Route("/v1/chat/completions", completions, methods=["POST"]),
        Route("/v1/models", models),
    ]
    uvicorn.run(Starlette(routes=routes), host="127.0.0.1", port=port, log_level="warning")


async def paced(direct: str, through: str, upstream_pid: int, gateway_pid: int) -> dict[str, Any]:
    """Every chunk arriving on its own: each chunk's trip from the upstream to the
    client, direct and through the gateway, and the CPU each process spends."""
    out: dict[str, Any] = {}
    body = orjson.dumps(STREAM)
    headers = {"Content-Type": "application/json"}
    async with aiohttp.ClientSession() as session:
        for where, base in (("direct", direct), ("gateway", through)):
            trips: list[float] = []
            cpu_before = cpu_seconds(upstream_pid), cpu_seconds(gateway_pid)
            for _ in range(PACED_STREAMS):
                url = base + "/chat/completions"
                async with session.post(url, data=body, headers=headers) as response:
                    async for line in response.content:
                        if not line.startswith(b"data: {"):
                            continue
                        now = time.monotonic_ns()
                        delta = orjson.loads(line[6:])["choices"][0]["delta"]
                        if delta.get("content"):
                            trips.append((now - int(delta["content"])) / 1000)
            chunks = PACED_STREAMS * STREAM_CHUNKS
            out[where] = {"p50": percentile(trips, 0.5), "p99": percentile(trips, 0.99)}
            out[f"{where}_upstream_cpu_us"] = (
                (cpu_seconds(upstream_pid) - cpu_before[0]) / chunks * 1e6
            )
            out[f"{where}_gateway_cpu_us"] = (
                (cpu_seconds(gateway_pid) - cpu_before[1]) / chunks * 1e6
            )
    return out


async def bench(direct: str, through: str) -> dict[str, Any]:
    results: dict[str, Any] = {}
    connector = aiohttp.TCPConnector(limit=64)
    async with aiohttp.ClientSession(connector=connector) as session:
        for label, body in (("plain", PLAIN), ("tools", WITH_TOOLS)):
            for concurrency, total in ((1, C1_REQUESTS), (16, C16_REQUESTS)):
                row = {}
                for where, base in (("direct", direct), ("gateway", through)):
                    url = base + "/chat/completions"
                    row[where] = await measure(aiohttp_post(session, url, body), total, concurrency)
                results[f"{label} c={concurrency}"] = row
        row = {}
        for where, base in (("direct", direct), ("gateway", through)):
            row[where] = await measure(
                aiohttp_stream(session, base + "/chat/completions"), STREAMS, 1
            )
        results["stream 128 chunks c=1"] = row
    results["clients"] = await client_choice(direct)
    results["validation"] = validation_cost()
    results["pipeline"] = pipeline_cost()
    return results


async def client_choice(direct: str) -> dict[str, dict[str, float]]:
    """aiohttp vs httpx as the backend client: same server, same requests."""
    url = direct + "/chat/completions"
    out: dict[str, dict[str, float]] = {}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64)) as session:
        for concurrency, total in ((1, C1_REQUESTS), (16, C16_REQUESTS)):
            out[f"aiohttp c={concurrency}"] = await measure(
                aiohttp_post(session, url, PLAIN), total, concurrency
            )
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    async with httpx.AsyncClient(limits=limits, timeout=30) as client:
        for concurrency, total in ((1, C1_REQUESTS), (16, C16_REQUESTS)):
            out[f"httpx c={concurrency}"] = await measure(
                httpx_post(client, url, PLAIN), total, concurrency
            )
    return out


def pipeline_cost() -> dict[str, float]:
    """µs of the gateway's own Python work per streamed chunk, in process and
    without I/O: decode the upstream line, the streaming parser (with tools),
    the native call relay (a call's argument fragments), the events' admission,
    and the encoding of the outgoing chunk."""
    from toolrelay.io.backends.native import NativeStream
    from toolrelay.io.round.body import ChunkReader
    from toolrelay.names import ToolSet
    from toolrelay.server.chat.wire import ChunkEncoder
    from toolrelay.stream import StreamParser

    words = ("The weather in Paris is mild today, " * 20).split(" ")
    lines = [
        b"data: " + orjson.dumps({"choices": [{"index": 0, "delta": {"content": word + " "}}]})
        for word in words[:STREAM_CHUNKS]
    ]
    arguments = orjson.dumps({"city": "Paris " * STREAM_CHUNKS}).decode()
    fragments = [arguments[i : i + CHUNK_CHARS] for i in range(0, len(arguments), CHUNK_CHARS)]
    start_call = {"index": 0, "id": "call_1", "type": "function"}
    start_call["function"] = {"name": "get_weather", "arguments": ""}
    native_lines = [
        b"data: " + orjson.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [entry]}}]})
        for entry in [
            start_call,
            *({"index": 0, "function": {"arguments": f}} for f in fragments[:STREAM_CHUNKS]),
        ]
    ]
    out: dict[str, float] = {}
    for label, tools in (("plain", None), ("tools", [TOOL]), ("native", [TOOL])):
        rounds = 200
        feed = native_lines if label == "native" else lines
        start = time.perf_counter()
        for _ in range(rounds):
            encoder = ChunkEncoder("bench", False)
            state = ChunkReader(
                StreamParser(tools=tools) if tools else None,
                NativeStream(ToolSet(tools)) if tools else None,
                None,
            )
            for line in feed:
                chunk = orjson.loads(line[6:])
                batch: list[Any] = []
                delta = chunk["choices"][0]["delta"]
                if "content" in delta:
                    state.feed(delta["content"], batch)
                else:
                    state.feed_native(delta["tool_calls"], batch)
                b"".join(data for data in map(encoder.event, batch) if data is not None)
        out[label] = (time.perf_counter() - start) / (rounds * len(feed)) * 1e6
    return out


def validation_cost() -> dict[str, float]:
    """µs to read a typical tool request (11 messages, 5 tools): the gateway's
    reader (decode, checks, tool_choice resolution) vs pydantic on the SDK's type."""
    from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
    from pydantic import TypeAdapter

    from toolrelay.io.settings import Settings
    from toolrelay.server.asgi import decode
    from toolrelay.server.chat.request import read_request

    tools = [
        {
            "type": "function",
            "function": {
                "name": f"tool_{i}",
                "description": "a tool",
                "parameters": {
                    "type": "object",
                    "properties": {"a": {"type": "string"}},
                    "required": ["a"],
                },
            },
        }
        for i in range(5)
    ]
    messages = [{"role": "system", "content": "be brief"}]
    messages += [{"role": "user", "content": "hello " * 20}] * 10
    raw = orjson.dumps({"model": "m", "messages": messages, "tools": tools, "temperature": 0.2})
    settings = Settings()
    adapter = TypeAdapter(CompletionCreateParamsNonStreaming)
    rounds = 3000
    start = time.perf_counter()
    for _ in range(rounds):
        read_request(decode(raw), settings, None)
    ours = (time.perf_counter() - start) / rounds * 1e6
    start = time.perf_counter()
    for _ in range(rounds):
        adapter.validate_python(orjson.loads(raw))
    theirs = (time.perf_counter() - start) / rounds * 1e6
    return {"gateway_us": ours, "pydantic_us": theirs}


def report(results: dict[str, Any]) -> str:
    lines = [
        HEADING,
        "",
        "`bench/gateway_bench.py`: `toolrelay simulate` direct vs through `toolrelay serve`,",
        "both as subprocesses on 127.0.0.1 (uvicorn, uvloop, httptools), an aiohttp client,",
        f"keep-alive, median of {RUNS} runs; c=1: {C1_REQUESTS} requests a run, c=16: "
        f"{C16_REQUESTS}. 2-core machine shared by client, gateway and simulator.",
        "",
        "| non-streaming | direct p50 | gateway p50 | added p50 | direct p99 | gateway p99 "
        "| added p99 |",
        "|---|---|---|---|---|---|---|",
    ]
    for key, row in results.items():
        if key in ("clients", "paced", "validation", "pipeline") or key.startswith("stream"):
            continue
        d, g = row["direct"], row["gateway"]
        lines.append(
            f"| {key} | {d['p50']:.3f} ms | {g['p50']:.3f} ms | **{g['p50'] - d['p50']:.3f} ms** "
            f"| {d['p99']:.3f} ms | {g['p99']:.3f} ms | {g['p99'] - d['p99']:.3f} ms |"
        )
    stream = results["stream 128 chunks c=1"]
    added = stream["gateway"]["p50"] - stream["direct"]["p50"]
    per_chunk = added / STREAM_CHUNKS * 1000
    p = results["paced"]
    paced_added = p["gateway"]["p50"] - p["direct"]["p50"]
    c1_added = [
        row["gateway"]["p50"] - row["direct"]["p50"]
        for key, row in results.items()
        if key.endswith(" c=1") and not key.startswith("stream")
    ]
    lines += [
        "",
        f"Streaming, {STREAM_CHUNKS}-chunk answers ({STREAMS} streams a run, p50 of a whole "
        f"stream, the simulator streaming flat out): direct {stream['direct']['p50']:.2f} ms, "
        f"through the gateway {stream['gateway']['p50']:.2f} ms: **{per_chunk:.1f} µs added "
        "per chunk**, the per-stream setup included. Chunks that arrive in one read leave in "
        "one write, which is what keeps this low when a backend is fast.",
        "",
        f"Paced upstream (a chunk every {PACED_DELAY_MS} ms, each stamped with its send "
        f"time; {PACED_STREAMS} streams of {STREAM_CHUNKS}): one chunk's trip to the client "
        f"takes {p['direct']['p50']:.0f} µs direct and {p['gateway']['p50']:.0f} µs through "
        f"the gateway at p50 (p99 {p['direct']['p99']:.0f} / {p['gateway']['p99']:.0f} µs): "
        f"**{paced_added:.0f} µs added per chunk** that arrives alone, the extra hop's "
        "wake-up, read and write included. CPU per chunk (user + system, from /proc): the "
        f"gateway {p['gateway_gateway_cpu_us']:.0f} µs, the upstream that produced it "
        f"{p['gateway_upstream_cpu_us']:.0f} µs (a process woken for every lone chunk pays "
        "most of that in the wake-up on this VM).",
        "",
        "The gateway's own Python work per chunk, in process and without I/O (decode the "
        "upstream line, the streaming parser, admission of the events, encode the outgoing "
        f"chunk): **{results['pipeline']['plain']:.1f} µs** without tools, "
        f"**{results['pipeline']['tools']:.1f} µs** with tools (the streaming parser on every "
        f"delta), **{results['pipeline']['native']:.1f} µs** per argument fragment of a native "
        "call relayed as it arrives (made strict JSON on the way). What a lone chunk costs "
        "beyond that is the operating system's: one more process to wake, one more socket to "
        "read and write.",
        "",
        "HTTP client to the backend (same simulator, same request, p50 / p99):",
        "",
    ]
    for key, row in results["clients"].items():
        lines.append(f"- {key}: {row['p50']:.3f} ms / {row['p99']:.3f} ms")
    lines += [
        "",
        "The gateway uses aiohttp: it is the faster client here at both concurrencies.",
        "",
        "Reading a request (11 messages, 5 tools, in process): the gateway's own checks "
        f"take {results['validation']['gateway_us']:.0f} µs (decode, field checks naming "
        "the param, tool_choice resolution); pydantic validating the openai SDK's "
        f"`CompletionCreateParamsNonStreaming` takes {results['validation']['pydantic_us']:.0f} "
        "µs for less, so the hot path has no pydantic model.",
        "",
        "Goals: ≤ 1 ms added p50 at c=1 non-streaming, ≤ 20 µs per streamed chunk. In this "
        f"run: {max(c1_added):.3f} ms at c=1 ({_verdict(max(c1_added) <= 1.0)}); "
        f"{per_chunk:.1f} µs per chunk on a flat-out stream ({_verdict(per_chunk <= 20)}); "
        f"{paced_added:.0f} µs on the trip of a chunk that arrives alone "
        f"({_verdict(paced_added <= 20)}: that is the cost of one more hop between processes "
        f"here, about what the direct hop itself takes, {p['direct']['p50']:.0f} µs, while "
        "the gateway's own work on it is the few µs above).",
        "",
    ]
    return "\n".join(lines)


def _verdict(met: bool) -> str:
    return "met" if met else "not met"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="update bench/RESULTS.md")
    parser.add_argument("--serve-stamps", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_stamps:
        serve_stamps(args.serve_stamps)
        return
    sim_port, gw_port = free_port(), free_port()
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as scenario:
        json.dump(SCENARIO, scenario)
    direct = f"http://127.0.0.1:{sim_port}/v1"
    through = f"http://127.0.0.1:{gw_port}/v1"
    try:
        with (
            process(
                [
                    *TOOLRELAY,
                    "simulate",
                    "--port",
                    str(sim_port),
                    "--scenario",
                    scenario.name,
                    "--chunk",
                    str(CHUNK_CHARS),
                ],
                direct + "/models",
            ),
            process(
                [
                    *TOOLRELAY,
                    "serve",
                    "--backend",
                    direct,
                    "--backend-kind",
                    "openai",
                    "--port",
                    str(gw_port),
                    "--log-level",
                    "warning",
                ],
                f"http://127.0.0.1:{gw_port}/health",
            ),
        ):
            results = asyncio.run(bench(direct, through))
        stamp_port, paced_gw_port = free_port(), free_port()
        stamps = f"http://127.0.0.1:{stamp_port}/v1"
        with (
            process(
                [sys.executable, __file__, "--serve-stamps", str(stamp_port)], stamps + "/models"
            ) as upstream,
            process(
                [
                    *TOOLRELAY,
                    "serve",
                    "--backend",
                    stamps,
                    "--backend-kind",
                    "openai",
                    "--port",
                    str(paced_gw_port),
                    "--log-level",
                    "warning",
                ],
                f"http://127.0.0.1:{paced_gw_port}/health",
            ) as paced_gateway,
        ):
            results["paced"] = asyncio.run(
                paced(
                    stamps,
                    f"http://127.0.0.1:{paced_gw_port}/v1",
                    upstream.pid,
                    paced_gateway.pid,
                )
            )
    finally:
        os.unlink(scenario.name)
    text = report(results)
    print(text)
    if args.write:
        write_section(HEADING, text)


if __name__ == "__main__":
    main()
