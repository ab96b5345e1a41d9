"""``toolrelay chat``: the terminal agent of seed 000, on the agent loop.

Native or rescue per provider and model (the config file's rules, Ollama's
``/api/show``, the fallback on "does not support tools"), calls parsed locally
when they come as text, the built-in tools (files in the working directory,
shell commands after a yes) beside the HTTP tools of ``--tools`` and the tools
of the MCP servers of ``--mcp-config`` (each call after a yes, unless the
server is ``trusted``).

Interactive when standard input is a terminal and no ``-m`` is given;
otherwise one message (``-m`` or standard input), the answer on standard
output, the trace on standard error. While the model works a spinner shows
for how long and about how many tokens it wrote; Ctrl-C cancels the turn and
its request to the backend. Exit status: 0 when the turn ended, 1 when the
backend (or an MCP server) failed, 2 for wrong arguments, 130 on Ctrl-C.
"""

from __future__ import annotations

import argparse

from toolrelay.cli.flags import add_backend, add_log_level, add_tool_mode

DEFAULT_MAX_ROUNDS = 10
# Tokens one answer may take. Without a limit some servers (llama-server) write
# until the context is full: minutes on a CPU. Enough for a page of code.
DEFAULT_MAX_TOKENS = 2048


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Chat with a model that uses tools: files in the working directory, shell "
        "commands (after a yes), the HTTP tools of --tools and the tools of MCP servers "
        "(--mcp-config), on any model server."
    )
    add_backend(parser)
    parser.add_argument("--model", help="default: the first model the server lists")
    add_tool_mode(
        parser,
        "native tools, tools in the prompt (rescue), or decide per model (auto, the default)",
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
        "--max-tokens",
        type=int,
        default=DEFAULT_MAX_TOKENS,
        metavar="N",
        help=f"tokens one answer of the model may take (default {DEFAULT_MAX_TOKENS}; "
        "0: the server's own limit)",
    )
    parser.add_argument(
        "--command-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="run_command stops a command after this long (default 60)",
    )
    add_log_level(
        parser,
        "error",
        "toolrelay's own log on standard error (default: error; the trace shows the rest)",
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
