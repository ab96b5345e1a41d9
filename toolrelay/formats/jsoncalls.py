"""The region for formats whose calls are JSON objects carrying their own name.

Hermes ``<tool_call>{…}</tool_call>``, ``[TOOL_CALL]…[/TOOL_CALL]``, Mistral's
``[TOOL_CALLS] [...]``, Llama 3's bare ``{"name": …, "parameters": …}``,
Granite, Jamba, Nemotron, LFM2, xLAM, InternLM2, ``functools[…]``, fenced
JSON and the rest: one token-driven state machine reads a JSON value that is
a call object, an array of them, or a wrapper (``{"tool_calls": [...]}``,
``{"function": {...}}``), and streams each call's arguments as they arrive.

Which keys mean what (``name``/``tool_name``/``tool``; ``arguments``/
``parameters``/``input``; ``id``/``tool_call_id``) is fixed here so that
every format gets the same tolerance. A call starts (``ToolCallStart``) only
once its name is known and the first member of its arguments object is
complete, so a call that turns out to be broken is rejected before anything
of it was emitted: a name that is not declared, arguments that are not an
object or cannot be read as one (``{invalid json}`` is not made ``{}``; a
first string that never ends, swallowing the block's end marker, is not a
value). A call whose text ends inside any of its strings is rejected even
after it started (``Call.cut_short``); the block's end marker inside a string
ends the block unless the string's quote follows (``_marker_in_string``).
A call without ``arguments`` is a call with ``{}`` (a tool that takes no
parameters); in unmarked text only when its name is a declared tool.

An *unmarked* region (a bare ``{`` or ``[`` in the text, no format marker)
is only a call if it looks like one through and through; until a call has
started it may fall back, and its text is then content.

Over 600 lines on purpose: the region is one state machine whose states share
the call being built, the lexer and the writer; split, each part would reach
into the others' state.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Any

import orjson

from toolrelay.events import CallRejected, RejectedCall
from toolrelay.formats.base import (
    Call,
    Context,
    Opener,
    Region,
    Sniff,
    Status,
    skip_whitespace,
    starts_or_partial,
)
from toolrelay.repair import MAX_DEPTH, JsonLexer, JsonWriter, Tok, lex_value
from toolrelay.strictjson import read_member, strict_json

NAME_KEYS = frozenset({"name", "tool_name", "tool", "function_name", "recipient_name"})
ARGUMENT_KEYS = frozenset({"arguments", "parameters", "input", "args", "params"})
ID_KEYS = frozenset({"id", "tool_call_id", "call_id"})
WRAPPER_OBJECT_KEYS = frozenset({"function", "tool_call", "function_call"})
WRAPPER_LIST_KEYS = frozenset({"tool_calls", "calls", "function_calls"})
# Where a call's arguments are, under its wrappers: written apart by strict_json.
_APART = ARGUMENT_KEYS | WRAPPER_OBJECT_KEYS | WRAPPER_LIST_KEYS
CALL_KEYS = NAME_KEYS | ARGUMENT_KEYS | ID_KEYS | WRAPPER_OBJECT_KEYS | WRAPPER_LIST_KEYS | {"type"}

_LEAKED_TAG = re.compile(r"</?[A-Za-z_|｜][^<>\n]{0,40}>")
# How far a block's non-JSON text is searched for the block's end marker.
GARBAGE_LIMIT = 2048
_RESCAN = 64  # longer than any marker: searched again after each delta
_ARGUMENT_TAG_NAMES = ("arguments", "parameters", "args", "input")
_ARGUMENTS_TAG = re.compile(r"<(/?)(?:" + "|".join(_ARGUMENT_TAG_NAMES) + r")>")
_ARGUMENTS_TAGS = tuple(f"<{s}{n}>" for n in _ARGUMENT_TAG_NAMES for s in ("", "/"))
_LONGEST_ARGUMENTS_TAG = max(map(len, _ARGUMENTS_TAGS))
# How far past a block's end marker met inside a string the string's closing quote
# is looked for: within it the marker was data; without it (the output ending first)
# the string never ends. As far as the XML formats look for a value's closing tag.
MARKER_WINDOW = 4096
# A string's text up to its closing quote (or a backslash the window cuts).
_UP_TO_QUOTE = {
    '"': re.compile(r'(?:[^"\\]|\\.)*', re.S),
    "'": re.compile(r"(?:[^'\\]|\\.)*", re.S),
}


@dataclass(frozen=True)
class JsonCallsOptions:
    end_marker: str | None = None  # the closing marker, if the format has one
    marked: bool = True  # False: a bare value in the text, which may be prose
    name_as_key: bool = False  # Apertus: {"get_weather": {...}}
    several: bool = True  # more values may follow (separated by , ; or whitespace)


class _Args(enum.Enum):
    NONE = 0
    OBJECT = 1
    STRING = 2
    INVALID = 3


class _CallRecord:
    """One call object being read: its name, id and arguments so far."""

    __slots__ = (
        "args",
        "args_complete",
        "args_text",
        "args_writer",
        "call",
        "cut",
        "levels",
        "wrapper",
    )

    def __init__(self, ctx: Context) -> None:
        self.call = Call(ctx)
        self.args = _Args.NONE
        self.args_text: list[str] = []  # a stringified arguments value, decoded
        self.args_writer: JsonWriter | None = None  # writes an arguments object read by tokens
        self.args_complete = False  # the arguments object closed as written
        self.wrapper = False  # {"tool_calls": [...]}: not a call itself
        self.levels = 0  # open objects of this call: {"function": {...}} is two
        self.cut = False  # the call's text ended inside one of its strings

    @property
    def readable(self) -> bool:
        """The arguments object closed as written, or its first member is complete
        (one cut short, an unterminated string above all, cannot be read)."""
        writer = self.args_writer
        return self.args_complete or (writer is not None and writer.readable)


class _Key(enum.Enum):
    EXPECT = 0  # before a key
    READING = 1  # inside a quoted key
    AFTER = 2  # after a key, before ':'
    VALUE = 3  # after ':', before the value
    NEXT = 4  # after a value


class _Object:
    __slots__ = ("key", "key_parts", "quoted", "record", "state")

    def __init__(self, record: _CallRecord) -> None:
        self.record = record
        record.levels += 1
        self.state = _Key.EXPECT
        self.quoted = False
        self.key = ""
        self.key_parts: list[str] = []


class _List:
    __slots__ = ()


class _Value:
    """A value being read for a purpose: skipped, collected as text, or streamed as arguments."""

    __slots__ = ("purpose", "record", "text", "writer")

    def __init__(self, purpose: str, record: _CallRecord) -> None:
        self.purpose = purpose  # "skip" | "name" | "id" | "args" | "args_string"
        self.record = record
        self.writer = JsonWriter()
        self.text: list[str] = []


_Frame = _Object | _List | _Value


class JsonCallsRegion:
    """Reads JSON call objects until the end marker (or the value) is over."""

    __slots__ = (
        "_claimed",
        "_ctx",
        "_eager",
        "_end",
        "_failed",
        "_frames",
        "_fresh",
        "_garbage_scanned",
        "_lexer",
        "_member_waits",
        "_opened",
        "_options",
        "_quote_free",
        "_started_any",
        "_token_at",
        "_whole",
        "_written",
    )

    def __init__(self, ctx: Context, options: JsonCallsOptions) -> None:
        self._ctx = ctx
        self._options = options
        # A bare value that opens the output is a call from its first argument
        # on (Llama 3 JSON mode); one in the middle of prose is held until it
        # is complete, because until then it may be prose.
        self._eager = options.marked or ctx.at_start
        self._claimed = False  # a call-shaped object to an undeclared name was dropped
        self._fresh = True  # no value has begun yet
        # Strings stop at the end marker, which may end the block (_marker_in_string).
        self._lexer = JsonLexer(options.end_marker or "")
        self._quote_free = -1  # where the open string's text is known to hold no quote
        self._frames: list[_Frame] = []
        self._started_any = False
        self._failed = False
        self._garbage_scanned = 0  # non-JSON text searched so far for the end marker
        self._token_at = 0  # where the token being handled starts in the buffer
        self._end = 0  # where it ends
        self._opened = ""  # the opener was the value's own bracket, not read yet
        self._whole: dict[str, Any] | None = None  # an arguments object decoded at once
        self._written: dict[int, bytes] = {}  # the text of objects decoded at once, by id
        self._member_waits = False  # an arguments member waits, at the position, to be whole

    @property
    def may_fallback(self) -> bool:
        return not self._options.marked and not self._started_any and not self._claimed

    def open_with(self, bracket: str) -> None:
        """The opener was the value's own first bracket, consumed, and right before ``pos``."""
        self._opened = bracket

    def feed(self, buf: str, pos: int, final: bool) -> tuple[int, Status]:
        if self._opened:
            bracket, self._opened = self._opened, ""
            end = self._whole_value(buf, pos - 1)
            if end is not None:
                pos = end
            else:
                self._token(Tok.BEGIN_OBJECT if bracket == "{" else Tok.BEGIN_ARRAY, bracket)
        frames = self._frames
        while True:
            if self._failed:
                return pos, Status.FALLBACK
            if not frames:
                pos, status = self._between_values(buf, pos, final)
                if status is not None:
                    return pos, status
                if not frames:
                    return pos, Status.CONTINUE
            top = frames[-1]
            if type(top) is _Value and top.purpose == "args":
                pos, waiting = self._arguments_run(top, buf, pos, final)
                if waiting:
                    return pos, Status.CONTINUE
                if not frames or frames[-1] is not top:
                    continue
            tok, text, new_pos = self._lexer.next(buf, pos, final)
            if tok is Tok.NEED_MORE:
                if final:
                    return self._finish(new_pos)
                return new_pos, Status.CONTINUE
            if tok is Tok.OTHER:
                pos, status = self._other_inside(buf, new_pos, final)
                if status is not None:
                    return pos, status
                continue
            pos = new_pos
            self._token_at = new_pos - len(text)
            self._end = new_pos
            self._token(tok, text)

    def _arguments_run(self, frame: _Value, buf: str, pos: int, final: bool) -> tuple[int, bool]:
        """The hot path: an arguments object's tokens straight into its writer.

        Text inside strings goes in runs (escapes decoded and written back
        in bulk), tokens skip the dispatch of ``_token``, and what the writer
        gives is sent to the call once per feed. Stops before what needs the
        region's judgement (a character that is not JSON, the end of the
        text so far), after the object closes or a token breaks it. Says
        whether it stopped only to wait for more text.
        """
        lexer = self._lexer
        writer = frame.writer
        record = frame.record
        end = len(buf)
        given_up = False  # a member that waited is read token by token after all
        if self._member_waits:
            # Straight to the member that waits at ``pos``: is it complete now?
            member_end = read_member(writer, buf, pos, final)
            if member_end is not None and member_end < 0:
                return pos, True
            self._member_waits = False
            if member_end is None:
                given_up = True
            else:
                pos = member_end
        elif writer.in_string_value and not writer.pending:
            # The usual delta: more of a long string, straight to the call (up to
            # an escape that the delta cut, which waits for the next one).
            text, pos = lexer.json_string_run(buf, pos, final)
            if pos == end or (pos == end - 1 and buf[pos] == "\\" and not final):
                if text:
                    writer.string_text(text)
                    self._send_arguments(record, writer.take())
                    if not record.call.started:
                        self._maybe_start(record)
                return pos, not final
            if text:
                writer.string_text(text)
        while True:
            if writer.in_string_value:
                text, pos = lexer.json_string_run(buf, pos, final)
                if text:
                    writer.string_text(text)
                if pos == end:
                    break
            tok, text, new_pos = lexer.next(buf, pos, final)
            if tok is Tok.NEED_MORE or tok is Tok.OTHER:
                pos = new_pos  # where the lexer resumes: the generic loop takes it from here
                break
            if given_up:
                given_up = False  # (this is its bracket)
            elif (tok is Tok.BEGIN_OBJECT or tok is Tok.BEGIN_ARRAY) and writer.awaits_member:
                member_end = read_member(writer, buf, new_pos - 1, final)
                if member_end is not None:
                    if member_end < 0:
                        # Held until it is complete: read whole, by the C decoder.
                        self._member_waits = True
                        self._send_arguments(record, writer.take())
                        self._maybe_start(record)
                        return new_pos - 1, True
                    pos = member_end
                    continue
            try:
                done = writer.push(tok, text)
            except ValueError:
                self._send_arguments(record, writer.take())
                self._token_at, self._end = new_pos - len(text), new_pos
                self._arguments_broken(frame, tok)
                return new_pos, new_pos == end and not final
            pos = new_pos
            if done:
                if not writer.dropped_key:
                    record.args_complete = True
                self._frames.pop()
                break
        self._send_arguments(record, writer.take())
        self._maybe_start(record)
        return pos, pos == end and not final

    # -- between top-level values ------------------------------------------------

    def _between_values(self, buf: str, pos: int, final: bool) -> tuple[int, Status | None]:
        options = self._options
        first = self._fresh
        while True:
            start = pos
            pos = skip_whitespace(buf, pos)
            # Unmarked, whitespace before what comes next may still be content:
            # it is not consumed while waiting for more text.
            wait_at = pos if options.marked else start
            if pos >= len(buf):
                return wait_at, (self._end_status() if final else None)
            char = buf[pos]
            if options.end_marker is not None:
                at_end = starts_or_partial(buf, pos, options.end_marker)
                if at_end:
                    return pos + len(options.end_marker), self._end_status()
                if at_end is None and not final:
                    return wait_at, None
            if char in "{[" and (first or options.several):
                end = self._whole_value(buf, pos)
                if end is not None:
                    first = False
                    pos = end
                    continue
                self._token_at, self._end = pos, pos + 1
                self._token(Tok.BEGIN_OBJECT if char == "{" else Tok.BEGIN_ARRAY, char)
                return pos + 1, None
            if not options.marked:
                if first:
                    return pos, self._end_status()
                return self._after_bare_value(buf, start, pos, final)
            if char in ",;" and options.several:
                pos += 1
                continue
            if char == "<":
                tag = _LEAKED_TAG.match(buf, pos)
                if tag is not None:
                    pos = tag.end()
                    continue
                if not final and ">" not in buf[pos : pos + 44] and len(buf) - pos < 44:
                    return pos, None
            if options.end_marker is not None:
                return self._garbage(buf, pos, final)
            # Anything else ends the region: the model left out the closing marker.
            return pos, self._end_status()

    def _garbage(self, buf: str, pos: int, final: bool) -> tuple[int, Status | None]:
        """Text in a block that is not JSON: markup up to the block's end marker, if that
        comes first; content if another marker, a blank line or the limit comes first.

        ``[TOOL_CALL]not json[/TOOL_CALL]`` leaves nothing in content (and is reported
        as rejected); ``<tool_call>{…}`` followed by prose, its end marker left out,
        leaves the prose.
        """
        end_marker = self._options.end_marker
        assert end_marker is not None
        limit = min(len(buf), pos + GARBAGE_LIMIT)
        # What was searched in earlier deltas is not searched again (a marker may
        # have begun in its last characters).
        start = pos + max(self._garbage_scanned - _RESCAN, 0)
        found = buf.find(end_marker, start, limit)
        stop = self._ctx.openers.search_marked(buf, start, limit if found < 0 else found)
        blank = buf.find("\n\n", start, limit if found < 0 else found)
        stops = [at for at in (stop, blank) if at >= 0]
        if stops:
            self._garbage_scanned = 0
            return pos, self._end_status()
        if found >= 0:
            self._garbage_scanned = 0
            end = found + len(end_marker)
            if self._fresh:
                rejected = RejectedCall(None, self._ctx.raw(end), "the block holds no tool call")
                self._ctx.events.append(CallRejected(rejected))
            return end, self._end_status()
        if final or limit - pos >= GARBAGE_LIMIT:
            self._garbage_scanned = 0
            return pos, self._end_status()
        self._garbage_scanned = len(buf) - pos
        return pos, Status.CONTINUE

    def _after_bare_value(
        self, buf: str, start: int, pos: int, final: bool
    ) -> tuple[int, Status | None]:
        """Llama 3 separates bare calls with ';': take it only when another call follows."""
        if buf[pos] != ";" or not self._options.several:
            return start, Status.DONE
        after = skip_whitespace(buf, pos + 1)
        if after >= len(buf):
            return (start, Status.DONE) if final else (start, None)
        if buf[after] == "{":
            self._token_at, self._end = after, after + 1
            self._token(Tok.BEGIN_OBJECT, "{")
            return after + 1, None
        return start, Status.DONE

    def _end_status(self) -> Status:
        return Status.FALLBACK if self.may_fallback else Status.DONE

    # -- a whole value at once ---------------------------------------------------

    def _whole_value(self, buf: str, pos: int) -> int | None:
        """Read the value at ``pos`` with the C decoder and replay its tokens; None: lex it.

        The machine above still decides everything (names, ids, wrappers,
        what is a call): it gets the tokens the lexer would have given it,
        except that an arguments object comes whole, as the text JsonWriter
        would have written for it (``strict_json``). Taken only when the
        value's shape is one of calls (objects, lists of them, strings,
        ``null``), and undone when the replay makes a region that may still
        be prose fail or rejects a call, since where the failure is and what
        the rejected call's text was are read from the text.
        """
        # A call's arguments are written apart, and go out as written here, once.
        decoded = strict_json(buf, pos, apart=_APART)
        if decoded is None or not _call_shaped(decoded.value):
            return None
        ctx = self._ctx
        state = (self._fresh, self._claimed, self._started_any)
        emitted = len(ctx.events)
        saved = ctx.checkpoint()
        self._token_at, self._end = pos, decoded.end
        self._written = decoded.objects
        replayed = self._replay(decoded.value)
        self._written = {}
        if replayed and not any(type(event) is CallRejected for event in ctx.events[emitted:]):
            return decoded.end
        self._fresh, self._claimed, self._started_any = state
        ctx.rollback(saved)
        self._frames.clear()
        self._failed = False
        return None

    def _replay(self, value: Any) -> bool:
        """The tokens of ``value`` into the machine; False if it failed on them."""
        # Values to replay, tokens as (Tok, text) pairs, and keys as (None, key).
        todo: list[Any] = [value]
        while todo:
            item = todo.pop()
            if type(item) is tuple:
                tok, text = item
                if tok is None:
                    self._whole_key(text)
                else:
                    self._token(tok, text)
            elif item is None:
                self._token(Tok.ATOM, "null")
            elif type(item) is str:
                self._token(Tok.STRING_START, '"')
                if item:
                    self._token(Tok.STRING_CHUNK, item)
                self._token(Tok.STRING_END, '"')
            else:
                self._open(item, todo)
            if self._failed:
                return False
        return True

    def _open(self, value: dict[str, Any] | list[Any], todo: list[Any]) -> None:
        """Open a container: the machine takes it whole, skips it, or reads its members."""
        frames = self._frames
        depth = len(frames)
        if type(value) is dict:
            self._whole = value  # taken whole if the machine makes it the arguments
            self._token(Tok.BEGIN_OBJECT, "{")
            self._whole = None
        else:
            self._token(Tok.BEGIN_ARRAY, "[")
        if len(frames) == depth:
            return  # taken whole as the arguments
        if type(frames[-1]) is _Value:
            frames.pop()  # a value the machine skips: skipped whole
            return
        # No commas: between members the machine ignores them.
        if type(value) is dict:
            todo.append((Tok.END_OBJECT, "}"))
            for key, member in reversed(value.items()):
                todo += (member, (None, key))
        else:
            todo.append((Tok.END_ARRAY, "]"))
            todo += reversed(value)

    def _whole_key(self, key: str) -> None:
        """A key of a decoded object, read at once up to its colon."""
        frame = self._frames[-1]
        assert type(frame) is _Object  # keys come right after the object opens or a member
        frame.key = key
        frame.quoted = True
        frame.state = _Key.AFTER
        self._object_token(frame, Tok.COLON, ":")

    # -- inside a value ----------------------------------------------------------

    def _other_inside(self, buf: str, pos: int, final: bool) -> tuple[int, Status | None]:
        """A character that is not JSON, met inside a value."""
        options = self._options
        if options.end_marker is not None:
            at_end = starts_or_partial(buf, pos, options.end_marker)
            if at_end:
                if self._lexer.in_string:
                    return self._marker_in_string(buf, pos, final)
                end_pos, status = self._finish(pos)
                return end_pos + len(options.end_marker), status
            if at_end is None and not final:
                return pos, Status.CONTINUE
        if buf[pos] == "<":
            # <arguments>…</arguments> written inside a call object (seed 000): a key
            # where a key belongs, markup where a value does; a call either way.
            tag = _ARGUMENTS_TAG.match(buf, pos)
            if tag is not None:
                self._arguments_tag(tag.group(1) == "/")
                return tag.end(), None
            if not final and len(buf) - pos < _LONGEST_ARGUMENTS_TAG:
                rest = buf[pos:]
                if any(t.startswith(rest) for t in _ARGUMENTS_TAGS):
                    return pos, Status.CONTINUE
        if self.may_fallback:
            return pos, Status.FALLBACK
        if buf[pos] == "<":
            tag = _LEAKED_TAG.match(buf, pos)
            if tag is not None:
                return tag.end(), None  # markup that leaked into the JSON
            if not final and ">" not in buf[pos : pos + 44] and len(buf) - pos < 44:
                return pos, Status.CONTINUE
        if not options.marked:
            return self._finish(pos)
        return pos + 1, None  # stray character inside markup: skip it

    def _marker_in_string(self, buf: str, pos: int, final: bool) -> tuple[int, Status | None]:
        """The block's end marker inside a string: data when the string's closing quote
        follows within ``MARKER_WINDOW`` characters, or that many follow without one;
        otherwise (the output ends first) the string never ends, and the block ends at
        the marker with the call cut (rejected), the text after it read again."""
        marker = self._options.end_marker
        assert marker is not None
        quote = self._lexer.quote
        after = pos + len(marker)
        limit = after + MARKER_WINDOW
        base = self._ctx.base
        # Text already found to hold no quote is not searched again.
        scan = max(after, self._quote_free - base)
        stop = _UP_TO_QUOTE[quote].match(buf, scan, limit).end()  # type: ignore[union-attr]
        self._quote_free = base + stop
        if (stop < len(buf) and stop < limit and buf[stop] == quote) or len(buf) >= limit:
            self._token_at, self._end = pos, after
            self._token(Tok.STRING_CHUNK, marker)  # data: the string goes on
            return after, None
        if not final:
            return pos, Status.CONTINUE
        end_pos, status = self._finish(pos)
        return end_pos + len(marker), status

    def _arguments_tag(self, closing: bool) -> None:
        top = self._frames[-1] if self._frames else None
        if closing or not isinstance(top, _Object) or top.state not in (_Key.EXPECT, _Key.NEXT):
            return  # markup around a value: skipped
        top.key = "arguments"
        top.quoted = True
        top.state = _Key.VALUE

    def _finish(self, pos: int) -> tuple[int, Status]:
        """The text ended inside a value: repair what can be, end every open call.

        A call whose text ends inside one of its strings is cut: whatever the string
        held, its value would be cut short, so the call is rejected."""
        self._end = pos
        if self._lexer.in_string:
            self._lexer.quote = ""
            top = self._frames[-1] if self._frames else None
            if type(top) is _Value or type(top) is _Object:
                top.record.cut = True
        while self._frames:
            frame = self._frames.pop()
            if isinstance(frame, _Value):
                self._finish_value(frame)
            elif isinstance(frame, _Object):
                self._end_object(frame.record)
        return pos, self._end_status()

    def _finish_value(self, frame: _Value) -> None:
        if frame.record.cut:
            return  # rejected: nothing more of it is sent
        if frame.purpose == "args":
            frame.writer.finish()
            self._send_arguments(frame.record, frame.writer.take())
        elif frame.purpose == "args_string":
            frame.record.args_text.extend(frame.text)
        elif frame.purpose == "name" and frame.text:
            self._name_value(frame.record, "".join(frame.text))

    def _token(self, tok: Tok, text: str) -> None:
        frames = self._frames
        if not frames:
            fresh = self._fresh
            self._fresh = False
            if tok is Tok.BEGIN_OBJECT:
                frames.append(_Object(self._new_record(fresh)))
            elif tok is Tok.BEGIN_ARRAY:
                frames.append(_List())
            return
        top = frames[-1]
        if isinstance(top, _Value):
            self._value_token(top, tok, text)
        elif isinstance(top, _List):
            self._list_token(tok, text)
        else:
            self._object_token(top, tok, text)

    def _new_record(self, first: bool) -> _CallRecord:
        """A call object begins at the current token (at the opener, for the first one)."""
        if not first:
            self._ctx.mark(self._token_at)
        return _CallRecord(self._ctx)

    def _list_token(self, tok: Tok, text: str) -> None:
        if tok is Tok.BEGIN_OBJECT and len(self._frames) < MAX_DEPTH:
            self._frames.append(_Object(self._new_record(False)))
        elif tok is Tok.END_ARRAY or tok is Tok.END_OBJECT:
            self._frames.pop()
        elif tok is Tok.COMMA:
            return
        elif self.may_fallback:
            self._failed = True
        else:
            skip = _Value("skip", _CallRecord(self._ctx))
            self._frames.append(skip)
            self._value_token(skip, tok, text)

    def _object_token(self, frame: _Object, tok: Tok, text: str) -> None:
        state = frame.state
        if state is _Key.READING:
            if tok is Tok.STRING_CHUNK:
                frame.key_parts.append(text)
            elif tok is Tok.STRING_END:
                frame.key = "".join(frame.key_parts)
                frame.state = _Key.AFTER
            return
        if state is _Key.EXPECT or state is _Key.NEXT:
            if tok is Tok.STRING_START:
                frame.key_parts = []
                frame.quoted = True
                frame.state = _Key.READING
            elif tok is Tok.ATOM:
                frame.key = text
                frame.quoted = False
                frame.state = _Key.AFTER
            elif tok is Tok.END_OBJECT or tok is Tok.END_ARRAY:
                self._frames.pop()
                self._end_object(frame.record)
            elif tok is not Tok.COMMA and self.may_fallback:
                self._failed = True
            return
        if state is _Key.AFTER:
            if tok is Tok.COLON:
                frame.state = _Key.VALUE
                if self.may_fallback and frame.key not in CALL_KEYS:
                    self._failed = True
                return
            if not frame.quoted:
                # {invalid json}: a bare word with no colon is not a key, the object is broken.
                self._reject(frame.record, "the call is not a JSON object: a key has no value")
                frame.state = _Key.NEXT
                self._object_token(frame, tok, text)
                return
            if tok is Tok.COMMA or tok is Tok.END_OBJECT:
                # {"get_weather", "arguments": {...}}: a name written where a key belongs.
                record = frame.record
                if record.call.name is None and not record.call.dropped:
                    record.call.set_name(frame.key)
                frame.state = _Key.EXPECT
                if tok is Tok.END_OBJECT:
                    self._frames.pop()
                    self._end_object(record)
                return
            frame.state = _Key.VALUE  # a missing colon
        self._begin_value(frame, tok, text)

    def _begin_value(self, frame: _Object, tok: Tok, text: str) -> None:
        key = frame.key
        record = frame.record
        frame.state = _Key.NEXT
        if key in ARGUMENT_KEYS and record.args is _Args.NONE:
            if tok is Tok.BEGIN_OBJECT:
                self._begin_arguments(record, tok, text)
                return
            if tok is Tok.STRING_START:
                record.args = _Args.STRING
                self._frames.append(_Value("args_string", record))
                return
            if not (tok is Tok.ATOM and text in ("null", "None")):
                record.args = _Args.INVALID
        elif key in NAME_KEYS or (key == "function" and tok is Tok.STRING_START):
            if tok is Tok.STRING_START:
                self._frames.append(_Value("name", record))
                return
        elif key in ID_KEYS and tok in (Tok.STRING_START, Tok.ATOM):
            if tok is Tok.ATOM:
                record.call.native_id = text
                return
            self._frames.append(_Value("id", record))
            return
        elif len(self._frames) >= MAX_DEPTH:
            pass  # nested too deep for markup: whatever it is, it is skipped as a value
        elif key in WRAPPER_OBJECT_KEYS and tok is Tok.BEGIN_OBJECT:
            self._frames.append(_Object(record))  # same call, one level down
            return
        elif key in WRAPPER_LIST_KEYS and tok is Tok.BEGIN_ARRAY:
            record.wrapper = True
            self._frames.append(_List())
            return
        elif (
            tok is Tok.BEGIN_OBJECT
            and record.call.name is None
            and self._name_as_key(key)
            and record.call.set_name(key)
        ):
            self._begin_arguments(record, tok, text)
            return
        skip = _Value("skip", record)
        self._frames.append(skip)
        self._value_token(skip, tok, text)

    def _begin_arguments(self, record: _CallRecord, tok: Tok, text: str) -> None:
        record.args = _Args.OBJECT
        if self._whole is not None:
            # Decoded at once (see _whole_value): the whole object goes out as it is.
            written = self._written.get(id(self._whole))
            arguments = (orjson.dumps(self._whole) if written is None else written).decode()
            record.args_complete = True
            record.call.whole_arguments(arguments, self._whole)
            self._whole = None
            self._maybe_start(record)
            return
        if self._options.marked:
            # What a call cut short after it started shows (the same however the text
            # was cut into deltas): its text up to its arguments.
            record.call.keep_raw(self._end)
        value = _Value("args", record)
        record.args_writer = value.writer
        self._frames.append(value)
        self._value_token(value, tok, text)
        self._maybe_start(record)

    def _name_as_key(self, key: str) -> bool:
        if not self._options.marked or key in CALL_KEYS:
            return False
        if self._options.name_as_key:
            return True
        tools = self._ctx.tools
        return tools.declared and tools.resolve(key) is not None

    def _send_arguments(self, record: _CallRecord, text: str) -> None:
        if text:
            record.call.arguments(text)

    def _value_token(self, frame: _Value, tok: Tok, text: str) -> None:
        purpose = frame.purpose
        if purpose in ("name", "id", "args_string"):
            if tok is Tok.STRING_CHUNK:
                frame.text.append(text)
                return
            if tok is not Tok.STRING_END:
                return
            self._frames.pop()
            value = "".join(frame.text)
            record = frame.record
            if purpose == "name":
                self._name_value(record, value)
            elif purpose == "id":
                record.call.native_id = value
            else:
                record.args_text.append(value)
            return
        writer = frame.writer
        record = frame.record
        try:
            done = writer.push(tok, text)
        except ValueError:
            if purpose == "args":
                self._send_arguments(record, writer.take())
                self._arguments_broken(frame, tok)
                return
            writer.finish()  # a token that cannot belong here ends the value as it stands
            done = True
        else:
            if done and purpose == "args" and not writer.dropped_key:
                record.args_complete = True
        if purpose == "args":
            self._send_arguments(record, writer.take())
            self._maybe_start(record)
        if done:
            self._frames.pop()

    def _arguments_broken(self, frame: _Value, tok: Tok) -> None:
        """A token that cannot belong to the arguments object ends it as it stands."""
        writer = frame.writer
        record = frame.record
        where_a_key_belongs = writer.depth == 1  # not inside a member's value
        writer.finish()
        self._frames.pop()
        if not record.readable:
            record.args = _Args.INVALID  # broken before its first member: unreadable
            if tok is Tok.BEGIN_OBJECT and where_a_key_belongs and len(self._frames) < MAX_DEPTH:
                # '{{"name": …': the model began the call again; read the new one.
                self._frames.append(_Object(self._new_record(False)))
            return
        self._send_arguments(record, writer.take())
        self._maybe_start(record)

    def _name_value(self, record: _CallRecord, name: str) -> None:
        # The first name wins: a later "name" key (a nested object the model
        # wrote where the arguments went on) must not rename a started call.
        if record.call.name is None and not record.call.dropped:
            record.call.set_name(name)
            self._maybe_start(record)

    def _maybe_start(self, record: _CallRecord) -> None:
        call = record.call
        if (
            self._eager
            and call.name is not None
            and record.args is _Args.OBJECT
            and record.readable
            and not call.started
        ):
            call.start()
            self._started_any = True
            if self._options.marked:
                # In a marked block the next call object marks its own beginning, and a
                # started call that is then cut short is shown by its text up to its
                # arguments (_begin_arguments): the rest need not be kept.
                self._ctx.unmark()

    def _end_object(self, record: _CallRecord) -> None:
        """A call object closed (or the text ended inside it): emit or reject the call."""
        record.levels -= 1
        if record.levels:
            return  # a wrapper level closed; the call goes on
        call = record.call
        if record.wrapper:
            return
        if call.dropped and self._eager and record.args in (_Args.OBJECT, _Args.INVALID):
            self._claimed = True  # call-shaped through and through: a call, not prose
        if not call.dropped:
            self._check(record)
        if call.dropped:
            if self.may_fallback:
                self._failed = True
            else:
                call.close(self._end)
            return
        call.start()
        self._started_any = True
        call.end()
        if self._options.marked:
            self._ctx.unmark()  # the next call object marks its own beginning

    def _check(self, record: _CallRecord) -> None:
        """Reject the call if its name or arguments cannot be used."""
        call = record.call
        if record.cut:
            call.cut_short()
        elif call.name is None:
            call.reject("the call names no tool")
        elif record.args is _Args.STRING:
            parsed = _object_text("".join(record.args_text))
            if parsed is None:
                call.reject("the arguments are a string that is not a JSON object")
            else:
                call.arguments(parsed)
        elif record.args is _Args.INVALID or (record.args is _Args.OBJECT and not record.readable):
            call.reject("the arguments could not be read as a JSON object")
        elif record.args is _Args.NONE:
            # Unmarked, {"name": "Bob"} is prose unless Bob is a declared tool.
            reason = self._ctx.tools.without_arguments(call.name)
            if reason is not None:
                call.reject(reason)

    def _reject(self, record: _CallRecord, reason: str) -> None:
        if record.call.started:
            return  # too late: what was streamed stands, the rest is repaired
        record.call.reject(reason)
        if self.may_fallback:
            self._failed = True


def _call_shaped(value: Any) -> bool:
    """Objects, lists of objects, strings and null, outside arguments objects (taken whole)."""
    todo = [value]
    while todo:
        item = todo.pop()
        if type(item) is list:
            if not all(type(entry) is dict for entry in item):
                return False
            todo += item
        elif type(item) is dict:
            for key, entry in item.items():
                if type(entry) is dict and key in ARGUMENT_KEYS:
                    continue
                if type(entry) is dict or type(entry) is list:
                    todo.append(entry)
                elif entry is not None and type(entry) is not str:
                    return False
    return True


def _object_text(text: str) -> str | None:
    """Strict JSON for stringified arguments, if the whole string is one object."""
    stripped = text.strip()
    if not stripped:
        return "{}"
    lexer = JsonLexer()
    writer = JsonWriter()
    end, stopped_at = lex_value(lexer, writer, stripped, 0, True)
    if stopped_at is not None or not writer.done or stripped[end:].strip():
        return None
    out = writer.take()
    return out if out.startswith("{") else None


def json_opener(
    marker: str,
    options: JsonCallsOptions,
    sniff: Sniff | None = None,
    follows: str | None = None,
) -> Opener:
    """An opener whose region reads JSON call objects with ``options``.

    A marker that ends with the JSON's own first bracket (a bare ``{`` or
    ``[``, ``functools[``) has the region start with that bracket read.
    """
    own_bracket = marker[-1] if marker[-1] in "{[" else ""

    def region(ctx: Context, _marker: str) -> Region:
        parsed = JsonCallsRegion(ctx, options)
        if own_bracket:
            parsed.open_with(own_bracket)
        return parsed

    return Opener(marker, region, sniff, follows)
