"""MCP servers as a tool source: the SDK-written weather server as a stdio child
and over streamable HTTP, each failure with its documented outcome."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.engine.support import weather_tool
from tests.mcp.support import http_server, stdio_entry
from toolrelay.events import ToolCall
from toolrelay.io.mcp.config import parse_config
from toolrelay.io.mcp.servers import McpServers, McpStartupError
from toolrelay.io.mcp.tools import Naming
from toolrelay.io.tools import FunctionTool, HttpTool, Toolbox, ToolOutput
from toolrelay.io.tools.definition import parse_definitions
from toolrelay.io.tools.http import HttpToolClient
from toolrelay.io.tools.results import TRUNCATION_MARK

T = TypeVar("T")


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    with http_server() as url:
        yield url


def servers(
    entries: dict[str, Any], *, naming: Naming = "auto", timeout: float = 5.0, **options: Any
) -> McpServers:
    return McpServers(
        parse_config({"mcpServers": entries}), timeout=timeout, naming=naming, **options
    )


def running(mcp: McpServers, body: Callable[[McpServers], Awaitable[T]]) -> T:
    async def main() -> T:
        await mcp.start()
        try:
            return await body(mcp)
        finally:
            await mcp.aclose()

    return asyncio.run(asyncio.wait_for(main(), 60))


async def call(mcp: McpServers, name: str, max_chars: int = 2000, **arguments: Any) -> ToolOutput:
    toolbox = Toolbox(mcp.tools(()), max_chars=max_chars)
    return await toolbox.run(ToolCall("call_1", name, arguments))


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_tools_are_listed_and_called(transport: str, http_url: str) -> None:
    entry = stdio_entry() if transport == "stdio" else {"url": http_url}

    async def body(mcp: McpServers) -> tuple[list[dict[str, Any]], ToolOutput]:
        declarations = [tool.declaration() for tool in mcp.tools(())]
        return declarations, await call(mcp, "forecast", city="Oslo")

    declarations, output = running(servers({"weather": entry}), body)
    forecast = next(d for d in declarations if d["function"]["name"] == "forecast")
    # Passed on as the server wrote them.
    assert forecast["function"] == {
        "name": "forecast",
        "description": "Weather forecast for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    }
    assert output == ToolOutput("Sunny in Oslo, 21 °C")


def test_results_of_every_kind_become_text() -> None:
    async def body(mcp: McpServers) -> list[ToolOutput]:
        return [await call(mcp, name) for name in ("picture", "measure", "fails")]

    picture, measure, fails = running(servers({"weather": stdio_entry()}), body)
    assert picture.text == (
        "Clear sky.\n[image: image/png, 70 bytes]\n[resource file:///station.txt]\nStation 7\n"
        "[resource link archive: https://example.org/archive]"
    )
    assert measure.text == '{"temp":21,"unit":"C"}'
    assert fails == ToolOutput("Error: MCP tool 'fails' failed: the sensor is offline", True)


def test_a_huge_result_is_cut_like_an_http_tool_result() -> None:
    output = running(
        servers({"weather": stdio_entry()}),
        lambda mcp: call(mcp, "huge", max_chars=100, chars=3_000_000),
    )
    assert output.text == "x" * 100 + TRUNCATION_MARK
    assert output.raw is not None and len(output.raw) == 3_000_000


def test_a_slow_call_times_out_and_the_server_stays_usable() -> None:
    async def body(mcp: McpServers) -> tuple[ToolOutput, float, ToolOutput]:
        started = time.monotonic()
        slow = await call(mcp, "slow", seconds=10)
        took = time.monotonic() - started
        return slow, took, await call(mcp, "forecast", city="Rome")

    slow, took, after = running(servers({"weather": stdio_entry()}, timeout=0.5), body)
    assert slow == ToolOutput("Error: MCP server 'weather' gave no answer within 0.5 s", True)
    assert took < 5
    assert after.text == "Sunny in Rome, 21 °C"


def test_a_server_that_dies_mid_call_is_an_error_then_comes_back() -> None:
    async def body(mcp: McpServers) -> tuple[ToolOutput, ToolOutput, dict[str, Any], ToolOutput]:
        crash = await call(mcp, "crash")
        meanwhile = await call(mcp, "forecast", city="Oslo")
        health = mcp.health()[0]
        for _ in range(100):  # reconnected after a second
            await asyncio.sleep(0.1)
            if mcp.health()[0]["state"] == "ready":
                break
        return crash, meanwhile, health, await call(mcp, "forecast", city="Oslo")

    crash, meanwhile, health, later = running(servers({"weather": stdio_entry()}), body)
    assert crash.is_error
    assert crash.text.startswith("Error: MCP server 'weather' stopped during the call: ")
    assert "crashing on purpose" in crash.text  # the child's standard error, quoted
    assert meanwhile.is_error
    assert meanwhile.text.startswith("Error: MCP server 'weather' is not running: ")
    assert health["state"] == "failed"
    assert later == ToolOutput("Sunny in Oslo, 21 °C")


def test_a_missing_command_stops_the_start_or_with_optional_leaves_its_tools_out() -> None:
    entries = {"weather": stdio_entry(), "gone": {"command": "/nonexistent/mcp-server"}}
    with pytest.raises(McpStartupError) as stopped:
        running(servers(entries), lambda mcp: asyncio.sleep(0))
    assert str(stopped.value) == (
        "MCP server 'gone' (/nonexistent/mcp-server): command not found: /nonexistent/mcp-server"
    )

    async def body(mcp: McpServers) -> tuple[list[str], list[dict[str, Any]]]:
        return [tool.name for tool in mcp.tools(())], mcp.health()

    names, health = running(servers(entries, optional=True), body)
    assert "forecast" in names
    assert [(h["name"], h["state"]) for h in health] == [("weather", "ready"), ("gone", "failed")]


def test_a_server_that_exits_at_once_says_what_it_printed() -> None:
    entry = {"command": sys.executable, "args": ["-c", "import sys; sys.exit('no API key set')"]}
    with pytest.raises(McpStartupError, match="no API key set"):
        running(servers({"broken": entry}), lambda mcp: asyncio.sleep(0))


def test_an_http_server_that_does_not_answer_is_a_startup_error() -> None:
    with pytest.raises(McpStartupError, match=r"MCP server 'far' \(http://127.0.0.1:9/mcp\)"):
        running(servers({"far": {"url": "http://127.0.0.1:9/mcp"}}), lambda mcp: asyncio.sleep(0))


def test_a_tool_with_a_bad_schema_is_left_out_and_shown_in_health() -> None:
    entry = stdio_entry(env={"WEATHER_BAD_SCHEMA": "1"})

    async def body(mcp: McpServers) -> tuple[list[str], list[dict[str, Any]]]:
        return [tool.name for tool in mcp.tools(())], mcp.health()

    names, health = running(servers({"weather": entry}), body)
    assert "broken" not in names and "forecast" in names
    assert health[0]["skipped"] == [
        {
            "tool": "broken",
            "reason": "inputSchema: not valid JSON Schema: "
            "\"tomorrow\" is not valid under any of the schemas listed in the 'anyOf' keyword",
        }
    ]


def test_a_listing_the_sdk_refuses_fails_the_server_with_the_reason(tmp_path: Path) -> None:
    # A tool whose schema is not an object schema: the SDK refuses the whole listing.
    # The SDK will not send such a thing, so this server writes its JSON-RPC by hand.
    script = tmp_path / "raw_server.py"
    script.write_text(RAW_SERVER, encoding="utf-8")
    entry = {"command": sys.executable, "args": [str(script)]}
    reason = (
        r"an answer that breaks the MCP schema \(ListToolsResult: tools.0.inputSchema.type: "
        r"Input should be 'object'\)"
    )
    with pytest.raises(McpStartupError, match=reason):
        running(servers({"raw": entry}), lambda mcp: asyncio.sleep(0))


RAW_SERVER = """
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    method = message["method"]
    if method == "initialize":
        result = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "raw", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "bad", "inputSchema": {"type": "string"}}]}
    else:
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"],
                          "error": {"code": -32601, "message": "no"}}), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
"""


def test_list_changed_brings_the_new_tool() -> None:
    async def body(mcp: McpServers) -> tuple[int, int, ToolOutput, ToolOutput]:
        before = mcp.revision
        await call(mcp, "grow")
        for _ in range(100):
            if "extra" in [tool.name for tool in mcp.tools(())]:
                break
            await asyncio.sleep(0.05)
        extra = await call(mcp, "extra")
        return before, mcp.revision, extra, await call(mcp, "forecast", city="Oslo")

    before, after, extra, forecast = running(servers({"weather": stdio_entry()}), body)
    assert after > before
    assert extra == ToolOutput("extra ran")
    assert forecast.text == "Sunny in Oslo, 21 °C"


def test_names_clash_filters_and_prefixes(http_url: str) -> None:
    entries = {
        "a": stdio_entry(include=["forecast", "slow"]),
        "b": {"url": http_url, "exclude": ["*"], "include": []},
        "c": {"url": http_url, "include": ["forecast", "huge"]},
    }

    async def body(mcp: McpServers) -> tuple[list[str], list[str], ToolOutput]:
        auto = [tool.name for tool in mcp.tools(frozenset({"huge"}))]
        mcp.naming = "prefixed"
        mcp._built = None
        prefixed = [tool.name for tool in mcp.tools(())]
        mcp.naming = "auto"
        mcp._built = None
        return auto, prefixed, await call(mcp, "c__forecast", city="Bergen")

    auto, prefixed, output = running(servers(entries), body)
    # forecast is wanted by a and c: both prefixed; huge is taken by an HTTP tool.
    assert auto == ["a__forecast", "slow", "c__forecast", "c__huge"]
    assert prefixed == ["a__forecast", "a__slow", "c__forecast", "c__huge"]
    assert output.text == "Sunny in Bergen, 21 °C"


def test_stopping_stops_the_stdio_child() -> None:
    async def body(mcp: McpServers) -> int:
        await call(mcp, "forecast", city="Oslo")
        return await pid_of_child(os.getpid())

    child = running(servers({"weather": stdio_entry()}), body)
    time.sleep(0.2)
    assert not os.path.exists(f"/proc/{child}") or _zombie(child)


async def pid_of_child(parent: int) -> int:
    children = Path(f"/proc/{parent}/task/{parent}/children").read_text().split()
    assert children, "no child process"
    return int(children[-1])


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except OSError:
        return True


def test_a_child_that_dies_while_idle_is_noticed_and_restarted() -> None:
    mcp = servers({"weather": stdio_entry()})
    mcp.connections[0].ping_interval = 0.2

    async def body(mcp: McpServers) -> tuple[list[str], ToolOutput, int]:
        first = await pid_of_child(os.getpid())
        os.kill(first, signal.SIGKILL)
        states = []
        for _ in range(300):  # the restart waits a second, then starts a new child
            await asyncio.sleep(0.05)
            state = mcp.health()[0]["state"]
            if not states or states[-1] != state:
                states.append(state)
            if states[-1] == "ready" and len(states) > 1:
                break
        output = await call(mcp, "forecast", city="Oslo")
        return states, output, await pid_of_child(os.getpid())

    states, output, second = running(mcp, body)
    assert states == ["ready", "failed", "ready"]
    assert output.text == "Sunny in Oslo, 21 °C"
    assert second > 0


def test_a_toolbox_reads_each_tool_into_a_spec_with_its_source() -> None:
    """What the agent loop's rounds read the tools as (``ToolSpec.source``): an MCP
    server's tools say ``mcp``, the declarative HTTP tools ``http``, a program's own
    functions ``client``; the order and schemas are the declarations'."""
    # Never run here: no service behind its URL.
    http = HttpTool(parse_definitions([weather_tool("http://127.0.0.1:9")])[0], HttpToolClient())
    own = FunctionTool("echo", lambda text: text, parameters={"type": "object"})

    async def body(mcp: McpServers) -> Toolbox:
        return Toolbox([http, *mcp.tools(("get_weather", "echo")), own])

    toolbox = running(servers({"weather": stdio_entry(include=["forecast"])}), body)
    specs = toolbox.specs()
    assert [(spec.name, spec.source) for spec in specs] == [
        ("get_weather", "http"),
        ("forecast", "mcp"),
        ("echo", "client"),
    ]
    assert [dict(spec.parameters) for spec in specs] == [
        d["function"]["parameters"] for d in toolbox.declarations()
    ]
