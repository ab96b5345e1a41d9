"""What every format module builds on: the parse context, call builders, regions.

A *region* is the stretch of model output that a format's opening marker
starts: a ``<tool_call>…</tool_call>`` block, a ``[TOOL_CALLS]`` section, a
bare JSON object that may be a call. The stream parser finds the marker and
hands the following text to the format's region, a little at a time; the
region emits events into the context and says when it is over.

Regions keep their own cursor state and consume text as they go, so the
parser's buffer never holds more than a partial token; the few that may turn
out not to be calls after all (``Status.FALLBACK``) do so before emitting
anything.
"""

from __future__ import annotations

import enum
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from toolrelay.events import (
    ContentDelta,
    Event,
    ReasoningDelta,
    ToolCall,
    ToolCallArgumentsDelta,
    ToolCallEnd,
    ToolCallStart,
)
from toolrelay.names import ToolSet
from toolrelay.repair import JsonLexer, JsonWriter, Tok, lex_value, load_json


class Status(enum.Enum):
    CONTINUE = 0  # give me more text
    DONE = 1  # the region is over; the parser resumes at the returned position
    FALLBACK = 2  # not a call after all: the opener is content, rescan after it
    DROP_OPENER = 3  # not a call, but the opener is markup: drop it, rescan after it


class Context:
    """State shared by the parser and its regions: declared tools, ids, output."""

    __slots__ = (
        "_id_prefix",
        "_ids",
        "at_start",
        "events",
        "format_name",
        "next_index",
        "openers",
        "tools",
        "unclosed",
    )

    def __init__(self, tools: ToolSet, format_name: str = "auto") -> None:
        self.tools = tools
        self.format_name = format_name
        self.openers: Any = None  # the parser's OpenerTable, for regions that nest markers
        self.events: list[Event] = []
        self.next_index = 0
        self.at_start = True  # nothing but whitespace has been seen so far
        self.unclosed: set[str] = set()  # closers of reasoning blocks that never close
        self._id_prefix = "call_" + secrets.token_hex(8)
        self._ids: set[str] = set()

    def content(self, text: str) -> None:
        if text:
            self.events.append(ContentDelta(text))

    def reasoning(self, text: str) -> None:
        if text:
            self.events.append(ReasoningDelta(text))

    def new_id(self, native: str | None = None) -> str:
        if native and native not in self._ids:
            self._ids.add(native)
            return native
        candidate = f"{self._id_prefix}{self.next_index}"
        self._ids.add(candidate)
        return candidate


class Call:
    """One tool call under construction: holds its argument text until it may stream.

    ``start`` resolves the name and emits ``ToolCallStart``; before that,
    argument text is kept; after it, argument text goes straight out.
    """

    __slots__ = (
        "_args",
        "_ctx",
        "_held",
        "dropped",
        "id",
        "index",
        "name",
        "native_id",
        "started",
    )

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._args: list[str] = []
        self._held: list[str] = []
        self.name: str | None = None
        self.native_id: str | None = None
        self.index = -1
        self.id = ""
        self.started = False
        self.dropped = False

    def set_name(self, raw_name: str) -> bool:
        """Resolve the model's name; False (and the call is dropped) when it is not declared."""
        resolved = self._ctx.tools.resolve(raw_name)
        if resolved is None:
            self.dropped = True
            return False
        self.name = resolved
        return True

    def start(self) -> None:
        if self.started or self.dropped or self.name is None:
            return
        ctx = self._ctx
        self.index = ctx.next_index
        self.id = ctx.new_id(self.native_id)
        ctx.events.append(ToolCallStart(self.index, self.id, self.name))
        ctx.next_index += 1
        self.started = True
        if self._held:
            self.arguments("".join(self._held))
            self._held.clear()

    def arguments(self, text: str) -> None:
        if not text or self.dropped:
            return
        if self.started:
            self._args.append(text)
            self._ctx.events.append(ToolCallArgumentsDelta(self.index, text))
        else:
            self._held.append(text)

    def held_arguments(self) -> str:
        """Argument text received before the call started (a call whose name is not known yet)."""
        return "".join(self._held)

    def end(self) -> None:
        """Emit ``ToolCallEnd``; a call that never received arguments gets ``{}``."""
        if self.dropped or self.name is None:
            return
        self.start()
        if not self._args:
            self.arguments("{}")
        arguments_json = "".join(self._args)
        arguments = load_json(arguments_json)
        call = ToolCall(self.id, self.name, arguments, arguments_json)
        self._ctx.events.append(ToolCallEnd(self.index, call))
        self.dropped = True  # ended: nothing more may be added


class ArgumentStream:
    """Streams one JSON arguments object into a ``Call`` as it is lexed.

    Shared by every format whose arguments are a JSON object after a known
    name (Kimi, DeepSeek, Mistral v11, ``<function=…>``, Harmony, …).
    ``feed`` returns the new position and the first non-JSON character met
    (unconsumed), if any, so the region can check for its end marker.
    """

    __slots__ = ("_call", "_finished", "_lexer", "_writer")

    def __init__(self, call: Call) -> None:
        self._call = call
        self._lexer = JsonLexer()
        self._writer = JsonWriter()
        self._finished = False

    @property
    def done(self) -> bool:
        """The arguments are over: complete, or ``finish()``-ed as they stood.

        A stream finished early (``feed`` met something else) must not be fed
        again: its lexer may be inside a string that was never an object's
        and would swallow the end marker after it.
        """
        return self._finished or self._writer.done

    @property
    def started(self) -> bool:
        return self._writer.started

    @property
    def in_string(self) -> bool:
        return self._lexer.in_string

    def feed(self, buf: str, pos: int, final: bool) -> tuple[int, str | None]:
        writer = self._writer
        if not writer.started:
            tok, _, new_pos = self._lexer.next(buf, pos, final)
            if tok is Tok.NEED_MORE:
                return new_pos, None
            if tok is not Tok.BEGIN_OBJECT:
                return new_pos, buf[new_pos] if new_pos < len(buf) else ""
        pos, other = lex_value(self._lexer, writer, buf, pos, final)
        call = self._call
        if call.name is not None:
            # The arguments are an object and the name is known: the call is certain
            # from here on, so what follows streams. A call whose name is still to be
            # inferred (Kimi's bare ids) keeps holding its arguments.
            call.start()
        call.arguments(writer.take())
        return pos, other

    def finish(self) -> None:
        self._finished = True
        self._writer.finish()
        self._call.arguments(self._writer.take())


class Region(Protocol):
    def feed(self, buf: str, pos: int, final: bool) -> tuple[int, Status]:
        """Consume text from ``buf[pos:]``; ``final`` means no more text will come."""
        ...


RegionFactory = Callable[[Context, str], Region]
Sniff = Callable[[str], "bool | None"]


@dataclass(frozen=True)
class Opener:
    """A marker that opens a region, and how to parse what follows it.

    ``sniff`` lets two formats share one marker (``<tool_call>`` opens Hermes
    JSON, Qwen3-Coder XML and GLM-4.5 blocks): it sees the text after the
    marker and says True (mine), False (not mine) or None (cannot tell yet).
    """

    marker: str
    region: RegionFactory
    sniff: Sniff | None = None


@dataclass(frozen=True)
class Format:
    name: str
    description: str
    openers: tuple[Opener, ...] = field(default_factory=tuple)


def skip_whitespace(buf: str, pos: int) -> int:
    end = len(buf)
    while pos < end and buf[pos] in " \t\r\n":
        pos += 1
    return pos


def starts_or_partial(buf: str, pos: int, marker: str) -> bool | None:
    """True if ``marker`` is at ``pos``, None if the buffer ends inside it, else False."""
    if buf.startswith(marker, pos):
        return True
    if len(buf) - pos < len(marker) and marker.startswith(buf[pos:]):
        return None
    return False


def find_marker(buf: str, pos: int, marker: str, end: int | None = None) -> tuple[int, int]:
    """Where ``marker`` starts at or after ``pos`` (or -1), and how far it is safe to release.

    The second value is the position up to which the text certainly holds no
    part of the marker: a possible partial marker at the end is held back.
    ``end`` bounds the search (a marker must end by then) for callers that
    give up after so many characters, so that giving up costs no more.
    """
    if end is not None and end < len(buf):
        found = buf.find(marker, pos, end)
        return (found, found) if found >= 0 else (-1, max(pos, end - len(marker) + 1))
    found = buf.find(marker, pos)
    if found >= 0:
        return found, found
    end = len(buf)
    keep = min(len(marker) - 1, end - pos)
    while keep > 0:
        if marker.startswith(buf[end - keep :]):
            return -1, end - keep
        keep -= 1
    return -1, end
