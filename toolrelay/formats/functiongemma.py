"""FunctionGemma: ``call:get_weather{city:<escape>Oslo<escape>}`` between its call tokens.

``<start_function_call>call:NAME{key:<escape>value<escape>}<end_function_call>``.

The engine here also reads Gemma 4 (``gemma4.py``), which writes the same
call syntax with ``<|"|>`` as the string delimiter. Arguments are
``key:value`` pairs, commas optional; a value is a delimited string, a bare
word, or a nested ``{…}`` / ``[…]``. Values are typed as FunctionGemma's
own parser types them (a delimited ``10`` is the number 10) or, when the
tool is declared, by its parameter schema.

A delimited string streams as soon as it can no longer turn out to be a
number, a literal or JSON (or at once, when the schema says string). The
call starts once its first member is complete (or its first string has run
on for ``STRING_HOLD`` characters): a delimited string that never ends (one
that swallowed the end marker) makes the call unreadable, and it is
rejected, even once started, rather than given a value that runs to the end
of the text or is cut short.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from toolrelay.formats.base import (
    Call,
    Context,
    Format,
    Opener,
    Region,
    Status,
    find_marker,
    skip_whitespace,
    starts_or_partial,
)
from toolrelay.formats.markup import stray_token
from toolrelay.repair import STRING_HOLD, escape_json_text, json_text
from toolrelay.schema import coerce_text, is_nullable_string, is_string_schema, schema_types

_MAX_HEADER = 256
_HEADER_RUN = re.compile(r"[^{<]*")
_NAME = re.compile(r"[A-Za-z_][\w\-.]*")
_KEY_RUN = re.compile(r"[^\s:{}\[\],<>]*")
_BARE_RUN = re.compile(r"[^,}\]<]*")
_NUMBER_PREFIX = re.compile(r"[+-]?[0-9_]*\.?[0-9_]*(?:[eE][+-]?[0-9_]*)?")
_LITERALS = ("true", "false", "null")


@dataclass(frozen=True)
class DslOptions:
    delimiter: str  # what opens and closes a string: <escape>, <|"|>
    end_marker: str  # what closes the call: <end_function_call>, <tool_call|>
    # Gemma 4: its template delimits every string and nothing else, so a delimited value
    # with no schema is a string whatever it spells, and a bare None (its template's
    # writing of a null item) is null. FunctionGemma's parser types delimited values.
    strings_delimited: bool = False


def could_be_json(text: str) -> bool:
    """Whether a string value so far may still be typed as a number, literal or JSON."""
    stripped = text.strip()
    if not stripped or stripped[0] in "{[":
        return True
    if any(literal.startswith(stripped) for literal in _LITERALS):
        return True
    return _NUMBER_PREFIX.fullmatch(stripped) is not None


class _Part(enum.Enum):
    KEY = 0  # object: before a key (or the closer)
    COLON = 1  # object: after a key
    VALUE = 2  # before a value
    NEXT = 3  # after a value: ',' or the closer (or, commas being optional, the next item)


class _Frame:
    __slots__ = ("array", "count", "key", "part", "schema")

    def __init__(self, array: bool, schema: Mapping[str, Any] | None) -> None:
        self.array = array
        self.schema = schema
        self.part = _Part.VALUE if array else _Part.KEY
        self.count = 0
        self.key = ""

    def child_schema(self) -> dict[str, Any] | None:
        schema = self.schema
        if not schema:
            return None
        found = (
            schema.get("items") if self.array else (schema.get("properties") or {}).get(self.key)
        )
        return found if isinstance(found, dict) else None


class _At(enum.Enum):
    HEAD = 0  # 'call:NAME' up to '{'
    BODY = 1  # between the tokens of the arguments
    KEY = 2  # a bare key
    STRING = 3  # a delimited string (a value, or a key)
    BARE = 4  # a bare value
    AFTER = 5  # after the arguments: the end marker


class _String:
    """A delimited string value: streamed as a JSON string, or held and typed at its end."""

    __slots__ = ("held", "schema", "streaming", "typed")

    def __init__(self, schema: dict[str, Any] | None, delimited_is_string: bool) -> None:
        self.schema = schema
        # A nullable string is read like an untyped one: held while it may be a literal.
        self.typed = (
            bool(schema_types(schema))
            and not is_string_schema(schema)
            and not is_nullable_string(schema)
        )
        self.streaming = is_string_schema(schema) or (
            delimited_is_string and not schema_types(schema)
        )
        self.held: list[str] = []


class DslCallRegion:
    """One or more ``call:NAME{…}`` after the opener, until the end marker."""

    __slots__ = (
        "_at",
        "_call",
        "_ctx",
        "_frames",
        "_head",
        "_lead",
        "_options",
        "_parts",
        "_seen",
        "_string",
    )

    def __init__(self, ctx: Context, options: DslOptions) -> None:
        self._ctx = ctx
        self._options = options
        self._at = _At.HEAD
        self._head = ""  # the header read so far (at most _MAX_HEADER + 1 characters)
        self._call: Call | None = None
        self._frames: list[_Frame] = []
        self._string: _String | None = None
        self._parts: list[str] = []  # a bare key or value read so far
        self._seen = False  # a call was read: the opener was real
        self._lead = 0  # string text streamed before the call started

    @property
    def may_fallback(self) -> bool:
        return not self._seen

    def feed(self, buf: str, pos: int, final: bool) -> tuple[int, Status]:
        while True:
            at = self._at
            if at is _At.HEAD:
                pos, status = self._header(buf, pos, final)
            elif at is _At.BODY:
                pos, status = self._body(buf, pos, final)
            elif at is _At.STRING:
                pos, status = self._delimited(buf, pos, final)
            elif at is _At.KEY or at is _At.BARE:
                pos, status = self._word(buf, pos, final)
            else:
                pos, status = self._after(buf, pos, final)
            if status is not None:
                return pos, status

    # -- the header --------------------------------------------------------------

    def _header(self, buf: str, pos: int, final: bool) -> tuple[int, Status | None]:
        # The limit is counted from the header's start, not from wherever a delta
        # began: a header too long stops at the same character however it was cut.
        run = _HEADER_RUN.match(buf, pos, pos + _MAX_HEADER + 1 - len(self._head))
        stop = run.end() if run else pos
        head = self._head = self._head + buf[pos:stop]
        pos = stop
        if len(head) > _MAX_HEADER:
            return pos, self._no_call()
        if pos >= len(buf):
            return pos, (self._no_call() if final else Status.CONTINUE)
        if buf[pos] == "<":
            at_end = starts_or_partial(buf, pos, self._options.end_marker)
            if at_end is None and not final:
                return pos, Status.CONTINUE
            if at_end and self._begin_call(head):  # 'call:get_time' with no arguments
                end = pos + len(self._options.end_marker)
                self._end_call(end)
                return end, Status.DONE
            return pos, self._no_call()
        # '{': the arguments begin.
        if not self._begin_call(head):
            return pos, self._no_call()
        call = self._call
        assert call is not None
        call.arguments("{")
        self._frames = [_Frame(False, self._ctx.tools.parameters(call.name or ""))]
        self._at = _At.BODY
        return pos + 1, None

    def _begin_call(self, head: str) -> bool:
        name = head.strip()
        if name.startswith("call:"):
            name = name[5:].strip()
        if not _NAME.fullmatch(name):
            return False
        call = Call(self._ctx)
        self._call = call
        self._seen = True
        self._head = ""
        self._lead = 0
        call.set_name(name)  # started once its first member is read (see _member_read)
        return True

    def _member_read(self) -> None:
        """A member of the arguments is complete: the call can be read, so it starts."""
        if len(self._frames) == 1 and self._call is not None:
            self._call.start()

    def _no_call(self) -> Status:
        # The opener is a special token: markup even when no call follows it.
        return Status.DROP_OPENER if self.may_fallback else Status.DONE

    # -- the arguments -----------------------------------------------------------

    def _body(self, buf: str, pos: int, final: bool) -> tuple[int, Status | None]:
        pos = skip_whitespace(buf, pos)
        if pos >= len(buf):
            return pos, (self._text_ended(pos) if final else Status.CONTINUE)
        char = buf[pos]
        if char == "<":
            for marker in (self._options.delimiter, self._options.end_marker):
                at = starts_or_partial(buf, pos, marker)
                if at is None and not final:
                    return pos, Status.CONTINUE
                if at and marker == self._options.end_marker:
                    self._close_all(pos + len(marker))
                    return pos + len(marker), Status.DONE
                if at:
                    self._begin_string()
                    return pos + len(marker), None
        frame = self._frames[-1]
        if char in "}]":
            self._close_frame(pos + 1)
            return pos + 1, None
        if char == ",":
            frame.part = _Part.KEY if not frame.array else _Part.VALUE
            return pos + 1, None
        if frame.part is _Part.COLON:
            if char == ":":
                frame.part = _Part.VALUE
                return pos + 1, None
            frame.part = _Part.VALUE  # a missing ':'
        if frame.part is _Part.NEXT:
            frame.part = _Part.KEY if not frame.array else _Part.VALUE  # a missing ','
        if frame.part is _Part.KEY:
            if char in ":{[":
                return pos + 1, None  # stray punctuation where a key belongs
            self._at = _At.KEY
            self._parts.clear()
            return pos, None
        if char in "{[":
            self._begin_value()
            self._emit(char)
            self._frames.append(_Frame(char == "[", frame.child_schema()))
            return pos + 1, None
        self._at = _At.BARE
        self._parts.clear()
        return pos, None

    def _word(self, buf: str, pos: int, final: bool) -> tuple[int, Status | None]:
        """A bare key (up to ':') or a bare value (up to ',', '}', ']' or a marker)."""
        key = self._at is _At.KEY
        while True:
            run = (_KEY_RUN if key else _BARE_RUN).match(buf, pos)
            stop = run.end() if run else pos
            self._parts.append(buf[pos:stop])
            pos = stop
            if pos >= len(buf):
                if not final:
                    return pos, Status.CONTINUE
                break
            if key or buf[pos] != "<":
                break
            markers = (self._options.delimiter, self._options.end_marker)
            verdicts = [starts_or_partial(buf, pos, m) for m in markers]
            if None in verdicts and not final:
                return pos, Status.CONTINUE
            if any(verdicts):
                break
            self._parts.append("<")  # a '<' inside a bare value: 'a<b'
            pos += 1
        if key and not self._parts[0]:
            self._at = _At.BODY
            return pos + 1, None  # a character that cannot start a key: skip it
        self._word_done()
        return pos, None

    def _word_done(self) -> None:
        text = "".join(self._parts)
        self._parts.clear()
        frame = self._frames[-1]
        if self._at is _At.KEY:
            frame.key = text
            frame.part = _Part.COLON
        else:
            self._begin_value()
            bare = text.strip()
            if self._options.strings_delimited and bare == "None":
                self._emit("null")
            else:
                self._emit(_typed(bare, frame.child_schema()))
            frame.part = _Part.NEXT
            self._member_read()
        self._at = _At.BODY

    def _begin_string(self) -> None:
        frame = self._frames[-1]
        self._parts.clear()
        # A delimited key (<escape>city<escape>:) is read like a value, then kept as the key.
        self._string = (
            None
            if frame.part is _Part.KEY
            else _String(frame.child_schema(), self._options.strings_delimited)
        )
        if self._string is not None:
            self._begin_value()
            if self._string.streaming:
                self._emit('"')
        self._at = _At.STRING

    def _delimited(self, buf: str, pos: int, final: bool) -> tuple[int, Status | None]:
        found, safe = find_marker(buf, pos, self._options.delimiter)
        stop = found if found >= 0 else (len(buf) if final else safe)
        text = buf[pos:stop]
        string = self._string
        if string is None:
            self._parts.append(text)
        elif string.streaming:
            self._emit(escape_json_text(text))
            self._lead += len(text)
            if self._lead >= STRING_HOLD and self._call is not None:
                self._call.start()  # a long first string streams (see STRING_HOLD)
        else:
            string.held.append(text)
            if not string.typed and not could_be_json("".join(string.held)):
                string.streaming = True
                self._emit('"' + escape_json_text("".join(string.held)))
                string.held.clear()
        if found < 0:
            return stop, (self._text_ended(stop) if final else Status.CONTINUE)
        self._end_string()
        return found + len(self._options.delimiter), None

    def _end_string(self) -> None:
        frame = self._frames[-1]
        string = self._string
        self._at = _At.BODY
        self._string = None
        if string is None:
            frame.key = "".join(self._parts)
            self._parts.clear()
            frame.part = _Part.COLON
            return
        if string.streaming:
            self._emit('"')
        else:
            self._emit(_typed("".join(string.held), string.schema))
        frame.part = _Part.NEXT
        self._member_read()

    def _begin_value(self) -> None:
        frame = self._frames[-1]
        comma = "," if frame.count else ""
        frame.count += 1
        if frame.array:
            self._emit(comma)
        else:
            self._emit(f'{comma}"{escape_json_text(frame.key)}":')

    def _close_frame(self, pos: int) -> None:
        frame = self._frames.pop()
        self._emit("]" if frame.array else "}")
        if self._frames:
            self._frames[-1].part = _Part.NEXT
            self._member_read()
            return
        self._end_call(pos)
        self._at = _At.AFTER

    def _close_all(self, pos: int) -> None:
        while self._frames:
            self._close_frame(pos)

    def _text_ended(self, pos: int) -> Status:
        """The output ended inside the arguments: close what is open, end the call.

        A string still open swallowed everything after it: its value would be cut
        short, so the call is rejected, even once it has started.
        """
        if self._at is _At.STRING:
            if self._call is not None:
                self._call.cut_short(
                    f"a string opened with {self._options.delimiter} never ends:"
                    " the arguments cannot be read"
                )
            self._end_string()
        elif self._at is _At.BARE or self._at is _At.KEY:
            self._word_done()
        self._close_all(pos)
        return Status.DONE

    def _end_call(self, pos: int) -> None:
        call = self._call
        if call is not None:
            call.close(pos)
        self._call = None
        self._frames = []

    def _emit(self, text: str) -> None:
        if self._call is not None:
            self._call.arguments(text)

    # -- after the call ----------------------------------------------------------

    def _after(self, buf: str, pos: int, final: bool) -> tuple[int, Status | None]:
        pos = skip_whitespace(buf, pos)
        if pos >= len(buf):
            return pos, (Status.DONE if final else Status.CONTINUE)
        for marker in (self._options.end_marker, "call:"):
            at = starts_or_partial(buf, pos, marker)
            if at is None and not final:
                return pos, Status.CONTINUE
            if at and marker == "call:":
                self._at = _At.HEAD  # another call in the same block
                self._ctx.mark(pos)
                return pos, None
            if at:
                return pos + len(marker), Status.DONE
        return pos, Status.DONE  # the end marker is missing: what follows is content


def _typed(text: str, schema: dict[str, Any] | None) -> str:
    return json_text(coerce_text(text, schema))


def dsl_opener(marker: str, options: DslOptions) -> Opener:
    def region(ctx: Context, _marker: str) -> Region:
        return DslCallRegion(ctx, options)

    return Opener(marker, region)


FORMAT = Format(
    name="functiongemma",
    families="FunctionGemma (Gemma 3 270M)",
    description="<start_function_call>call:get_weather{city:<escape>Oslo<escape>}<end_function_call>",
    openers=(
        dsl_opener(
            "<start_function_call>",
            DslOptions(delimiter="<escape>", end_marker="<end_function_call>"),
        ),
        stray_token("<end_function_call>"),
    ),
    tokens=("<start_function_call>", "<end_function_call>"),
)
