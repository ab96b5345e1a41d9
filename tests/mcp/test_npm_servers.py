"""Real third-party MCP servers from npm (server-everything, server-filesystem),
run with npx from a cache folder: listed and called on their own, in a /ws
turn, and in a ``toolrelay chat -m`` run beside the chat agent's own tools."""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.gateway.support import gateway, ws_turn
from tests.mcp.npm import npm_servers, npx
from tests.mcp.support import calling, config_file, free_port, wait_for_port
from toolrelay.cli import main
from toolrelay.events import ToolCall
from toolrelay.io.mcp.config import parse_config
from toolrelay.io.mcp.servers import McpServers
from toolrelay.io.tools import Toolbox, ToolOutput
from toolrelay.simulator import Simulator, SimulatorConfig


@pytest.fixture(scope="module")
def folder() -> Path:
    return npm_servers()


@pytest.fixture(scope="module")
def everything_http(folder: Path) -> Iterator[str]:
    """server-everything over streamable HTTP; yields its /mcp URL."""
    port = free_port()
    script = folder / "node_modules/@modelcontextprotocol/server-everything/dist/index.js"
    process = subprocess.Popen(
        ["node", str(script), "streamableHttp"],
        env={**os.environ, "PORT": str(port)},
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for_port(port, process, seconds=60)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)


def calls(entry: dict[str, Any], *wanted: tuple[str, dict[str, Any]]) -> list[ToolOutput]:
    async def main() -> list[ToolOutput]:
        mcp = McpServers(parse_config({"mcpServers": {"everything": entry}}), timeout=30)
        await mcp.start()
        try:
            toolbox = Toolbox(mcp.tools(()), max_chars=2000)
            return [await toolbox.run(ToolCall("c", name, args)) for name, args in wanted]
        finally:
            await mcp.aclose()

    return asyncio.run(asyncio.wait_for(main(), 120))


def test_server_everything_over_stdio_with_npx(folder: Path) -> None:
    total, image, unknown = calls(
        npx("mcp-server-everything", "stdio"),
        ("get-sum", {"a": 2, "b": 3}),
        ("get-tiny-image", {}),
        ("get-sum", {"a": "two", "b": 3}),
    )
    assert total == ToolOutput("The sum of 2 and 3 is 5.")
    assert "[image: image/png, " in image.text and not image.is_error
    # Checked against the server's own schema before it is sent.
    assert unknown.is_error and unknown.text.startswith("Error: invalid arguments for tool")


def test_server_everything_over_streamable_http(everything_http: str) -> None:
    (echo,) = calls({"url": everything_http}, ("echo", {"message": "hello"}))
    assert echo == ToolOutput("Echo: hello")


def test_a_ws_turn_calls_server_everything(folder: Path, tmp_path: Path) -> None:
    config = config_file(tmp_path, {"everything": npx("mcp-server-everything", "stdio")})
    scenario = calling("get-sum", {"a": 20, "b": 22}, "So: {last_tool_result}")
    with (
        Simulator(SimulatorConfig.load(scenario)) as sim,
        gateway(sim.openai_url, mcp_config=config, mcp_startup_timeout=90) as gw,
    ):
        events = asyncio.run(ws_turn(gw.url, "What is 20 + 22?"))
    results = [e["content"] for e in events if e["type"] == "tool_result"]
    assert results == ["The sum of 20 and 22 is 42."]
    assert events[-1]["text"] == "So: The sum of 20 and 22 is 42."


def test_chat_with_server_filesystem_beside_the_builtin_file_tools(
    folder: Path, everything_http: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("buy milk\n", encoding="utf-8")
    config = config_file(
        tmp_path,
        {
            "files": {**npx("mcp-server-filesystem", str(work)), "trusted": True},
            "everything": {"url": everything_http, "include": ["echo"], "trusted": True},
        },
    )
    # server-filesystem's read_text_file keeps its name; its list_directory is
    # also the chat agent's own tool's name, so it becomes files__list_directory.
    scenario = calling("files__list_directory", {"path": str(work)}, "Listed: {last_tool_result}")
    with Simulator(SimulatorConfig.load(scenario)) as sim:
        status = main(
            [
                *("chat", "--backend", sim.openai_url, "--workdir", str(work)),
                *("--mcp-config", config, "-m", "What is in my folder?"),
            ]
        )
        offered = [
            tool["function"]["name"]
            for request in sim.requests
            if request.path.endswith("/chat/completions")
            for tool in request.body.get("tools", [])
        ]
    out, err = capsys.readouterr()
    assert status == 0, err
    assert out.strip() == "Listed: [FILE] notes.txt"
    assert {"list_directory", "files__list_directory", "read_text_file", "echo"} <= set(offered)
