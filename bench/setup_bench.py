"""A request's setup, in process: decoding and reading a Chat Completions body
into its round (issue 29).

What every request pays before the backend call, without the server stack or
the network: ``decode`` (the nesting check included), the chat front's
``read`` (the checks, the model's options, the tool list read into specs and
``tool_choice`` resolved) and the round's tool set. Bodies: no tools, one tool,
20 tools as an agent sends them (the same list every turn), and 100 kB of text.
The best of the rounds, in µs per request; to compare two checkouts run it in
each (``PYTHONPATH=CHECKOUT``), in turn, on the same machine:

    PYTHONPATH=. .venv/bin/python bench/setup_bench.py [--rounds 9] [--number 2000]
"""

from __future__ import annotations

import argparse
import timeit
from collections.abc import Callable
from typing import Any

import orjson

import toolrelay
from toolrelay.io.settings import Settings
from toolrelay.server.asgi import decode
from toolrelay.server.chat import ChatFront

PLAIN: dict[str, Any] = {"model": "bench", "messages": [{"role": "user", "content": "hi"}]}
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def _agent_tool(index: int) -> dict[str, Any]:
    """A tool as coding agents declare theirs: a paragraph, four typed parameters."""
    return {
        "type": "function",
        "function": {
            "name": f"tool_{index}",
            "description": "Does a thing with a file. " * 8,
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "The absolute path to the file"},
                    "offset": {"type": "integer", "description": "The line to start from"},
                    "limit": {"type": "integer", "description": "The number of lines to read"},
                    "mode": {"type": "string", "enum": ["a", "b", "c"]},
                },
                "required": ["path"],
                "additionalProperties": False,
            },
        },
    }


BODIES: dict[str, dict[str, Any]] = {
    "no tools": PLAIN,
    "one tool": {**PLAIN, "tools": [WEATHER]},
    "20 tools": {**PLAIN, "tools": [WEATHER, *(_agent_tool(i) for i in range(19))]},
    "100 kB of text": {
        "model": "bench",
        "messages": [{"role": "user", "content": "word " * 20_000}],
    },
}
HEADERS = [(b"content-type", b"application/json"), (b"authorization", b"Bearer x")]


def _best(step: Callable[[], object], rounds: int, number: int) -> float:
    """µs per call, the best round's."""
    return min(timeit.repeat(step, number=number, repeat=rounds)) / number * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--number", type=int, default=2000)
    args = parser.parse_args()
    front = ChatFront(Settings(backend="http://127.0.0.1:9/v1", backend_kind="openai"))
    print(f"toolrelay from {toolrelay.__file__}")
    print("| body | bytes | decode | decode + read + tool set |")
    print("|---|---:|---:|---:|")
    for name, body in BODIES.items():
        raw = orjson.dumps(body)

        def setup(raw: bytes = raw) -> object:
            return front.read(decode(raw), HEADERS).round.toolset

        setup()  # what is read once (settings per model, a kept tool list) is read here
        decoding = _best(lambda raw=raw: decode(raw), args.rounds, args.number)
        reading = _best(setup, args.rounds, args.number)
        print(f"| {name} | {len(raw)} | {decoding:.2f} µs | {reading:.2f} µs |")


if __name__ == "__main__":
    main()
