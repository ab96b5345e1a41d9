"""Calls in fenced code blocks: ```json {"tool": …, "input": …} ``` and the like.

Models without a native format, and models that drift, wrap a call object
(or an array of them) in a Markdown fence. A fence whose body is not a call
stays content, untouched.

This is the fallback of seed 000 (``parseManualToolCalls``): it applies only
when the output holds no ``[TOOL_CALL]`` block. A fence after such a block
is content as written; calls read from a fence before one are held by the
stream parser until the output ends or the block appears, and then given
back as the fence's text (an example quoted next to a real call is not a
second call).
"""

from __future__ import annotations

from dataclasses import replace

from toolrelay.events import (
    CallRejected,
    ContentDelta,
    Event,
    ToolCallArgumentsDelta,
    ToolCallEnd,
    ToolCallStart,
)
from toolrelay.formats.base import Context, Format, KeptText, Opener, Region, Status, find_marker
from toolrelay.formats.jsoncalls import JsonCallsOptions, json_opener

FENCE = "```"
_FENCE_BODY = JsonCallsOptions(end_marker=FENCE, marked=False, several=True)
MARKERS = ("```json\n", "```json", "```tool_call\n", "```\n")


class VerbatimFence:
    """A fenced block after a ``[TOOL_CALL]`` block: content, through its closing fence."""

    __slots__ = ("_ctx", "_opener")

    def __init__(self, ctx: Context, opener: str) -> None:
        self._ctx = ctx
        self._opener = opener

    def feed(self, buf: str, pos: int, final: bool) -> tuple[int, Status]:
        ctx = self._ctx
        ctx.content(self._opener)
        self._opener = ""
        found, safe = find_marker(buf, pos, FENCE)
        if found >= 0:
            ctx.content(buf[pos : found + len(FENCE)])
            return found + len(FENCE), Status.DONE
        stop = len(buf) if final else safe
        ctx.content(buf[pos:stop])
        return stop, (Status.DONE if final else Status.CONTINUE)


def _fence(marker: str) -> Opener:
    calls = json_opener(marker, _FENCE_BODY).region

    def region(ctx: Context, opener: str) -> Region:
        if ctx.bracket_seen:
            return VerbatimFence(ctx, opener)
        return calls(ctx, opener)

    return Opener(marker, region)


FORMAT = Format(
    name="fenced_json",
    families="models without a native format, drifting models (seed 000's fallback)",
    description='```json {"name"|"tool": …, "arguments"|"input": …} ``` in a code fence',
    openers=tuple(_fence(marker) for marker in MARKERS),
)


class _Fence:
    """A fenced region's events, and its text to give back if it was no call."""

    __slots__ = ("events", "text")

    def __init__(self, events: list[Event], text: str) -> None:
        self.events = events
        self.text = text


class HeldFences:
    """The stream parser's hold on calls read from fences (seed 000's fallback).

    A fence that produced calls, and every event after it, is held until the
    output ends (the calls stand) or a ``[TOOL_CALL]`` block begins (each
    held fence becomes its text again, as content, and the calls after it
    are numbered as if it had never been read). Nothing is held unless a
    fence produced a call; while a fence is read, its own events wait for its
    end.
    """

    __slots__ = ("_events_from", "_held", "_open", "_release", "_text")

    def __init__(self) -> None:
        self._text = KeptText()  # the text of the fence being read
        self._open: list[Event] | None = None  # its events so far; None: no fence is read
        self._events_from = 0  # where its events begin in ctx.events
        self._held: list[Event | _Fence] = []
        self._release: list[Event] = []  # events from before the first held fence

    @property
    def holding(self) -> bool:
        return bool(self._held)

    def begin(self, ctx: Context, start: int) -> None:
        """A fenced region opens at ``buf[start]``."""
        self._text.mark(ctx.base + start)
        self._open = []
        self._events_from = len(ctx.events)

    def trim(self, ctx: Context, keep_from: int) -> None:
        if self._text.start >= 0:
            self._text.trim(ctx.buf, ctx.base, keep_from)

    def cancel(self) -> None:
        """The region fell back: its text is content, and it produced nothing."""
        self._text.clear()
        self._open = None

    def end(self, ctx: Context, pos: int) -> None:
        """The fenced region ended at ``buf[pos]``: hold it if it produced calls."""
        if self._open is None:
            return
        start = self._events_from
        events = self._open + ctx.events[start:]
        self._open = None
        before = ctx.events[:start]
        if any(isinstance(e, (ToolCallStart, CallRejected)) for e in events):
            (self._held if self._held else self._release).extend(before)
            self._held.append(_Fence(events, self._text.text(ctx.buf, ctx.base, pos)))
            ctx.events = []
        else:
            ctx.events = before + events
        self._text.clear()

    def take(self, events: list[Event]) -> list[Event]:
        """What may go out now of the parser's new ``events``."""
        if self._open is not None:
            self._open.extend(events[self._events_from :])
            events = events[: self._events_from]
            self._events_from = 0
        if self._held:
            self._held.extend(events)
            events = []
        if self._release:
            events = self._release + events
            self._release = []
        return events

    def give_back(self, ctx: Context) -> None:
        """A ``[TOOL_CALL]`` block begins: the held fences were not calls."""
        held = self._held
        self._held = []
        held.extend(ctx.events)
        dropped: set[int] = set()
        for item in held:
            if isinstance(item, _Fence):
                dropped.update(e.index for e in item.events if isinstance(e, ToolCallStart))
        out: list[Event] = []
        for item in held:
            if isinstance(item, _Fence):
                out.append(ContentDelta(item.text))
            elif isinstance(item, (ToolCallStart, ToolCallArgumentsDelta, ToolCallEnd)):
                out.append(replace(item, index=_renumbered(item.index, dropped)))
            else:
                out.append(item)
        ctx.next_index -= len(dropped)
        ctx.events = out

    def flush(self, ctx: Context) -> None:
        """The output ended with no ``[TOOL_CALL]`` block: the fences' calls stand."""
        held = self._held
        self._held = []
        held.extend(ctx.events)
        out: list[Event] = []
        for item in held:
            if isinstance(item, _Fence):
                out.extend(item.events)
            else:
                out.append(item)
        ctx.events = out


def _renumbered(index: int, dropped: set[int]) -> int:
    return index - sum(1 for d in dropped if d < index)
