"""Fixtures the engine tests share: a local HTTP tool service and a simulator, one
of each per test module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.tools.service import Service
from toolrelay.simulator import Simulator, SimulatorConfig


@pytest.fixture(scope="module")
def service() -> Iterator[Service]:
    with Service() as running:
        yield running


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator(SimulatorConfig.load(None)) as running:
        yield running
