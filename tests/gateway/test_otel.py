"""OpenTelemetry traces (``serve --otel``): a server span per request, a child
per backend attempt and per tool run, with GenAI semantic-convention
attributes; checked with the SDK's in-memory exporter."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from tests.gateway.inspected import QUESTION, WEATHER, scenario
from tests.gateway.support import gateway
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
    rules = scenario()["rules"]
    tool_round = [
        {"match": {"tool_result": "."}, "answer": {"content": "It is sunny."}},
        {
            "match": {"last_user": "^Lookup", "tools": "prompt"},
            "answer": {
                "content": '[TOOL_CALL]{"name": "lookup", "arguments": {"city": "Paris"}}'
                "[/TOOL_CALL]"
            },
        },
    ]
    with Simulator(SimulatorConfig.load({"rules": [*tool_round, *rules]})) as simulator:
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
    assert not spans.tracing(), "the gateway's shutdown stops its spans"


def test_a_tool_run_is_a_span_of_its_own(
    sim: Simulator, exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    exporter.clear()
    tool = {
        "name": "lookup",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
    with Service() as service:
        path = tmp_path / "tools.json"
        path.write_text(json.dumps([{**tool, "url": service.url + "/lookup"}]), encoding="utf-8")
        with gateway(sim.openai_url, tool_mode="rescue", tools_file=str(path), otel=True) as gw:
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


def test_off_no_span_is_made(sim: Simulator, exporter: InMemorySpanExporter) -> None:
    exporter.clear()
    with gateway(sim.openai_url, tool_mode="rescue") as gw:
        gw.client().chat.completions.create(
            model="sim", messages=[{"role": "user", "content": QUESTION}]
        )
    assert exporter.get_finished_spans() == ()
