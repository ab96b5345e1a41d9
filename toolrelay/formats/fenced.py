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

Weak models asked for ``[TOOL_CALL]`` blocks (the rescue prompt) head the
call with a ``# TOOL_CALL`` comment line instead: inside the fence, above it,
or with no fence at all (``# TOOL_CALL {"name": …}``), with one to six ``#``,
with or without the space and with a colon after it (``## TOOL_CALL:``,
``#TOOL_CALL``). A heading that a call follows is markup, read with the call;
one that no call follows is content, as written.
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
from toolrelay.formats.base import (
    Context,
    Format,
    KeptText,
    Opener,
    Region,
    Status,
    find_marker,
    skip_whitespace,
)
from toolrelay.formats.jsoncalls import JsonCallsOptions, json_opener

FENCE = "```"
_FENCE_BODY = JsonCallsOptions(end_marker=FENCE, marked=False, several=True)
MARKERS = ("```json\n", "```json", "```tool_call\n", "```\n")
HEADING = "# TOOL_CALL"
# Every way of writing the heading: one to six ``#``, the space or none, a colon or none.
HEADINGS = tuple(
    f"{'#' * hashes}{space}TOOL_CALL{colon}"
    for hashes in range(1, 7)
    for space in ("", " ")
    for colon in ("", ":")
)
# Blanks waited through before a fence's heading: past them, the body is read as it is.
_MAX_BLANKS = 256


def _headed_by(following: str) -> bool | None:
    """Does a call's value follow the heading (True), not (False), or cannot it tell yet?"""
    if following and following[0] not in " \t\r\n{[":
        return False  # ``# TOOL_CALLS``, ``# TOOL_CALLing``: a word, not the heading
    stripped = following.lstrip()
    if not stripped:
        return None
    return stripped[0] in "{["


# What follows a heading wherever ``_headed_by`` could say anything but no
# (str.lstrip and \s strip the same characters).
_HEADED_BY = r"\Z|[{\[]|[ \t\r\n]\s*(?:[{\[]|\Z)"


def _heading_length(buf: str, start: int) -> int | None:
    """The length of the longest heading at ``buf[start]``: 0 none, None: cannot tell yet."""
    rest = buf[start : start + len(max(HEADINGS, key=len))]
    found = max((len(h) for h in HEADINGS if rest.startswith(h)), default=0)
    if any(h.startswith(rest) and len(h) > len(rest) for h in HEADINGS):
        return None  # the buffer ends inside a heading (or a longer one)
    return found


def _headings_end(buf: str, pos: int) -> int | None:
    """Where the heading lines at ``buf[pos:]`` end, if a call's value follows them
    (0: no heading, or none that a value follows; None: cannot tell yet).

    Weak models repeat the heading (``# TOOL_CALL`` twice over one call).
    """
    found = False
    while True:
        start = skip_whitespace(buf, pos)
        if start - pos > _MAX_BLANKS:
            return 0
        if start == len(buf):
            return None
        if found and buf[start] in "{[":
            return pos
        length = _heading_length(buf, start)
        if not length:
            return length
        after = buf[start + length : start + length + 1]
        if not after:
            return None
        if after not in " \t\r\n{[":
            return 0  # ``# TOOL_CALLS``, ``# TOOL_CALLing``: a word, not the heading
        found = True
        pos = start + length


class HeadedFence:
    """A fence's body, after the ``# TOOL_CALL`` heading lines it opens with, if any.

    The heading is passed over; if no call follows, the body falls back and the
    parser reads the heading again as the text after the fence's opener.
    """

    __slots__ = ("_body", "_started")

    def __init__(self, body: Region) -> None:
        self._body = body
        self._started = False

    @property
    def may_fallback(self) -> bool:
        return not self._started or bool(getattr(self._body, "may_fallback", False))

    def feed(self, buf: str, pos: int, final: bool) -> tuple[int, Status]:
        if not self._started:
            end = _headings_end(buf, pos)
            if end is None and not final:
                return pos, Status.CONTINUE  # a heading may be coming
            if end:
                pos = end
            self._started = True
        return self._body.feed(buf, pos, final)


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
        return HeadedFence(calls(ctx, opener))

    return Opener(marker, region)


def _fence_follows(following: str) -> bool | None:
    """Does a fence's opener follow the heading past blanks (True), not (False), or
    cannot it tell yet?"""
    stripped = following.lstrip(" \t\r\n")
    if any(stripped.startswith(marker) for marker in MARKERS):
        return True
    return None if any(marker.startswith(stripped) for marker in MARKERS) else False


# What follows a heading wherever ``_fence_follows`` could say anything but no.
_FENCE_FOLLOWS = r"\s*(?:\Z|`{1,2}\Z|```)"


class FenceUnderHeading:
    """A fence under a heading (``# TOOL_CALL`` on the line above it), read with it.

    If the fence holds no call the region falls back: the heading is content
    and the parser reads the fence again on its own. Next to a ``[TOOL_CALL]``
    block (seed 000) the heading is content at once, and the fence verbatim.
    """

    __slots__ = ("_ctx", "_fence")

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._fence: HeadedFence | None = None

    @property
    def may_fallback(self) -> bool:
        return self._fence is None or self._fence.may_fallback

    def feed(self, buf: str, pos: int, final: bool) -> tuple[int, Status]:
        if self._fence is None:
            if self._ctx.bracket_seen:
                return pos, Status.FALLBACK
            start = skip_whitespace(buf, pos)
            if not final and any(
                m.startswith(buf[start:]) and len(m) > len(buf) - start for m in MARKERS
            ):
                return pos, Status.CONTINUE  # the fence's opener may grow (```json, ```json\n)
            marker = next((m for m in MARKERS if buf.startswith(m, start)), None)
            if marker is None:
                return pos, Status.FALLBACK
            self._fence = HeadedFence(_FENCED_CALLS(self._ctx, marker))
            pos = start + len(marker)
        return self._fence.feed(buf, pos, final)


_FENCED_CALLS = json_opener(FENCE, _FENCE_BODY).region


def _under_heading(ctx: Context, _heading: str) -> Region:
    return FenceUnderHeading(ctx)


def opens_fence(marker: str, region: Region) -> bool:
    """Does the region the parser just opened at ``marker`` read a fence?"""
    return marker in MARKERS or isinstance(region, FenceUnderHeading)


def _headings() -> tuple[Opener, ...]:
    """``# TOOL_CALL`` over a fence, or with none: a call's value (as ``bare_json``
    reads it) follows."""
    bare = json_opener(HEADING, JsonCallsOptions(marked=False)).region
    return tuple(
        opener
        for heading in HEADINGS
        for opener in (
            Opener(heading, _under_heading, _fence_follows, _FENCE_FOLLOWS),
            Opener(heading, bare, _headed_by, _HEADED_BY),
        )
    )


FORMAT = Format(
    name="fenced_json",
    families="models without a native format, drifting models (seed 000's fallback)",
    description='```json {"name"|"tool": …, "arguments"|"input": …} ``` in a code fence',
    openers=(*(_fence(marker) for marker in MARKERS), *_headings()),
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
