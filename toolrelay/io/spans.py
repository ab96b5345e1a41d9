"""OpenTelemetry spans of the round and the tools (``serve --otel``): one per
backend attempt and one per tool run, children of the request's span.

The OpenTelemetry SDK is an optional extra (``toolrelay[otel]``): nothing here
imports it. The server hands a tracer to :func:`use_tracer` when traces are
on; until then every function returns at once and makes nothing. Names and
attributes follow OpenTelemetry's GenAI semantic conventions
(``chat {model}``, ``execute_tool {name}``, ``gen_ai.*``) plus toolrelay's own
(``toolrelay.*``).
"""

from __future__ import annotations

from typing import Any

from toolrelay.io.recording import CORRECTION

# An opentelemetry.trace.Tracer when traces are on (None: off); the compiled round
# reads it to know whether an attempt is observed.
active_tracer: Any = None


def use_tracer(tracer: Any) -> None:
    """Spans from now on go to ``tracer`` (None: no spans)."""
    global active_tracer
    active_tracer = tracer


def start_attempt(
    backend: str, kind: str, model: str, mode: str, stream: bool, why: str, text_format: str
) -> Any:
    """The span of one request to a backend (None when traces are off); end it
    with :func:`end_attempt`. A re-ask marks the request's span too."""
    if active_tracer is None:
        return None
    if why != "first":
        from opentelemetry import trace

        request = trace.get_current_span()
        attributes = getattr(request, "attributes", None) or {}
        request.set_attribute("toolrelay.reasks", int(attributes.get("toolrelay.reasks", 0)) + 1)
        if why == CORRECTION:
            repairs = int(attributes.get("toolrelay.repairs", 0)) + 1
            request.set_attribute("toolrelay.repairs", repairs)
    return active_tracer.start_span(
        f"chat {model}",
        kind=_client_kind(),
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": kind,
            "gen_ai.request.model": model,
            "toolrelay.backend": backend,
            "toolrelay.path": mode,
            "toolrelay.stream": stream,
            "toolrelay.attempt": why,
            "toolrelay.format": text_format,
        },
    )


def end_attempt(
    span: Any,
    *,
    usage: dict[str, Any] | None = None,
    finish_reason: str | None = None,
    calls: list[str] | None = None,
    formats: list[str] | None = None,
    rejected: int = 0,
    error: str | None = None,
) -> None:
    if span is None:
        return
    if usage:
        for ours, theirs in (
            ("input_tokens", "prompt_tokens"),
            ("output_tokens", "completion_tokens"),
        ):
            if isinstance(usage.get(theirs), int):
                span.set_attribute(f"gen_ai.usage.{ours}", usage[theirs])
    if finish_reason:
        span.set_attribute("gen_ai.response.finish_reasons", [finish_reason])
    if calls is not None:
        span.set_attribute("gen_ai.response.tool_calls", calls)
    if formats:
        # The text formats the calls were parsed from (toolrelay.format is the one asked).
        span.set_attribute("toolrelay.call_formats", formats)
    if rejected:
        span.set_attribute("toolrelay.rejected_calls", rejected)
    if error is not None:
        from opentelemetry.trace import Status, StatusCode

        span.set_attribute("error.type", "backend_error")
        span.set_status(Status(StatusCode.ERROR, error))
    span.end()


def tool_span(name: str, call_id: str) -> Any:
    """The span of one tool run, as a context manager (a no-op when traces are off)."""
    if active_tracer is None:
        return _NO_SPAN
    return active_tracer.start_as_current_span(
        f"execute_tool {name}",
        kind=_internal_kind(),
        attributes={
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
        },
    )


def turn_span(model: str, path: str) -> Any:
    """The span of one agent turn that is no HTTP request of its own (a ``/ws``
    session's turn: the root of its attempts and tool runs), as a context manager
    giving the span (None when traces are off)."""
    if active_tracer is None:
        return _NO_SPAN
    from opentelemetry.trace import SpanKind

    return active_tracer.start_as_current_span(
        "invoke_agent toolrelay",
        kind=SpanKind.SERVER,
        attributes={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "toolrelay",
            "gen_ai.request.model": model,
            "url.path": path,
        },
    )


def under(span: Any) -> Any:
    """A context manager making ``span`` the current one: the parent of the spans
    made in a task other than the request's (the MCP SDK runs a call in its own)."""
    if active_tracer is None or span is None:
        return _NO_SPAN
    from opentelemetry.trace import use_span

    return use_span(span, end_on_exit=False)


class _NoSpan:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_NO_SPAN = _NoSpan()


def _client_kind() -> Any:
    from opentelemetry.trace import SpanKind

    return SpanKind.CLIENT


def _internal_kind() -> Any:
    from opentelemetry.trace import SpanKind

    return SpanKind.INTERNAL
