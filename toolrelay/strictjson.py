"""The C decoder's path for JSON that is already well formed.

Most model output that holds a call is valid JSON, and a finished parse (or a
delta that brings a whole call) has all of it at hand. Lexing it token by
token in Python costs about a microsecond a token; ``json``'s C scanner reads
it a hundred times faster. ``strict_json`` takes that path and hands back
exactly what the lenient reader (``toolrelay.repair``) would have produced for
the same text, or nothing, and the caller falls back to the lenient reader:

- The value is read by ``json``'s C scanner (exact integers, and it says
  where the value ends) and written by orjson, which writes strings and
  numbers as ``JsonWriter`` does: ``JsonWriter`` uses orjson for both.
- What the two would not agree on is refused, never patched: duplicate keys
  (the lenient writer keeps both, a dict only the last), ``NaN``/``Infinity``
  and numbers beyond a double (the writer writes ``null``), integers beyond
  64 bits or Python's digit limit, lone surrogates (the lexer reads them as
  U+FFFD), values nested deeper than ``MAX_DEPTH``.

Duplicate keys and overflowing numbers are found in one of two ways, both
exact, whichever is cheaper for the text: hooks called per object and per
float (few of them in a long string), or counting ``:`` and ``null`` in the
text and in orjson's output (many small objects). A refusal costs one C
pass over the text, once per value.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import orjson

from toolrelay.repair import MAX_DEPTH, JsonWriter


class _Refused(ValueError):
    pass


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):
        raise _Refused("duplicate key")
    return value


def _finite(text: str) -> float:
    number = float(text)
    if number - number != 0.0:  # inf - inf is nan
        raise _Refused("not a finite number")
    return number


def _constant(text: str) -> float:
    raise _Refused(f"{text} is not JSON")


# Objects and floats checked as they are read: cheap when there are few of them.
_CHECKED = json.JSONDecoder(
    object_pairs_hook=_unique, parse_float=_finite, parse_constant=_constant
)
# Everything at C speed; duplicates and overflow are found by counting afterwards.
_PLAIN = json.JSONDecoder(parse_constant=_constant)

# orjson refuses more than 254 nested containers: wrapped in this many lists, a
# value nested deeper than MAX_DEPTH is refused by the same call that writes it.
_DEPTH_PADDING = 254 - MAX_DEPTH
_SAMPLE = 1024  # characters looked at to tell a long string from many small objects
_MANY_KEYS = 16  # keys in the sample above which counting is cheaper than hooks
_SPLIT_MEMBERS = 8  # more members than a call object has: written whole
_WINDOW = 4096  # characters decoded first (then 8 times more, while that was too short)
_CUT = 16  # an error this near a slice's end may be the slice's end


class Decoded:
    """A value read by the C decoder, and its text as ``JsonWriter`` writes it."""

    __slots__ = ("_pieces", "end", "objects", "value")

    def __init__(
        self, value: Any, pieces: list[bytes], end: int, objects: dict[int, bytes]
    ) -> None:
        self.value = value
        self._pieces = pieces
        self.end = end  # where the value ends in the buffer
        # The text of each object written member by member (see ``strict_json``), by
        # id: a caller that hands one of them on whole need not write it again.
        self.objects = objects

    @property
    def text(self) -> bytes:
        """The value's text (joined on demand: a caller of ``objects`` may not need it)."""
        pieces = self._pieces
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)


def strict_json(buf: str, pos: int, *, apart: frozenset[str] = frozenset()) -> Decoded | None:
    """The JSON value at ``buf[pos]``, or None when the text there is not a complete,
    well-formed value that the lenient reader would turn into the same text.

    ``apart``: the keys under which a caller looks for objects to hand on whole (a
    call's arguments, and the wrappers around calls). An object of a few members
    holding one of them, and a short list of objects, is written member by member, and
    the objects written whole on the way are listed in ``objects``: the caller need
    not write them a second time.
    """
    opener = buf[pos : pos + 1]
    if (opener == "{" and buf.find("}", pos) < 0) or (opener == "[" and buf.find("]", pos) < 0):
        # A container that never closes is no complete value: said without the decoder,
        # whose refusal (an exception that counts lines) costs more than the read.
        return None
    sample_end = pos + _SAMPLE
    # Keys (a quote before a colon that is not an escaped quote in a string) tell
    # many small objects from a long string, whatever brackets the string holds.
    counting = buf.count('":', pos, sample_end) - buf.count('\\":', pos, sample_end) >= _MANY_KEYS
    objects: dict[int, bytes] = {}
    pieces: list[bytes] = []
    try:
        value, end = _decode(_PLAIN if counting else _CHECKED, buf, pos)
        # Shorter text cannot nest deeper than MAX_DEPTH: no need to check it.
        deep = end - pos > 2 * MAX_DEPTH
        _Encoder(apart, deep, pieces, objects).encode(value, 0)
    except (ValueError, TypeError, RecursionError):
        # Not JSON, not complete yet, or one of the refusals above (orjson's
        # JSONEncodeError, for big integers, surrogates and depth, is a TypeError).
        return None
    decoded = Decoded(value, pieces, end, objects)
    if counting and not _counts_agree(buf, pos, end, decoded.text):
        return None
    return decoded


_local = threading.local()


def _dumps_padded(value: Any, padding: int) -> bytes:
    """``value`` as orjson writes it, refused (TypeError) if nested deeper than MAX_DEPTH
    at the level ``padding`` stands for.

    Wrapped in ``padding`` lists, a value nested too deep in all is refused by
    orjson's own limit in the call that writes it. The lists are made once per
    thread and padding (orjson calls back into no Python code while it writes).
    """
    chains: dict[int, tuple[list[Any], list[Any]]] = _local.__dict__.setdefault("chains", {})
    chain = chains.get(padding)
    if chain is None:
        inner: list[Any] = []
        outer = inner
        for _ in range(padding - 1):
            outer = [outer]
        chain = chains[padding] = (outer, inner)
    outer, inner = chain
    inner.append(value)
    try:
        return orjson.dumps(outer)[padding:-padding]
    finally:
        inner.clear()


class _Encoder:
    """Writes a value as orjson does, into pieces; refuses one nested deeper than MAX_DEPTH."""

    __slots__ = ("apart", "deep", "objects", "pieces")

    def __init__(
        self, apart: frozenset[str], deep: bool, pieces: list[bytes], objects: dict[int, bytes]
    ) -> None:
        self.apart = apart
        self.deep = deep
        self.pieces = pieces
        self.objects = objects

    def encode(self, value: Any, level: int) -> None:
        kind = type(value)
        pieces = self.pieces
        if kind is dict and 0 < len(value) <= _SPLIT_MEMBERS and not self.apart.isdisjoint(value):
            self._check_depth(level)
            pieces.append(b"{")
            for key, member in value.items():
                pieces.append(orjson.dumps(key) + b":")
                self.encode(member, level + 1)
                pieces.append(b",")
            pieces[-1] = b"}"
            return
        if kind is list and 0 < len(value) <= _SPLIT_MEMBERS and type(value[0]) is dict:
            self._check_depth(level)
            pieces.append(b"[")
            for member in value:
                self.encode(member, level + 1)
                pieces.append(b",")
            pieces[-1] = b"]"
            return
        if self.deep and (kind is dict or kind is list):
            pieces.append(_dumps_padded(value, _DEPTH_PADDING + level))
        else:
            pieces.append(orjson.dumps(value))
        if kind is dict:
            self.objects[id(value)] = pieces[-1]

    @staticmethod
    def _check_depth(level: int) -> None:
        if level >= MAX_DEPTH:  # this container would be one level too deep
            raise _Refused("nested too deep")


def _decode(decoder: json.JSONDecoder, buf: str, pos: int) -> tuple[Any, int]:
    """``decoder.raw_decode(buf, pos)``, at a cost that does not grow with ``pos``.

    ``JSONDecodeError`` counts the lines of the text before the error, so a
    refusal deep in a long buffer would cost the whole buffer, once per call
    tried. Near the buffer's start (a finished call, most often) that costs
    no more than what was read, and the buffer is decoded as it is; further
    on, the value is decoded from a slice at ``pos``, widened only while it
    was cut off at the slice's end.
    """
    if pos <= _WINDOW:
        return decoder.raw_decode(buf, pos)
    window = _WINDOW
    while True:
        text = buf[pos : pos + window]
        try:
            value, end = decoder.raw_decode(text)
        except json.JSONDecodeError as error:
            cut_off = error.pos >= len(text) - _CUT or error.msg.startswith("Unterminated")
            if pos + window >= len(buf) or not cut_off:
                raise
            window *= 8
            continue
        if end == len(text) and pos + window < len(buf):
            window *= 8  # a number (or the value's end) may go on past the slice
            continue
        return value, pos + end


def _counts_agree(buf: str, pos: int, end: int, out: bytes) -> bool:
    """No key was dropped as a duplicate and no number became ``null``.

    Every key has one ':' after it and orjson escapes no ':', so the output
    holds as many as the text (counting ``\\u003a`` escapes, which decode to
    one) unless a duplicate key went; likewise ``null`` unless a number that
    overflowed a double was written as ``null``. An escape counted that was
    not one (``\\\\u003a``) only refuses text that was fine.
    """
    colons = buf.count(":", pos, end)
    if buf.find("\\u003", pos, end) >= 0:
        colons += buf.count("\\u003a", pos, end) + buf.count("\\u003A", pos, end)
    return out.count(b":") == colons and out.count(b"null") == buf.count("null", pos, end)


# A member held back this long without completing is read token by token.
_HELD = 512


def read_member(writer: JsonWriter, buf: str, start: int, final: bool) -> int | None:
    """A container at ``buf[start]`` that is a member of the writer's value, read whole.

    Streamed JSON-heavy arguments (lists of small objects) cost a Python step
    per token; a small member instead waits (in the parser's buffer) until it
    is complete, then the C decoder reads it and the writer takes it as
    written, exactly as its tokens would have been. Returns where it ends,
    -1 to wait for more text, None to read it token by token: when it does
    not complete within ``_HELD`` characters, is not well formed, or might
    nest deeper than the writer has room for.
    """
    opener = buf[start]
    closer = "}" if opener == "{" else "]"
    # Closed as often as opened (brackets in strings aside): it may be complete. With
    # more than _HELD characters after it, it cannot wait, so it is tried as it is:
    # counting the whole rest of a long text at every member would be quadratic.
    long_rest = len(buf) - start > _HELD
    if long_rest or buf.count(closer, start) >= buf.count(opener, start):
        decoded = strict_json(buf, start)
        if decoded is not None:
            if (decoded.end - start) // 2 > writer.room:
                return None  # it might nest too deep: a value nests half as deep as it is long
            writer.whole_member(decoded.text.decode())
            return decoded.end
    if final or long_rest:
        return None
    return -1
