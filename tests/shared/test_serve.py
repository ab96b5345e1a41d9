"""``toolrelay serve --redis-url``: two real gateway processes sharing a Redis, and
the startup error when Redis cannot be used."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from tests.gateway.serve_process import serve_process
from tests.shared.redis_server import RedisServer, free_port
from tests.shared.test_replicas import eventually
from tests.weather import ASK_WEATHER, WEATHER_TOOL
from toolrelay.simulator import Simulator, SimulatorConfig

WITH_TOOLS = {"model": "m", "messages": ASK_WEATHER, "tools": [WEATHER_TOOL]}
LOOKUP = {
    "name": "lookup",
    "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
    "url": "http://127.0.0.1:9/{q}",
    "method": "GET",
}


def serve_args(backend: str, redis_url: str, port: int) -> list[str]:
    args = [sys.executable, "-m", "toolrelay", "serve", "--backend", backend]
    return [*args, "--backend-kind", "openai", "--port", str(port), "--redis-url", redis_url]


@contextmanager
def serve(backend: str, redis_url: str) -> Iterator[str]:
    """``toolrelay serve`` on a port the system picks: its base URL."""
    args = ["--backend", backend, "--backend-kind", "openai", "--redis-url", redis_url]
    with serve_process(*args) as served:
        yield served.url


def refuses_tools(url: str) -> bool:
    """Whether the replica at ``url`` knows that model m refuses tools."""
    health = httpx.get(url + "/health", timeout=30).json()
    return any(b["facts"].get("m", {}).get("refuses_tools") for b in health["backends"])


def test_two_serve_processes_share_facts_and_the_override(redis_server: RedisServer) -> None:
    config = SimulatorConfig.load(None, no_tools_support=True)
    with (
        Simulator(config) as sim,
        serve(sim.openai_url, redis_server.url) as first,
        serve(sim.openai_url, redis_server.url) as second,
    ):
        assert httpx.post(first + "/v1/chat/completions", json=WITH_TOOLS, timeout=20).is_success
        chats = [r for r in sim.requests if r.path.endswith("/chat/completions")]
        assert [bool(r.body.get("tools")) for r in chats] == [True, False]
        # The lesson reaches the other process through Redis (pub/sub: soon, not at once).
        eventually(lambda: refuses_tools(second))
        before = len(sim.requests)
        assert httpx.post(second + "/v1/chat/completions", json=WITH_TOOLS, timeout=20).is_success
        chats = [r for r in list(sim.requests)[before:] if r.path.endswith("/chat/completions")]
        assert [bool(r.body.get("tools")) for r in chats] == [False]  # straight to rescue

        posted = httpx.post(first + "/api/tools", json=[LOOKUP], timeout=10)
        assert posted.status_code == 200
        eventually(lambda: httpx.get(second + "/api/tools", timeout=10).json()["count"] == 1)
        shown = httpx.get(second + "/api/tools", timeout=10).json()
        assert (shown["source"], shown["count"], shown["tools"]) == (
            "request",
            1,
            posted.json()["tools"],
        )


def test_serve_stops_at_startup_when_redis_does_not_answer() -> None:
    closed = f"redis://127.0.0.1:{free_port()}/0"
    args = serve_args("http://127.0.0.1:9/v1", closed, free_port())
    done = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert f"Redis at {closed} (TOOLRELAY_REDIS_URL) cannot be used" in done.stderr
    assert "unset TOOLRELAY_REDIS_URL" in done.stderr
    assert "Traceback" not in done.stderr
