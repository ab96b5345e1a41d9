"""``toolrelay simulate``: serve the model-server simulator (a test double for a model)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from toolrelay.simulator import ScenarioError, SimulatorConfig, serve_forever

# Each switch reproduces a real failure; the scenario file's `settings` may set
# them too, and a flag given here wins.
_SWITCHES = {
    "strip_tools": "drop tools and tool_choice before the model sees them (a stripping proxy)",
    "stop_at_tool_call_tag": "stop generation at <tool_call>, like vLLM's stop-token interception",
    "swallow_streamed_calls": "streamed rounds that would hold a call end empty, without error",
    "swallow_streamed_calls_once": "only the first streamed round that would hold a call ends "
    "empty",
    "no_tools_support": "requests with tools get '400 <model> does not support tools'",
    "ignore_tool_choice": "ignore tool_choice (the model decides alone)",
    "honour_parallel_tool_calls": "keep only the first call when parallel_tool_calls is false",
    "reasoning_open": "the chat template opens <think>: answers start inside the reasoning",
    "echo_example": "a weak model: with tools in the prompt, answer with its first example call",
    "echo_directive": "a weak model: start every answer by repeating the late [SYSTEM DIRECTIVE]",
    "copy_prompt": "a weak model: with tools in the prompt (or asked to correct its calls), "
    "answer with a copy of that prompt",
    "reword_prompt": "a weak model: with tools in the prompt, answer with the late directive "
    "reworded, then its example call",
    "echo_history": "a weak model: after a tool result, first repeat the [TOOL_RESULT] "
    "blocks it was given",
    "refuse_tools_in_stream": "a streamed refusal (--refuse-tools) comes in a 200 stream",
    "close_after_stream": "close the connection after every whole stream, unannounced "
    "(llama-server)",
}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Serve a simulated model server (OpenAI /v1, Ollama /api, llama.cpp /props, "
        "LM Studio /api/v1/models). It is a test double: no model runs behind it."
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=port_number, default=0, help="port (default 0: a free port)")
    parser.add_argument(
        "--scenario", metavar="FILE", help="scenario file, YAML or JSON (default: built-in demo)"
    )
    # The flags default to None so that a scenario's settings apply unless a flag
    # is given; the help shows the simulator's own defaults.
    for name, help_text in _SWITCHES.items():
        flag = "--" + name.replace("_", "-")
        parser.add_argument(
            flag, action="store_true", default=None, help=help_text + " (default: off)"
        )
    parser.add_argument(
        "--capabilities",
        metavar="LIST",
        help="capabilities /api/show reports, comma-separated, e.g. completion,tools "
        "(default: completion,tools, or completion alone with --no-tools-support)",
    )
    parser.add_argument(
        "--chunk",
        type=int,
        metavar="N",
        help=f"characters per streamed delta ({_default('chunk')})",
    )
    parser.add_argument(
        "--delay-ms",
        type=int,
        metavar="N",
        help=f"milliseconds between streamed deltas ({_default('delay_ms')})",
    )
    parser.add_argument(
        "--fail-after-chunks",
        type=int,
        metavar="N",
        help="drop the connection after N streamed chunks (default: never)",
    )
    parser.add_argument(
        "--cut-streamed-arguments",
        type=int,
        metavar="N",
        help="streamed tool-call arguments lose their last N characters (default: never)",
    )
    parser.add_argument(
        "--status",
        type=int,
        metavar="CODE",
        help="fail every completion request with this HTTP status (default: never)",
    )
    parser.add_argument(
        "--request-log",
        type=int,
        metavar="N",
        help="requests kept for inspection, the oldest dropped first (default 1000)",
    )
    parser.add_argument(
        "--refuse-tools",
        metavar="MESSAGE",
        help="refuse requests with tools with MESSAGE (the probes still claim tool support)",
    )
    parser.add_argument(
        "--constraints",
        choices=("honour", "ignore", "refuse"),
        help="what constrained-decoding fields (response_format, json_schema, grammar, "
        "structured_outputs, Ollama's format) do: honour (applied to the answer), ignore, "
        "or refuse (a 400) (default honour)",
    )
    parser.add_argument(
        "--refuse-tools-status",
        type=int,
        metavar="CODE",
        help="the status of those refusals (default 400; llama.cpp --no-jinja sends 500)",
    )


def run(args: argparse.Namespace) -> int:
    switches: dict[str, Any] = {
        name: getattr(args, name)
        for name in [
            *_SWITCHES,
            "chunk",
            "delay_ms",
            "fail_after_chunks",
            "cut_streamed_arguments",
            "status",
            "refuse_tools",
            "refuse_tools_status",
            "request_log",
            "constraints",
        ]
        if getattr(args, name) is not None
    }
    if args.capabilities is not None:
        switches["capabilities"] = tuple(
            c.strip() for c in args.capabilities.split(",") if c.strip()
        )
    try:
        config = SimulatorConfig.load(args.scenario, **switches)
    except (ScenarioError, ValueError) as exc:
        print(f"toolrelay simulate: {exc}", file=sys.stderr)
        return 2
    try:
        serve_forever(config, args.host, args.port, _announce)
    except OSError as exc:
        print(
            f"toolrelay simulate: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr
        )
        return 1
    return 0


def _default(name: str) -> str:
    return f"default: {SimulatorConfig.__dataclass_fields__[name].default}"


def port_number(text: str) -> int:
    port = int(text)
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text} is not a TCP port (0-65535)")
    return port


def _announce(url: str) -> None:
    print(f"toolrelay simulate listening on {url}", flush=True)
