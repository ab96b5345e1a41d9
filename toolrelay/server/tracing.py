"""OpenTelemetry traces (``serve --otel``, or ``OTEL_EXPORTER_OTLP_ENDPOINT``):
a server span per request around the backend attempts' and tool runs' spans
(:mod:`toolrelay.io.spans`), exported over OTLP/HTTP.

The SDK is the optional extra ``toolrelay[otel]``. When the process already
has an SDK tracer provider (an application embedding the gateway, or a
test with an in-memory exporter) it is used as it is; else one is made with
the OTLP exporter, which reads the standard ``OTEL_EXPORTER_OTLP_*`` variables.
"""

from __future__ import annotations

import os
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolrelay.errors import ToolrelayError
from toolrelay.io.settings import Settings
from toolrelay.server.logs import NOTES

MISSING_EXTRA = (
    "OpenTelemetry traces need the otel extra: pip install 'toolrelay[otel]' "
    "(or unset OTEL_EXPORTER_OTLP_ENDPOINT and leave out --otel)"
)


class TracingUnavailable(ToolrelayError):
    """Traces are asked for and the SDK is not installed (a setting, at startup)."""


def traces_wanted(settings: Settings) -> bool:
    return settings.otel or bool(os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"))


def make_tracer() -> Any:
    """toolrelay's tracer, from the process's SDK provider or a new OTLP one."""
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
    except ImportError as exc:
        raise TracingUnavailable(MISSING_EXTRA) from exc
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        provider = TracerProvider(resource=Resource.create({"service.name": "toolrelay"}))
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        trace.set_tracer_provider(provider)
    from toolrelay import __version__

    return provider.get_tracer("toolrelay", __version__)


# Where a request's server span is kept in its scope: the parent of spans made in
# another task for it (the MCP SDK runs a tool call in its own task group).
SPAN = "toolrelay.span"


class Traced:
    """An endpoint whose every request is a server span (the attempts' parent).

    ``operation`` is the GenAI operation the endpoint serves (``chat`` for the
    fronts; None for ``/mcp``, whose requests say theirs in the scope's notes:
    ``mcp_method``, and ``tool`` for a call)."""

    def __init__(self, app: ASGIApp, tracer: Any, operation: str | None = "chat") -> None:
        self.app = app
        self.tracer = tracer
        self.operation = operation

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        from opentelemetry.trace import SpanKind, Status, StatusCode

        status = 0

        async def send_and_watch(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        attributes = {"http.request.method": scope["method"], "url.path": scope["path"]}
        name = f"{scope['method']} {scope['path']}"
        with self.tracer.start_as_current_span(
            name, kind=SpanKind.SERVER, attributes=attributes
        ) as span:
            scope[SPAN] = span
            try:
                await self.app(scope, receive, send_and_watch)
            finally:
                notes = scope.get(NOTES, {})
                span.set_attribute("http.response.status_code", status)
                if self.operation is not None:
                    span.set_attribute("gen_ai.operation.name", self.operation)
                if notes.get("mcp_method"):
                    span.set_attribute("mcp.method.name", notes["mcp_method"])
                if notes.get("tool"):
                    span.set_attribute("gen_ai.operation.name", "execute_tool")
                    span.set_attribute("gen_ai.tool.name", notes["tool"])
                if notes.get("model"):
                    span.set_attribute("gen_ai.request.model", notes["model"])
                if notes.get("mode"):
                    span.set_attribute("toolrelay.path", notes["mode"])
                if notes.get("request_id"):
                    span.set_attribute("toolrelay.request_id", notes["request_id"])
                if status >= 500:
                    span.set_status(Status(StatusCode.ERROR))
