"""The parser's events as a sequence of blocks, for the fronts whose answers
are lists of typed parts (Anthropic's content blocks, Responses' output items).

A block is text, reasoning or one tool call. One block is open at a time, so
blocks never interleave: a block of another kind closes the open one. A front
subclasses :class:`Blocks` and says, in its own wire format, what opening a
block, a delta and closing it mean; each returns the stream events to send.

Blank text waits for visible text: no text block starts or ends with the
line breaks a model writes around its calls, nor holds only them.
"""

from __future__ import annotations

from functools import cache
from typing import Any, Literal

import orjson
from mypy_extensions import mypyc_attr

from toolrelay.events import (
    CallRejected,
    ContentDelta,
    Event,
    ReasoningDelta,
    ToolCall,
    ToolCallArgumentsDelta,
    ToolCallEnd,
    ToolCallStart,
)
from toolrelay.io.round import ContentRun

Kind = Literal["text", "reasoning", "call"]
WireEvent = dict[str, Any]


# Compiled (setup.py); tests subclass the Messages builder, a subclass of this.
@mypyc_attr(allow_interpreted_subclasses=True)
class Blocks:
    def __init__(self, reasoning: bool) -> None:
        # Reasoning is answered only when the client asked for it, dropped otherwise.
        self._reasoning = reasoning
        self._kind: Kind | None = None
        self._pieces: list[str] = []
        self._blank = ""

    # --- what a front says -----------------------------------------------------

    def open(self, kind: Kind, start: ToolCallStart | None) -> list[WireEvent]:
        raise NotImplementedError

    def delta(self, kind: Kind, text: str) -> WireEvent | None:
        """None when the front says nothing until the block closes."""
        raise NotImplementedError

    def close(self, kind: Kind, text: str, call: ToolCall | None) -> list[WireEvent]:
        """``text`` is the block's whole text (a call's arguments); ``call`` the
        finished call, None when a call block closes without one."""
        raise NotImplementedError

    # --- feeding it --------------------------------------------------------------

    def event(self, event: Event) -> list[WireEvent]:
        """The wire events saying what ``event`` changed (often none or one)."""
        if isinstance(event, ContentDelta):
            return self._add("text", event.text)
        if isinstance(event, ToolCallArgumentsDelta):
            if self._kind != "call" or not event.text:
                return []
            self._pieces.append(event.text)
            said = self.delta("call", event.text)
            return [said] if said is not None else []
        if isinstance(event, ReasoningDelta):
            return self._add("reasoning", event.text) if self._reasoning else []
        if isinstance(event, ToolCallStart):
            self._blank = ""
            out = self.end_block()
            self._kind = "call"
            return out + self.open("call", event)
        if isinstance(event, ToolCallEnd) and self._kind == "call":
            return self._end(event.call)
        if isinstance(event, CallRejected) and event.index is not None and self._kind == "call":
            return self._end(None)  # a started call cut short: its block closes without it
        return []

    def text_open_bytes(self) -> bytes:
        """``sse`` of ``self.open("text", None)``'s events, the same bytes and the
        same block opened, written without the events' dicts (:meth:`event_bytes`)."""
        raise NotImplementedError

    def text_delta_bytes(self, text: str) -> bytes:
        """``sse(self.delta("text", text))`` for the open text block: the same
        bytes, written without the event's dict (:meth:`stream_event`'s hot path)."""
        raise NotImplementedError

    def stream_event(self, event: Event) -> bytes | None:
        """The SSE bytes saying ``event`` (None: nothing to say), as :meth:`event`'s
        events through :func:`sse`. More text in the open text block, most of a
        stream's events, skips the general dispatch and the events' dicts: one
        call of the front's :meth:`text_delta_bytes`; so does more of a call's
        arguments, most of a call's events (:meth:`event`'s steps for it here,
        one call of the front's :meth:`call_delta_bytes`); a call's start and end
        go straight to their byte writers."""
        if type(event) is ContentDelta and self._kind == "text":
            text = event.text
            # The usual text holds no blank at its end and follows none held:
            # said as it came. (``rstrip`` strips what ``isspace`` names.)
            if text and not self._blank and not text[-1].isspace():
                self._pieces.append(text)
            else:
                text = self._more_text(text)
                if not text:
                    return None
            return self.text_delta_bytes(text)
        if type(event) is ToolCallArgumentsDelta:
            text = event.text
            if self._kind != "call" or not text:
                return None
            self._pieces.append(text)
            return self.call_delta_bytes(text)
        # Compiled, two checks of the type and a direct call each cost less than a
        # lookup by type and a call of the found function through its wrapper.
        if type(event) is ToolCallStart:
            return self._call_start_bytes(event)
        if type(event) is ToolCallEnd:
            return self._call_end_bytes(event)
        return self.event_bytes(event)

    def event_bytes(self, event: Event) -> bytes | None:
        """:meth:`event`'s events through :func:`sse` (None: nothing to say) for an
        event other than more text in the open text block and a call's events
        (:meth:`stream_event` says those). Text that opens a text block where
        none is open (a stream's first, most often) is said by the front's
        :meth:`text_open_bytes` and :meth:`text_delta_bytes`, without the events'
        dicts."""
        if type(event) is ContentDelta and self._kind is None:
            text = self._hold_blanks(event.text).lstrip()
            if not text:
                return None
            self._kind = "text"
            self._pieces.append(text)
            return self.text_open_bytes() + self.text_delta_bytes(text)
        events = self.event(event)
        return b"".join(map(sse, events)) if events else None

    # --- a call's events, written without the events' dicts ----------------------

    def call_open_bytes(self, start: ToolCallStart) -> bytes | None:
        """``sse`` of ``self.open("call", start)``'s events, the same bytes and
        the same block opened, written around their values; None, nothing
        opened, for a call the front says only through :meth:`open`."""
        raise NotImplementedError

    def call_delta_bytes(self, text: str) -> bytes | None:
        """``sse(self.delta("call", text))`` for the open call block (None:
        nothing to say), written without the event's dict."""
        raise NotImplementedError

    def call_close_bytes(self, text: str, call: ToolCall | None) -> bytes:
        """``sse`` of ``self.close("call", text, call)``'s events, the block
        taken: the same bytes, written around their values."""
        raise NotImplementedError

    def _call_start_bytes(self, start: ToolCallStart) -> bytes:
        """:meth:`event`'s steps for a call's start, said in bytes: the open
        block closed (as :meth:`event` closes it), the call's block opened."""
        self._blank = ""
        closed = self.end_block()
        self._kind = "call"
        said = self.call_open_bytes(start)
        if said is None:
            closed += self.open("call", start)
            said = b""
        return b"".join(map(sse, closed)) + said if closed else said

    def _call_end_bytes(self, end: ToolCallEnd) -> bytes | None:
        """:meth:`event`'s steps for a call's end, in bytes: its block closed."""
        if self._kind != "call":
            return None
        return self.call_close_bytes(self._take_block()[1], end.call)

    def text_run_bytes(self, texts: list[str]) -> bytes:
        """``b"".join(map(self.text_delta_bytes, texts))`` for the open text block,
        whose texts' JSON strings are each the text between two quotes (a
        :class:`ContentRun`'s): the same bytes, written in one pass
        (:meth:`stream_run`'s hot path)."""
        raise NotImplementedError

    def stream_run(self, run: ContentRun) -> bytes | None:
        """:meth:`stream_event` of each text's ``ContentDelta``, joined (None:
        nothing to say). The usual run, more text in the open text block after no
        held blank, none of its texts ending in one, is said as it came, all in
        one writing (:meth:`text_run_bytes`); any other goes text by text."""
        texts = run.texts
        # Compiled, each text's ``rstrip`` is a C call and the loop no generator's
        # (``map(str.rstrip, ...)`` calls the method through Python's protocol).
        if (
            self._kind == "text"
            and not self._blank
            and all(len(text.rstrip()) == len(text) for text in texts)
        ):
            self._pieces += texts
            return self.text_run_bytes(texts)
        said = b"".join(filter(None, map(self.stream_event, map(ContentDelta, texts))))
        return said or None

    def _more_text(self, text: str) -> str:
        """``text`` added to the open text block, the blanks held: what of it is
        said now ('' for nothing yet). The same steps as :meth:`_add` takes for
        an open text block."""
        text = self._blank + text
        visible = text.rstrip()
        self._blank = text[len(visible) :]
        if visible:
            self._pieces.append(visible)
        return visible

    def end_block(self) -> list[WireEvent]:
        """Close the open block, if any (at the answer's end, say)."""
        return self._end(None) if self._kind is not None else []

    def _end(self, call: ToolCall | None) -> list[WireEvent]:
        return self.close(*self._take_block(), call)

    def _take_block(self) -> tuple[Kind, str]:
        """The open block's kind and whole text, the block closed (a front's
        :meth:`close` then says so)."""
        kind = self._kind
        assert kind is not None
        text = "".join(self._pieces)
        self._kind = None
        self._pieces = []
        return kind, text

    def _hold_blanks(self, text: str) -> str:
        """``text`` after the blanks held, without those at its end, now held."""
        text = self._blank + text
        visible = text.rstrip()
        self._blank = text[len(visible) :]
        return visible

    def _add(self, kind: Kind, text: str) -> list[WireEvent]:
        if kind == "text":
            text = self._hold_blanks(text)
        if self._kind != kind:
            if kind == "text":
                text = text.lstrip()
            if not text:
                return []
            out = self.end_block()
            self._kind = kind
            out += self.open(kind, None)
        elif not text:
            return []
        else:
            out = []
        self._pieces.append(text)
        said = self.delta(kind, text)
        if said is not None:
            out.append(said)
        return out


def sse(event: WireEvent) -> bytes:
    """One server-sent event, named by its ``type`` (both SDKs read the name)."""
    return _head(event["type"]) + orjson.dumps(event) + b"\n\n"


@cache
def _head(name: str) -> bytes:
    return b"event: " + name.encode() + b"\ndata: "
