"""Simulators on free 127.0.0.1 ports, and helpers to read their wire formats."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import openai
import orjson
import pytest

from tests.weather import ASK_WEATHER, WEATHER_TOOL
from toolrelay.simulator import Simulator, SimulatorConfig

StartSimulator = Callable[..., Simulator]


@pytest.fixture
def start_simulator() -> Iterator[StartSimulator]:
    """start_simulator(scenario_or_None, **switches) -> a running Simulator, stopped after."""
    running: list[Simulator] = []

    def start(scenario: Any = None, **switches: Any) -> Simulator:
        simulator = Simulator(SimulatorConfig.load(scenario, **switches))
        simulator.start()
        running.append(simulator)
        return simulator

    yield start
    for simulator in running:
        simulator.stop()


@pytest.fixture(scope="module")
def default_sim() -> Iterator[Simulator]:
    """The built-in scenario, no switch on; shared by a module's read-only tests."""
    with Simulator() as simulator:
        yield simulator


class Wire:
    """Clients for a simulator (closed after the test) and readers for its formats."""

    def __init__(self) -> None:
        self.clients: list[httpx.Client | openai.OpenAI] = []

    def openai(self, simulator: Simulator) -> openai.OpenAI:
        client = openai.OpenAI(
            base_url=simulator.openai_url, api_key="unused", timeout=10, max_retries=0
        )
        self.clients.append(client)
        return client

    def http(self, simulator: Simulator) -> httpx.Client:
        client = httpx.Client(base_url=simulator.url, timeout=10)
        self.clients.append(client)
        return client

    @staticmethod
    def sse(body: str) -> list[Any]:
        """The data payloads of an SSE body: decoded JSON, or the raw string ([DONE])."""
        payloads: list[Any] = []
        for event in body.split("\n\n")[:-1]:
            assert event.startswith("data: "), event
            data = event.removeprefix("data: ")
            payloads.append(data if data == "[DONE]" else orjson.loads(data))
        assert body.endswith("\n\n")
        return payloads

    @staticmethod
    def ndjson(body: str) -> list[Any]:
        assert body.endswith("\n")
        return [orjson.loads(line) for line in body.splitlines()]


@pytest.fixture
def wire() -> Iterator[Wire]:
    helper = Wire()
    yield helper
    for client in helper.clients:
        client.close()


@pytest.fixture
def weather_tool() -> dict[str, Any]:
    return WEATHER_TOOL


@pytest.fixture
def weather_question() -> list[dict[str, Any]]:
    return [dict(message) for message in ASK_WEATHER]
