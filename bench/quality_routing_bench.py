"""Quality routing on and off: the traffic share of a replica whose tool calls
are invalid, among three ``toolrelay simulate`` processes behind one
``toolrelay serve --backend A --backend B --backend C``.

Two replicas answer the weather question with a valid ``get_weather`` call;
the third calls it without its required ``city`` (the gateway re-asks once to
correct it, and drops the call when the correction is invalid too). ``REQUESTS``
requests with the tool go through the gateway, ``CONCURRENCY`` at a time
(openai SDK clients); the share of each replica is read from ``/health``.

    .venv/bin/python bench/quality_routing_bench.py [--write]   # --write updates bench/RESULTS.md
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import openai

sys.path.insert(0, str(Path(__file__).resolve().parent))

from load_bench import TOOLRELAY, free_port, process, write_section

REQUESTS = 400
CONCURRENCY = 4
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
INVALID = {
    "models": ["toolrelay-sim"],
    "rules": [
        {
            "name": "invalid-call",
            "match": {"tools": "native"},
            "answer": {"tool_calls": [{"name": "get_weather", "arguments": {"town": "?"}}]},
        }
    ],
}


@contextmanager
def replica(scenario: dict[str, Any] | None) -> Iterator[str]:
    port = free_port()
    args = [*TOOLRELAY, "simulate", "--port", str(port)]
    with ExitStack() as stack:
        if scenario is not None:
            file = stack.enter_context(tempfile.NamedTemporaryFile("w", suffix=".json"))
            json.dump(scenario, file)
            file.flush()
            args += ["--scenario", file.name]
        stack.enter_context(process(args, f"http://127.0.0.1:{port}/v1/models"))
        yield f"http://127.0.0.1:{port}/v1"


def run(quality: bool) -> dict[str, Any]:
    with ExitStack() as stack:
        urls = [stack.enter_context(replica(s)) for s in (None, None, INVALID)]
        port = free_port()
        args = [*TOOLRELAY, "serve", "--port", str(port), "--backend-kind", "openai"]
        for url in urls:
            args += ["--backend", url]
        env = {"TOOLRELAY_QUALITY_ROUTING": str(quality).lower()}
        base = f"http://127.0.0.1:{port}"
        stack.enter_context(process(args, base + "/health", env))
        client = openai.OpenAI(base_url=base + "/v1", api_key="none", max_retries=0)
        messages = [{"role": "user", "content": "What's the weather in Paris?"}]

        def one(_: int) -> bool:
            reply = client.chat.completions.create(
                model="toolrelay-sim", messages=messages, tools=[WEATHER]
            )
            return bool(reply.choices[0].message.tool_calls)

        started = time.perf_counter()
        with ThreadPoolExecutor(CONCURRENCY) as pool:
            called = sum(pool.map(one, range(REQUESTS)))
        seconds = time.perf_counter() - started
        health = httpx.get(base + "/health", timeout=10).json()
        shares = [b["requests"] for b in health["backends"]]
    return {"quality": quality, "shares": shares, "called": called, "seconds": seconds}


def report(off: dict[str, Any], on: dict[str, Any]) -> str:
    def row(r: dict[str, Any]) -> str:
        a, b, bad = r["shares"]
        return (
            f"| {'on' if r['quality'] else 'off'} | {a} | {b} | **{bad}** "
            f"({bad / REQUESTS:.1%}) | {r['called']} of {REQUESTS} | {r['seconds']:.1f} s |"
        )

    return (
        "## Quality routing\n\n"
        "`bench/quality_routing_bench.py`: three `toolrelay simulate` processes behind one "
        "`toolrelay serve` (`--backend` three times), the third calling `get_weather` "
        f"without its required `city`; {REQUESTS} requests with the tool, {CONCURRENCY} at a "
        "time (openai SDK), one run each way. Requests per replica, from `/health`:\n\n"
        "| quality routing | good 1 | good 2 | invalid calls | answered with a call | time |\n"
        "|---|---|---|---|---|---|\n"
        f"{row(off)}\n{row(on)}\n\n"
        "Off, the invalid replica gets a little under its third: each of its requests "
        "costs a correction re-ask, so it holds its requests longer and least-outstanding "
        "balancing gives it fewer. On, it is judged once it and its peers have 20 rounds "
        "with tools each (routing_quality.MIN_ROUNDS), then its weight is cut to the floor "
        "(x0.1): from there it gets about 1 request in 21 (less under load), enough to show "
        "that it got better. More requests end with a call because fewer go to it.\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true", help="update bench/RESULTS.md")
    args = parser.parse_args()
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    off, on = run(False), run(True)
    text = report(off, on)
    print(text)
    if args.write:
        write_section("## Quality routing", text)


if __name__ == "__main__":
    main()
