"""``parse_tool_calls``: a finished model output in, calls, content and reasoning out."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from toolrelay.events import (
    CallRejected,
    ContentDelta,
    Event,
    ParseResult,
    ReasoningDelta,
    RejectedCall,
    ToolCall,
    ToolCallEnd,
)
from toolrelay.finished import parse_one_call
from toolrelay.stream import StreamParser


def parse_tool_calls(
    text: str,
    tools: Iterable[Any] | None = None,
    format: str = "auto",
    *,
    reasoning_open: bool | None = None,
) -> ParseResult:
    """Take every tool call out of ``text``.

    ``tools`` is the OpenAI ``tools`` array: when given, call names are
    matched to it (exactly, or by a unique namespaced suffix); a call to any
    other name, or whose arguments are not an object, is not returned but
    listed in ``rejected`` (``RejectedCall(name, raw, reason)``: the name as
    written, the call's text, why). Without ``tools`` any name is accepted.
    ``format`` is ``"auto"`` (every known format) or one format's name (see
    ``toolrelay.formats.format_names()``).

    ``reasoning_open``: True when the chat template opened the reasoning, so
    the text starts inside it; None (the default) decides from the text: a
    closing reasoning tag before any opening one makes everything before it
    reasoning (call markers included).

    This is the streaming parser fed the whole text at once, so the two can
    never disagree (one clean call is read without it, to the same result:
    ``toolrelay.finished``). See ``StreamParser`` for the reasoning policy.
    """
    return parse_output(text, tools, format, reasoning_open=reasoning_open)[0]


def parse_output(
    text: str,
    tools: Iterable[Any] | None = None,
    format: str = "auto",
    *,
    reasoning_open: bool | None = None,
) -> tuple[ParseResult, bool]:
    """``parse_tool_calls``, and whether the text was read as starting inside reasoning
    (told so, or found so by its orphan closing tag): what a caller learns a model by."""
    # One clean call: the same result without the replay (``toolrelay.finished``).
    quick = parse_one_call(text, tools, format, reasoning_open)
    if quick is not None:
        return quick
    return replay_output(text, tools, format, reasoning_open=reasoning_open)


def replay_output(
    text: str,
    tools: Iterable[Any] | None = None,
    format: str = "auto",
    *,
    reasoning_open: bool | None = None,
) -> tuple[ParseResult, bool]:
    """``parse_output`` through the stream parser always: the reference of its fast path."""
    parser = StreamParser(tools, format, reasoning_open=bool(reasoning_open))
    events = parser.feed(text) + parser.close()
    opened = bool(reasoning_open)
    if reasoning_open is None and parser.orphan_close:
        parser = StreamParser(tools, format, reasoning_open=True)
        events = parser.feed(text) + parser.close()
        opened = True
    return _result(events, parser), opened


def _result(events: list[Event], parser: StreamParser) -> ParseResult:
    calls: list[ToolCall] = []
    content: list[str] = []
    reasoning: list[str] = []
    rejected: list[RejectedCall] = []
    indices: list[int] = []
    for event in events:
        if isinstance(event, ContentDelta):
            content.append(event.text)
        elif isinstance(event, ReasoningDelta):
            reasoning.append(event.text)
        elif isinstance(event, ToolCallEnd):
            calls.append(event.call)
            indices.append(event.index)
        elif isinstance(event, CallRejected):
            rejected.append(event.call)
    formats = [parser.call_format(index) for index in indices]
    return ParseResult(
        calls, "".join(content), "".join(reasoning) if reasoning else None, rejected, formats
    )
