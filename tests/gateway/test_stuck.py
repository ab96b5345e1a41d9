"""Loop protection in proxy mode: the client's history shows a loop."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.gateway.inspected import lookup_tools_file
from tests.gateway.support import GatewayServer, gateway
from tests.tools.service import Service
from tests.weather import ASK_WEATHER, WEATHER_TOOL
from toolrelay.io.settings import Settings
from toolrelay.simulator import Simulator, SimulatorConfig

SCENARIO = {
    "rules": [
        {
            "match": {"tools": "none", "tool_result": True},
            "answer": {"content": "Final answer: {last_tool_result}"},
        },
        {
            "match": {"tools": "native"},
            "answer": {"tool_calls": [{"name": "{tool_name}", "arguments": {"city": "Paris"}}]},
        },
        {"answer": {"content": "ok"}},
    ]
}
STATUS_TOOL = {
    "type": "function",
    "function": {
        "name": "get_job_status",
        "description": "Status of the job",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def _history(name: str, results: list[str]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = list(ASK_WEATHER)
    for i, result in enumerate(results):
        call = {
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": name, "arguments": '{"city": "Paris"}'},
        }
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"call_{i}", "content": result})
    return messages


LOOP = _history("get_weather", ["18 C", "18 C", "18 C"])


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator(SimulatorConfig.load(SCENARIO)) as simulator:
        yield simulator


@pytest.fixture(scope="module")
def gw(sim: Simulator) -> Iterator[GatewayServer]:
    with gateway(sim.openai_url, backend_kind="openai") as server:
        yield server


def _stuck(reply: Any) -> Any:
    return (reply.model_extra or {}).get("toolrelay_stuck")


def test_enforce_answers_without_tools(gw: GatewayServer, sim: Simulator) -> None:
    reply = gw.client().chat.completions.create(
        model="toolrelay-sim", messages=LOOP, tools=[WEATHER_TOOL]
    )
    assert not reply.choices[0].message.tool_calls
    assert reply.choices[0].finish_reason == "stop"
    assert reply.choices[0].message.content.startswith("Final answer: 18 C")
    stuck = _stuck(reply)
    assert stuck["pattern"] == "identical_call" and stuck["mode"] == "enforce"
    assert stuck["tools"] == ["get_weather"] and stuck["count"] >= 3
    sent = sim.requests[-1].body
    assert "tools" not in sent and "tool_choice" not in sent
    health = httpx.get(gw.url + "/health", timeout=10).json()
    assert any(k.startswith("enforce/identical_call/") for k in health["counters"]["stuck"])
    assert health["settings"]["stuck_mode"] == "enforce"
    metrics = httpx.get(gw.url + "/metrics", timeout=10).text
    assert 'toolrelay_stuck_total{signal="enforce/identical_call/' in metrics
    assert 'stuck_mode="enforce"' in metrics and 'stuck_polling_exempt="true"' in metrics


def test_enforce_streamed_carries_it_on_the_final_chunk(gw: GatewayServer) -> None:
    chunks = list(
        gw.client().chat.completions.create(
            model="toolrelay-sim", messages=LOOP, tools=[WEATHER_TOOL], stream=True
        )
    )
    marked = [c for c in chunks if _stuck(c)]
    assert len(marked) == 1 and marked[0].choices[0].finish_reason == "stop"
    assert not any(c.choices[0].delta.tool_calls for c in chunks if c.choices)


@pytest.mark.parametrize("how", ["body", "header"])
def test_observe_leaves_the_answer_alone(gw: GatewayServer, how: str) -> None:
    client: openai.OpenAI = gw.client()
    if how == "body":
        reply = client.chat.completions.create(
            model="toolrelay-sim",
            messages=LOOP,
            tools=[WEATHER_TOOL],
            extra_body={"toolrelay_stuck_mode": "observe"},
        )
    else:
        reply = client.chat.completions.create(
            model="toolrelay-sim",
            messages=LOOP,
            tools=[WEATHER_TOOL],
            extra_headers={"x-toolrelay-stuck-mode": "observe"},
        )
    assert reply.choices[0].message.tool_calls
    assert _stuck(reply) is None
    health = httpx.get(gw.url + "/health", timeout=10).json()
    assert any(k.startswith("observe/identical_call/") for k in health["counters"]["stuck"])


def test_off_per_model(sim: Simulator) -> None:
    with gateway(
        sim.openai_url, backend_kind="openai", models={"toolrelay-sim": {"stuck": "off"}}
    ) as gw:
        reply = gw.client().chat.completions.create(
            model="toolrelay-sim", messages=LOOP, tools=[WEATHER_TOOL]
        )
        assert reply.choices[0].message.tool_calls and _stuck(reply) is None
        # The request still wins over the model's setting.
        forced = gw.client().chat.completions.create(
            model="toolrelay-sim",
            messages=LOOP,
            tools=[WEATHER_TOOL],
            extra_body={"toolrelay_stuck_mode": "enforce"},
        )
        assert _stuck(forced) is not None


def test_polling_with_progress_is_never_flagged(gw: GatewayServer) -> None:
    history = _history("get_job_status", ["running 10%", "running 50%", "running 90%"])
    reply = gw.client().chat.completions.create(
        model="toolrelay-sim", messages=history, tools=[STATUS_TOOL]
    )
    assert _stuck(reply) is None
    assert reply.choices[0].message.tool_calls


def test_bad_stuck_mode_is_a_400(gw: GatewayServer) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        gw.client().chat.completions.create(
            model="toolrelay-sim",
            messages=ASK_WEATHER,
            extra_headers={"x-toolrelay-stuck-mode": "sometimes"},
        )
    assert caught.value.param == "toolrelay_stuck_mode"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("mode", ["enforce", "observe"])
def test_a_loop_verdict_counts_for_the_backend_that_served_the_round(
    mode: str, stream: bool
) -> None:
    # The first backend answers 500: the round is served by the second (failover).
    with ExitStack() as stack:
        broken = stack.enter_context(Simulator(SimulatorConfig.load(SCENARIO, status=500)))
        good = stack.enter_context(Simulator(SimulatorConfig.load(SCENARIO)))
        settings = Settings(
            backend=broken.openai_url,
            backend_replicas=[good.openai_url],
            backend_kind="openai",
            health_interval=0,
            stuck_mode=mode,
        )
        gw = stack.enter_context(GatewayServer(settings))
        reply: Any = gw.client().chat.completions.create(
            model="toolrelay-sim", messages=LOOP, tools=[WEATHER_TOOL], stream=stream
        )
        if stream:
            list(reply)
        metrics = httpx.get(gw.url + "/metrics", timeout=10).text
    assert any(r.path.endswith("/chat/completions") for r in good.requests)
    assert (
        f'toolrelay_quality_loop_verdicts_total{{backend="default-2",mode="{mode}",'
        'model="toolrelay-sim"} 1.0' in metrics
    )
    assert 'loop_verdicts_total{backend="-"' not in metrics


def test_a_loop_verdict_in_a_turn_with_server_tools_counts_for_its_backend(
    tmp_path: Path,
) -> None:
    # The gateway runs its own tools: the turn goes to the agent loop, not the routed round.
    answered = {"rules": [{"match": {"tool_result": "."}, "answer": {"content": "done"}}]}
    with (
        Service() as service,
        Simulator(SimulatorConfig.load(answered)) as sim,
        gateway(
            sim.openai_url,
            backend_kind="openai",
            stuck_mode="observe",
            tools_file=lookup_tools_file(service.url, tmp_path),
        ) as gw,
    ):
        reply = gw.client().chat.completions.create(model="toolrelay-sim", messages=LOOP)
        metrics = httpx.get(gw.url + "/metrics", timeout=10).text
    assert reply.choices[0].message.content == "done"
    assert (
        'toolrelay_quality_loop_verdicts_total{backend="default",mode="observe",'
        'model="toolrelay-sim"} 1.0' in metrics
    )
