"""One engine for the XML-parameter formats: a call is a name and ``<parameter>`` tags.

Qwen3-Coder (``<function=f><parameter=p>v</parameter></function>``), Seed-OSS,
GLM-4.5 (``f\\n<arg_key>p</arg_key><arg_value>v</arg_value>``), MiniMax-M2
(``<invoke name="f"><parameter name="p">``), DeepSeek-V3.2 DSML and StepFun
Step-3 differ only in their tag names and a few habits, so each is a
``Dialect`` of the one region parser here.

Parameter values are raw text, typed by the tool's JSON Schema. A value whose
schema says string streams out as a JSON string while it arrives; any other
value is held until it is complete and then coerced. Every call's argument
fragments concatenate to one strict JSON object whatever the chunking,
because the region keeps all of its state and never looks at a character
twice (only a possible partial tag at the end of the buffer waits).

Models drop closing tags: a value also ends at the next parameter, at the
end of the call or of the section, unless the value's own closing tag comes
within ``CLOSE_WINDOW`` characters and before any opening tag (then the
call's or section's closing tag was data inside the value: code that writes
``</tool_call>``); a call ends at the next call or at the end of the section;
a tag that is not this format's ends the section. Prose between calls is
content, in order. A tag that never closes
(``<function=name`` and a newline) makes its call invalid: it is dropped, and
its markup with it.

Over 600 lines on purpose: the region is one state machine over tags and
values (a value's end depends on which tag comes next); split, each part
would reach into the others' state.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from toolrelay.formats.base import (
    ArgumentStream,
    Call,
    Context,
    Opener,
    Region,
    Sniff,
    Status,
    starts_or_partial,
)
from toolrelay.repair import escape_json_text, json_text
from toolrelay.schema import coerce_text, could_be_null, is_nullable_string, is_string_schema

# Longest tag (attributes included) that is waited for; a longer one is garbage.
TAG_LIMIT = 256

# How far past a call's or section's closing tag met inside a value its own closing
# tag is looked for: found there, before any opening tag, the closing tag was data.
CLOSE_WINDOW = 4096

# Parameters that models wrap a whole arguments object in (DSML).
WRAPPER_KEYS = frozenset({"arguments", "input"})

CDATA_OPEN = "<![CDATA["
CDATA_CLOSE = "]]>"
_ENTITY = re.compile(r"&(?:(lt|gt|amp|quot|apos)|#([0-9]{1,7})|#[xX]([0-9a-fA-F]{1,6}));")
_NAMED_ENTITIES = {"lt": "<", "gt": ">", "amp": "&", "quot": '"', "apos": "'"}
_LONGEST_ENTITY = len("&#x10FFFF;")


def _entity(found: re.Match[str]) -> str:
    named, decimal, hexadecimal = found.groups()
    if named is not None:
        return _NAMED_ENTITIES[named]
    code = int(decimal) if decimal is not None else int(hexadecimal, 16)
    return chr(code) if 0 < code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF else found.group()


def decode_entities(text: str) -> str:
    """XML's five named entity escapes and character references, decoded."""
    return _ENTITY.sub(_entity, text) if "&" in text else text


@dataclass(frozen=True)
class Dialect:
    """The tags and habits of one XML-parameter format."""

    section_end: str  # the raw marker closing the region: "</tool_call>"
    invoke: str | None  # tag name opening a call ("function"); None: the name follows the opener
    parameter: str  # tag name opening a parameter ("parameter"; GLM: "arg_key")
    param_open: str  # how a parameter tag starts, to end a value left unclosed
    value_tag: str | None = None  # GLM: the value has its own tag after the key's
    # Drop the line break the template writes around a value on its own lines (and the
    # tag's indentation, when the model indents its markup). Off: the value is all data.
    trim: bool = False
    skip_tags: frozenset[str] = field(default_factory=frozenset)  # separators, no meaning
    name_separator: str | None = None  # Step-3: "function<｜tool_sep｜>name\n" before a call
    literal_newlines: bool = False  # GLM: a backslash-n written between tags is a newline
    json_arguments: bool = False  # a JSON object right after the name: <function=f>{json}
    string_attribute: bool = False  # DSML: string="true|false" says whether a value is JSON
    unwrap: bool = False  # DSML: a lone "arguments"/"input" parameter holds the object
    # MiniCPM5, read as XML by its server: a value may be a <![CDATA[…]]> section (its
    # text raw, tags in it data), and XML's entity escapes outside one are decoded.
    xml_text: bool = False

    @property
    def value_close(self) -> str:
        return f"</{self.value_tag or self.parameter}>"

    @property
    def invoke_close(self) -> str | None:
        return None if self.invoke is None else f"</{self.invoke}>"

    @cached_property
    def value_terminators(self) -> tuple[str, ...]:
        """What ends a value: its closing tag, or markup that shows the closing tag was lost
        (and, with ``xml_text``, what begins a CDATA section)."""
        found = [self.value_close, self.param_open, self.section_end]
        if self.invoke_close is not None:
            found.append(self.invoke_close)
        found.extend(sorted(self.skip_tags))
        if self.xml_text:
            found.append(CDATA_OPEN)
        return tuple(found)

    @cached_property
    def closers(self) -> frozenset[str]:
        """Terminators that close what holds the value: inside it, they may be data."""
        found = {self.section_end}
        if self.invoke_close is not None:
            found.add(self.invoke_close)
        return frozenset(found)

    @cached_property
    def openings(self) -> re.Pattern[str]:
        """Tags that begin a parameter or a value: one after a closer means it was markup."""
        tags = [self.param_open]
        if self.value_tag is not None:
            tags.append(f"<{self.value_tag}>")
        return re.compile("|".join(re.escape(t) for t in tags))

    @cached_property
    def longest_terminator(self) -> int:
        return max(len(t) for t in self.value_terminators)

    @cached_property
    def value_end(self) -> re.Pattern[str]:
        # One search that stops at the first terminator: a value is scanned once.
        return re.compile("|".join(re.escape(t) for t in self.value_terminators))


@dataclass(frozen=True)
class _Tag:
    name: str  # without the "/" of a closing tag
    closing: bool
    value: str | None  # the name a tag carries: <function=NAME> or name="NAME"
    attributes: dict[str, str]


_TAG_NAME = re.compile(r"\s*(/?)\s*([^\s=/>]*)")
_ATTRIBUTE = re.compile(r"""([\w:.-]+)\s*=\s*(?:"([^"]*)"?|'([^']*)'?|([^\s"'>]+))""")


def parse_tag(body: str) -> _Tag:
    """``<…>`` without its brackets: ``function=f``, ``invoke name="f"``, ``/parameter``."""
    head = _TAG_NAME.match(body)
    assert head is not None  # the pattern matches the empty string
    slash, name = head.groups()
    rest = body[head.end() :]
    value: str | None = None
    attributes: dict[str, str] = {}
    if rest.lstrip().startswith("="):
        value = rest.lstrip()[1:].strip().strip("\"'")
    else:
        for found in _ATTRIBUTE.finditer(rest):
            key, double, single, bare = found.groups()
            attributes[key] = next(v for v in (double, single, bare) if v is not None)
        value = attributes.get("name")
    return _Tag(name, bool(slash), value, attributes)


class TagRead(enum.Enum):
    COMPLETE = 0
    PARTIAL = 1  # the buffer ends inside the tag
    BROKEN = 2  # a newline or another '<' came before '>'


def read_tag(buf: str, pos: int, final: bool) -> tuple[TagRead, int]:
    """At a '<': where the tag ends (after '>'), or where it broke off."""
    end = len(buf)
    limit = min(end, pos + TAG_LIMIT)
    i = pos + 1
    while i < limit:
        char = buf[i]
        if char == ">":
            return TagRead.COMPLETE, i + 1
        if char == "<" or char == "\n":
            return TagRead.BROKEN, i
        i += 1
    if limit == end and not final:
        return TagRead.PARTIAL, pos
    return TagRead.BROKEN, limit


class Trim:
    """Drops the line break, and the tag's indentation, that frame a value.

    ``<parameter=p>\\nvalue\\n</parameter>`` means ``value``; pretty-printed
    markup indents both lines by the parameter tag's own indentation, which
    goes too. Nothing else is touched: a string keeps its text.
    """

    __slots__ = ("_frame", "_leading", "_matched", "_tail")

    def __init__(self, indent: str | None) -> None:
        self._frame = None if indent is None else "\n" + indent
        self._leading = self._frame is not None
        self._matched = ""  # what of the leading frame has been seen
        self._tail = ""  # a trailing line break and blanks, held until the value ends

    def push(self, text: str) -> str:
        """The part of ``text`` that is certainly value text."""
        frame = self._frame
        if frame is None:
            return text
        if self._leading:
            matched = self._matched
            taken = 0
            while taken < len(text) and len(matched) < len(frame):
                if text[taken] != frame[len(matched)]:
                    break
                matched += text[taken]
                taken += 1
            text = text[taken:]
            if len(matched) < len(frame) and not text:
                self._matched = matched
                return ""
            self._leading = False
            # A full frame goes; a partial one loses only its line break.
            text = matched[1:] + text if 0 < len(matched) < len(frame) else text
            if not text:
                return ""
        joined = self._tail + text
        newline = joined.rfind("\n")
        if newline >= 0 and joined[newline + 1 :].strip(" \t") == "":
            if newline > 0 and joined[newline - 1] == "\r":
                newline -= 1
            self._tail = joined[newline:]
            return joined[:newline]
        if joined.endswith("\r"):  # maybe the start of a "\r\n" cut in two
            self._tail = "\r"
            return joined[:-1]
        self._tail = ""
        return joined

    def close(self) -> str:
        """What is left once the value is over, its closing frame dropped."""
        if self._frame is None:
            return ""
        if self._leading:
            return self._matched[1:]
        tail = self._tail
        self._tail = ""
        # The closing tag may sit at the line start even when the value was indented.
        return "" if tail.lstrip("\r") in ("\n", self._frame) else tail


class ValueMode(enum.Enum):
    STREAM = 0  # a string: streamed as a JSON string
    HOLD = 1  # typed or schema-less: coerced when complete
    IGNORE = 2  # part of a dropped call, or after JSON arguments
    MAYBE_NULL = 3  # a string or null: held while it may be "null", then streamed


# A nullable string's text longer than this streams as a string, whatever it holds.
NULL_WINDOW = 64


def value_mode(schema: Mapping[str, Any] | None, text_flag: bool | None = None) -> ValueMode:
    """How a parameter's text is read under its schema (``text_flag``: DSML's
    ``string=`` attribute): streamed as a string, held while it may be ``null``,
    or held whole and coerced."""
    if is_string_schema(schema) or (not schema and text_flag is True):
        return ValueMode.STREAM
    if is_nullable_string(schema):
        return ValueMode.MAYBE_NULL
    return ValueMode.HOLD


class _Value:
    __slots__ = ("cdata", "key", "mode", "parts", "schema", "trim", "wrapper")

    def __init__(
        self, key: str, mode: ValueMode, schema: Mapping[str, Any] | None, trim: Trim
    ) -> None:
        self.key = key
        self.mode = mode
        self.schema = schema
        self.trim = trim
        self.parts: list[str] = []
        self.wrapper = False  # may be the whole arguments object, wrapped (DSML)
        self.cdata = False  # inside a <![CDATA[…]]> section


class _State(enum.Enum):
    OPEN_TAG = 0  # opened by "<function=": the rest of that tag
    NAME = 1  # GLM: the name line after the opener
    SECTION = 2  # between calls
    CALL = 3  # inside a call, between parameters
    KEY = 4  # GLM: the text of <arg_key>
    BEFORE_VALUE = 5  # GLM: between </arg_key> and <arg_value>
    VALUE = 6
    JSON = 7  # Functionary v3.1: a JSON arguments object
    TRAILER = 8  # opened by "<function=": a stray "</tool_call>" may follow the call


_NAME_END = re.compile(r"[\n<]")
# Where stray text inside a call stops: at a tag, or at a line break (GLM: a
# possible backslash-n), which ``_skip_space`` must read as the start of the
# next tag's indentation whether or not the text was cut right there.
_STRAY_END = re.compile(r"[\n<]")
_STRAY_END_LITERAL = re.compile(r"[\n<\\]")
_ANGLE = re.compile("<")
_WORD = re.compile(r"[A-Za-z0-9_.:/-]*")


class XmlParamsRegion:
    """Reads the calls of one section (or one bare call) of an XML-parameter format."""

    __slots__ = (
        "_after_separator",
        "_bare",
        "_blank",
        "_call",
        "_count",
        "_ctx",
        "_dialect",
        "_fallback",
        "_fresh",
        "_indent",
        "_json",
        "_key",
        "_name",
        "_prose",
        "_state",
        "_terminators",
        "_trailer",
        "_unread",
        "_value",
        "_values",
        "_wrapper",
    )

    def __init__(self, ctx: Context, dialect: Dialect, bare: bool = False) -> None:
        self._ctx = ctx
        self._dialect = dialect
        self._terminators = dialect.value_terminators
        if bare:
            self._state = _State.OPEN_TAG
        elif dialect.invoke is None:
            self._state = _State.NAME
        else:
            self._state = _State.SECTION
        self._bare = bare  # opened by a call's own tag, not by a section marker
        self._fallback = bare  # until that tag proves well formed
        self._call: Call | None = None
        self._count = 0  # parameters emitted into the current call
        self._json: ArgumentStream | None = None
        self._fresh = False  # nothing but blanks since the call's opening tag
        self._unread = False  # the call's body held text or tags that are not parameters
        self._prose = False  # inside a run of prose between calls, until the next '<'
        self._after_separator = False  # Step-3: the last markup was the name separator
        self._blank = ""  # blanks skipped between calls, since the last markup
        # A held "arguments" parameter: key, JSON, value.
        self._wrapper: tuple[str, str, dict[str, Any]] | None = None
        # The call's arguments as values, while every one was written from its value
        # (None once one streamed): the call need not decode its text at the end.
        self._values: dict[str, Any] | None = None
        self._value: _Value | None = None
        self._name: list[str] = []  # GLM name or key text so far
        self._key = ""
        self._indent: str | None = None  # blanks after the last line break, at a line start
        self._trailer = ""

    @property
    def may_fallback(self) -> bool:
        return self._fallback

    def feed(self, buf: str, pos: int, final: bool) -> tuple[int, Status]:
        while True:
            state = self._state
            if state is _State.VALUE:
                pos, status = self._read_value(buf, pos, final)
            elif state is _State.JSON:
                pos, status = self._read_json(buf, pos, final)
            elif state is _State.NAME or state is _State.KEY:
                pos, status = self._read_text(buf, pos, final)
            elif state is _State.OPEN_TAG:
                pos, status = self._read_open_tag(buf, pos, final)
            elif state is _State.TRAILER:
                pos, status = self._read_trailer(buf, pos, final)
            else:
                pos, status = self._between_tags(buf, pos, final)
            if status is not None:
                return pos, status

    # -- markup between values ----------------------------------------------------

    def _skip_space(self, buf: str, pos: int) -> int:
        end = len(buf)
        literal = self._dialect.literal_newlines
        while pos < end:
            char = buf[pos]
            if char == "\n":
                self._indent = ""
            elif char in " \t\r":
                if self._indent is not None and char != "\r":
                    self._indent += char
            elif literal and char == "\\" and buf.startswith("\\n", pos):
                self._indent = ""
                pos += 1
            else:
                break
            pos += 1
        return pos

    def _between_tags(self, buf: str, pos: int, final: bool) -> tuple[int, Status | None]:
        end = len(buf)
        if self._prose:
            return self._prose_text(buf, pos, final)
        start = pos
        pos = self._skip_space(buf, pos)
        if self._state is _State.SECTION:
            self._blank += buf[start:pos]  # content if prose follows, formatting if markup does
        if pos >= end:
            return (self._finish(pos), Status.DONE) if final else (pos, Status.CONTINUE)
        if buf[pos] != "<":
            return self._stray_text(buf, pos, final)
        kind, tag_end = read_tag(buf, pos, final)
        if kind is TagRead.PARTIAL:
            return pos, Status.CONTINUE
        if kind is TagRead.BROKEN:
            return self._broken_tag(buf, pos, tag_end, final)
        indent = self._indent
        self._indent = None
        self._fresh = False
        return self._tag(parse_tag(buf[pos + 1 : tag_end - 1]), buf, pos, tag_end, indent)

    def _stray_text(self, buf: str, pos: int, final: bool) -> tuple[int, Status | None]:
        dialect = self._dialect
        self._indent = None
        if dialect.literal_newlines and buf[pos] == "\\" and pos + 1 == len(buf) and not final:
            return pos, Status.CONTINUE  # maybe a backslash-n
        if self._state is _State.SECTION:
            separator = dialect.name_separator
            after_separator = self._after_separator
            if separator is not None:
                word_end = _WORD.match(buf, pos).end()  # type: ignore[union-attr]
                if word_end == len(buf) and not final and word_end - pos < TAG_LIMIT:
                    return pos, Status.CONTINUE
                # "function" before the separator, the name after it: markup.
                before = word_end > pos and starts_or_partial(buf, word_end, separator)
                if before is None and not final:
                    return pos, Status.CONTINUE
                self._after_separator = False
                if before or (
                    after_separator
                    and word_end > pos
                    and (word_end == len(buf) or buf[word_end] in "<\r\n")
                ):
                    self._blank = ""
                    return word_end, None
            self._after_separator = False
            # Prose between calls (or after them, the closing marker left out) is
            # content; the section goes on, so that markup after the prose is still read.
            self._ctx.content(self._blank)
            self._blank = ""
            self._prose = True
            return self._prose_text(buf, pos, final)
        fresh = self._fresh
        self._fresh = False
        if fresh and dialect.json_arguments and buf[pos] == "{" and self._call is not None:
            self._json = ArgumentStream(self._call)
            self._state = _State.JSON
            return pos, None
        # Stray text inside a call is garbage inside markup: skip it (a call that has
        # nothing else is not read as one without arguments: see _end_call).
        self._unread = True
        stray_end = _STRAY_END_LITERAL if dialect.literal_newlines else _STRAY_END
        found = stray_end.search(buf, pos + 1)
        return (len(buf) if found is None else found.start()), None

    def _prose_text(self, buf: str, pos: int, final: bool) -> tuple[int, Status | None]:
        end = len(buf)
        if pos >= end:
            return (self._finish(pos), Status.DONE) if final else (pos, Status.CONTINUE)
        openers = self._ctx.openers
        tag = buf.find("<", pos)
        if tag >= 0:
            self._prose = False
            # A marker may begin in the prose and run on through the tag (MiniMax-M3's
            # "]<]minimax[>[<tool_call>"): the prose is held where one may still begin.
            stop = tag if final else min(tag, openers.safe_end(buf, pos))
        else:
            stop = end if final else openers.safe_end(buf, pos)
        # Another format's marker that begins in the prose ends the section: the parser
        # reads it. (Searched past the tag, or to the buffer's end: a held partial marker
        # may be complete.)
        reach = end if tag < 0 else min(end, tag + openers.longest)
        foreign = openers.search_marked(buf, pos, reach)
        if foreign >= 0 and (tag < 0 or foreign < tag):
            self._ctx.content(buf[pos:foreign])
            self._end_call(foreign)
            return foreign, Status.DONE
        self._ctx.content(buf[pos:stop])
        return stop, (Status.CONTINUE if stop == pos and not final else None)

    def _broken_tag(self, buf: str, pos: int, stop: int, final: bool) -> tuple[int, Status | None]:
        """A tag that never closes: a call opened by it is invalid, the rest is garbage."""
        self._indent = None
        self._fresh = False
        dialect = self._dialect
        opens_call = dialect.invoke is not None and buf.startswith("<" + dialect.invoke, pos)
        blank, self._blank = self._blank, ""
        if self._state is _State.SECTION and not opens_call:
            if final and stop >= len(buf) and self._is_own_markup(buf[pos:]):
                return len(buf), Status.DONE  # a closing marker cut short by the end
            self._ctx.content(blank)
            return pos, Status.DONE
        if opens_call:
            self._end_call(pos)
            self._ctx.mark(pos)
            self._call = Call(self._ctx)
            self._call.reject(f"the call's tag {buf[pos:stop].strip()!r} is not closed")
            self._state = _State.CALL
        return stop, None

    def _is_own_markup(self, text: str) -> bool:
        dialect = self._dialect
        known = [dialect.section_end, *dialect.skip_tags]
        if dialect.invoke is not None:
            known += ["<" + dialect.invoke, "</" + dialect.invoke]
        return any(k.startswith(text) or text.startswith(k) for k in known)

    def _tag(
        self, tag: _Tag, buf: str, pos: int, end: int, indent: str | None
    ) -> tuple[int, Status | None]:
        dialect = self._dialect
        raw = buf[pos:end]
        state = self._state
        self._after_separator = raw == dialect.name_separator
        blank, self._blank = self._blank, ""
        if raw == dialect.section_end:
            self._end_call(pos)
            return end, Status.DONE
        if state is _State.BEFORE_VALUE:
            if tag.name == dialect.value_tag and not tag.closing:
                return self._open_value(self._key, None, indent, end)
            if tag.name == dialect.parameter and tag.closing:
                return end, None  # </arg_key>
            self._state = _State.CALL  # the value never came; look at this tag as markup
            return pos, None
        if tag.name == dialect.invoke and not tag.closing:
            self._end_call(pos)
            self._ctx.mark(pos)
            self._begin_call(tag.value or "")
            return end, None
        if state is _State.SECTION:
            if raw in dialect.skip_tags or (
                tag.closing and tag.name in (dialect.invoke, dialect.parameter, dialect.value_tag)
            ):
                return end, None
            self._ctx.content(blank)
            return pos, Status.DONE  # someone else's markup: the section is over
        # Inside a call.
        if (tag.closing and tag.name == dialect.invoke) or raw in dialect.skip_tags:
            self._end_call(end)
            self._state = _State.TRAILER if self._bare else _State.SECTION
            return end, None
        if tag.name == dialect.parameter and not tag.closing:
            if dialect.value_tag is not None:
                self._name = []
                self._state = _State.KEY
                return end, None
            string = tag.attributes.get("string") if dialect.string_attribute else None
            text_flag = None if string is None else string.strip().lower() != "false"
            return self._open_value(tag.value or "", text_flag, indent, end)
        if tag.name == dialect.value_tag and not tag.closing:
            return self._open_value(None, None, indent, end)
        if not tag.closing:
            self._unread = True  # <city>Paris</city>: a tag this format has no use for
        return end, None  # a stray closing tag or unknown markup inside the call

    # -- calls --------------------------------------------------------------------

    def _begin_call(self, raw_name: str) -> None:
        """A call begins; it starts with its first parameter (or JSON value), or at its end."""
        call = Call(self._ctx)
        self._call = call
        self._count = 0
        self._json = None
        self._wrapper = None
        self._values = {}
        self._fresh = True
        self._unread = False
        call.set_name(raw_name)
        self._state = _State.CALL

    def _end_call(self, pos: int) -> None:
        """The call's text ends at ``pos``."""
        call = self._call
        if call is None:
            return
        self._call = None
        values = self._values
        if self._json is not None:
            self._json.finish()
            values = None
        elif self._wrapper is not None and self._count == 0:
            call.arguments(self._wrapper[1])  # the lone wrapper was the arguments object
            values = self._wrapper[2]
        else:
            self._flush_wrapper()
            if self._count:
                call.arguments("}")
            elif self._unread:
                # Its body was something else (a JSON object, tags of its own): the
                # arguments were not read, and are not made {}.
                call.reject("the call's body is not parameter tags: its arguments cannot be read")
        self._wrapper = None
        if values is not None:
            call.known_arguments(values)
        call.close(pos)

    def _flush_wrapper(self) -> None:
        if self._wrapper is not None and self._call is not None:
            key, text, value = self._wrapper
            self._wrapper = None
            self._call.arguments(self._key_prefix(key) + text)
            self._value_written(key, value)

    def _value_written(self, key: str, value: Any) -> None:
        if self._values is not None:
            self._values[key] = value  # a repeated key: the last value, where the first was

    def _key_prefix(self, key: str) -> str:
        prefix = "{" if self._count == 0 else ","
        self._count += 1
        return f'{prefix}"{escape_json_text(key)}":'

    def _finish(self, pos: int) -> int:
        """The text ended: finish what is open as it stands."""
        if self._state is _State.VALUE:
            self._close_value()
        self._end_call(pos)
        return pos

    # -- values -------------------------------------------------------------------

    def _open_value(
        self, key: str | None, text_flag: bool | None, indent: str | None, end: int
    ) -> tuple[int, Status | None]:
        dialect = self._dialect
        call = self._call
        trim = Trim((indent or "") if dialect.trim else None)
        self._state = _State.VALUE
        if key is None or call is None or call.dropped or self._json is not None:
            self._value = _Value("", ValueMode.IGNORE, None, trim)
            return end, None
        self._flush_wrapper()
        call.start()
        key = key.strip()
        name = call.name or ""
        tools = self._ctx.tools
        schema = tools.parameter_schema(name, key) if tools.declared else None
        if (
            dialect.unwrap
            and self._count == 0
            and key in WRAPPER_KEYS
            and tools.declared
            and key not in ((tools.parameters(name) or {}).get("properties") or {})
        ):
            value = _Value(key, ValueMode.HOLD, None, trim)
            value.wrapper = True
        else:
            mode = value_mode(schema, text_flag)
            value = _Value(key, mode, schema or None, trim)
            if mode is ValueMode.STREAM:
                call.arguments(self._key_prefix(key) + '"')
                self._values = None  # a string that streams
        self._value = value
        return end, None

    def _read_value(self, buf: str, pos: int, final: bool) -> tuple[int, Status | None]:
        dialect = self._dialect
        if self._value is not None and self._value.cdata:
            return self._read_cdata(buf, pos, final)
        match = dialect.value_end.search(buf, pos)
        if match is None:
            safe = len(buf) if final else self._safe_end(buf, pos)
            if self._decodes() and not final:
                safe = _before_partial_entity(buf, pos, safe)
            self._value_text(self._xml_text(buf[pos:safe]))
            if final:
                return self._finish(len(buf)), Status.DONE
            return safe, Status.CONTINUE
        found = match.start()
        if match.group() == CDATA_OPEN and self._value is not None:
            self._value_text(self._xml_text(buf[pos:found]))
            self._value.cdata = True
            return match.end(), None
        if match.group() in self._dialect.closers:
            close = self._closes_later(buf, match.end(), final)
            if close == -1:  # cannot tell yet: the text before the closer is value
                self._value_text(self._xml_text(buf[pos:found]))
                return found, Status.CONTINUE
            if close >= 0:
                found = close
                match = None
        self._value_text(self._xml_text(buf[pos:found]))
        self._close_value()
        if match is None:
            return found + len(self._dialect.value_close), None
        self._state = _State.CALL
        if match.group() == self._dialect.value_close:
            return match.end(), None
        self._indent = None
        return found, None  # a lost closing tag: the markup that follows is read as such

    def _closes_later(self, buf: str, after: int, final: bool) -> int:
        """Where the value's own closing tag is, after a closer met inside the value at
        ``after``: -2 when the closer ended the value (its closing tag was lost), -1
        when the text so far cannot tell."""
        dialect = self._dialect
        limit = after + CLOSE_WINDOW
        close = buf.find(dialect.value_close, after, limit + len(dialect.value_close))
        opening = dialect.openings.search(buf, after, close if close >= 0 else limit)
        if opening is not None:
            return -2
        if close >= 0:
            return close
        return -2 if final or len(buf) >= limit + len(dialect.value_close) else -1

    def _xml_text(self, text: str) -> str:
        return decode_entities(text) if self._decodes() else text

    def _decodes(self) -> bool:
        # Only a string's text: MiniCPM5's template puts a string holding '&' in CDATA,
        # so an escape outside one is XML's, but writes lists and objects raw.
        value = self._value
        return self._dialect.xml_text and value is not None and value.mode is not ValueMode.HOLD

    def _read_cdata(self, buf: str, pos: int, final: bool) -> tuple[int, Status | None]:
        """A CDATA section's text is the value's, markup and all, up to ``]]>``."""
        close = buf.find(CDATA_CLOSE, pos)
        if close < 0:
            safe = len(buf)
            if not final:
                for keep in (2, 1):  # a "]]" or "]" at the end may begin the close
                    if buf.endswith(CDATA_CLOSE[:keep], pos):
                        safe = len(buf) - keep
                        break
            self._value_text(buf[pos:safe])
            if final:
                return self._finish(len(buf)), Status.DONE
            return safe, Status.CONTINUE
        self._value_text(buf[pos:close])
        assert self._value is not None
        self._value.cdata = False
        return close + len(CDATA_CLOSE), None

    def _safe_end(self, buf: str, pos: int) -> int:
        """Hold back a possible partial terminator at the end of the buffer."""
        end = len(buf)
        longest = self._dialect.longest_terminator
        start = buf.rfind("<", max(pos, end - longest + 1))
        while start >= 0:
            tail = buf[start:]
            if any(t.startswith(tail) for t in self._terminators):
                return start
            start = buf.rfind("<", max(pos, end - longest + 1), start)
        return end

    def _value_text(self, text: str) -> None:
        value = self._value
        if value is None or not text or value.mode is ValueMode.IGNORE:
            return
        certain = value.trim.push(text)
        if not certain:
            return
        if value.mode is ValueMode.STREAM:
            if self._call is not None:
                self._call.arguments(escape_json_text(certain))
            return
        value.parts.append(certain)
        if value.mode is ValueMode.MAYBE_NULL and self._call is not None:
            held = "".join(value.parts)
            if len(held) > NULL_WINDOW or not could_be_null(held):
                # A string after all: it streams from here on.
                self._call.arguments(self._key_prefix(value.key) + '"' + escape_json_text(held))
                value.parts.clear()
                value.mode = ValueMode.STREAM
                self._values = None

    def _close_value(self) -> None:
        value = self._value
        self._value = None
        call = self._call
        if value is None or call is None or value.mode is ValueMode.IGNORE:
            return
        rest = value.trim.close()
        if value.mode is ValueMode.STREAM:
            call.arguments(escape_json_text(rest) + '"')
            return
        coerced = coerce_text("".join(value.parts) + rest, value.schema)
        if value.wrapper and isinstance(coerced, dict):
            self._wrapper = (value.key, json_text(coerced), coerced)
            return
        call.arguments(self._key_prefix(value.key) + json_text(coerced))
        self._value_written(value.key, coerced)

    def _read_json(self, buf: str, pos: int, final: bool) -> tuple[int, Status | None]:
        stream = self._json
        assert stream is not None
        pos, other = stream.feed(buf, pos, final)
        if other is None and not stream.done:
            if final:
                return self._finish(len(buf)), Status.DONE
            return pos, Status.CONTINUE
        stream.finish()
        self._state = _State.CALL
        return pos, None

    # -- GLM's name and keys, the bare opener's tag and trailer --------------------

    def _read_text(self, buf: str, pos: int, final: bool) -> tuple[int, Status | None]:
        """A name line (ends at a newline or a tag) or a key (ends at a tag)."""
        naming = self._state is _State.NAME
        if naming and not self._name:
            pos = self._skip_space(buf, pos)
        found = (_NAME_END if naming else _ANGLE).search(buf, pos)
        stop = len(buf) if found is None else found.start()
        if stop > pos:
            self._name.append(buf[pos:stop])
        if found is None and not final:
            return stop, Status.CONTINUE
        text = "".join(self._name).strip()
        self._name = []
        if naming:
            while text.endswith("\\n"):  # GLM-4.6 writes the line break as backslash-n
                text = text[:-2].rstrip()
            self._begin_call(text)
            self._indent = None
        else:
            self._key = text
            self._state = _State.BEFORE_VALUE
        if found is None:
            return self._finish(stop), Status.DONE
        if buf[stop] == "\n":
            self._indent = ""
            return stop + 1, None
        return stop, None

    def _read_open_tag(self, buf: str, pos: int, final: bool) -> tuple[int, Status | None]:
        """After "<function=": the name and '>', or this was not a call."""
        kind, end = read_tag(buf, pos - 1, final)  # the opener ends with '=', not '<'
        if kind is TagRead.PARTIAL:
            return pos, Status.CONTINUE
        name = buf[pos : end - 1].strip().strip("\"'") if kind is TagRead.COMPLETE else ""
        if not name or any(c.isspace() for c in name):
            return pos, Status.FALLBACK
        self._fallback = False
        self._begin_call(name)
        return end, None

    def _read_trailer(self, buf: str, pos: int, final: bool) -> tuple[int, Status | None]:
        end = len(buf)
        start = pos
        while pos < end and buf[pos] in " \t\r\n":
            pos += 1
        self._trailer += buf[start:pos]
        closing = starts_or_partial(buf, pos, self._dialect.section_end)
        if closing:
            return pos + len(self._dialect.section_end), Status.DONE
        if (closing is None or pos >= end) and not final:
            return pos, Status.CONTINUE
        self._ctx.content(self._trailer)
        return pos, Status.DONE


def _before_partial_entity(buf: str, pos: int, safe: int) -> int:
    """Hold back an entity escape the buffer may end inside (``&am`` before ``p;``)."""
    amp = buf.rfind("&", max(pos, safe - _LONGEST_ENTITY), safe)
    if amp >= 0 and ";" not in buf[amp:safe]:
        return amp
    return safe


def xml_opener(
    marker: str, dialect: Dialect, sniff: Sniff | None = None, bare: bool = False
) -> Opener:
    """An opener whose region reads ``dialect``; ``bare``: the marker opens a call's own tag."""

    def region(ctx: Context, _marker: str) -> Region:
        return XmlParamsRegion(ctx, dialect, bare)

    return Opener(marker, region, sniff)
