"""MCP servers' tools in the gateway: /ws, a mixed request through the openai
SDK, GET /api/tools, /health, and the start that fails or goes on."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.engine.support import completions, weather_tool
from tests.gateway.support import (
    TIME_TOOL,
    GatewayServer,
    gateway,
    wait_until_up,
    ws_turn,
)
from tests.mcp.support import config_file, free_port, http_server, stdio_entry
from tests.tools.service import Service
from toolrelay.simulator import Simulator, SimulatorConfig

TOOLRELAY = [sys.executable, "-m", "toolrelay"]
# The model calls the stdio server's forecast, then the HTTP server's measure,
# then answers from both results.
TWO_SERVERS = {
    "rules": [
        {
            "match": {"tool_result": "temp"},
            "answer": {"content": "Measured: {last_tool_result}"},
        },
        {
            "match": {"tool_result": "Sunny"},
            "answer": {"tool_calls": [{"name": "measure", "arguments": {}}]},
        },
        {
            "match": {"tools": "native"},
            "answer": {"tool_calls": [{"name": "forecast", "arguments": {"city": "Oslo"}}]},
        },
        {"answer": {"content": "no tools offered"}},
    ]
}


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    with http_server() as url:
        yield url


def two_servers(folder: Path, http_url: str) -> str:
    return config_file(
        folder,
        {
            "local": stdio_entry(include=["forecast"]),
            "remote": {"url": http_url, "include": ["measure"]},
        },
    )


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def test_a_ws_turn_calls_a_stdio_and_an_http_server_through_the_real_commands(
    tmp_path: Path, http_url: str
) -> None:
    scenario = tmp_path / "scenario.json"
    scenario.write_text(json.dumps(TWO_SERVERS), encoding="utf-8")
    simulate = subprocess.Popen(
        [*TOOLRELAY, "simulate", "--port", "0", "--scenario", str(scenario)],
        stdout=subprocess.PIPE,
        text=True,
    )
    serve = None
    try:
        assert simulate.stdout is not None
        backend = simulate.stdout.readline().split()[-1] + "/v1"
        port = free_port()
        config = two_servers(tmp_path, http_url)
        serve = subprocess.Popen(
            [
                *TOOLRELAY,
                *("serve", "--backend", backend, "--port", str(port)),
                *("--mcp-config", config, "--log-level", "warning"),
            ],
            stderr=subprocess.PIPE,
            text=True,
        )
        url = f"http://127.0.0.1:{port}"
        wait_until_up(url + "/health", serve)
        events = asyncio.run(ws_turn(url, "Weather in Oslo?"))
        child = children(serve.pid)
        for _ in range(50):  # read /proc again if it was caught between two states
            if child:
                break
            time.sleep(0.1)
            child = children(serve.pid)
        assert child, "the stdio MCP server runs as the gateway's child"
    finally:
        for process in (serve, simulate):
            if process is not None:
                process.terminate()
                process.wait(15)
    calls = [(e["name"], e["arguments"]) for e in events if e["type"] == "tool_call"]
    assert calls == [("forecast", {"city": "Oslo"}), ("measure", {})]
    results = [e["content"] for e in events if e["type"] == "tool_result"]
    assert results == ["Sunny in Oslo, 21 °C", '{"temp":21,"unit":"C"}']
    assert events[-1]["text"] == 'Measured: {"temp":21,"unit":"C"}'
    # Stopped with the gateway.
    time.sleep(0.3)
    assert all(not Path(f"/proc/{pid}").exists() for pid in child)


@pytest.fixture(scope="module")
def service() -> Iterator[Service]:
    with Service() as running:
        yield running


# Server tools first (the HTTP tool, then the MCP tool), then the client's tool.
MIXED = {
    "rules": [
        {
            "match": {"tool_result": r"^\d\d:\d\d$"},
            "answer": {"content": "It is {last_tool_result}."},
        },
        {
            "match": {"tool_result": "Sunny"},
            "answer": {
                "content": "Now the time.",
                "tool_calls": [{"name": "get_time", "arguments": {"tz": "CET"}}],
            },
        },
        {
            "match": {"tool_result": "ok GET /weather"},
            "answer": {"tool_calls": [{"name": "forecast", "arguments": {"city": "Oslo"}}]},
        },
        {
            "match": {"tools": "native"},
            "answer": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}]},
        },
        {"answer": {"content": "no tools offered"}},
    ]
}


@pytest.fixture(scope="module")
def stack(
    service: Service, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Simulator, GatewayServer]]:
    folder = Path(tmp_path_factory.mktemp("mcp"))
    tools = folder / "tools.json"
    tools.write_text(json.dumps([weather_tool(service.url)]), encoding="utf-8")
    mcp = config_file(folder, {"weather": stdio_entry(exclude=["crash"])})
    with (
        Simulator(SimulatorConfig.load(MIXED, chunk=3)) as sim,
        gateway(sim.openai_url, tools_file=str(tools), mcp_config=mcp) as gw,
    ):
        yield sim, gw


@pytest.mark.parametrize("stream", [False, True])
def test_a_mixed_request_through_the_openai_sdk_uses_an_mcp_tool_beside_a_client_tool(
    stack: tuple[Simulator, GatewayServer], service: Service, stream: bool
) -> None:
    sim, gw = stack
    client = gw.client()
    question = [{"role": "user", "content": "Weather and time in Oslo?"}]
    before = len(service.recorder.requests)
    if stream:
        with client.chat.completions.stream(
            model="toolrelay-sim", messages=question, tools=[TIME_TOOL]
        ) as events:
            completion = events.get_final_completion()
    else:
        completion = client.chat.completions.create(
            model="toolrelay-sim", messages=question, tools=[TIME_TOOL]
        )
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls or []
    assert call.function.name == "get_time"
    # Both server tools ran in between: the HTTP tool, then the MCP tool.
    assert [seen.target for seen in service.recorder.requests[before:]] == ["/weather/Oslo"]
    conversation = completions(sim)[-1]["messages"]
    assert conversation[-1] == {
        "role": "tool",
        "tool_call_id": conversation[-2]["tool_calls"][0]["id"],
        "content": "Sunny in Oslo, 21 °C",
    }
    offered = [tool["function"]["name"] for tool in completions(sim)[-1]["tools"]]
    assert offered[0] == "get_weather" and offered[-1] == "get_time"
    assert "forecast" in offered and "crash" not in offered
    follow_up = [
        *question,
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": "14:05"},
    ]
    final = client.chat.completions.create(
        model="toolrelay-sim", messages=follow_up, tools=[TIME_TOOL]
    )
    assert final.choices[0].message.content == "It is 14:05."


def test_the_anthropic_and_responses_fronts_run_the_mcp_tool_too(
    stack: tuple[Simulator, GatewayServer],
) -> None:
    import anthropic

    sim, gw = stack
    anthropic_client = anthropic.Anthropic(base_url=gw.url, api_key="unused", max_retries=0)
    time_tool = {
        "name": "get_time",
        "description": "Current time in a time zone",
        "input_schema": TIME_TOOL["function"]["parameters"],
    }
    message = anthropic_client.messages.create(
        model="toolrelay-sim",
        max_tokens=200,
        messages=[{"role": "user", "content": "Weather and time in Oslo?"}],
        tools=[time_tool],  # type: ignore[list-item]
    )
    uses = [block for block in message.content if block.type == "tool_use"]
    assert [use.name for use in uses] == ["get_time"]
    assert completions(sim)[-1]["messages"][-1]["content"] == "Sunny in Oslo, 21 °C"
    response = gw.client().responses.create(
        model="toolrelay-sim",
        input="Weather and time in Oslo?",
        tools=[{"type": "function", **TIME_TOOL["function"]}],  # type: ignore[list-item]
    )
    calls = [item for item in response.output if item.type == "function_call"]
    assert [call.name for call in calls] == ["get_time"]
    assert completions(sim)[-1]["messages"][-1]["content"] == "Sunny in Oslo, 21 °C"


def test_api_tools_lists_mcp_tools_with_their_source_and_health_their_server(
    stack: tuple[Simulator, GatewayServer],
) -> None:
    _, gw = stack
    listing = httpx.get(gw.url + "/api/tools").json()
    assert listing["source"] == "file"
    assert listing["tools"][0]["name"] == "get_weather" and "source" not in listing["tools"][0]
    forecast = next(tool for tool in listing["tools"] if tool["name"] == "forecast")
    assert forecast == {
        "name": "forecast",
        "description": "Weather forecast for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
        "source": "mcp",
        "server": "weather",
        "mcp_name": "forecast",
    }
    assert listing["count"] == len(listing["tools"]) == 1 + 7  # the weather tools but crash
    (server,) = httpx.get(gw.url + "/health").json()["mcp_servers"]
    assert server["name"] == "weather" and server["state"] == "ready"
    assert server["transport"] == "stdio" and server["tools"] == 8 and server["error"] is None


def test_a_client_tool_named_like_an_mcp_tool_is_a_400(
    stack: tuple[Simulator, GatewayServer],
) -> None:
    import openai

    _, gw = stack
    clash = {"type": "function", "function": {"name": "forecast", "parameters": {}}}
    with pytest.raises(openai.BadRequestError, match="'forecast'"):
        gw.client().chat.completions.create(
            model="toolrelay-sim", messages=[{"role": "user", "content": "hi"}], tools=[clash]
        )


def test_an_mcp_server_that_does_not_start_stops_serve_in_one_line(tmp_path: Path) -> None:
    config = config_file(tmp_path, {"gone": {"command": "/nonexistent/mcp-server"}})
    done = subprocess.run(
        [*TOOLRELAY, "serve", "--port", str(free_port()), "--mcp-config", config],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert (
        "toolrelay serve: MCP server 'gone' (/nonexistent/mcp-server): command not found: "
        "/nonexistent/mcp-server" in done.stderr
    )
    assert "Traceback" not in done.stderr


def test_with_mcp_optional_serve_starts_without_its_tools(tmp_path: Path) -> None:
    config = config_file(
        tmp_path, {"gone": {"command": "/nonexistent/mcp-server"}, "weather": stdio_entry()}
    )
    port = free_port()
    serve = subprocess.Popen(
        [*TOOLRELAY, "serve", "--port", str(port), "--mcp-config", config, "--mcp-optional"],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TOOLRELAY_BACKEND": "http://127.0.0.1:9/v1"},
    )
    try:
        wait_until_up(f"http://127.0.0.1:{port}/health", serve)
        health = httpx.get(f"http://127.0.0.1:{port}/health").json()
        tools = httpx.get(f"http://127.0.0.1:{port}/api/tools").json()["tools"]
    finally:
        serve.terminate()
        serve.wait(15)
    states = {s["name"]: (s["state"], s["error"]) for s in health["mcp_servers"]}
    assert states == {
        "gone": ("failed", "command not found: /nonexistent/mcp-server"),
        "weather": ("ready", None),
    }
    assert health["status"] == "degraded"
    assert {tool["server"] for tool in tools} == {"weather"}


def test_a_bad_mcp_config_is_a_usage_error(tmp_path: Path) -> None:
    config = config_file(tmp_path, {"x": {"command": "a", "url": "http://b"}})
    done = subprocess.run(
        [*TOOLRELAY, "serve", "--mcp-config", config],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"toolrelay serve: invalid MCP configuration: MCP config {config}.x: give either "
        "'command' (stdio) or 'url' (streamable HTTP)"
    )
