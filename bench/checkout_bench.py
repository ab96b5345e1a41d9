"""Checkouts of toolrelay side by side with the floor, on the cells you pick.

``release_bench.py`` compares this commit with an installed release; this one
compares working trees (``main`` and a branch, say) as they stand: each
``NAME=DIR`` runs ``toolrelay serve`` from ``DIR`` (its working directory and
``PYTHONPATH``, so ``DIR``'s package is the one imported), all in front of one
``toolrelay simulate``, beside the floor (``floor_proxy.py``), the targets
taking turns within each round. CPU per request is release_bench's: the
process's threads' run time, the median over the rounds. Besides the release
bench's cells there is ``short``: a stream of one short content chunk, whose
cost is a stream's fixed cost.

    .venv/bin/python bench/checkout_bench.py main=. mine=../wt/mine \\
        --cells plain,tools,short,stream,stream-tools --concurrency 16 --rounds 9

``--front messages`` (or ``responses``) asks the checkouts Anthropic Messages
(or OpenAI Responses) and the floor the same question as Chat Completions.
``--delay-ms N`` paces the simulator's streamed deltas N ms apart, as a model
generating tokens does: each chunk then reaches the gateway in a read of its own.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import release_bench
from gateway_bench import PLAIN, ROOT, STREAM, free_port, log_dir, process

SHORT = {"model": "bench", "messages": [{"role": "user", "content": "short"}], "stream": True}
SCENARIO = {
    **release_bench.SCENARIO,
    # Before the catch-all: a short stream's one chunk.
    "rules": [
        {"match": {"last_user": "short"}, "answer": {"content": "Hi"}},
        *release_bench.SCENARIO["rules"],
    ],
}
BODIES: dict[str, dict[str, Any]] = {
    "plain": PLAIN,
    "tools": release_bench.WITH_TOOLS,
    "short": SHORT,
    "stream": STREAM,
    "stream-tools": release_bench.STREAM_TOOLS,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("targets", nargs="+", metavar="NAME=DIR", help="checkouts to run")
    parser.add_argument("--cells", default=",".join(BODIES), help="of: " + ", ".join(BODIES))
    parser.add_argument(
        "--front",
        choices=["chat", *release_bench.FRONTS],
        default="chat",
        help="messages, responses: the checkouts are asked Anthropic Messages or OpenAI "
        "Responses, the floor Chat Completions",
    )
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument(
        "--delay-ms", type=int, default=0, help="milliseconds between the simulator's deltas"
    )
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    checkouts = {
        name: Path(path).resolve() for name, _, path in (t.partition("=") for t in args.targets)
    }
    requests = 320 if args.concurrency > 1 else 120
    cells = [
        (f"{name} c={args.concurrency}", args.front, BODIES[name], args.concurrency, requests)
        for name in args.cells.split(",")
    ]
    with tempfile.NamedTemporaryFile("w", suffix=".json") as scenario:
        json.dump(SCENARIO, scenario)
        scenario.flush()
        sim_port = free_port()
        direct = f"http://127.0.0.1:{sim_port}/v1"
        simulate = [sys.executable, "-m", "toolrelay", "simulate", "--port", str(sim_port)]
        simulate += ["--scenario", scenario.name, "--chunk", "4", "--delay-ms", str(args.delay_ms)]
        serve = [sys.executable, "-m", "toolrelay", "serve", "--backend", direct]
        serve += ["--backend-kind", "openai", "--log-level", "warning", "--port"]
        floor = [sys.executable, str(ROOT / "bench" / "floor_proxy.py"), "--backend", direct]
        with ExitStack() as stack:
            stack.enter_context(
                process(simulate, direct + "/models", log=log_dir() / "simulate.log")
            )
            targets = {}
            for name, checkout in {**checkouts, "floor": None}.items():
                port = free_port()
                command = [*floor, "--port", str(port)] if checkout is None else [*serve, str(port)]
                env = None if checkout is None else {"PYTHONPATH": str(checkout)}
                base = f"http://127.0.0.1:{port}/v1"
                log = log_dir() / f"{name}.log"
                proc = stack.enter_context(
                    process(command, base + "/models", cwd=checkout, env=env, log=log)
                )
                targets[name] = release_bench.Target(base, proc.pid, log)
            speaking = {front: set(checkouts) for front in release_bench.FRONTS}
            results = asyncio.run(release_bench.run_cells(targets, args.rounds, cells, speaking))
    for label, *_ in cells:
        row = results[label]
        floor_cpu = row["floor"]["cpu"]
        each = (
            f"{name} {row[name]['cpu']:6.0f} µs ({row[name]['cpu'] / floor_cpu:.2f}×)"
            for name in checkouts
        )
        print(f"{label:18s} floor {floor_cpu:6.0f} µs  " + "  ".join(each))


if __name__ == "__main__":
    main()
