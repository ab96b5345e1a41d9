"""What the request inspector costs: the same requests through ``toolrelay serve``
without and with ``--inspector``, side by side.

Starts ``toolrelay simulate`` and two gateways (inspector off, inspector on) as
subprocesses on free 127.0.0.1 ports, then measures with one aiohttp client
at concurrency 1, off and on in turn, run after run (p50 of each run, the
median over runs: the machine is shared, and alternating keeps drift out of
the difference): a non-streamed request with a tool call, and a 128-chunk
stream (where the inspector keeps every chunk with its time). Then, in
process and without I/O, the inspector's own work: recording one such
request, and one streamed chunk (best of several repeats). Bounded: a few
thousand requests, well under a minute. Usage::

    .venv/bin/python bench/inspector_bench.py [--write]   # --write updates bench/RESULTS.md
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import aiohttp
from gateway_bench import (
    SCENARIO,
    STREAM_CHUNKS,
    TOOLRELAY,
    WITH_TOOLS,
    aiohttp_post,
    aiohttp_stream,
    cpu_seconds,
    free_port,
    latencies,
    percentile,
    process,
)
from results import write_section

from toolrelay.events import ContentDelta
from toolrelay.io.recording import RequestRecord
from toolrelay.server.logs import Redactor

HEADING = "## Inspector"
REQUESTS = 200
STREAMS = 40
RUNS = 9
REPEATS = 2000
CHUNK = {
    "id": "chatcmpl-1",
    "object": "chat.completion.chunk",
    "created": 1,
    "model": "bench",
    "choices": [{"index": 0, "delta": {"content": "abcd"}, "finish_reason": None}],
}
SENT_CHUNK = "data: " + json.dumps(CHUNK) + "\n\n"


async def run(
    urls: dict[str, str], pids: dict[str, int]
) -> tuple[dict[str, dict[str, list[float]]], dict[str, dict[str, float]]]:
    """Per case and setting, the p50 of each run in ms, off and on taking turns;
    and the gateway's CPU time per request (or stream) in µs."""
    figures: dict[str, dict[str, list[float]]] = {
        case: {name: [] for name in urls} for case in ("tools", "stream")
    }
    cpu: dict[str, dict[str, float]] = {case: dict.fromkeys(urls, 0.0) for case in figures}
    async with aiohttp.ClientSession() as session:
        requests = {
            name: {
                "tools": (
                    aiohttp_post(session, url + "/v1/chat/completions", WITH_TOOLS),
                    REQUESTS,
                ),
                "stream": (aiohttp_stream(session, url + "/v1/chat/completions"), STREAMS),
            }
            for name, url in urls.items()
        }
        for name in urls:  # warm-up
            for request, total in requests[name].values():
                await latencies(request, min(total, 30), 1)
        for _ in range(RUNS):
            for name in urls:
                for case, (request, total) in requests[name].items():
                    before = cpu_seconds(pids[name])
                    figures[case][name].append(percentile(await latencies(request, total, 1), 0.5))
                    cpu[case][name] += (cpu_seconds(pids[name]) - before) / (total * RUNS) * 1e6
    latency = {
        case: {name: [value * 1000 for value in values] for name, values in by_name.items()}
        for case, by_name in figures.items()
    }
    return latency, cpu


def own_work() -> tuple[float, float]:
    """µs of the inspector's work for one non-streamed request, and per streamed chunk."""
    redact = Redactor(["an-api-key-1", "an-admin-token-2"])
    body = {**WITH_TOOLS, "model": "bench"}
    answer = {"choices": [{"message": {"content": "Hello, this is a short answer."}}]}

    def one_request() -> None:
        record = RequestRecord("r", "POST", "/v1/chat/completions", 262144, redact)
        record.client_sent = record.budget.keep(body)
        entry = record.attempt("default", "native", body, stream=False, why="first")
        record.parsed(entry, [ContentDelta("Hello, this is a short answer.")], "Hello")
        record.answered(entry, answer)
        record.sent(json.dumps(answer))
        record.finish(200, {"model": "bench"})

    def one_stream() -> None:
        record = RequestRecord("r", "POST", "/v1/chat/completions", 262144, redact)
        entry = record.attempt("default", "native", body, stream=True, why="first")
        for _ in range(STREAM_CHUNKS):
            record.chunk(entry, CHUNK)
            record.parsed(entry, [ContentDelta("abcd")])
            record.sent(SENT_CHUNK)
        record.streamed(entry)
        record.finish(200, {"model": "bench"})

    return _best(one_request), _best(one_stream, REPEATS // 20) / STREAM_CHUNKS


def _best(work: Callable[[], None], repeats: int = REPEATS) -> float:
    times = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(repeats):
            work()
        times.append((time.perf_counter() - start) / repeats)
    return min(times) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="update bench/RESULTS.md")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        scenario = Path(scratch) / "scenario.json"
        scenario.write_text(json.dumps(SCENARIO))
        sim_port, off_port, on_port = free_port(), free_port(), free_port()
        sim = [*TOOLRELAY, "simulate", "--port", str(sim_port), "--scenario", str(scenario)]
        backend = f"http://127.0.0.1:{sim_port}/v1"
        serve = [*TOOLRELAY, "serve", "--backend", backend, "--backend-kind", "openai"]
        serve += ["--log-level", "warning"]
        off = [*serve, "--port", str(off_port)]
        on = [*serve, "--port", str(on_port), "--inspector"]
        with (
            process(sim, backend + "/models"),
            process(off, f"http://127.0.0.1:{off_port}/health") as off_process,
            process(on, f"http://127.0.0.1:{on_port}/health") as on_process,
        ):
            urls = {"off": f"http://127.0.0.1:{off_port}", "on": f"http://127.0.0.1:{on_port}"}
            pids = {"off": off_process.pid, "on": on_process.pid}
            figures, cpu = asyncio.run(run(urls, pids))
    request_us, chunk_us = own_work()
    rows = []
    for case, label in (("tools", "tool call, not streamed"), ("stream", "128-chunk stream")):
        off_f, on_f = figures[case]["off"], figures[case]["on"]
        added = statistics.median(on - off for on, off in zip(on_f, off_f, strict=True))
        rows.append(
            f"| {label} | {statistics.median(off_f):.3f} ms | {statistics.median(on_f):.3f} ms "
            f"| **{added:+.3f} ms** | {cpu[case]['off']:.0f} µs | {cpu[case]['on']:.0f} µs | "
            f"**{cpu[case]['on'] - cpu[case]['off']:+.0f} µs** |"
        )
    section = "\n".join(
        [
            HEADING,
            "",
            "`bench/inspector_bench.py`: the same requests through `toolrelay serve` without "
            "and with `--inspector` (simulator, both gateways as subprocesses on 127.0.0.1, "
            f"aiohttp client, c=1; {RUNS} runs of {REQUESTS} requests or {STREAMS} streams of "
            f"{STREAM_CHUNKS} chunks, off and on taking turns; p50 of each run, median over "
            "runs; added: the median of the runs' differences; CPU: the gateway process's "
            "user + system time per request or stream, from /proc; 2-core machine shared with "
            "other work, so a difference under ~0.5 ms is noise; load average during this "
            f"run: {os.getloadavg()[0]:.1f}).",
            "",
            "| request | off p50 | on p50 | added p50 | off CPU | on CPU | added CPU |",
            "|---|---|---|---|---|---|---|",
            *rows,
            "",
            f"The inspector's own work, in process without I/O (best of 5 x {REPEATS}): "
            f"**{request_us:.0f} µs** to record a non-streamed request (client body, one "
            f"attempt's body, answer and parse, the reply, all redacted), **{chunk_us:.1f} µs** "
            "per streamed chunk (the chunk with its time, its parse, the bytes sent on, and its "
            "share of the redaction at the end of a 128-chunk stream). Off, "
            "the round checks one context variable per backend attempt and one local per "
            "chunk, and makes no record.",
            "",
        ]
    )
    print(section)
    if args.write:
        write_section(HEADING, section)


if __name__ == "__main__":
    sys.exit(main())
