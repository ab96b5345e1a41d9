"""Lenient, incremental JSON: sloppy model JSON in, strict compact JSON out.

Two pieces, both fed a little at a time and never rescanning what they have
read (the buffer discipline of h11):

- ``JsonLexer`` cuts text into tokens. It accepts what models get wrong:
  single-quoted strings, Python literals, bare words, raw control characters
  inside strings. Characters that are not JSON come back as ``OTHER`` so that
  the caller (a format's region parser) can decide whether they end the
  value (a closing tag), are leaked markup to skip, or are garbage.
- ``JsonWriter`` turns the tokens of one value into strict, compact JSON and
  hands it out as soon as nothing later can change it: a trailing comma or a
  key is held until the next value starts, everything else goes out at once.
  ``finish()`` closes what truncation left open, so the concatenation of all
  it emitted is always one valid JSON document once it has started.

``repair_json`` runs both over a finished string.

Hostile text is bounded, never an exception: values nest at most
``MAX_DEPTH`` deep (a deeper container ends the value as it stands), a number
is text until it must be a number (integers keep every digit; one longer than
Python's ``int`` reads, ``INT_DIGITS``, becomes a string of its digits),
and every pattern here matches in time linear in the text (no pattern can
backtrack over a run of characters more than once).

Over 600 lines on purpose: the lexer and the writer are written for each
other (the writer takes exactly the lexer's tokens) and share the limits and
the atom rules above; split, one half would only make sense beside the other.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Callable
from typing import Any

import orjson

# How deep JSON values nest (objects and arrays) at most: a container deeper than
# this ends the value as it stands. Far beyond real arguments, and well inside what
# orjson (255) and json (the recursion limit) encode and decode.
MAX_DEPTH = 128
# Python refuses to turn longer digit strings into an int (the conversion is
# quadratic), and so does every Python client's ``json.loads``: such an integer
# is written as a JSON string of its digits (docs/formats.md), exact and loadable.
INT_DIGITS = 4300
# A bare word or number this long that is still growing is taken into the lexer
# instead of being waited for in the buffer: it is never read twice, and never
# handed back to the caller (a word this long is no markup the caller could want).
ATOM_HOLD = 64
# Text a value's first member may hold back before the value counts as readable
# (``JsonWriter.readable``): a first string this long streams even though it may
# still turn out never to end. Longer than any short value a call's start could wait for.
STRING_HOLD = 256


class Tok(enum.Enum):
    BEGIN_OBJECT = "{"
    END_OBJECT = "}"
    BEGIN_ARRAY = "["
    END_ARRAY = "]"
    COLON = ":"
    COMMA = ","
    STRING_START = "str<"
    STRING_CHUNK = "str"
    STRING_END = "str>"
    ATOM = "atom"
    OTHER = "other"
    NEED_MORE = "more"


_STRUCTURAL = {
    "{": Tok.BEGIN_OBJECT,
    "}": Tok.END_OBJECT,
    "[": Tok.BEGIN_ARRAY,
    "]": Tok.END_ARRAY,
    ":": Tok.COLON,
    ",": Tok.COMMA,
}
_ATOM_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_+-.")
_ATOM_RUN = re.compile(r"[A-Za-z0-9_+\-.]*")
_WHITESPACE = frozenset(" \t\r\n")
_SPACE_RUN = re.compile(r"[ \t\r\n]*")
_DOUBLE_QUOTED_SPECIAL = re.compile(r'["\\\x00-\x1f]')
_SINGLE_QUOTED_SPECIAL = re.compile(r"['\\\x00-\x1f]")
# A stretch of a double-quoted string that strict JSON decodes: plain text and
# well-formed escapes. Unrolled (plain run, then escape + plain run, repeated) so
# that each character is matched once. A raw surrogate (never in decoded UTF-8)
# is left to the lexer, so that every surrogate a run decodes to is an escape's.
_JSON_STRING_RUN = re.compile(
    '[^"\\\\\x00-\x1f\ud800-\udfff]*'
    '(?:\\\\(?:["\\\\/bfnrt]|u[0-9a-fA-F]{4})[^"\\\\\x00-\x1f\ud800-\udfff]*)*'
)
_SURROGATE = re.compile("[\ud800-\udfff]")
_SIMPLE_ESCAPES = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "'": "'",
}
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")
# Escapes JsonWriter does not write as they are (orjson's \uXXXX only for control
# characters, '/' unescaped): a run with none of them needs no rewriting.
_REWRITTEN_ESCAPE = re.compile(r"\\[u/]")
# The C decoder of a string's contents, given the position after its opening quote.
scanstring: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]


class JsonLexer:
    """Pull tokens out of a growing buffer: ``next(buf, pos, final)``.

    Returns ``(token, text, new_pos)``. ``NEED_MORE`` means the buffer ends in
    the middle of something (an escape, a bare word) and ``final`` is false;
    callers resume at ``new_pos``. String contents come back decoded, in
    chunks as long as the buffer allows, so a long string streams.

    ``stop``, a block's end marker: string text stops where it appears (``OTHER``
    with its first character, at the marker) and, until more text comes, where
    the buffer ends in what may be its beginning, so that the caller decides
    whether the marker ends the block or is data (then it is passed as string text).
    """

    __slots__ = (
        "_atom",
        "_run_at",
        "_run_buf",
        "_run_end",
        "_run_resume",
        "_special",
        "quote",
        "stop",
    )

    def __init__(self, stop: str = "") -> None:
        self.quote = ""  # the open string's quote character, "" outside strings
        self._special = _DOUBLE_QUOTED_SPECIAL
        self._atom: list[str] = []  # a long bare word read so far (see ATOM_HOLD)
        # Holds no quote, backslash or control character: inside a string it is plain text.
        self.stop = stop
        # A run of string text cut at a stop marker (at ``_run_at``) in ``_run_buf``:
        # looked at again at the marker, or resumed right after it (it was data), it
        # goes on to ``_run_end``, not searched again.
        self._run_buf: str | None = None
        self._run_at = -1
        self._run_resume = -1
        self._run_end = -1

    @property
    def in_string(self) -> bool:
        return self.quote != ""

    def next(self, buf: str, pos: int, final: bool) -> tuple[Tok, str, int]:
        if self.quote:
            return self._string_part(buf, pos, final)
        end = len(buf)
        if self._atom:
            return self._atom_part(buf, pos, pos, final)
        if pos >= end:
            return Tok.NEED_MORE, "", pos
        char = buf[pos]
        if char in _WHITESPACE:
            pos = _SPACE_RUN.match(buf, pos).end()  # type: ignore[union-attr]
            if pos >= end:
                return Tok.NEED_MORE, "", pos
            char = buf[pos]
        structural = _STRUCTURAL.get(char)
        if structural is not None:
            return structural, char, pos + 1
        if char == '"' or char == "'":
            self._run_buf = None  # (a run of an earlier string is no longer resumed)
            self.quote = char
            self._special = _DOUBLE_QUOTED_SPECIAL if char == '"' else _SINGLE_QUOTED_SPECIAL
            return Tok.STRING_START, char, pos + 1
        if char in _ATOM_CHARS:
            return self._atom_part(buf, pos, pos, final)
        return Tok.OTHER, char, pos

    def _atom_part(self, buf: str, start: int, pos: int, final: bool) -> tuple[Tok, str, int]:
        stop = _ATOM_RUN.match(buf, pos).end()  # type: ignore[union-attr]
        if stop < len(buf) or final:
            if self._atom:
                self._atom.append(buf[pos:stop])
                text = "".join(self._atom)
                self._atom = []
                return Tok.ATOM, text, stop
            return Tok.ATOM, buf[start:stop], stop
        if self._atom or stop - start >= ATOM_HOLD:
            self._atom.append(buf[pos:stop])
            return Tok.NEED_MORE, "", stop
        return Tok.NEED_MORE, "", start

    def string_run(self, buf: str, pos: int, final: bool) -> tuple[str, int]:
        """Decode the longest stretch of a double-quoted string at ``pos`` that strict JSON reads.

        Plain text and well-formed escapes come out in one piece, decoded by
        the C decoder; ``("", pos)`` when what is at ``pos`` needs a closer
        look (the quote, a raw control character, an odd or cut escape).
        """
        if self.stop:
            stop = self._stopped_run(buf, pos, final)
        else:
            stop = _JSON_STRING_RUN.match(buf, pos).end()  # type: ignore[union-attr]
        if stop == pos or buf.find("\\", pos, stop) < 0:
            return buf[pos:stop], stop
        return _decoded_run(buf, pos, stop, final)

    def json_string_run(self, buf: str, pos: int, final: bool) -> tuple[str, int]:
        """``string_run`` written back as the inside of a JSON string, as JsonWriter writes it.

        Only a double-quoted string has such runs (a single-quoted one ends at its
        own quote, which a run would read as text): ``("", pos)`` in any other.
        """
        if self.quote != '"':
            return "", pos
        if self.stop:
            stop = self._stopped_run(buf, pos, final)
        else:
            stop = _JSON_STRING_RUN.match(buf, pos).end()  # type: ignore[union-attr]
        if (
            stop == pos
            or buf.find("\\", pos, stop) < 0
            or _REWRITTEN_ESCAPE.search(buf, pos, stop) is None
        ):
            # No escapes, or only those JsonWriter writes (orjson's: \" \\ \b \f \n \r \t):
            # decoded and written back, the run would be what it is.
            return buf[pos:stop], stop
        text, stop = _decoded_run(buf, pos, stop, final)
        return escape_json_text(text), stop

    def _string_part(self, buf: str, pos: int, final: bool) -> tuple[Tok, str, int]:
        end = len(buf)
        if pos >= end:
            return Tok.NEED_MORE, "", pos
        if self.quote == '"':
            text, stop = self.string_run(buf, pos, final)
            if stop > pos:
                return Tok.STRING_CHUNK, text, stop
        else:
            if (pos == self._run_resume or pos == self._run_at) and buf is self._run_buf:
                stop = self._run_end  # (see _stopped_run)
            else:
                found = self._special.search(buf, pos)
                stop = end if found is None else found.start()
            if self.stop and buf.find(self.stop[0], pos, stop) >= 0:
                stop = self._before_stop(buf, pos, stop, final)
            if stop > pos:
                return Tok.STRING_CHUNK, buf[pos:stop], stop
        if self.stop and stop == pos and pos < end and buf[pos] == self.stop[0]:
            if buf.startswith(self.stop, pos):
                return Tok.OTHER, buf[pos], pos
            return Tok.NEED_MORE, "", pos  # what may be the marker's beginning, held
        char = buf[pos]
        if char == self.quote:
            self.quote = ""
            return Tok.STRING_END, char, pos + 1
        if char != "\\":
            return Tok.STRING_CHUNK, char, pos + 1  # a raw control character
        return self._escape(buf, pos, final)

    def _stopped_run(self, buf: str, pos: int, final: bool) -> int:
        """Where a run of double-quoted string text at ``pos`` ends, the stop marker
        included among what ends it (one search of the run however many markers it
        holds: the run's end is kept for the same buffer)."""
        if (pos == self._run_resume or pos == self._run_at) and buf is self._run_buf:
            stop = self._run_end
        else:
            stop = _JSON_STRING_RUN.match(buf, pos).end()  # type: ignore[union-attr]
        if buf.find(self.stop[0], pos, stop) >= 0:
            return self._before_stop(buf, pos, stop, final)
        return stop

    def _before_stop(self, buf: str, pos: int, stop: int, final: bool) -> int:
        """Where a run of string text from ``pos`` to ``stop`` ends before the stop marker:
        at the marker, or (more text to come) at what may be its beginning at the end.
        (Called only when the marker's first character is in the run.)"""
        marker = self.stop
        found = buf.find(marker, pos, stop)  # (no character of it ends a run)
        if found >= 0:
            self._run_buf, self._run_at, self._run_end = buf, found, stop
            self._run_resume = found + len(marker)
            return found
        if final or stop < len(buf):
            return stop
        # The buffer ends in the run: hold a tail that may be the marker's beginning.
        tail = max(pos, stop - len(marker) + 1)
        first = buf.find(marker[0], tail, stop)
        while first >= 0:
            if marker.startswith(buf[first:stop]):
                return first
            first = buf.find(marker[0], first + 1, stop)
        return stop

    def _escape(self, buf: str, pos: int, final: bool) -> tuple[Tok, str, int]:
        end = len(buf)
        if pos + 1 >= end:
            if final:
                return Tok.STRING_CHUNK, "", end  # a lone trailing backslash is dropped
            return Tok.NEED_MORE, "", pos
        kind = buf[pos + 1]
        simple = _SIMPLE_ESCAPES.get(kind)
        if simple is not None:
            return Tok.STRING_CHUNK, simple, pos + 2
        if kind != "u":
            # An unknown escape keeps its backslash: it was most likely meant literally.
            return Tok.STRING_CHUNK, "\\" + kind, pos + 2
        if pos + 6 > end and not final:
            return Tok.NEED_MORE, "", pos
        if not _HEX4.fullmatch(buf, pos + 2, pos + 6):
            return Tok.STRING_CHUNK, "\\u", pos + 2
        code = int(buf[pos + 2 : pos + 6], 16)
        if 0xD800 <= code < 0xDC00:
            if pos + 12 > end and not final:
                return Tok.NEED_MORE, "", pos
            if buf.startswith("\\u", pos + 6) and _HEX4.fullmatch(buf, pos + 8, pos + 12):
                low = int(buf[pos + 8 : pos + 12], 16)
                if 0xDC00 <= low < 0xE000:
                    pair = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                    return Tok.STRING_CHUNK, chr(pair), pos + 12
            return Tok.STRING_CHUNK, "\ufffd", pos + 6
        if 0xDC00 <= code < 0xE000:
            return Tok.STRING_CHUNK, "\ufffd", pos + 6
        return Tok.STRING_CHUNK, chr(code), pos + 6


def _decoded_run(buf: str, pos: int, stop: int, final: bool) -> tuple[str, int]:
    """``buf[pos:stop]``, plain text and well-formed escapes, decoded as ``_escape`` would.

    The C decoder joins a surrogate pair as the lexer does; what it leaves
    lone becomes U+FFFD, as in ``_escape``, except a high surrogate at the end
    of the buffer, which waits for its partner.
    """
    if stop < len(buf) and buf[stop] == '"':
        text = scanstring(buf, pos)[0]  # decodes up to the quote, which follows
    else:
        text = scanstring(buf[pos:stop] + '"', 0)[0]
    if _SURROGATE.search(text) is None:
        return text, stop
    if not final and len(buf) - stop < 6 and "\ud800" <= text[-1] <= "\udbff":
        text, stop = text[:-1], stop - 6
    return _SURROGATE.sub("\ufffd", text), stop


_INTEGER = re.compile(r"[+-]?[0-9]+")
# Unambiguous: digits before and after the point can be split only one way.
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_LITERALS = {
    "true": "true",
    "false": "false",
    "null": "null",
    "True": "true",
    "False": "false",
    "None": "null",
}
_NEEDS_ESCAPE = re.compile(r'["\\\x00-\x1f]')


def json_text(value: Any) -> str:
    """Compact strict JSON for ``value``.

    orjson refuses integers beyond 64 bits and strings with a lone surrogate
    (which a backend's ``"\\ud800"`` decodes to): json writes those, escaping
    exactly as orjson does otherwise.
    """
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _exact_int(text: str) -> int | str:
    try:
        return int(text)
    except ValueError:  # beyond Python's int-string limit: its digits, as a string
        return text


def load_json(text: str | bytes) -> Any:
    """``json.loads``, except that integers too long for ``int`` become strings of their digits.

    Not orjson, which turns integers beyond 64 bits into floats.
    """
    try:
        return json.loads(text)
    except ValueError:
        return json.loads(text, parse_int=_exact_int)


def load_written(text: str) -> Any:
    """``load_json`` of text a ``JsonWriter`` wrote (strict, compact), often by orjson.

    orjson reads such text several times faster than ``json``, and exactly as it
    does whenever it writes the value back as the very same text: not so for an
    integer beyond 64 bits (which orjson reads as a float) or a duplicate key
    (which the writer keeps), and those go to ``load_json``.
    """
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return load_json(text)
    if orjson.dumps(value) == text.encode():
        return value
    return load_json(text)


def escape_json_text(text: str) -> str:
    """The inside of a JSON string literal for ``text`` (no quotes)."""
    if _NEEDS_ESCAPE.search(text) is None:
        return text
    return json_text(text)[1:-1]


def number_text(number: float) -> str:
    """A float as JSON: its shortest exact form (orjson's), ``null`` when not finite."""
    return orjson.dumps(number).decode()


def canonical_atom(text: str) -> str:
    """Strict JSON for a bare word: a number or a literal.

    An integer keeps every digit (without a sign ``+``, leading zeros or
    ``-0``); any other number is written as the float it denotes, in the same
    form a JSON decoder and orjson give it. Any other word is an error rather
    than a string: quoting it would invent a value the model did not write.
    """
    literal = _LITERALS.get(text)
    if literal is not None:
        return literal
    if _INTEGER.fullmatch(text):
        digits = text.lstrip("+-").lstrip("0") or "0"
        signed = "-" + digits if text[0] == "-" and digits != "0" else digits
        # Too long for any Python client's json.loads: kept exact, as a string.
        return signed if len(digits) <= INT_DIGITS else '"' + signed + '"'

    if _NUMBER.fullmatch(text):
        return number_text(float(text))
    if text.lstrip("+-") in ("NaN", "Infinity", "inf", "nan"):
        return "null"
    raise ValueError(f"bare word {text!r} is not a JSON value")


class _Frame(enum.Enum):
    OBJECT_KEY = 1  # in an object, before a key
    OBJECT_COLON = 2  # after a key, before ':'
    OBJECT_VALUE = 3  # after ':', before the value
    OBJECT_NEXT = 4  # after a value, before ',' or '}'
    ARRAY_VALUE = 5  # in an array, before a value
    ARRAY_NEXT = 6  # after a value, before ',' or ']'


class JsonWriter:
    """Tokens of one JSON value in, strict compact JSON out, as early as is safe.

    ``push`` returns True once the value is complete. ``take()`` hands out
    what may be emitted now; ``finish()`` repairs a truncated value. A token
    that cannot belong to the value raises ``ValueError`` before anything of
    it is emitted, so what was emitted stays a valid prefix.

    ``depth`` is how deep the value already sits (1 for a parameter value
    written into an arguments object): together they nest at most MAX_DEPTH.
    """

    __slots__ = (
        "_filled",
        "_held",
        "_key",
        "_lead",
        "_out",
        "_room",
        "_stack",
        "done",
        "dropped_key",
        "first_member",
        "in_key",
        "in_string_value",
        "started",
    )

    def __init__(self, depth: int = 0) -> None:
        self._out: list[str] = []
        self._room = MAX_DEPTH - depth  # how many containers may be open at once
        self._stack: list[_Frame] = []
        self._filled: list[bool] = []  # per open container: has a member been emitted?
        self._held = ""  # a ',' and/or '"key":' waiting for the next value
        self._key: list[str] = []
        self.in_key = False
        self.in_string_value = False
        self.started = False
        self.done = False
        self.dropped_key = False  # a key without a value was left out: the text lost something
        # The first member of the outermost container is complete: what the value
        # holds can be read (an unterminated string, or truncation, before it: not).
        self.first_member = False
        self._lead = 0  # characters of string text written before the first member completed

    def take(self) -> str:
        if not self._out:
            return ""
        text = "".join(self._out)
        self._out.clear()
        return text

    @property
    def pending(self) -> bool:
        """Output not taken yet."""
        return bool(self._out)

    @property
    def awaits_member(self) -> bool:
        """Inside a container, where a member's value begins (after a colon, '[' or ',')."""
        stack = self._stack
        return bool(stack) and (stack[-1] is _Frame.OBJECT_VALUE or stack[-1] is _Frame.ARRAY_VALUE)

    @property
    def readable(self) -> bool:
        """The first member is complete, or has run on for ``STRING_HOLD`` characters of
        string text: what the value holds can be read (and a call's start need wait no
        longer for it). Not so for a first value cut short, an unterminated string above all."""
        return self.first_member or self._lead >= STRING_HOLD

    @property
    def depth(self) -> int:
        """How many containers are open."""
        return len(self._stack)

    @property
    def room(self) -> int:
        """How many more containers may open, one inside the other."""
        return self._room - len(self._stack)

    def whole_member(self, text: str) -> None:
        """A member's whole value (where ``awaits_member``), already written as JsonWriter
        would write it: the C decoder's reading of one that arrived complete."""
        self._begin_value(text)
        if text.startswith("{"):
            self._key.clear()  # as closing the object would
        self._value_done()

    def string_text(self, text: str) -> None:
        """Inside a string value: text already written as JSON (``JsonLexer.json_string_run``)."""
        if not self.first_member:
            self._lead += len(text)
        self._out.append(text)

    def push(self, tok: Tok, text: str) -> bool:
        if self.done:
            raise ValueError("value already complete")
        if self.in_key:
            self._push_key(tok, text)
        elif self.in_string_value:
            if tok is Tok.STRING_CHUNK:
                if not self.first_member:
                    self._lead += len(text)
                self._out.append(escape_json_text(text))
            elif tok is Tok.STRING_END:
                self._out.append('"')
                self.in_string_value = False
                self._value_done()
        else:
            self._push_structure(tok, text)
        return self.done

    def _push_key(self, tok: Tok, text: str) -> None:
        if tok is Tok.STRING_CHUNK:
            self._key.append(text)
        elif tok is Tok.STRING_END:
            self.in_key = False
            self._stack[-1] = _Frame.OBJECT_COLON

    def _begin_value(self, text: str) -> None:
        if self._filled:
            self._filled[-1] = True
        self._out.append(self._held)
        self._out.append(text)
        self._held = ""
        self.started = True

    def _value_done(self) -> None:
        stack = self._stack
        if not stack:
            self.done = True
            return
        if len(stack) == 1:
            self.first_member = True
        top = stack[-1]
        stack[-1] = _Frame.OBJECT_NEXT if top is _Frame.OBJECT_VALUE else _Frame.ARRAY_NEXT

    def _push_structure(self, tok: Tok, text: str) -> None:
        frame = self._stack[-1] if self._stack else None
        if frame is _Frame.OBJECT_COLON and tok is not Tok.COLON:
            if tok in (Tok.COMMA, Tok.END_OBJECT, Tok.END_ARRAY):
                self._drop_key()  # a key with no value: {"a", ...} or {"a"}
                self._stack[-1] = _Frame.OBJECT_NEXT
                self._push_structure(tok, text)
                return
            self._accept_key()  # the colon is missing; the value follows
            frame = _Frame.OBJECT_VALUE
        if frame in (_Frame.OBJECT_NEXT, _Frame.ARRAY_NEXT) and tok in (
            Tok.BEGIN_OBJECT,
            Tok.BEGIN_ARRAY,
            Tok.STRING_START,
            Tok.ATOM,
        ):
            # A missing comma between two values.
            self._push_structure(Tok.COMMA, ",")
            self._push_structure(tok, text)
            return
        if tok is Tok.COLON:
            if frame is _Frame.OBJECT_COLON:
                self._accept_key()
            return
        if tok is Tok.COMMA:
            # A comma is written only after a member that was (a dropped key is not).
            if frame is _Frame.OBJECT_NEXT:
                self._held = "," if self._filled[-1] else ""
                self._stack[-1] = _Frame.OBJECT_KEY
            elif frame is _Frame.ARRAY_NEXT:
                self._held = "," if self._filled[-1] else ""
                self._stack[-1] = _Frame.ARRAY_VALUE
            elif frame is None:
                raise ValueError("comma outside a value")
            return
        if tok in (Tok.END_OBJECT, Tok.END_ARRAY):
            if frame is None:
                raise ValueError("closing bracket outside a value")
            self._close_container()
            return
        if frame is _Frame.OBJECT_KEY:
            if tok is Tok.STRING_START:
                self.in_key = True
                self._key.clear()
                return
            if tok is Tok.ATOM:
                self._key[:] = [text]
                self._stack[-1] = _Frame.OBJECT_COLON
                return
            raise ValueError(f"unexpected {text!r} where a key belongs")
        if (tok is Tok.BEGIN_OBJECT or tok is Tok.BEGIN_ARRAY) and len(self._stack) >= self._room:
            raise ValueError(f"nested deeper than {MAX_DEPTH}")
        if tok is Tok.BEGIN_OBJECT:
            self._begin_value("{")
            self._stack.append(_Frame.OBJECT_KEY)
            self._filled.append(False)
        elif tok is Tok.BEGIN_ARRAY:
            self._begin_value("[")
            self._stack.append(_Frame.ARRAY_VALUE)
            self._filled.append(False)
        elif tok is Tok.STRING_START:
            self._begin_value('"')
            self.in_string_value = True
        elif tok is Tok.ATOM:
            atom = canonical_atom(text)
            self._begin_value(atom)
            self._value_done()
        else:
            raise ValueError(f"unexpected {text!r} in JSON")

    def _accept_key(self) -> None:
        key = "".join(self._key)
        self._held += '"' + escape_json_text(key) + '":'
        self._stack[-1] = _Frame.OBJECT_VALUE

    def _drop_key(self) -> None:
        self._key.clear()
        self.dropped_key = True

    def _close_container(self) -> None:
        frame = self._stack.pop()
        self._filled.pop()
        self._held = ""
        if frame in (_Frame.OBJECT_VALUE, _Frame.OBJECT_COLON, _Frame.OBJECT_KEY):
            self._key.clear()
        is_object = frame in (
            _Frame.OBJECT_KEY,
            _Frame.OBJECT_COLON,
            _Frame.OBJECT_VALUE,
            _Frame.OBJECT_NEXT,
        )
        self._out.append("}" if is_object else "]")
        self._value_done()

    def finish(self) -> None:
        """Close whatever truncation left open; a value never started stays empty."""
        if self.done or not self.started:
            return
        first_member = self.first_member  # as written: what is closed here was not
        if self.in_string_value:
            self._out.append('"')
            self.in_string_value = False
            self._value_done()
        self.in_key = False
        while self._stack:
            self._close_container()
        self.first_member = first_member


# Reads a container member whole (``strictjson.read_member``): where it ends, -1 to
# wait for more text, None to read it token by token.
MemberReader = Callable[[JsonWriter, str, int, bool], "int | None"]


def lex_value(
    lexer: JsonLexer,
    writer: JsonWriter,
    buf: str,
    pos: int,
    final: bool,
    members: MemberReader | None = None,
) -> tuple[int, str | None]:
    """Feed ``writer`` from ``buf`` until the value is complete or input runs out.

    Returns the new position and, when the lexer met something that cannot
    continue the value, its first character (unconsumed) so the caller can
    decide; the value is then closed as it stands. ``members`` may take a
    container member whole instead of token by token.
    """
    while not writer.done:
        tok, text, new_pos = lexer.next(buf, pos, final)
        if tok is Tok.NEED_MORE:
            return new_pos, None
        if tok is Tok.OTHER:
            return new_pos, text
        if (
            members is not None
            and (tok is Tok.BEGIN_OBJECT or tok is Tok.BEGIN_ARRAY)
            and writer.awaits_member
        ):
            end = members(writer, buf, new_pos - 1, final)
            if end is not None:
                if end < 0:
                    return new_pos - 1, None  # wait for the rest of it
                pos = end
                continue
        try:
            writer.push(tok, text)
        except ValueError:
            lexer.quote = ""
            writer.finish()
            if tok is Tok.ATOM and len(text) >= ATOM_HOLD:
                return new_pos, None  # a long word is not handed back (see ATOM_HOLD)
            # Whitespace before the token is consumed, as it is when input runs out there.
            return new_pos - len(text), text[:1]
        pos = new_pos
    return pos, None


def repair_json(text: str, depth: int = 0, *, lossless: bool = False) -> Any:
    """Parse sloppy JSON text leniently; None when it holds no JSON value.

    Sloppiness is repaired (quotes, commas, literals, truncation); text that is
    not JSON at all (``{not json}``), or nests deeper than MAX_DEPTH (less
    ``depth``, where the value will sit), is not turned into a value. Trailing
    text after the first complete value is ignored. ``lossless``: None, too,
    when the repair would leave out a key that has no value (``{not}``).
    """
    lexer = JsonLexer()
    writer = JsonWriter(depth)
    _, stopped_at = lex_value(lexer, writer, text, 0, True)
    if stopped_at is not None or (lossless and writer.dropped_key):
        return None  # something that is not JSON stood inside the value
    writer.finish()
    out = writer.take()
    if not out:
        return None
    return load_written(out)
