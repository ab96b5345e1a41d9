"""An MCP server written with the official SDK, for the tests: over stdio
(``python weather_server.py stdio``) or streamable HTTP (``... http PORT``).

Tools: ``forecast`` (the happy path), ``slow`` (sleeps), ``huge`` (a result of
``chars`` characters), ``crash`` (the process dies mid-call), ``fails`` (an
``isError`` result), ``picture`` (image, embedded resource and link content),
``measure`` (structured content only) and ``grow`` (adds the tool ``extra`` and
sends ``notifications/tools/list_changed``). With ``WEATHER_BAD_SCHEMA=1`` it
also lists ``broken``, whose input schema is not valid JSON Schema.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

import mcp_types as types
import uvicorn
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server

# A 1x1 PNG.
PIXEL = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9Q"
    "DwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


def _tool(name: str, description: str, properties: dict[str, Any] | None = None) -> types.Tool:
    schema: dict[str, Any] = {"type": "object", "properties": properties or {}}
    if properties:
        schema["required"] = list(properties)
    return types.Tool(name=name, description=description, input_schema=schema)


TOOLS = [
    _tool("forecast", "Weather forecast for a city", {"city": {"type": "string"}}),
    _tool("slow", "Answers after some seconds", {"seconds": {"type": "number"}}),
    _tool("huge", "A very long answer", {"chars": {"type": "integer"}}),
    _tool("crash", "Makes the server die in the middle of the call"),
    _tool("fails", "Always reports an error"),
    _tool("picture", "A picture of the sky, with its source"),
    _tool("measure", "Structured measurements"),
    _tool("grow", "Adds the tool 'extra'"),
]
EXTRA = _tool("extra", "A tool that appeared later")
# An object schema (the SDK checks that much) that is not valid JSON Schema.
BROKEN = types.Tool(
    name="broken",
    description="Bad schema",
    input_schema={"type": "object", "properties": {"when": {"type": "tomorrow"}}},
)


def build() -> Server[Any]:
    listed = list(TOOLS)
    if os.environ.get("WEATHER_BAD_SCHEMA"):
        listed.append(BROKEN)

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        arguments = params.arguments or {}
        name = params.name
        if name == "forecast":
            return _text(f"Sunny in {arguments['city']}, 21 °C")
        if name == "slow":
            await asyncio.sleep(float(arguments["seconds"]))
            return _text("finally")
        if name == "huge":
            return _text("x" * int(arguments["chars"]))
        if name == "crash":
            sys.stderr.write("weather server: crashing on purpose\n")
            sys.stderr.flush()
            os._exit(3)
        if name == "fails":
            return types.CallToolResult(
                content=[types.TextContent(type="text", text="the sensor is offline")],
                is_error=True,
            )
        if name == "picture":
            return types.CallToolResult(
                content=[
                    types.TextContent(type="text", text="Clear sky."),
                    types.ImageContent(type="image", data=PIXEL, mime_type="image/png"),
                    types.EmbeddedResource(
                        type="resource",
                        resource=types.TextResourceContents(
                            uri="file:///station.txt", mime_type="text/plain", text="Station 7"
                        ),
                    ),
                    types.ResourceLink(
                        type="resource_link", name="archive", uri="https://example.org/archive"
                    ),
                ]
            )
        if name == "measure":
            return types.CallToolResult(content=[], structured_content={"temp": 21, "unit": "C"})
        if name == "grow":
            if EXTRA not in listed:
                listed.append(EXTRA)
            await ctx.session.send_tool_list_changed()
            return _text("grown")
        if name == "extra":
            return _text("extra ran")
        raise ValueError(f"unknown tool {name}")

    return Server("weather", on_list_tools=list_tools, on_call_tool=call_tool)


def _text(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


async def serve_stdio() -> None:
    server = build()
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def http_app() -> Any:
    return build().streamable_http_app()


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        asyncio.run(serve_stdio())
    else:
        uvicorn.run(http_app(), host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
