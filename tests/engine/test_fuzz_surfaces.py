"""The short fuzz run of the surfaces added last (issue 23): hostile tool
definitions, tool responses and /ws frames against a real gateway, simulator
and tool server. The long run is bench/fuzz_surfaces.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings

from tests.engine.surfaces import (
    DEFINITION_BODIES,
    TOOL_ANSWERS,
    WS_FRAMES,
    Answer,
    Responder,
    check_definitions,
    check_tool_answer,
    check_ws_frame,
)
from tests.gateway.support import GatewayServer, gateway
from toolrelay.simulator import Simulator, SimulatorConfig

FUZZ = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    database=None,
)


@pytest.fixture(scope="module")
def gw() -> Iterator[GatewayServer]:
    with (
        Simulator(SimulatorConfig.load(None)) as sim,
        gateway(sim.openai_url, max_body_bytes=64 * 1024) as running,
    ):
        yield running


@pytest.fixture(scope="module")
def responder() -> Iterator[Responder]:
    with Responder() as running:
        yield running


@FUZZ
@given(body=DEFINITION_BODIES)
def test_hostile_definitions_get_a_clean_answer_and_break_nothing(
    gw: GatewayServer, body: bytes
) -> None:
    assert check_definitions(gw.url, body) is None


@FUZZ
@given(answer=TOOL_ANSWERS)
def test_hostile_tool_answers_become_bounded_texts(responder: Responder, answer: Answer) -> None:
    for follow in (False, True):
        assert check_tool_answer(responder, answer, follow) is None


@FUZZ
@given(frame=WS_FRAMES)
def test_hostile_ws_frames_get_an_event_and_the_session_goes_on(
    gw: GatewayServer, frame: str | bytes
) -> None:
    assert check_ws_frame(gw.url, frame) is None
