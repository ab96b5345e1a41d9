"""``parse_tool_calls``: a finished model output in, calls, content and reasoning out."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from toolrelay.events import (
    CallRejected,
    ContentDelta,
    ParseResult,
    ReasoningDelta,
    RejectedCall,
    ToolCall,
    ToolCallEnd,
)
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
    never disagree. See ``StreamParser`` for the reasoning policy.
    """
    parser = StreamParser(tools, format, reasoning_open=bool(reasoning_open))
    events = parser.feed(text) + parser.close()
    if reasoning_open is None and parser.orphan_close:
        parser = StreamParser(tools, format, reasoning_open=True)
        events = parser.feed(text) + parser.close()
    calls: list[ToolCall] = []
    content: list[str] = []
    reasoning: list[str] = []
    rejected: list[RejectedCall] = []
    for event in events:
        if isinstance(event, ContentDelta):
            content.append(event.text)
        elif isinstance(event, ReasoningDelta):
            reasoning.append(event.text)
        elif isinstance(event, ToolCallEnd):
            calls.append(event.call)
        elif isinstance(event, CallRejected):
            rejected.append(event.call)
    return ParseResult(calls, "".join(content), "".join(reasoning) if reasoning else None, rejected)
