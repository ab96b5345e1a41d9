"""The gateway in front of the simulator, for the fronts' tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fronts.support import SCENARIO
from tests.gateway.support import GatewayServer, stack
from toolrelay.simulator import Simulator


@pytest.fixture(scope="module", params=["native", "rescue"])
def pair(request: pytest.FixtureRequest) -> Iterator[tuple[Simulator, GatewayServer]]:
    """The gateway in front of the simulator, once natively and once rescuing."""
    settings = {"backend_kind": "openai", "tool_mode": request.param}
    with stack(SCENARIO, gateway_settings=settings) as both:
        yield both
