"""Constrained decoding on a real weak model: the rescue path through toolrelay,
with and without constraints, against a real llama-server.

A short smoke, not the issue's full benchmark: a few hand-written questions
(not the Berkeley Function Calling Leaderboard's), SmolLM2-135M-Instruct (a
model whose chat template renders no tools, so toolrelay takes the rescue
path), ``tool_choice`` ``required`` and ``auto``, ``constrain`` ``off`` and
``auto``. Per route: calls returned, how many are schema-valid, requests the
backend got, tokens generated and wall time.

Needs a llama-server binary and the GGUF file, as bench/realmodels_bench.py
builds and downloads them (default: under ``~/.cache/toolrelay-bench``)::

    python bench/constrained_bench.py [--llama-server PATH] [--gguf PATH]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import httpx
from realmodels_bench import free_port, process

from toolrelay.io.settings import Settings
from toolrelay.server import create_app
from toolrelay.server.background import BackgroundServer
from toolrelay.types import ToolSpec
from toolrelay.validate import validate_arguments

CACHE = Path.home() / ".cache" / "toolrelay-bench"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather forecast for a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "Current time in a time zone",
            "parameters": {
                "type": "object",
                "properties": {"tz": {"type": "string"}},
                "required": ["tz"],
            },
        },
    },
]
QUESTIONS = (
    "What is the weather in Paris?",
    "What time is it in Tokyo?",
    "Will it rain in Rome in the next 3 days?",
)
SPECS = {spec.name: spec for spec in map(ToolSpec.read, TOOLS) if spec is not None}


def _rounds(gateway: str) -> int:
    counters = httpx.get(gateway + "/health", timeout=10).json()["counters"]
    return sum(counters.get("rounds", {}).values())


def run_route(gateway: str, constrain: str, choice: str) -> dict[str, Any]:
    calls = valid = tokens = 0
    before, started = _rounds(gateway), time.perf_counter()
    for question in QUESTIONS:
        answer = httpx.post(
            gateway + "/v1/chat/completions",
            json={
                "model": "smollm2",
                "messages": [{"role": "user", "content": question}],
                "tools": TOOLS,
                "tool_choice": choice,
                "max_tokens": 96,
                "temperature": 0,
                "toolrelay_constrain": constrain,
            },
            timeout=600,
        ).json()
        tokens += (answer.get("usage") or {}).get("completion_tokens") or 0
        for call in answer["choices"][0]["message"].get("tool_calls") or ():
            calls += 1
            spec = SPECS.get(call["function"]["name"])
            arguments = json.loads(call["function"]["arguments"])
            valid += spec is not None and validate_arguments(spec, arguments).ok
    return {
        "constrain": constrain,
        "tool_choice": choice,
        "questions": len(QUESTIONS),
        "calls": calls,
        "valid": valid,
        "backend_requests": _rounds(gateway) - before,
        "completion_tokens": tokens,
        "seconds": round(time.perf_counter() - started, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--llama-server", type=Path, default=CACHE / "llama.cpp-build/bin/llama-server"
    )
    parser.add_argument("--gguf", type=Path, default=CACHE / "SmolLM2-135M-Instruct.Q4_1.gguf")
    args = parser.parse_args()
    port = free_port()
    command = [
        str(args.llama_server), "-m", str(args.gguf), "--host", "127.0.0.1",
        "--port", str(port), "-c", "2048", "-t", "1", "-np", "1",
    ]  # fmt: skip
    log = CACHE / "logs" / "llama-server-constrained.log"
    with process(command, f"http://127.0.0.1:{port}/health", log):
        settings = Settings(
            backend=f"http://127.0.0.1:{port}/v1", backend_kind="llamacpp", tool_mode="rescue"
        )
        with BackgroundServer(create_app(settings)) as gateway:
            print("| constrain | tool_choice | questions | calls | schema-valid | backend "
                  "requests | completion tokens | seconds |")  # fmt: skip
            print("|---|---|---|---|---|---|---|---|")
            for choice in ("required", "auto"):
                for constrain in ("off", "auto"):
                    row = run_route(gateway.url, constrain, choice)
                    print(
                        "| " + " | ".join(str(value) for value in row.values()) + " |", flush=True
                    )


if __name__ == "__main__":
    main()
