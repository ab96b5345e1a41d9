"""Claude Code as the MCP client of toolrelay's ``POST /mcp``.

Two gateways on 127.0.0.1: the one ``toolrelay launch claude`` starts in front
of the simulator (the model), and a ``toolrelay serve`` with a tools file whose
HTTP tool calls a real local service; Claude Code gets the second one's
``/mcp`` with ``--mcp-config``. The model calls the tool by Claude Code's name
for it, ``mcp__toolrelay__get_weather``; Claude Code calls it over MCP,
toolrelay calls the service, and the answer repeats what the service said:
the service echoes the path, and the path holds a marker that is only in the
tools file, which neither Claude Code nor the model ever see.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.clients.support import MODES, gateway, installed, launch, scenario, simulator
from tests.engine.support import weather_tool
from tests.tools.service import Service

pytestmark = pytest.mark.timeout(900)

TOOL = "mcp__toolrelay__get_weather"
QUESTION = "What's the weather in Paris?"


@pytest.fixture(scope="module")
def service() -> Iterator[Service]:
    with Service() as running:
        yield running


@pytest.mark.parametrize("mode", MODES)
def test_claude_code_calls_a_tool_of_toolrelay_over_mcp(
    mode: str, service: Service, tmp_path: Path
) -> None:
    bin_dir = installed("claude-2.1")
    marker = f"MARKER-{secrets.token_hex(8)}"
    tools_file = tmp_path / "tools.json"
    tool = weather_tool(service.url) | {"url": service.url + f"/{marker}/{{city}}"}
    tools_file.write_text(json.dumps([tool]))
    rules = scenario(TOOL, {"city": "Paris"}, asked=r"weather in Paris")
    (tmp_path / "mcp-server").mkdir()
    with (
        simulator(tmp_path, rules) as model_server,
        gateway(
            tmp_path / "mcp-server", model_server, "native", "--tools-file", str(tools_file)
        ) as mcp_server,
    ):
        config = tmp_path / "mcp.json"
        servers = {"toolrelay": {"type": "http", "url": mcp_server + "/mcp"}}
        config.write_text(json.dumps({"mcpServers": servers}))
        argv = ["-p", QUESTION, "--mcp-config", str(config), "--strict-mcp-config",
                "--allowedTools", TOOL]  # fmt: skip
        # Tool search would defer the MCP tools behind ToolSearch: the model
        # is to see the tool itself, as it does with a handful of tools.
        result = launch(
            "claude", model_server + "/v1", mode, argv, folder=tmp_path, bin_dir=bin_dir,
            ENABLE_TOOL_SEARCH="false",
        )  # fmt: skip
    answer = f"ok GET /{marker}/Paris"
    assert result.returncode == 0 and answer in result.stdout, (
        f"status {result.returncode}\nstdout: {result.stdout[-2000:]}\n"
        f"stderr: {result.stderr[-3000:]}\n"
        f"gateway log: {(tmp_path / 'gateway.log').read_text(errors='replace')[-3000:]}\n"
        f"MCP server log: {(tmp_path / 'mcp-server/gateway.log').read_text()[-3000:]}"
    )
    assert any(seen.raw_path == f"/{marker}/Paris" for seen in service.recorder.requests)
