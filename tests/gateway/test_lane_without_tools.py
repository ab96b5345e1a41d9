"""The lane of a finished round without tools (``complete_without_tools``) is
the layered round, minus layers that had nothing to do for it.

Hypothesis drives the real gateway (in front of ``toolrelay simulate``) with
non-streamed requests that declare no tool, each sent twice: through the lane,
and through every layer as the round was before it (the required re-ask, the
refusal rescue, the checked reply, the empty-handed re-ask). The client's
answer (ids and times aside), the inspector's record of the request and every
counter the request moved must be the same both ways.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.gateway.support import GatewayServer, gateway
from toolrelay.io.backends.backend import Backend
from toolrelay.io.counters import Counters
from toolrelay.io.round import answered
from toolrelay.io.round.checked import complete_checked
from toolrelay.io.round.request import Reply, RoundRequest
from toolrelay.simulator import Simulator, SimulatorConfig

# Per-request figures that differ between two sends of the same request.
_VARYING = frozenset({"id", "created", "created_at", "time", "duration_ms", "ms"})


async def _through_every_layer(backend: Backend, req: RoundRequest, counters: Counters) -> Reply:
    """The round without the lane: every layer, as ``complete_round`` has it with tools."""

    async def ask(again: RoundRequest) -> Reply:
        return await complete_checked(backend, again, counters)

    return await answered._answered(backend.name, req, await ask(req), ask, counters)


@pytest.fixture(scope="module")
def gateways() -> Iterator[dict[str, GatewayServer]]:
    """Gateways with the inspector on: native, rescue (``round_mode`` asks the
    backend's facts for a history with calls) and in front of a failing backend."""
    with (
        Simulator(SimulatorConfig.load(None)) as sim,
        Simulator(SimulatorConfig.load(None, status=503)) as failing,
        gateway(sim.openai_url, inspector=True) as auto,
        gateway(sim.openai_url, inspector=True, tool_mode="rescue") as rescue,
        gateway(failing.openai_url, inspector=True) as down,
    ):
        yield {"auto": auto, "rescue": rescue, "down": down}


_texts = st.one_of(
    st.sampled_from(
        [
            "hello",
            "What's the weather in Paris?",
            "What is in notes.txt?",
            '<tool_call>{"name": "get_weather", "arguments": {"city": "Rome"}}</tool_call>',
            '[TOOL_CALL]{"name": "read_file", "arguments": {}}[/TOOL_CALL]',
            "<think>hm</think>ok",
        ]
    ),
    st.text(min_size=1, max_size=40),
)

_CALLED = [
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "rain, 4 C"},
]
# Earlier turns; one with a call makes ``round_mode`` ask the backend's mode.
_history = st.lists(
    st.sampled_from([[{"role": "assistant", "content": "Sure."}], _CALLED]), max_size=2
)


@st.composite
def _requests(draw: st.DrawFn) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    if draw(st.booleans()):
        messages.append({"role": "system", "content": draw(_texts)})
    messages.append({"role": "user", "content": draw(_texts)})
    for turn in draw(_history):
        messages.extend(turn)
    if messages[-1]["role"] == "assistant" or draw(st.booleans()):
        messages.append({"role": "user", "content": draw(_texts)})
    body: dict[str, Any] = {"model": "toolrelay-sim", "messages": messages}
    # A required or named choice without tools is refused (400), alike both ways.
    named = {"type": "function", "function": {"name": "f"}}
    choice = draw(st.sampled_from([None, None, None, "auto", "none", "required", named]))
    if choice is not None:
        body["tool_choice"] = choice
    if draw(st.booleans()):
        body["tools"] = []
    if draw(st.booleans()):
        body["max_tokens"] = draw(st.integers(1, 64))
    return body


def _steady(value: Any) -> Any:
    """``value`` without what differs from one send to the next (ids, times)."""
    if isinstance(value, dict):
        return {key: _steady(item) for key, item in value.items() if key not in _VARYING}
    if isinstance(value, list):
        return [_steady(item) for item in value]
    return value


def _metrics(gw: GatewayServer) -> dict[str, float]:
    """The gateway's counters (``/metrics``): the gauges and timings left out."""
    text = httpx.get(gw.url + "/metrics", timeout=10).text
    series = {}
    for line in text.splitlines():
        name, _, value = line.rpartition(" ")
        if "_total" in name and not name.startswith(("#", "process_", "python_")):
            series[name] = float(value)
    return series


def _record(gw: GatewayServer, before: int) -> dict[str, Any]:
    """The inspector's record of the request just answered (once it is done)."""
    inspector = gw.gateway_app.state.inspector
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        records = inspector.recent()
        if len(records) > before and records[0].done:
            record = records[0].to_dict()
            record["client_got"] = _steady(httpx.Response(200, text=record["client_got"]).json())
            return _steady(record)
        time.sleep(0.01)
    raise AssertionError("the request was not recorded")


def _send(gw: GatewayServer, path: str, body: dict[str, Any]) -> dict[str, Any]:
    before_metrics = _metrics(gw)
    before_records = len(gw.gateway_app.state.inspector.recent())
    response = httpx.post(gw.url + path, json=body, timeout=20)
    after = _metrics(gw)
    moved = {
        name: value - before_metrics.get(name, 0.0)
        for name, value in after.items()
        if value != before_metrics.get(name, 0.0)
    }
    return {
        "status": response.status_code,
        "answer": _steady(response.json()),
        "counters": moved,
        "record": _record(gw, before_records),
    }


def _as_messages(body: dict[str, Any]) -> dict[str, Any]:
    """The same question on the Messages front (its history in its own shape aside)."""
    users = [m["content"] for m in body["messages"] if m["role"] == "user"]
    return {
        "model": body["model"],
        "max_tokens": body.get("max_tokens", 64),
        "messages": [{"role": "user", "content": users[-1]}],
    }


_HISTORY_WITH_A_CALL = {
    "model": "toolrelay-sim",
    "messages": [{"role": "user", "content": "What's the weather in Oslo?"}, *_CALLED],
}


@settings(max_examples=40)
@given(
    body=_requests(),
    target=st.sampled_from(["auto", "rescue", "down"]),
    front=st.sampled_from(["chat", "chat", "messages"]),
)
@example(body=_HISTORY_WITH_A_CALL, target="rescue", front="chat")
@example(body=_HISTORY_WITH_A_CALL, target="down", front="chat")
def test_a_round_without_tools_answers_alike_through_the_lane_and_every_layer(
    gateways: dict[str, GatewayServer], body: dict[str, Any], target: str, front: str
) -> None:
    gw = gateways[target]
    path, sent = ("/v1/chat/completions", body)
    if front == "messages":
        path, sent = "/v1/messages", _as_messages(body)
    through_lane = _send(gw, path, sent)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(answered, "complete_without_tools", _through_every_layer)
        through_layers = _send(gw, path, sent)
    assert through_lane == through_layers
