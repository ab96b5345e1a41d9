"""Checks every stream of events must pass, shared by the parser tests."""

from __future__ import annotations

from typing import Any

from toolrelay import (
    CallRejected,
    ContentDelta,
    ParseResult,
    ReasoningDelta,
    StreamParser,
    ToolCallArgumentsDelta,
    ToolCallEnd,
    ToolCallStart,
    parse_tool_calls,
)
from toolrelay.repair import load_json
from toolrelay.undecided import stream_parser


def opens_in_reasoning(text: str, tools: Any = None, fmt: str = "auto") -> bool:
    """What ``parse_tool_calls`` decides for the text: does it start inside reasoning?

    A stream parser is told this by its caller (``reasoning_open``); the
    finished parse finds it in the text (an orphan closing tag).
    """
    parser = StreamParser(tools, fmt)
    parser.feed(text)
    parser.close()
    return parser.orphan_close


def pieces(text: str, cuts: list[int]) -> list[str]:
    """``text`` cut at the given positions (those inside it, each once, in order)."""
    out, start = [], 0
    for cut in sorted(set(cuts)):
        if start < cut < len(text):
            out.append(text[start:cut])
            start = cut
    out.append(text[start:])
    return out


def stream(
    text: str,
    cuts: list[int],
    tools: Any = None,
    fmt: str = "auto",
    reasoning_open: bool | None = False,
) -> list[Any]:
    """Feed ``text`` cut at the given positions; return every event. ``reasoning_open``
    None: not known, as for a gateway's first streams of a model (toolrelay.undecided)."""
    parser = stream_parser(tools, fmt, reasoning_open=reasoning_open)
    events: list[Any] = []
    for piece in pieces(text, cuts):
        events += parser.feed(piece)
    events += parser.close()
    return events


def check_stream(
    text: str, cuts: list[int], tools: Any = None, fmt: str = "auto", *, told: bool = True
) -> None:
    """The streamed events agree with the finished parse and obey the event rules.

    ``told``: the stream parser is told whether the text starts inside reasoning
    (what the finished parse finds); else it is not, as the gateway's first
    streams of a model are not, and must find out itself."""
    expected: ParseResult = parse_tool_calls(text, tools, fmt)
    opened = opens_in_reasoning(text, tools, fmt) if told else None
    events = stream(text, cuts, tools, fmt, opened)
    content = "".join(e.text for e in events if isinstance(e, ContentDelta))
    reasoning = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
    assert content == expected.content
    assert (reasoning or None) == expected.reasoning
    started: dict[int, ToolCallStart] = {}
    arguments: dict[int, list[str]] = {}
    ended = []
    cut: list[int] = []
    for event in events:
        if isinstance(event, ToolCallStart):
            assert event.index not in started, "a call started twice"
            assert event.index == len(started), "indices are consecutive"
            assert event.name and event.id
            started[event.index] = event
            arguments[event.index] = []
        elif isinstance(event, ToolCallArgumentsDelta):
            assert event.index in started and event.index not in {c.index for c in ended}
            assert event.index not in cut
            assert event.text
            arguments[event.index].append(event.text)
        elif isinstance(event, ToolCallEnd):
            assert event.index in started
            assert (event.call.id, event.call.name) == (
                started[event.index].id,
                started[event.index].name,
            ), "a call ends under the id and name it started with"
            assert "".join(arguments[event.index]) == event.call.arguments_json
            assert isinstance(event.call.arguments, dict)
            # However the parser came by the value (decoded at once, or known to the
            # region as it wrote the text), it is what the text decodes to.
            assert event.call.arguments == load_json(event.call.arguments_json)
            ended.append(event)
        elif isinstance(event, CallRejected) and event.index is not None:
            # A started call whose text ended inside a string: cut, it ends rejected.
            assert event.index in started and event.index not in {c.index for c in ended}
            assert event.index not in cut
            cut.append(event.index)
    assert len(ended) + len(cut) == len(started), "every started call ends or is cut"
    got = [(e.call.name, e.call.arguments, e.call.arguments_json) for e in ended]
    want = [(c.name, c.arguments, c.arguments_json) for c in expected.calls]
    assert got == want
    rejected = [e.call for e in events if isinstance(e, CallRejected)]
    assert rejected == expected.rejected, "the same calls are rejected, with the same text"
    for call in rejected:
        assert call.reason and call.raw, "a rejection says why, and shows the call"
