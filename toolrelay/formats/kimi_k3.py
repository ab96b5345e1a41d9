"""Kimi K3: calls in an XTML ``tools`` channel of ``<|open|>``/``<|close|>``/``<|sep|>`` tags.

Its chat template (llama.cpp's ``models/templates/Kimi-K3.jinja``) writes an
assistant turn as ``<|open|>response<|sep|>answer<|close|>response<|sep|>``
and, when it calls tools, a ``tools`` channel after it, with no blanks
between the tags::

    <|open|>tools<|sep|>
    <|open|>call tool="NAME" index="1"<|sep|>
    <|open|>argument key="K" type="string"<|sep|>raw text<|close|>argument<|sep|>
    <|open|>argument key="N" type="number"<|sep|>2<|close|>argument<|sep|>
    <|close|>call<|sep|>
    <|close|>tools<|sep|>

then ``<|close|>message<|sep|><|end_of_msg|>``. An argument's ``type`` says
how its body reads: ``string`` is the text itself, raw (no escape at all);
every other type (``number``, ``boolean``, ``null``, ``object``, ``array``) is
the value as JSON. Attribute values escape ``&`` and ``"`` (``&amp;``,
``&quot;``) and nothing else. Arguments that reach the template as a string
(the JSON text the API carries) are written as one
``<|open|>json type="object"<|sep|>{…}<|close|>json<|sep|>`` block instead.
Thinking is ``<|open|>think<|sep|>…<|close|>think<|sep|>`` (reasoning.py),
which the generation prompt opens unless thinking is off.

Read here: a value ends at its own ``<|close|>argument<|sep|>`` and nowhere
else (strings are raw, so any other tag inside one is its text; a string
holding that very closing tag cannot be written, a documented limit). A call
starts once its first argument is complete, or once a first string has run
on for ``STRING_HOLD`` characters: a call whose first value never ends, that
names no tool, or whose first typed value is not JSON is rejected, never
given ``{}``; a later value that is not its type's JSON stays the text the
model wrote (the call is streaming by then; the schema check names it). The
channel's own tokens (``response``, the message's close, ``<|end_of_msg|>``)
are markup wherever they stand. A call may come without
the ``tools`` tags around it: ``<|open|>call …`` opens one too.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from typing import Any

from toolrelay.formats.base import (
    ArgumentStream,
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
from toolrelay.repair import STRING_HOLD, escape_json_text, json_text, load_json, repair_json
from toolrelay.schema import coerce_text, is_string_schema

OPEN = "<|open|>"
CLOSE = "<|close|>"
SEP = "<|sep|>"
TOOLS_OPEN = f"{OPEN}tools{SEP}"
TOOLS_CLOSE = f"{CLOSE}tools{SEP}"
CALL_OPEN = f"{OPEN}call "
VALUE_CLOSE = f"{CLOSE}argument{SEP}"
# The rest of a message's markup: never content.
CHANNEL_TOKENS = (
    f"{OPEN}response{SEP}",
    f"{CLOSE}response{SEP}",
    f"{CLOSE}message{SEP}",
    "<|end_of_msg|>",
)

# Longest tag header (name and attributes) that is waited for; a longer one is garbage.
HEADER_LIMIT = 1024
_ATTRIBUTE = re.compile(r'(\w+)="([^"]*)"')


def _unescape(value: str) -> str:
    # The template writes '&' as '&amp;' first, then '"' as '&quot;': undone in reverse.
    return value.replace("&quot;", '"').replace("&amp;", "&")


def _attributes(header: str) -> dict[str, str]:
    return {key: _unescape(value) for key, value in _ATTRIBUTE.findall(header)}


def _read_header(buf: str, start: int, final: bool) -> tuple[str | None, int]:
    """From ``start`` to the ``<|sep|>`` that ends a tag: the header and where the tag
    ends; ``None, -1`` when the buffer may end inside it; ``None`` and where it broke
    off when no ``<|sep|>`` ends it (a header holds no ``<|``)."""
    limit = start + HEADER_LIMIT
    token = buf.find("<|", start, limit)
    if token < 0:
        if len(buf) < limit and not final:
            return None, -1
        return None, min(len(buf), limit)
    if not buf.startswith(SEP, token):
        if not final and len(buf) - token < len(SEP) and SEP.startswith(buf[token:]):
            return None, -1
        return None, token
    return buf[start:token], token + len(SEP)


def _at_tag(buf: str, pos: int) -> bool | None:
    """Does a tag begin at ``pos`` (None: the buffer ends inside its first token)?"""
    opening = starts_or_partial(buf, pos, OPEN)
    closing = starts_or_partial(buf, pos, CLOSE)
    if opening or closing:
        return True
    return None if opening is None or closing is None else False


class _State(enum.Enum):
    HEADER = 0  # opened by "<|open|>call ": the rest of the call's tag
    SECTION = 1  # between calls
    CALL = 2  # inside a call, between arguments
    VALUE = 3  # an argument's body
    JSON = 4  # a json block's body: the whole arguments object


class _Mode(enum.Enum):
    STREAM = 0  # a string: streamed as a JSON string while it arrives
    TYPED = 1  # JSON (or, untyped, the schema's reading): held until complete
    IGNORE = 2  # no key, a dropped call, or after a json block


class KimiK3Region:
    """Reads the calls of one ``tools`` channel (or one bare call)."""

    __slots__ = (
        "_blank",
        "_call",
        "_count",
        "_ctx",
        "_fallback",
        "_json",
        "_key",
        "_kind",
        "_lead",
        "_mode",
        "_parts",
        "_state",
        "_unread",
    )

    def __init__(self, ctx: Context, bare: bool) -> None:
        self._ctx = ctx
        self._state = _State.HEADER if bare else _State.SECTION
        self._fallback = bare  # until the call's tag proves well formed
        self._blank = ""  # blanks between calls: content if prose follows
        self._call: Call | None = None
        self._count = 0  # arguments written into the current call
        self._json: ArgumentStream | None = None
        self._unread = False  # the call's body held something that is no argument
        self._lead = 0  # string text of the first argument written so far
        self._key = ""
        self._kind: str | None = None  # the argument's type attribute
        self._mode = _Mode.IGNORE
        self._parts: list[str] = []  # a typed value's text

    @property
    def may_fallback(self) -> bool:
        return self._fallback

    def feed(self, buf: str, pos: int, final: bool) -> tuple[int, Status]:
        while True:
            state = self._state
            if state is _State.VALUE:
                pos, status = self._read_value(buf, pos, final)
            elif state is _State.CALL:
                pos, status = self._in_call(buf, pos, final)
            elif state is _State.SECTION:
                pos, status = self._in_section(buf, pos, final)
            elif state is _State.JSON:
                pos, status = self._read_json(buf, pos, final)
            else:
                pos, status = self._bare_header(buf, pos, final)
            if status is not None:
                return pos, status

    # -- tags ---------------------------------------------------------------------

    def _bare_header(self, buf: str, pos: int, final: bool) -> tuple[int, Status | None]:
        header, end = _read_header(buf, pos, final)
        if end < 0:
            return pos, Status.CONTINUE
        if header is None:
            return pos, Status.FALLBACK
        self._fallback = False
        self._begin_call(_attributes(header))  # the parser marked the call at its opener
        return end, None

    def _in_section(self, buf: str, pos: int, final: bool) -> tuple[int, Status | None]:
        start = pos
        pos = skip_whitespace(buf, pos)
        self._blank += buf[start:pos]
        if pos >= len(buf):
            return pos, (Status.DONE if final else Status.CONTINUE)
        at = _at_tag(buf, pos)
        if at is None and not final:
            return pos, Status.CONTINUE
        if not at:
            return self._leave(pos)  # prose: the channel is over
        name, closing, header, end = self._tag(buf, pos, final)
        if end < 0:
            return pos, Status.CONTINUE
        if name == "tools" and closing:
            self._blank = ""
            return end, Status.DONE
        if name == "call" and not closing:
            self._blank = ""
            self._ctx.mark(pos)
            self._begin_call(_attributes(header))
            return end, None
        if closing and name in ("call", "argument", "json"):
            self._blank = ""
            return end, None  # a stray closing tag
        return self._leave(pos)  # another tag (the message's close): the channel is over

    def _leave(self, pos: int) -> tuple[int, Status]:
        self._ctx.content(self._blank)
        self._blank = ""
        return pos, Status.DONE

    @staticmethod
    def _tag(buf: str, pos: int, final: bool) -> tuple[str, bool, str, int]:
        """The tag at ``pos``: its name, whether it closes, its header, where it ends
        (-1: the buffer may end inside it; a broken tag has the name "")."""
        closing = buf.startswith(CLOSE, pos)
        header, end = _read_header(buf, pos + len(CLOSE if closing else OPEN), final)
        if header is None:
            return "", closing, "", end
        name = header.split(None, 1)[0] if header.strip() else ""
        return name, closing, header, end

    def _in_call(self, buf: str, pos: int, final: bool) -> tuple[int, Status | None]:
        pos = skip_whitespace(buf, pos)
        if pos >= len(buf):
            if final:
                self._end_call(pos)
                return pos, Status.DONE
            return pos, Status.CONTINUE
        at = _at_tag(buf, pos)
        if at is None and not final:
            return pos, Status.CONTINUE
        if not at:
            # Text between the tags of a call is no argument: skipped, and a call that
            # has nothing else is not read as one without arguments (see _end_call).
            self._unread = True
            stray = buf.find("<", pos + 1)
            return (len(buf) if stray < 0 else stray), None
        name, closing, header, end = self._tag(buf, pos, final)
        if end < 0:
            return pos, Status.CONTINUE
        if not name:
            self._unread = True  # a broken tag
            return end, None
        if closing:
            if name == "call":
                self._end_call(end)
                self._state = _State.SECTION
            elif name == "tools":
                self._end_call(pos)
                return end, Status.DONE
            return end, None  # the json block's close, or a stray one
        if name == "argument":
            self._open_value(_attributes(header))
        elif name == "json":
            self._open_json()
        elif name == "call":  # the last call's closing tag was lost
            self._end_call(pos)
            self._ctx.mark(pos)
            self._begin_call(_attributes(header))
        else:
            self._unread = True  # a tag this format has no use for
        return end, None

    # -- calls --------------------------------------------------------------------

    def _begin_call(self, attributes: Mapping[str, str]) -> None:
        call = Call(self._ctx)
        name = attributes.get("tool", "")
        if name.strip():
            call.set_name(name)
        else:
            call.reject("the call names no tool")
        self._call = call
        self._count = 0
        self._lead = 0
        self._json = None
        self._unread = False
        self._state = _State.CALL

    def _end_call(self, pos: int) -> None:
        call = self._call
        if call is None:
            return
        self._call = None
        if self._json is not None:
            self._json.finish()
        elif self._count:
            call.arguments("}")
        elif self._unread:
            call.reject("the call's body is not argument tags: its arguments cannot be read")
        call.close(pos)

    def _open_json(self) -> None:
        if self._call is not None and self._count == 0 and self._json is None:
            self._json = ArgumentStream(self._call)
            self._state = _State.JSON
        else:
            self._unread = True  # a second object, or one after arguments: not read

    def _read_json(self, buf: str, pos: int, final: bool) -> tuple[int, Status | None]:
        stream = self._json
        assert stream is not None
        pos, other = stream.feed(buf, pos, final)
        if other is None and not stream.done:
            if final:
                self._end_call(len(buf))
                return len(buf), Status.DONE
            return pos, Status.CONTINUE
        stream.finish()
        self._state = _State.CALL
        return pos, None

    # -- values -------------------------------------------------------------------

    def _open_value(self, attributes: Mapping[str, str]) -> None:
        self._state = _State.VALUE
        self._parts = []
        call = self._call
        key = attributes.get("key")
        self._mode = _Mode.IGNORE
        if call is None or call.dropped or self._json is not None:
            return
        if key is None:
            call.reject("an argument of the call has no key")
            return
        self._key = key
        kind = attributes.get("type")
        self._kind = kind
        tools = self._ctx.tools
        schema = tools.parameter_schema(call.name or "", key) if tools.declared else None
        if kind == "string" or (kind is None and (not schema or is_string_schema(schema))):
            self._mode = _Mode.STREAM
            call.arguments(self._key_prefix() + '"')
        else:
            self._mode = _Mode.TYPED

    def _key_prefix(self) -> str:
        prefix = "{" if self._count == 0 else ","
        self._count += 1
        return f'{prefix}"{escape_json_text(self._key)}":'

    def _read_value(self, buf: str, pos: int, final: bool) -> tuple[int, Status | None]:
        found, safe = find_marker(buf, pos, VALUE_CLOSE)
        if found < 0:
            stop = len(buf) if final else safe
            self._value_text(buf[pos:stop])
            if not final:
                return stop, Status.CONTINUE
            if self._call is not None and self._mode is not _Mode.IGNORE:
                # Even once started: the value would be cut short.
                reason = f"the value of {self._key!r} never ends: the call was cut short"
                self._call.cut_short(reason)
            self._close_value()
            self._end_call(len(buf))
            return len(buf), Status.DONE
        self._value_text(buf[pos:found])
        self._close_value()
        self._state = _State.CALL
        return found + len(VALUE_CLOSE), None

    def _value_text(self, text: str) -> None:
        call = self._call
        if not text or call is None:
            return
        if self._mode is _Mode.STREAM:
            call.arguments(escape_json_text(text))
            if self._count == 1 and not call.started:
                self._lead += len(text)
                if self._lead >= STRING_HOLD:
                    call.start()  # a long first string streams; see the module's docstring
        elif self._mode is _Mode.TYPED:
            self._parts.append(text)

    def _close_value(self) -> None:
        call = self._call
        mode = self._mode
        self._mode = _Mode.IGNORE
        if call is None or mode is _Mode.IGNORE:
            return
        if mode is _Mode.STREAM:
            call.arguments('"')
        else:
            text = "".join(self._parts)
            self._parts = []
            value, readable = self._typed_value(text, call)
            if not readable:
                call.reject(f"the value of {self._key!r} is not the {self._kind} it says it is")
            call.arguments(self._key_prefix() + json_text(value))
        call.start()  # the first argument is complete: the call is certain

    def _typed_value(self, text: str, call: Call) -> tuple[Any, bool]:
        """What a typed value's text stands for, and whether it could be read: JSON
        for a type the template wrote with ``tojson``; the schema's reading without a
        type attribute. Unreadable JSON in a call already streaming stays its text."""
        if self._kind is None:
            tools = self._ctx.tools
            return coerce_text(text, tools.parameter_schema(call.name or "", self._key)), True
        try:
            return load_json(text), True
        except ValueError:
            pass
        if self._kind in ("object", "array"):
            repaired = repair_json(text, lossless=True)
            if isinstance(repaired, dict if self._kind == "object" else list):
                return repaired, True
        return text, False


def _section(ctx: Context, _marker: str) -> Region:
    return KimiK3Region(ctx, bare=False)


def _bare_call(ctx: Context, _marker: str) -> Region:
    return KimiK3Region(ctx, bare=True)


FORMAT = Format(
    name="kimi_k3",
    families="Kimi K3",
    description='<|open|>tools<|sep|><|open|>call tool="f"<|sep|><|open|>argument key="p" …',
    openers=(Opener(TOOLS_OPEN, _section), Opener(CALL_OPEN, _bare_call)),
    tokens=(TOOLS_OPEN, TOOLS_CLOSE, *CHANNEL_TOKENS),
)
