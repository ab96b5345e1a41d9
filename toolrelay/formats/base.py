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
    CallRejected,
    ContentDelta,
    Event,
    ReasoningDelta,
    RejectedCall,
    ToolCall,
    ToolCallArgumentsDelta,
    ToolCallEnd,
    ToolCallStart,
)
from toolrelay.names import ToolSet
from toolrelay.repair import JsonLexer, JsonWriter, Tok, lex_value, load_written
from toolrelay.strictjson import read_member, strict_json

# Why a call whose text ends inside a string is rejected (``Call.cut_short``).
CUT_SHORT = "the arguments could not be read as a JSON object: a string in the call never ends"


class Status(enum.Enum):
    CONTINUE = 0  # give me more text
    DONE = 1  # the region is over; the parser resumes at the returned position
    FALLBACK = 2  # not a call after all: the opener is content, rescan after it
    DROP_OPENER = 3  # not a call, but the opener is markup: drop it, rescan after it


class KeptText:
    """Text of the output from an offset on, kept as the parser trims its buffer.

    Offsets count from the start of the whole output; ``buf`` starts at
    ``base``. The parser hands over what it drops (``trim``), so the text
    survives however the output was cut into deltas.
    """

    __slots__ = ("_parts", "start")

    def __init__(self) -> None:
        self.start = -1  # -1: nothing is kept
        self._parts: list[str] = []

    def mark(self, start: int, gone: str = "") -> None:
        """Keep the text from ``start`` on, after ``gone`` (its part already trimmed)."""
        self.start = start
        self._parts = [gone] if gone else []

    def clear(self) -> None:
        self.start = -1
        self._parts = []

    def copy(self) -> KeptText:
        kept = KeptText()
        kept.start = self.start
        kept._parts = list(self._parts)
        return kept

    def trim(self, buf: str, base: int, keep_from: int) -> None:
        """``buf[:keep_from]`` leaves the buffer: keep what of it is ours."""
        if self.start >= 0:
            start = self.start - base
            if start < keep_from:
                self._parts.append(buf[max(start, 0) : keep_from])

    def text(self, buf: str, base: int, pos: int) -> str:
        """The kept text up to ``buf[pos]``."""
        if self.start < 0:
            return ""
        return "".join(self._parts) + buf[max(self.start - base, 0) : pos]


class Context:
    """State shared by the parser and its regions: declared tools, ids, output.

    It also keeps the text of the call being read (from ``mark``) while the
    parser trims its buffer, so that a call rejected at its end can be
    reported with the text the model wrote (``raw``).
    """

    __slots__ = (
        "_id_prefix",
        "_ids",
        "_raw",
        "at_start",
        "base",
        "bracket_seen",
        "buf",
        "events",
        "format_name",
        "formats",
        "next_index",
        "openers",
        "orphan_close",
        "read_nested",
        "reasoning_seen",
        "region_format",
        "tools",
        "unclosed",
    )

    def __init__(self, tools: ToolSet, format_name: str = "auto") -> None:
        self.tools = tools
        self.format_name = format_name
        self.openers: Any = None  # the parser's OpenerTable, for regions that nest markers
        # The parser's reading of a stretch of text with this context, for a region
        # that holds text to read later (a think block that never closes): set by
        # the parser, so that no format imports it.
        self.read_nested: Callable[[Context, str], list[Event]] | None = None
        self.events: list[Event] = []
        self.next_index = 0
        # The format whose region is being read (set by the parser as it opens one),
        # and each call's, by index: what a caller counts calls by.
        self.region_format = ""
        self.formats: dict[int, str] = {}
        self.at_start = True  # nothing but whitespace has been seen so far
        self.unclosed: set[str] = set()  # closers of reasoning blocks that never close
        self.reasoning_seen = False  # a reasoning block was entered
        self.orphan_close = False  # a closing reasoning tag came before any opening one
        self.bracket_seen = False  # a [TOOL_CALL] block was met (fenced calls are then text)
        # Drawn when a call first needs an id of ours: a stream of text, or of
        # calls that bring their own ids, never reads the random source.
        self._id_prefix = ""
        self._ids: set[str] = set()
        self.buf = ""  # the parser's buffer, as the regions are fed it
        self.base = 0  # where ``buf`` starts in the whole output
        self._raw = KeptText()  # the text of the call being read

    def mark(self, pos: int, gone: str = "") -> None:
        """The call being read starts at ``buf[pos]``, or ``gone`` before it when its
        beginning already left the buffer."""
        self._raw.mark(self.base + pos, gone)

    def raw(self, pos: int) -> str:
        """The text from the last ``mark`` up to ``buf[pos]``."""
        return self._raw.text(self.buf, self.base, pos)

    def unmark(self) -> None:
        """No call is being read: the parser need not keep its text."""
        self._raw.clear()

    def trim(self, keep_from: int) -> None:
        """The parser drops ``buf[:keep_from]``: keep what belongs to the marked call."""
        if self._raw.start >= 0:
            self._raw.trim(self.buf, self.base, keep_from)
        self.base += keep_from

    def checkpoint(self) -> tuple[Any, ...]:
        """What reading a call changes here, to be put back by ``rollback``."""
        raw = (self.buf, self.base, self._raw.copy())
        return len(self.events), self.next_index, set(self._ids), raw

    def rollback(self, saved: tuple[Any, ...]) -> None:
        """Forget every call read since ``checkpoint``: its events, indices, ids and text."""
        emitted, self.next_index, self._ids, raw = saved
        del self.events[emitted:]
        self.restore_raw(raw)

    def save_raw(self) -> tuple[str, int, KeptText]:
        """Set the call text aside (a nested parse keeps its own); ``restore_raw`` it."""
        saved = (self.buf, self.base, self._raw)
        self._raw = KeptText()
        return saved

    def restore_raw(self, saved: tuple[str, int, KeptText]) -> None:
        self.buf, self.base, self._raw = saved

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
        if not self._id_prefix:
            self._id_prefix = "call_" + secrets.token_hex(8)
        candidate = f"{self._id_prefix}{self.next_index}"
        self._ids.add(candidate)
        return candidate


class Call:
    """One tool call under construction: holds its argument text until it may stream.

    ``start`` resolves the name and emits ``ToolCallStart``; before that,
    argument text is kept; after it, argument text goes straight out.

    A call that cannot be used (``reject``: its name is unknown or
    ambiguous, its arguments are not an object) is dropped; ``close`` ends
    the call, reporting a rejected one as ``CallRejected`` with its text.
    Once started a call is rejected only when its text ends inside one of its
    strings (``cut_short``): whatever that string was, its value would be cut.
    """

    __slots__ = (
        "_args",
        "_ctx",
        "_decoded",
        "_held",
        "_raw",
        "dropped",
        "id",
        "index",
        "name",
        "native_id",
        "raw_name",
        "rejection",
        "started",
    )

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._args: list[str] = []
        self._held: list[str] = []
        # See whole_arguments (the text decoded) and known_arguments (None: all of it).
        self._decoded: tuple[str | None, dict[str, Any]] | None = None
        self.name: str | None = None
        self.raw_name: str | None = None  # the name as the model wrote it
        self.native_id: str | None = None
        self.index = -1
        self.id = ""
        self.started = False
        self.dropped = False
        self.rejection: str | None = None  # why the call cannot be used
        self._raw: str | None = None  # its text up to where it started (keep_raw)

    def set_name(self, raw_name: str) -> bool:
        """Resolve the model's name; False (and the call is rejected) when it is not declared."""
        self.raw_name = raw_name.strip()
        tools = self._ctx.tools
        resolved = tools.resolve(raw_name)
        if resolved is None:
            self.reject(tools.unresolved(raw_name))
            return False
        self.name = resolved
        return True

    def reject(self, reason: str) -> None:
        """The call cannot be used; ignored once it has started."""
        if self.started or self.dropped:
            return
        self.rejection = reason
        self.dropped = True

    def cut_short(self, reason: str = CUT_SHORT) -> None:
        """The call's text ended inside one of its strings: rejected, even once started
        (its ``CallRejected`` then carries its index, and no ``ToolCallEnd`` follows)."""
        if self.dropped:
            return
        self.rejection = reason
        self.dropped = True

    def close(self, pos: int) -> None:
        """The call's text ends at ``buf[pos]``: end it, or report why it was rejected."""
        rejected = self.take_rejection(pos)
        if rejected is None:
            self.end()
        else:
            self._ctx.events.append(CallRejected(rejected, self.index if self.started else None))
        self._ctx.unmark()

    def keep_raw(self, pos: int) -> None:
        """Keep the call's text so far, up to ``buf[pos]``: its text if it is rejected
        (cut short) after it started, once the context no longer keeps it (``unmark``)."""
        self._raw = self._ctx.raw(pos)

    def take_rejection(self, pos: int) -> RejectedCall | None:
        """The call's rejection, its text ending at ``buf[pos]`` (or as ``keep_raw``
        kept it, for a call that had started); handed out once."""
        reason = self.rejection
        if reason is None:
            return None
        self.rejection = None
        raw = self._ctx.raw(pos) if self._raw is None or not self.started else self._raw
        return RejectedCall(self.raw_name, raw, reason)

    def start(self) -> None:
        if self.started or self.dropped or self.name is None:
            return
        ctx = self._ctx
        self.index = ctx.next_index
        ctx.formats[self.index] = ctx.region_format
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

    def whole_arguments(self, text: str, value: dict[str, Any]) -> None:
        """All of the arguments at once, as text and already decoded (``strict_json``'s path)."""
        if not self._args and not self._held:
            self._decoded = (text, value)
        self.arguments(text)

    def known_arguments(self, value: dict[str, Any]) -> None:
        """What the argument text sent so far decodes to, known to the region that wrote
        it from values (each written by ``json_text``): not decoded again at the end."""
        self._decoded = (None, value)

    def end(self) -> None:
        """Emit ``ToolCallEnd``; a call that never received arguments gets ``{}``."""
        if self.dropped or self.name is None:
            return
        self.start()
        if not self._args:
            self.arguments("{}")
        arguments_json = "".join(self._args)
        decoded = self._decoded
        # The text is the very string decoded, or the region knows its value: no decoding.
        known = decoded is not None and (decoded[0] is None or decoded[0] is arguments_json)
        arguments = decoded[1] if decoded is not None and known else load_written(arguments_json)
        call = ToolCall(self.id, self.name, arguments, arguments_json)
        self._ctx.events.append(ToolCallEnd(self.index, call))
        self.dropped = True  # ended: nothing more may be added


class ArgumentStream:
    """Streams one JSON arguments object into a ``Call`` as it is lexed.

    Shared by every format whose arguments are a JSON object after a known
    name (Kimi, DeepSeek, Mistral v11, ``<function=…>``, Harmony, …).
    ``feed`` returns the new position and the first non-JSON character met
    (unconsumed), if any, so the region can check for its end marker.

    The call starts once its first member is complete (or the object closed):
    arguments broken before that (``{invalid json}``, a first string value that
    never ends) are not ``readable`` and the region rejects the call instead of
    inventing ``{}`` or a value that swallowed the call's end.
    """

    __slots__ = ("_call", "_complete", "_finished", "_lexer", "_whole", "_writer", "muted")

    def __init__(self, call: Call) -> None:
        self._call = call
        self._lexer = JsonLexer()
        self._writer = JsonWriter()
        self._finished = False
        self._complete = False  # the object closed as written
        self._whole = False  # read at once by the C decoder
        # Reading again text whose output already went out (a fast path's): none is emitted.
        self.muted = False

    @property
    def done(self) -> bool:
        """The arguments are over: complete, or ``finish()``-ed as they stood.

        A stream finished early (``feed`` met something else) must not be fed
        again: its lexer may be inside a string that was never an object's
        and would swallow the end marker after it.
        """
        return self._finished or self._whole or self._writer.done

    @property
    def started(self) -> bool:
        """The arguments began as an object."""
        return self._whole or self._writer.started

    @property
    def readable(self) -> bool:
        """The arguments are an object that closed as written or whose first member is
        complete (a first value cut short, an unterminated string, cannot be read; see
        ``JsonWriter.readable``)."""
        return self._complete or self._writer.readable

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
            decoded = strict_json(buf, new_pos - 1)
            if decoded is not None:
                value, end = decoded.value, decoded.end
                arguments = decoded.text.decode()
                self._whole = self._complete = True
                if self._call.name is not None:
                    self._call.start()
                if not self.muted:
                    self._call.whole_arguments(arguments, value)
                return end, None
        pos, other = lex_value(self._lexer, writer, buf, pos, final, read_member)
        if other is None and writer.done and not writer.dropped_key:
            self._complete = True
        text = writer.take()
        call = self._call
        if other is None and self.readable and call.name is not None:
            # A member is complete (or the object closed) and the name is known: the
            # call is certain from here on, so what follows streams. Arguments that
            # broke before (other is set) are judged by the region, through ``readable``.
            # A call whose name is still to come (DeepSeek R1's name line) keeps holding.
            call.start()
        if not self.muted:
            call.arguments(text)
        return pos, other

    def finish(self) -> None:
        """The arguments are over: close what is open; reject the call if they are
        not an object, or one too broken to read."""
        if self._finished:
            return
        self._finished = True
        self._writer.finish()
        text = self._writer.take()
        self._call.arguments(text)
        if not self.started:
            self._call.reject("the arguments are not a JSON object")
        elif self._lexer.in_string:
            self._call.cut_short()  # the output ended inside a string of them
        elif not self.readable:
            self._call.reject("the arguments could not be read as a JSON object")


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

    ``follows``, for a marker common in prose (a bare ``{`` or ``[``): a regular
    expression that the text after the marker matches whenever the sniff could
    say anything but False (with ``\\Z`` where the text so far may go on). The
    marker search checks it in C, so a bracket no format could claim costs
    nothing in Python.
    """

    marker: str
    region: RegionFactory
    sniff: Sniff | None = None
    follows: str | None = None


@dataclass(frozen=True)
class Format:
    """One text format: its name, a line about it, its openers.

    ``tokens`` are the format's special tokens: markup wherever they stand, so
    never content. One that no opener claims is dropped where it stands; one
    whose region turns out not to be a call is dropped rather than shown.
    """

    name: str
    description: str
    openers: tuple[Opener, ...] = field(default_factory=tuple)
    tokens: tuple[str, ...] = ()
    families: str = ""  # the model families that write it


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
