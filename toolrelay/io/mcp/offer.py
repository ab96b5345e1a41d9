"""toolrelay's own tools offered to MCP clients (the server side of MCP).

:func:`tools_server` builds the SDK's low-level :class:`mcp.server.Server`
over whatever toolbox ``current()`` answers when a request arrives: the
gateway's HTTP tools in force (the tools file, or the ``POST /api/tools``
override) for ``POST /mcp``, the tools file's for ``toolrelay mcp`` over
stdio. A call runs exactly as in the agent loop (arguments checked against
the schema, ``LLM_TOOL_TIMEOUT_SECS``, ``LLM_TOOL_RESULT_MAX_CHARS``, errors
as text); a failed call is an ``isError`` result whose text says why.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import mcp_types as types
import orjson
from mcp.server import Server
from mcp.server.context import ServerRequestContext

from toolrelay import __version__
from toolrelay.events import ToolCall
from toolrelay.io.tools import Toolbox

SERVER_NAME = "toolrelay"

# What the endpoint wraps each request's handling in (its trace, its notes),
# given the SDK's context of the request, the method and the tool called.
Around = Callable[[ServerRequestContext[Any], str, str | None], AbstractContextManager[Any]]


def _nothing(ctx: ServerRequestContext[Any], method: str, tool: str | None) -> Any:
    return nullcontext()


def tools_server(
    current: Callable[[], Awaitable[Toolbox]], around: Around = _nothing
) -> Server[Any]:
    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        with around(ctx, "tools/list", None):
            toolbox = await current()
        return types.ListToolsResult(tools=[_tool(entry) for entry in toolbox.declarations()])

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        arguments = dict(params.arguments or {})
        call = ToolCall("mcp", params.name, arguments, orjson.dumps(arguments).decode())
        with around(ctx, "tools/call", params.name):
            toolbox = await current()
            output = await toolbox.run(call)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=output.text)], is_error=output.is_error
        )

    return Server(
        SERVER_NAME,
        version=__version__,
        instructions="toolrelay's declarative HTTP tools (GET /api/tools on the gateway).",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def _tool(declaration: dict[str, Any]) -> types.Tool:
    function = declaration["function"]
    return types.Tool(
        name=function["name"],
        description=function.get("description"),
        input_schema=function.get("parameters") or {"type": "object", "properties": {}},
    )
