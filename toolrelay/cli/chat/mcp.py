"""MCP servers' tools in the chat agent: the user says yes before each call,
unless the server is marked ``trusted`` in the configuration or ``--yes`` is given."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from toolrelay.cli.chat.approval import Approver, Declined
from toolrelay.io.tools import ToolOutput
from toolrelay.types import ToolSource

if TYPE_CHECKING:
    from toolrelay.io.mcp.tools import McpTool

_SHOWN_ARGUMENTS = 200


class AskedTool:
    """An MCP tool whose calls wait for the user's yes."""

    def __init__(self, tool: McpTool, approver: Approver) -> None:
        self.tool = tool
        self.approver = approver

    @property
    def name(self) -> str:
        return self.tool.name

    @property
    def source(self) -> ToolSource:
        return self.tool.source

    def declaration(self) -> dict[str, Any]:
        return self.tool.declaration()

    async def run(self, arguments: dict[str, Any], max_chars: int) -> ToolOutput:
        shown = orjson.dumps(arguments).decode()
        if len(shown) > _SHOWN_ARGUMENTS:
            shown = shown[:_SHOWN_ARGUMENTS] + "…"
        action = f"call {self.tool.tool.name} of MCP server '{self.tool.server}' with {shown}"
        try:
            allowed = await self.approver.approve(action)
        except Declined as exc:
            return ToolOutput(f"Error: {exc}", is_error=True)
        if not allowed:
            return ToolOutput(f"Error: the user did not allow the call to {self.name}", True)
        return await self.tool.run(arguments, max_chars)


def guarded(tools: list[McpTool], approver: Approver, ask: bool) -> list[Any]:
    """The tools as the agent gets them: asked about, unless ``ask`` is off or trusted."""
    return [tool if tool.trusted or not ask else AskedTool(tool, approver) for tool in tools]
