"""``toolrelay chat -m`` with MCP servers: a stdio and an HTTP server's tools
called and answered from, the yes each call needs, a server that does not start."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.mcp.support import calling, config_file, http_server, stdio_entry
from toolrelay.cli import main
from toolrelay.simulator import Simulator, SimulatorConfig


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    with http_server() as url:
        yield url


def chat_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, servers: dict[str, Any], *args: str
) -> tuple[int, str, str, Simulator]:
    config = config_file(tmp_path, servers)
    scenario = calling("forecast", {"city": "Oslo"}, "The forecast: {last_tool_result}")
    with Simulator(SimulatorConfig.load(scenario)) as sim:
        status = main(
            [
                *("chat", "--backend", sim.openai_url, "--workdir", str(tmp_path)),
                *("--mcp-config", config, "-m", "Weather in Oslo?", *args),
            ]
        )
    out, err = capsys.readouterr()
    return status, out, err, sim


def test_the_real_command_answers_with_a_stdio_servers_result(tmp_path: Path) -> None:
    config = config_file(tmp_path, {"weather": stdio_entry(trusted=True)})
    scenario = tmp_path / "scenario.json"
    scenario.write_text(
        json.dumps(calling("forecast", {"city": "Oslo"}, "It says: {last_tool_result}")),
        encoding="utf-8",
    )
    simulate = subprocess.Popen(
        [sys.executable, "-m", "toolrelay", "simulate", "--port", "0", "--scenario", str(scenario)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert simulate.stdout is not None
        backend = simulate.stdout.readline().split()[-1] + "/v1"
        done = subprocess.run(
            [
                *(sys.executable, "-m", "toolrelay", "chat", "--backend", backend),
                *("--mcp-config", config, "--workdir", str(tmp_path), "-m", "Weather in Oslo?"),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    finally:
        simulate.terminate()
        simulate.wait(10)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "It says: Sunny in Oslo, 21 °C"
    assert "forecast" in done.stderr  # the trace shows the call


def test_an_http_servers_tool_with_yes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, http_url: str
) -> None:
    status, out, _, _ = chat_run(capsys, tmp_path, {"remote": {"url": http_url}}, "--yes")
    assert status == 0
    assert out.strip() == "The forecast: Sunny in Oslo, 21 °C"


def test_an_untrusted_servers_call_needs_a_yes_nobody_can_give(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status, out, _, sim = chat_run(capsys, tmp_path, {"weather": stdio_entry()})
    assert status == 0
    tool_messages = [
        m for r in sim.requests if r.path.endswith("/chat/completions")
        for m in r.body["messages"] if m["role"] == "tool"
    ]  # fmt: skip
    assert tool_messages[-1]["content"] == (
        'Error: not allowed to call forecast of MCP server \'weather\' with {"city":"Oslo"}: '
        "nobody can confirm it (standard input is not a terminal); the user can allow it with "
        "toolrelay chat --yes"
    )
    assert out.startswith("The forecast: Error: not allowed")


def test_two_servers_with_the_same_tools_get_their_prefixes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, http_url: str
) -> None:
    # Two servers with the same tools: each one's gets its prefix.
    servers = {"a": stdio_entry(trusted=True), "b": {"url": http_url, "trusted": True}}
    status, _, err, sim = chat_run(capsys, tmp_path, servers)
    offered = [
        tool["function"]["name"]
        for r in sim.requests
        if r.path.endswith("/chat/completions")
        for tool in r.body.get("tools", [])
    ]
    assert "a__forecast" in offered and "b__forecast" in offered and "forecast" not in offered
    assert "read_file" in offered
    assert status == 0, err


def test_a_server_that_does_not_start_is_an_error_exit(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status, _, err, _ = chat_run(capsys, tmp_path, {"gone": {"command": "/nonexistent/server"}})
    assert status == 1
    assert err.strip() == (
        "toolrelay chat: MCP server 'gone' (/nonexistent/server): command not found: "
        "/nonexistent/server"
    )
