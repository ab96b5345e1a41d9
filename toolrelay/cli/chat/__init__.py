"""``toolrelay chat``: the terminal agent of seed 000, on the agent loop.

Native or rescue per provider and model (the config file's rules, Ollama's
``/api/show``, the fallback on "does not support tools"), calls parsed locally
when they come as text, the built-in tools (files in the working directory,
shell commands after a yes) beside the HTTP tools of ``--tools`` and the tools
of the MCP servers of ``--mcp-config`` (each call after a yes, unless the
server is ``trusted``).

Interactive when standard input is a terminal and no ``-m`` is given;
otherwise one message (``-m`` or standard input), the answer on standard
output, the trace on standard error. Exit status: 0 when the turn ended, 1
when the backend (or an MCP server) failed, 2 for wrong arguments, 130 on Ctrl-C.
"""

from __future__ import annotations

import argparse

from toolrelay.cli.flags import BACKEND_KINDS

DEFAULT_MAX_ROUNDS = 10


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Chat with a model that uses tools: files in the working directory, shell "
        "commands (after a yes), the HTTP tools of --tools and the tools of MCP servers "
        "(--mcp-config), on any model server."
    )
    parser.add_argument(
        "--backend", help="the model server's base URL, e.g. http://127.0.0.1:8000/v1"
    )
    parser.add_argument("--model", help="default: the first model the server lists")
    parser.add_argument("--backend-kind", choices=BACKEND_KINDS, help="default: auto (detected)")
    parser.add_argument(
        "--tool-mode",
        choices=("auto", "native", "rescue"),
        help="native tools, tools in the prompt (rescue), or decide per model (auto, the default)",
    )
    parser.add_argument("--config", help="a YAML or JSON config file (as for toolrelay serve)")
    parser.add_argument("-m", "--message", help="ask this, print the answer and exit")
    parser.add_argument("--tools", metavar="FILE", help="HTTP tools (the LLM_TOOLS_FILE format)")
    parser.add_argument(
        "--mcp-config",
        metavar="FILE",
        help='MCP servers whose tools the agent may call: {"mcpServers": {...}} as Claude '
        "Desktop, Claude Code and Cursor write it (each call asked about, unless the server "
        "is trusted or --yes)",
    )
    parser.add_argument(
        "--mcp-optional",
        action="store_true",
        default=None,
        help="go on without an MCP server that does not start (a warning, its tools absent)",
    )
    parser.add_argument("--no-builtins", action="store_true", help="no file or command tools")
    parser.add_argument(
        "--yes",
        action="store_true",
        help="write files, run commands and call MCP tools without asking",
    )
    parser.add_argument(
        "--workdir", metavar="DIR", help="the folder the file tools may touch (default: .)"
    )
    parser.add_argument(
        "--no-confine", action="store_true", help="let the file tools reach any path"
    )
    parser.add_argument(
        "--max-rounds",
        type=int,
        default=DEFAULT_MAX_ROUNDS,
        metavar="N",
        help=f"tool rounds per turn, then one answer without tools (default {DEFAULT_MAX_ROUNDS})",
    )
    parser.add_argument(
        "--command-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="run_command stops a command after this long (default 60)",
    )
    parser.add_argument(
        "--log-level",
        default="error",
        choices=("debug", "info", "warning", "error"),
        help="toolrelay's own log on standard error (default: error; the trace shows the rest)",
    )
    parser.add_argument(
        "--max-result-chars",
        type=int,
        default=8000,
        metavar="N",
        help="tool results are cut to this many characters (default 8000)",
    )


def run(args: argparse.Namespace) -> int:
    from toolrelay.cli.chat.app import main

    return main(args)
