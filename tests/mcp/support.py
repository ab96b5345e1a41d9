"""MCP servers for the tests: the SDK-written weather server (stdio child or
streamable HTTP on 127.0.0.1) and a scenario that makes the simulator (a test
double for a model) call an MCP tool."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

SERVER = Path(__file__).with_name("weather_server.py")


def stdio_entry(**extra: Any) -> dict[str, Any]:
    """The weather server as a stdio entry of ``mcpServers``."""
    return {"command": sys.executable, "args": [str(SERVER), "stdio"], **extra}


def config_file(folder: Path, servers: dict[str, Any]) -> str:
    path = folder / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    return str(path)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def http_server(env: dict[str, str] | None = None) -> Iterator[str]:
    """The weather server over streamable HTTP in a child process; yields its /mcp URL."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "http", str(port)],
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        wait_for_port(port, process)
        yield url
    finally:
        process.terminate()
        process.wait(10)


def wait_for_port(port: int, process: subprocess.Popen[str], seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        try:
            httpx.get(f"http://127.0.0.1:{port}/", timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.05)
    raise AssertionError(f"port {port} did not open")


def calling(tool: str, arguments: dict[str, Any], answer: str = "Done: {last_tool_result}") -> Any:
    """A scenario: call ``tool`` when tools are offered, answer from its result."""
    return {
        "rules": [
            {"match": {"tool_result": True}, "answer": {"content": answer}},
            {
                "match": {"tools": "native"},
                "answer": {"tool_calls": [{"name": tool, "arguments": arguments}]},
            },
            {"answer": {"content": "no tools offered"}},
        ]
    }
