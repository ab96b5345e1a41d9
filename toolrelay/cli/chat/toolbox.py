"""The chat agent's toolbox: its built-in tools beside the HTTP tools of ``--tools``
and the MCP servers' tools (named apart from both)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from toolrelay.cli.chat.approval import Approver
from toolrelay.cli.chat.command import RunCommand
from toolrelay.cli.chat.files import file_tools
from toolrelay.cli.chat.mcp import guarded
from toolrelay.cli.chat.workspace import Workspace
from toolrelay.io.tools import HttpTool, HttpToolClient, Tool, Toolbox
from toolrelay.io.tools.registry import ToolsError, load_tools_file

if TYPE_CHECKING:
    from toolrelay.io.mcp.servers import McpServers


class ToolsFileError(ValueError):
    """A ``--tools`` file that cannot be used, with the file named."""


@dataclass(frozen=True)
class ToolOptions:
    workspace: Workspace
    approver: Approver
    builtins: bool = True
    tools_file: str | None = None
    max_chars: int = 8000
    command_timeout: float = 60.0
    http_timeout: float = 15.0
    # Started MCP servers, and whether their calls wait for a yes (not with --yes).
    mcp: McpServers | None = None
    ask_mcp: bool = True


def build_toolbox(options: ToolOptions) -> tuple[Toolbox, HttpToolClient | None]:
    """The toolbox and the HTTP client its HTTP tools share (None without any)."""
    tools: list[Tool] = []
    if options.builtins:
        tools += file_tools(options.workspace, options.approver, options.http_timeout)
        tools.append(
            RunCommand(options.workspace, options.approver, timeout=options.command_timeout)
        )
    client = None
    if options.tools_file:
        client = HttpToolClient(timeout=options.http_timeout)
        try:
            definitions = load_tools_file(options.tools_file)
        except ToolsError as exc:
            raise ToolsFileError(str(exc)) from None
        tools += [HttpTool(d, client) for d in definitions]
    if options.mcp is not None:
        mcp_tools = options.mcp.tools(frozenset(tool.name for tool in tools))
        tools += guarded(mcp_tools, options.approver, options.ask_mcp)
    try:
        return Toolbox(tools, max_chars=options.max_chars), client
    except ValueError as exc:
        raise ToolsFileError(f"tools file {options.tools_file}: {exc}") from None
