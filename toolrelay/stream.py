"""The streaming parser: model text in, a few characters at a time; events out.

``StreamParser`` is the one implementation of tool-call parsing;
``parse_tool_calls`` is this parser fed the whole text at once. It works like
h11's connection object: a buffer that only ever holds text not yet decided
on, a cursor that never goes back over searched text, and events handed out
as soon as they are certain.

Outside a region the parser looks for the opening markers of the active
formats. Text that cannot start a marker goes out as content at once; only
a possible partial marker at the end of the buffer is held back (at most the
longest marker's length less one). Inside a region the format's region
parser consumes the text and emits call events.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import groupby
from typing import Any

from toolrelay.events import ContentDelta, Event, ReasoningDelta, ToolCallArgumentsDelta
from toolrelay.formats import bracket, fenced, opener_table
from toolrelay.formats.base import Context, Region, Status
from toolrelay.formats.fenced import HeldFences
from toolrelay.formats.markers import MarkerSearch, OpenerTable
from toolrelay.formats.reasoning import open_reasoning
from toolrelay.names import ToolSet


class StreamParser:
    """Feed model output with ``feed(delta)``; finish with ``close()``.

    Both return the events that became certain. Events are frozen
    dataclasses from ``toolrelay.events``. The concatenated ContentDelta
    texts equal ``parse_tool_calls(whole_text).content`` whatever the
    chunking, and the argument deltas of a call concatenate to its final
    ``arguments_json``.

    Reasoning policy:

    - Text in ``<think>…</think>`` (and the other reasoning wrappers:
      ``<seed:think>``, ``<|START_THINKING|>``, ``[THINK]``, Gemma 4's
      ``<|channel>thought…<channel|>``, …) is reasoning, calls written
      inside a closed think block included: they are drafts, not calls.
    - ``reasoning_open=True`` says the chat template opened the reasoning
      in the prompt (Qwen3-Thinking, QwQ, DeepSeek-R1, MiniMax-M2, …): the
      output starts inside it, and everything up to the first closing tag
      (any family's) is reasoning, call markers included.
    - Without the flag, a closing tag met before any opening one is an
      orphan: it is dropped, and ``orphan_close`` becomes True, so that a
      caller can learn the flag for the model's next outputs. (The text
      before it has gone out as content by then; ``parse_tool_calls``,
      which sees the whole text, reads it again with the flag.)
    - If a think block (or the reasoning the flag opened) never closes, the
      calls in it are parsed as calls when the output ends (a model that
      forgot ``</think>``), and its prose stays reasoning.

    Calls that are recognised but cannot be used (an undeclared or
    ambiguous name, arguments that are not an object) come out as
    ``CallRejected`` events, never as calls and never silently.
    """

    __slots__ = (
        "_barrier",
        "_buf",
        "_closed",
        "_ctx",
        "_fences",
        "_opener",
        "_pos",
        "_region",
        "_replay",
        "_search",
        "_table",
    )

    def __init__(
        self,
        tools: Iterable[Any] | None = None,
        format: str = "auto",
        *,
        reasoning_open: bool = False,
    ) -> None:
        self._start(Context(ToolSet(tools), format), reasoning_open)

    def _start(self, ctx: Context, reasoning_open: bool) -> None:
        self._table: OpenerTable = opener_table(ctx.format_name)
        self._search = MarkerSearch(self._table)
        self._ctx = ctx
        ctx.openers = self._table
        ctx.read_nested = _read_nested
        self._buf = ""  # text not yet decided on
        self._pos = 0  # how far the buffer has been read
        self._region: Region | None = open_reasoning(ctx) if reasoning_open else None
        self._opener = ""  # the marker that opened the current region
        # What a region that may still fall back has read, from its opener on: kept
        # aside rather than in the buffer, so that a long region costs no copying.
        self._replay: list[str] = []
        # A bare bracket that turned out not to open a call makes the text its region
        # read content, brackets in it included (they are inside the same non-call):
        # single-character markers before this buffer position are not tried again.
        self._barrier = 0
        self._closed = False
        # Calls read from fences wait while a [TOOL_CALL] block may still come (seed 000):
        # with the formats that have both, from the first fence on (before it, nothing
        # waits, and a delta pays nothing for them).
        self._fences: HeldFences | None = None

    @property
    def orphan_close(self) -> bool:
        """A closing reasoning tag came before any opening one: the template opened it."""
        return self._ctx.orphan_close

    @property
    def reasoning_seen(self) -> bool:
        """A reasoning block was opened: no closing tag after this is an orphan."""
        return self._ctx.reasoning_seen

    def call_format(self, index: int) -> str:
        """The text format call ``index`` was written in (``hermes``, ``mistral``,
        ``bracket`` for the rescue prompt's blocks, …), once it has started."""
        return self._ctx.formats.get(index, "")

    def feed(self, delta: str) -> list[Event]:
        if self._closed:
            raise RuntimeError("feed() after close()")
        if delta:
            self._buf = self._buf + delta if self._buf else delta
            self._run(final=False)
        return self._take()

    def close(self) -> list[Event]:
        if not self._closed:
            self._closed = True
            self._run(final=True)
            if self._fences is not None and self._fences.holding:
                self._fences.flush(self._ctx)
        return self._take()

    def _take(self) -> list[Event]:
        events = self._ctx.events
        self._ctx.events = []
        if self._fences is not None:
            events = self._fences.take(events)
        return events if len(events) < 2 else _merge_text(events)

    def _run(self, final: bool) -> None:
        buf = self._buf
        pos = self._pos
        keep_from = 0  # text before this is decided (or kept aside) and leaves the buffer
        ctx = self._ctx
        ctx.buf = buf
        while True:
            region = self._region
            if region is not None:
                pos, status = region.feed(buf, pos, final)
                if status is Status.CONTINUE:
                    if getattr(region, "may_fallback", False):
                        if pos > keep_from:
                            self._replay.append(buf[keep_from:pos])
                    elif self._replay:
                        self._replay = []
                    keep_from = pos
                    break
                self._region = None
                fences = self._fences
                if fences is not None:
                    if status is Status.DONE:
                        fences.end(ctx, pos)
                    else:
                        fences.cancel()
                if status is Status.FALLBACK or status is Status.DROP_OPENER:
                    ctx.unmark()  # no call was read
                    if self._replay:
                        # Read again what the region read: its text is back in the buffer.
                        replayed = "".join(self._replay)
                        self._replay = []
                        buf = replayed + buf[keep_from:]
                        shift = len(replayed) - keep_from
                        pos += shift
                        self._barrier += shift  # it counts from the buffer's start too
                        ctx.base -= shift
                        ctx.buf = buf
                        keep_from = 0
                    if len(self._opener) == 1:
                        self._barrier = max(self._barrier, pos)
                    if status is Status.FALLBACK and self._opener not in self._table.tokens:
                        # (A special token is markup even where no call follows it.)
                        ctx.content(self._opener)
                        ctx.at_start = False
                    pos = keep_from + len(self._opener)
                elif self._replay:
                    self._replay = []
                keep_from = pos
                continue
            found = self._search.search(buf, pos, final)
            while found is not None and found[0] < self._barrier and len(found[1]) == 1:
                found = self._search.search(buf, found[0] + 1, final)
            if found is None:
                safe = len(buf) if final else self._table.safe_end(buf, pos)
                self._emit_content(buf[pos:safe])
                pos = keep_from = safe
                break
            start, marker, factory = found
            if factory is None:
                # Waiting on this marker: a longer one may begin before it and run past
                # the buffer's end (MiniMax-M3's "]<]minimax[>[<tool_call>" holds a "[").
                start = min(start, self._table.safe_end(buf, pos))
                self._emit_content(buf[pos:start])
                pos = keep_from = start
                break
            self._emit_content(buf[pos:start])
            self._opener = marker
            keep_from = start
            ctx.mark(start)  # a call the region rejects is reported from its opener on
            ctx.region_format = self._table.format_of.get(factory, "")
            region = self._region = factory(ctx, marker)
            if marker == bracket.MARKER:
                if self._fences is not None and self._fences.holding:
                    self._fences.give_back(ctx)
            elif (
                fenced.opens_fence(marker, region)
                and not ctx.bracket_seen
                and bracket.MARKER in self._table.openers
            ):
                if self._fences is None:
                    self._fences = HeldFences()
                self._fences.begin(ctx, start)
            ctx.at_start = False
            pos = start + len(marker)
        if keep_from:
            if self._fences is not None:
                self._fences.trim(ctx, keep_from)
            ctx.trim(keep_from)
            self._buf = buf[keep_from:]
        self._pos = pos - keep_from
        self._barrier -= keep_from

    def _emit_content(self, text: str) -> None:
        if text:
            ctx = self._ctx
            ctx.content(text)
            if ctx.at_start and not text.isspace():
                ctx.at_start = False


def _read_nested(ctx: Context, text: str) -> list[Event]:
    """``text`` read whole by a parser of its own over ``ctx`` (the calls of a
    think block that never closed: see ``Context.read_nested``)."""
    parser = StreamParser.__new__(StreamParser)
    parser._start(ctx, reasoning_open=False)
    return parser.feed(text) + parser.close()


def _merge_text(events: list[Event]) -> list[Event]:
    """Join neighbouring deltas of one kind produced by one feed.

    Content with content, reasoning with reasoning, and a call's argument
    fragments with each other: a feed gives each call at most one
    ``ToolCallArgumentsDelta``, however many pieces its text was read in.
    """
    merged: list[Event] = []
    for kind, run in groupby(events, _kind):
        if kind is ContentDelta or kind is ReasoningDelta:
            text = "".join(e.text for e in run if isinstance(e, ContentDelta | ReasoningDelta))
            merged.append(ContentDelta(text) if kind is ContentDelta else ReasoningDelta(text))
        elif type(kind) is int:
            text = "".join(e.text for e in run if isinstance(e, ToolCallArgumentsDelta))
            merged.append(ToolCallArgumentsDelta(kind, text))
        else:
            merged.extend(run)
    return merged


def _kind(event: Event) -> object:
    """What may merge with its neighbour: the type, or a call's index for argument deltas."""
    return event.index if type(event) is ToolCallArgumentsDelta else type(event)
