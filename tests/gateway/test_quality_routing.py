"""Quality routing: a replica whose tool calls come out invalid gets less
traffic when it is on, the same as the others when it is off."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import httpx
import pytest

from tests.gateway.support import GatewayServer
from tests.weather import ASK_WEATHER, WEATHER_TOOL
from toolrelay.io.settings import Settings
from toolrelay.routing_quality import MIN_ROUNDS
from toolrelay.simulator import Simulator, SimulatorConfig

# A replica whose model calls get_weather without the required city, always.
INVALID_CALLS: dict[str, Any] = {
    "models": ["toolrelay-sim"],
    "rules": [
        {
            "name": "invalid-call",
            "match": {"tools": "native"},
            "answer": {"tool_calls": [{"name": "get_weather", "arguments": {"town": "?"}}]},
        }
    ],
}
REQUESTS = 3 * MIN_ROUNDS + 90


@contextmanager
def three_replicas(quality: bool) -> Iterator[GatewayServer]:
    """Two good replicas and, last, one that writes invalid calls."""
    with ExitStack() as stack:
        sims = [stack.enter_context(Simulator()) for _ in range(2)]
        sims.append(stack.enter_context(Simulator(SimulatorConfig.load(INVALID_CALLS))))
        urls = [sim.openai_url for sim in sims]
        settings = Settings(
            backend=urls[0], backend_replicas=urls[1:], backend_kind="openai",
            health_interval=0, quality_routing=quality,
        )  # fmt: skip
        yield stack.enter_context(GatewayServer(settings))


def _shares(gw: GatewayServer) -> list[int]:
    client = gw.client()
    for _ in range(REQUESTS):
        client.chat.completions.create(
            model="toolrelay-sim", messages=ASK_WEATHER, tools=[WEATHER_TOOL]
        )
    health = httpx.get(gw.url + "/health", timeout=10).json()
    return [b["requests"] for b in health["backends"]]


def test_off_the_invalid_replica_gets_its_share() -> None:
    with three_replicas(quality=False) as gw:
        good, other, bad = _shares(gw)
        assert abs(bad - good) <= 1 and abs(bad - other) <= 1


def test_on_the_invalid_replica_gets_less_and_the_log_says_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, "toolrelay.backends"), three_replicas(True) as gw:
        good, other, bad = _shares(gw)
        assert bad < min(good, other) / 2
        metrics = httpx.get(gw.url + "/metrics", timeout=10).text
        assert (
            'toolrelay_backend_quality_factor{backend="default-3",model="toolrelay-sim"} 0.1'
            in metrics
        )
    (line,) = [r.getMessage() for r in caplog.records if "default-3" in r.getMessage()]
    assert line.startswith("quality routing, model toolrelay-sim: backend default-3: 100% of")
    assert "weight x0.10" in line
