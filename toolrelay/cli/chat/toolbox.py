"""The chat agent's toolbox: its built-in tools beside the HTTP tools of ``--tools``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import orjson

from toolrelay.cli.chat.approval import Approver
from toolrelay.cli.chat.command import RunCommand
from toolrelay.cli.chat.files import file_tools
from toolrelay.cli.chat.workspace import Workspace
from toolrelay.io.tools import (
    HttpTool,
    HttpToolClient,
    Tool,
    Toolbox,
    ToolDefinition,
    parse_definitions,
)


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


def build_toolbox(options: ToolOptions) -> tuple[Toolbox, HttpToolClient | None]:
    """The toolbox and the HTTP client its HTTP tools share (None without any)."""
    tools: list[Tool] = []
    if options.builtins:
        tools += file_tools(options.workspace, options.approver)
        tools.append(
            RunCommand(options.workspace, options.approver, timeout=options.command_timeout)
        )
    client = None
    if options.tools_file:
        client = HttpToolClient(timeout=options.http_timeout)
        tools += [HttpTool(d, client) for d in _definitions(options.tools_file)]
    try:
        return Toolbox(tools, max_chars=options.max_chars), client
    except ValueError as exc:
        raise ToolsFileError(f"tools file {options.tools_file}: {exc}") from None


def _definitions(path: str) -> list[ToolDefinition]:
    try:
        data = orjson.loads(Path(path).read_bytes())
    except OSError as exc:
        raise ToolsFileError(f"tools file {path}: {exc.strerror or exc}") from None
    except orjson.JSONDecodeError as exc:
        raise ToolsFileError(f"tools file {path} is not JSON: {exc}") from None
    try:
        return list(parse_definitions(data))
    except ValueError as exc:
        raise ToolsFileError(f"tools file {path}: {exc}") from None
