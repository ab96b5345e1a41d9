"""The ``toolrelay`` command: one module per subcommand, loaded on demand.

Each subcommand module offers ``configure(parser)`` to declare its options and
``run(args) -> int`` to do the work; importing lazily keeps ``toolrelay parse``
free of the server stack.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from toolrelay import __version__

COMMANDS: dict[str, tuple[str, str]] = {
    "parse": ("toolrelay.cli.parse", "parse tool calls out of model output"),
    "demo": ("toolrelay.cli.demo", "the whole loop offline: simulator, gateway and a tool"),
    "serve": (
        "toolrelay.cli.serve",
        "run the OpenAI-compatible gateway in front of a model server",
    ),
    "simulate": ("toolrelay.cli.simulate", "serve a model-server simulator (a test double)"),
    "chat": ("toolrelay.cli.chat", "chat with a model that uses tools, in the terminal"),
    "mcp": ("toolrelay.cli.mcp", "serve toolrelay's HTTP tools to an MCP client over stdio"),
    "doctor": (
        "toolrelay.cli.doctor",
        "probe a model server's tool calling and say what to set",
    ),
    "launch": (
        "toolrelay.cli.launch",
        "run Claude Code, Codex CLI, opencode or llm on any model server, through the gateway",
    ),
}


def build_parser(chosen: str | None = None) -> argparse.ArgumentParser:
    """The argument parser; only the ``chosen`` subcommand's module is imported."""
    parser = argparse.ArgumentParser(
        prog="toolrelay",
        description="Make LLM tool calling work on every model server.",
    )
    parser.add_argument("--version", action="version", version=f"toolrelay {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        command = sub.add_parser(name, help=help_text, description=help_text)
        if name == chosen:
            importlib.import_module(module_name).configure(command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    chosen = next((a for a in arguments if not a.startswith("-")), None)
    passed_on: list[str] = []
    # A command that runs another program (``launch``) hands it everything after
    # ``--`` untouched; argparse would take those for its own.
    if (
        chosen in COMMANDS
        and "--" in arguments
        and getattr(importlib.import_module(COMMANDS[chosen][0]), "PASSES_ON", False)
    ):
        split = arguments.index("--")
        arguments, passed_on = arguments[:split], arguments[split + 1 :]
    args = build_parser(chosen if chosen in COMMANDS else None).parse_args(arguments)
    args.passed_on = passed_on
    if args.command is None:
        build_parser().print_help()
        return 2
    module = importlib.import_module(COMMANDS[args.command][0])
    try:
        return int(module.run(args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
