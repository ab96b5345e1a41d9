"""``toolrelay mcp``: toolrelay's HTTP tools as an MCP server over stdio.

For MCP clients that start their servers themselves (Claude Desktop, Claude
Code, Cursor, Codex): ``{"command": "toolrelay", "args": ["mcp", "--tools-file",
"tools.json"]}``. The tools are the tools file's (``LLM_TOOLS_FILE``, read
once at start), run as the agent loop runs them. Standard output carries the
protocol; the log goes to standard error. Exit status: 0 when the client
closes the connection, 2 for wrong settings or a bad tools file.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import TYPE_CHECKING

from toolrelay.cli.flags import add_log_level

if TYPE_CHECKING:
    from toolrelay.io.settings import Settings


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Serve toolrelay's declarative HTTP tools to an MCP client over stdio "
        "(the client starts this command; docs/mcp.md)."
    )
    parser.add_argument(
        "--tools-file",
        metavar="FILE",
        help="JSON array of tool definitions (LLM_TOOLS_FILE; the seed 002 format)",
    )
    parser.add_argument("--config", help="a YAML or JSON config file (as for toolrelay serve)")
    parser.add_argument(
        "--tool-timeout-secs",
        type=float,
        metavar="S",
        help="timeout of one tool HTTP request (LLM_TOOL_TIMEOUT_SECS; default: 15)",
    )
    parser.add_argument(
        "--tool-result-max-chars",
        type=int,
        metavar="N",
        help="results are cut to this many characters (LLM_TOOL_RESULT_MAX_CHARS; default: 2000)",
    )
    add_log_level(parser, "warning", "toolrelay's log, on standard error (default: warning)")


def run(args: argparse.Namespace) -> int:
    import anyio
    from pydantic import ValidationError

    from toolrelay.cli.flags import given
    from toolrelay.io.settings import Settings, describe_error
    from toolrelay.io.tools.registry import ToolsError

    logging.basicConfig(
        level=args.log_level.upper(),
        stream=sys.stderr,
        format="%(levelname)s %(name)s: %(message)s",
    )
    names = ("tools_file", "config", "tool_timeout_secs", "tool_result_max_chars")
    try:
        settings = Settings(**given(args, *names))
    except ValidationError as exc:
        print(f"toolrelay mcp: invalid settings:\n{describe_error(exc)}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as exc:
        print(f"toolrelay mcp: invalid settings: {exc}", file=sys.stderr)
        return 2
    try:
        anyio.run(_serve, settings)
    except ToolsError as exc:
        print(f"toolrelay mcp: invalid tools: {exc}", file=sys.stderr)
        return 2
    return 0


async def _serve(settings: Settings) -> None:
    from mcp.server.stdio import stdio_server

    from toolrelay.io.mcp.offer import tools_server
    from toolrelay.io.tools import HttpTool, HttpToolClient, Toolbox
    from toolrelay.io.tools.registry import load_tools_file

    definitions = load_tools_file(settings.tools_file) if settings.tools_active else ()
    if not definitions:
        logging.getLogger("toolrelay.mcp").warning(
            "no tools file (--tools-file or LLM_TOOLS_FILE): serving no tools"
        )
    client = HttpToolClient(timeout=settings.tool_timeout_secs)
    toolbox = Toolbox(
        [HttpTool(definition, client) for definition in definitions],
        max_chars=settings.tool_result_max_chars,
    )

    async def current() -> Toolbox:
        return toolbox

    server = tools_server(current)
    try:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
    finally:
        await client.aclose()
