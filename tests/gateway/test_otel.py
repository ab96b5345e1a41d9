"""OpenTelemetry traces (``serve --otel``): a server span per request, a child
per backend attempt and per tool run, with GenAI semantic-convention
attributes; checked with the SDK's in-memory exporter."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from tests.gateway.inspected import QUESTION, WEATHER, lookup_tools_file, scenario
from tests.gateway.support import gateway, ws_turn
from tests.tools.service import Service
from toolrelay.io import spans
from toolrelay.simulator import Simulator, SimulatorConfig


@pytest.fixture(scope="module")
def exporter() -> InMemorySpanExporter:
    """The process's tracer provider, exporting to memory (the gateway uses the
    provider it finds; the provider can be set once per process)."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    return memory


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator(SimulatorConfig.load(scenario())) as simulator:
        yield simulator


def _by_name(finished: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [span for span in finished if span.name == name]


def test_a_request_span_holds_each_attempt_with_gen_ai_attributes(
    sim: Simulator, exporter: InMemorySpanExporter
) -> None:
    exporter.clear()
    with gateway(sim.openai_url, tool_mode="rescue", otel=True) as gw:
        reply = gw.client().chat.completions.create(
            model="sim",
            messages=[{"role": "user", "content": QUESTION}],
            tools=[WEATHER],  # type: ignore[list-item]
        )
    assert reply.choices[0].message.tool_calls
    finished = exporter.get_finished_spans()
    (request,) = _by_name(finished, "POST /v1/chat/completions")
    assert request.kind is SpanKind.SERVER
    attributes: Any = request.attributes
    assert attributes["gen_ai.request.model"] == "sim"
    assert attributes["toolrelay.path"] == "rescue"
    assert attributes["toolrelay.repairs"] == 1
    assert attributes["http.response.status_code"] == 200
    first, repair = sorted(_by_name(finished, "chat sim"), key=lambda span: span.start_time or 0)
    for attempt in (first, repair):
        assert attempt.kind is SpanKind.CLIENT
        assert attempt.parent is not None
        assert attempt.parent.span_id == request.context.span_id
        assert attempt.context.trace_id == request.context.trace_id
        own: Any = attempt.attributes
        assert own["gen_ai.operation.name"] == "chat"
        assert own["gen_ai.request.model"] == "sim"
        assert own["toolrelay.backend"] == "default" and own["toolrelay.path"] == "rescue"
        assert own["gen_ai.usage.input_tokens"] > 0 and own["gen_ai.usage.output_tokens"] > 0
    assert first.attributes is not None and repair.attributes is not None
    assert first.attributes["toolrelay.attempt"] == "first"
    assert first.attributes["toolrelay.rejected_calls"] == 1
    assert repair.attributes["toolrelay.attempt"] == "correction re-ask"
    assert list(repair.attributes["gen_ai.response.tool_calls"]) == ["get_weather"]
    assert spans.active_tracer is None, "the gateway's shutdown stops its spans"


def test_a_tool_run_is_a_span_of_its_own(
    sim: Simulator, exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    exporter.clear()
    with Service() as service, _lookup_gateway(sim, service, tmp_path) as gw:
        reply = gw.client().chat.completions.create(
            model="sim", messages=[{"role": "user", "content": "Lookup Paris"}]
        )
    assert reply.choices[0].message.content == "It is sunny."
    finished = exporter.get_finished_spans()
    (request,) = _by_name(finished, "POST /v1/chat/completions")
    (run,) = _by_name(finished, "execute_tool lookup")
    attributes: Any = run.attributes
    assert attributes["gen_ai.operation.name"] == "execute_tool"
    assert attributes["gen_ai.tool.name"] == "lookup"
    assert attributes["gen_ai.tool.call.id"]
    assert run.context.trace_id == request.context.trace_id
    assert len(_by_name(finished, "chat sim")) == 2  # the call, then the answer


def _lookup_gateway(sim: Simulator, service: Service, folder: Path, **settings: Any) -> Any:
    """A traced gateway whose tools file declares ``lookup`` (on ``service``)."""
    path = lookup_tools_file(service.url, folder)
    return gateway(sim.openai_url, tool_mode="rescue", tools_file=path, otel=True, **settings)


def test_a_ws_turn_is_a_span_over_its_attempts_and_tool_runs(
    sim: Simulator, exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    exporter.clear()
    with Service() as service, _lookup_gateway(sim, service, tmp_path, model="sim") as gw:
        events = asyncio.run(ws_turn(gw.url, "Lookup Paris"))
    assert [e["type"] for e in events][-1] == "assistant_end"
    assert events[-1]["text"] == "It is sunny."
    finished = exporter.get_finished_spans()
    (turn,) = _by_name(finished, "invoke_agent toolrelay")
    assert turn.kind is SpanKind.SERVER
    attributes: Any = turn.attributes
    assert attributes["gen_ai.operation.name"] == "invoke_agent"
    assert attributes["gen_ai.request.model"] == "sim" and attributes["url.path"] == "/ws"
    assert attributes["toolrelay.tool_calls"] == 1 and attributes["toolrelay.status"] == 200
    attempts = _by_name(finished, "chat sim")
    (run,) = _by_name(finished, "execute_tool lookup")
    assert len(attempts) == 2  # the call, then the answer
    for child in (*attempts, run):
        assert child.parent is not None and child.parent.span_id == turn.context.span_id
        assert child.context.trace_id == turn.context.trace_id


def test_an_mcp_call_is_a_span_over_its_tool_run(
    sim: Simulator, exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    exporter.clear()

    async def call(url: str) -> Any:
        async with Client(url + "/mcp") as client:
            return await client.call_tool("lookup", {"city": "Paris"})

    with Service() as service, _lookup_gateway(sim, service, tmp_path) as gw:
        result = asyncio.run(asyncio.wait_for(call(gw.url), 30))
    assert not result.is_error
    finished = exporter.get_finished_spans()
    posts = _by_name(finished, "POST /mcp")
    (request,) = [s for s in posts if (s.attributes or {}).get("mcp.method.name") == "tools/call"]
    attributes: Any = request.attributes
    assert request.kind is SpanKind.SERVER
    assert attributes["gen_ai.operation.name"] == "execute_tool"
    assert attributes["gen_ai.tool.name"] == "lookup"
    assert attributes["http.response.status_code"] == 200
    (run,) = _by_name(finished, "execute_tool lookup")
    assert run.parent is not None and run.parent.span_id == request.context.span_id
    assert run.context.trace_id == request.context.trace_id


def test_off_no_span_is_made(sim: Simulator, exporter: InMemorySpanExporter) -> None:
    exporter.clear()
    with gateway(sim.openai_url, tool_mode="rescue") as gw:
        gw.client().chat.completions.create(
            model="sim", messages=[{"role": "user", "content": QUESTION}]
        )
    assert exporter.get_finished_spans() == ()
