"""``toolrelay serve --redis-url``: two real gateway processes sharing a Redis, and
the startup error when Redis cannot be used."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from tests.shared.redis_server import RedisServer, free_port
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
    port = free_port()
    proc = subprocess.Popen(
        serve_args(backend, redis_url, port), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(url + "/health", timeout=2)
                break
            except httpx.HTTPError:
                assert proc.poll() is None, proc.communicate()[1].decode()
                assert time.monotonic() < deadline, "toolrelay serve did not start"
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


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
        before = len(sim.requests)
        assert httpx.post(second + "/v1/chat/completions", json=WITH_TOOLS, timeout=20).is_success
        chats = [r for r in list(sim.requests)[before:] if r.path.endswith("/chat/completions")]
        assert [bool(r.body.get("tools")) for r in chats] == [False]  # straight to rescue

        posted = httpx.post(first + "/api/tools", json=[LOOKUP], timeout=10)
        assert posted.status_code == 200
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
