"""toolrelay as an MCP server: the official SDK's client lists and calls the
HTTP tools over ``POST /mcp`` (streamable HTTP, both protocol eras) and over
``toolrelay mcp`` (stdio)."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from tests.engine.support import weather_tool
from tests.gateway.support import GatewayServer, gateway
from tests.tools.service import Service

KEY = "sk-test-gateway"


@pytest.fixture(scope="module")
def service() -> Iterator[Service]:
    with Service() as running:
        yield running


@pytest.fixture(scope="module")
def tools_file(service: Service, tmp_path_factory: pytest.TempPathFactory) -> str:
    path = Path(tmp_path_factory.mktemp("tools")) / "tools.json"
    path.write_text(json.dumps([weather_tool(service.url)]), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def gw(tools_file: str) -> Iterator[GatewayServer]:
    with gateway("http://127.0.0.1:9/v1", tools_file=tools_file, api_keys=[KEY]) as running:
        yield running


def session(target: Any, mode: str = "auto") -> dict[str, Any]:
    """List the tools and make three calls: a good one, bad arguments, an unknown tool."""

    async def main() -> dict[str, Any]:
        async with Client(target, mode=mode) as client:
            listed = await client.list_tools()
            good = await client.call_tool("get_weather", {"city": "Oslo"})
            bad = await client.call_tool("get_weather", {"town": "Oslo"})
            unknown = await client.call_tool("launch_rockets", {})
            return {
                "version": client.protocol_version,
                "tools": [tool.model_dump(exclude_none=True) for tool in listed.tools],
                "results": [(_text(r), r.is_error) for r in (good, bad, unknown)],
            }

    return asyncio.run(asyncio.wait_for(main(), 30))


def _text(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


EXPECTED_RESULTS = [
    ("ok GET /weather/Oslo", False),
    ("Error: invalid arguments for tool 'get_weather': 'city' is required", True),
    ("Error: unknown tool 'launch_rockets'", True),
]


def with_key(url: str, key: str = KEY) -> Any:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
    return streamable_http_client(url, http_client=http)


@pytest.mark.parametrize(("mode", "version"), [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
def test_the_sdk_client_lists_and_calls_the_http_tools_over_post_mcp(
    gw: GatewayServer, service: Service, mode: str, version: str
) -> None:
    answer = session(with_key(gw.url + "/mcp"), mode)
    assert answer["version"] == version
    (tool,) = answer["tools"]
    assert tool["name"] == "get_weather"
    assert tool["input_schema"]["required"] == ["city"]
    assert answer["results"] == EXPECTED_RESULTS
    assert service.recorder.last.target == "/weather/Oslo"


def test_post_mcp_wants_the_gateways_key(gw: GatewayServer) -> None:
    refused = httpx.post(gw.url + "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "invalid_api_key"
    with pytest.raises(Exception) as failed:
        session(with_key(gw.url + "/mcp", "sk-wrong"))
    leaf = failed.value
    while getattr(leaf, "exceptions", None):  # anyio's task groups wrap it
        leaf = leaf.exceptions[0]  # type: ignore[attr-defined]
    assert isinstance(leaf, MCPError)


def test_post_mcp_serves_the_api_tools_override_at_once(
    gw: GatewayServer, service: Service
) -> None:
    override = {**weather_tool(service.url), "name": "get_forecast"}
    posted = httpx.post(
        gw.url + "/api/tools", json=[override], headers={"Authorization": f"Bearer {KEY}"}
    )
    assert posted.status_code == 200
    try:

        async def names() -> list[str]:
            async with Client(with_key(gw.url + "/mcp")) as client:
                return [tool.name for tool in (await client.list_tools()).tools]

        assert asyncio.run(names()) == ["get_forecast"]
    finally:
        original = {**weather_tool(service.url)}
        httpx.post(
            gw.url + "/api/tools", json=[original], headers={"Authorization": f"Bearer {KEY}"}
        )


def test_a_foreign_host_header_is_refused_on_loopback(gw: GatewayServer) -> None:
    # DNS rebinding: a page whose name now resolves to 127.0.0.1 sends its own Host.
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "page", "version": "1"},
        },
    }
    answer = httpx.post(
        gw.url + "/mcp",
        json=body,
        headers={
            "Authorization": f"Bearer {KEY}",
            "Host": "evil.example",
            "Accept": "application/json, text/event-stream",
        },
    )
    assert answer.status_code == 421


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_the_sdk_client_lists_and_calls_the_http_tools_over_toolrelay_mcp(
    tools_file: str, service: Service, mode: str
) -> None:
    command = StdioServerParameters(
        command=sys.executable, args=["-m", "toolrelay", "mcp", "--tools-file", tools_file]
    )
    answer = session(command, mode)
    assert [tool["name"] for tool in answer["tools"]] == ["get_weather"]
    assert answer["results"] == EXPECTED_RESULTS


def test_toolrelay_mcp_with_a_bad_tools_file_says_so(tmp_path: Path) -> None:
    import subprocess

    bad = tmp_path / "tools.json"
    bad.write_text('[{"name": "x"}]', encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "toolrelay", "mcp", "--tools-file", str(bad)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"toolrelay mcp: invalid tools: tools file {bad}: tool #0 ('x'), field 'url': is required"
    )
    assert done.stdout == ""


def test_post_mcp_and_mcp_tools_are_in_the_openapi_document(gw: GatewayServer) -> None:
    spec = httpx.get(gw.url + "/openapi.json").json()
    assert spec["paths"]["/mcp"]["post"]["tags"] == ["tools"]
    items = spec["components"]["schemas"]["ToolsAnswer"]["properties"]["tools"]["items"]
    assert {"$ref": "#/components/schemas/McpTool"} in items["oneOf"]


def test_an_mcp_server_needing_a_header_gets_it_from_the_config(gw: GatewayServer) -> None:
    # toolrelay's own /mcp, behind its API key, as an MCP server of another toolrelay.
    from toolrelay.events import ToolCall
    from toolrelay.io.mcp.config import parse_config
    from toolrelay.io.mcp.servers import McpServers, McpStartupError
    from toolrelay.io.tools import Toolbox

    def entry(key: str) -> dict[str, Any]:
        return {"gw": {"url": gw.url + "/mcp", "headers": {"Authorization": f"Bearer {key}"}}}

    async def main(key: str) -> str:
        mcp = McpServers(parse_config(entry(key)), startup_timeout=10)
        await mcp.start()
        try:
            toolbox = Toolbox(mcp.tools(()))
            output = await toolbox.run(ToolCall("c", "get_weather", {"city": "Oslo"}))
            return output.text
        finally:
            await mcp.aclose()

    assert asyncio.run(main(KEY)) == "ok GET /weather/Oslo"
    with pytest.raises(McpStartupError, match=r"MCP server 'gw' \(http://127.0.0.1:\d+/mcp\)"):
        asyncio.run(main("sk-wrong"))
