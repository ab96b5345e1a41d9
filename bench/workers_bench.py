"""``toolrelay serve --workers 2`` against ``--workers 1``: throughput, side by side.

Starts ``toolrelay simulate`` and, in turn, ``toolrelay serve --workers 1`` and
``--workers 2`` in front of it (subprocesses on free 127.0.0.1 ports) and
drives each with the same closed loop: ``--concurrency`` clients sending
non-streamed requests with a tool for ``--seconds`` seconds, the two settings
alternated ``--rounds`` times. Reports requests per second and the ratio.

    .venv/bin/python bench/workers_bench.py [--write]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))

from load_bench import TOOLRELAY, free_port, process, simulator, write_section

BODY: dict[str, Any] = {
    "model": "bench",
    "messages": [{"role": "user", "content": "weather?"}],
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    ],
}


async def closed_loop(url: str, concurrency: int, seconds: float) -> float:
    """Requests per second that ``concurrency`` clients get through in ``seconds``."""
    done = 0
    stop = time.monotonic() + seconds
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def client() -> None:
            nonlocal done
            while time.monotonic() < stop:
                async with session.post(url + "/chat/completions", json=BODY) as reply:
                    await reply.read()
                    if reply.status == 200:
                        done += 1

        started = time.monotonic()
        await asyncio.gather(*(client() for _ in range(concurrency)))
        return done / (time.monotonic() - started)


def measure(workers: int, backend: str, concurrency: int, seconds: float) -> float:
    port = free_port()
    args = [*TOOLRELAY, "serve", "--backend", backend, "--backend-kind", "openai"]
    args += ["--port", str(port), "--workers", str(workers), "--log-level", "warning"]
    with process(args, f"http://127.0.0.1:{port}/health"):
        url = f"http://127.0.0.1:{port}/v1"
        asyncio.run(closed_loop(url, concurrency, 1.0))  # warm up every worker
        return asyncio.run(closed_loop(url, concurrency, seconds))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--write", action="store_true", help="update bench/RESULTS.md")
    args = parser.parse_args()
    rates: dict[int, list[float]] = {1: [], 2: []}
    with simulator("--request-log", "10") as backend:
        for _ in range(args.rounds):
            for workers in (1, 2):
                rates[workers].append(measure(workers, backend, args.concurrency, args.seconds))
    one, two = statistics.median(rates[1]), statistics.median(rates[2])
    result = {"rates": rates, "one": one, "two": two, "ratio": two / one, "cpus": os.cpu_count()}
    print(json.dumps(result, indent=2))
    text = "\n".join(
        [
            "## Gateway workers",
            "",
            "`bench/workers_bench.py`: `toolrelay serve --workers 1` and `--workers 2` in "
            "front of one `toolrelay simulate`, alternated "
            f"{args.rounds} times, each driven by {args.concurrency} clients sending "
            f"non-streamed requests with a tool for {args.seconds:g} s (median of the "
            f"rounds). {os.cpu_count()} cores, shared by the client, the simulator, the "
            "gateway and whatever else runs.",
            "",
            f"- `--workers 1`: {one:.0f} requests/s ({', '.join(f'{r:.0f}' for r in rates[1])})",
            f"- `--workers 2`: {two:.0f} requests/s ({', '.join(f'{r:.0f}' for r in rates[2])})",
            f"- ratio: **{two / one:.2f}×**",
            "",
        ]
    )
    print(text)
    if args.write:
        write_section(text)


if __name__ == "__main__":
    main()
