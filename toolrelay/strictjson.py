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
from typing import Any

import orjson

from toolrelay.repair import MAX_DEPTH


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
_MANY_CONTAINERS = 16  # brackets in the sample above which counting is cheaper
_WINDOW = 4096  # characters decoded first (then 8 times more, while that was too short)
_CUT = 16  # an error this near a slice's end may be the slice's end


def strict_json(buf: str, pos: int) -> tuple[Any, bytes, int] | None:
    """The JSON value at ``buf[pos]``: the value, its text as JsonWriter writes it, its end.

    None when the text there is not a complete, well-formed value that the
    lenient reader would turn into the same text.
    """
    counting = (
        buf.count("{", pos, pos + _SAMPLE) + buf.count("[", pos, pos + _SAMPLE) >= _MANY_CONTAINERS
    )
    try:
        value, end = _decode(_PLAIN if counting else _CHECKED, buf, pos)
        if end - pos > 2 * MAX_DEPTH:  # shorter text cannot nest that deep
            padded: Any = value
            for _ in range(_DEPTH_PADDING):
                padded = [padded]
            out = orjson.dumps(padded)[_DEPTH_PADDING:-_DEPTH_PADDING]
        else:
            out = orjson.dumps(value)
    except (ValueError, TypeError, RecursionError):
        # Not JSON, not complete yet, or one of the refusals above (orjson's
        # JSONEncodeError, for big integers, surrogates and depth, is a TypeError).
        return None
    if counting and not _counts_agree(buf, pos, end, out):
        return None
    return value, out, end


def _decode(decoder: json.JSONDecoder, buf: str, pos: int) -> tuple[Any, int]:
    """``decoder.raw_decode(buf, pos)``, at a cost that does not grow with ``pos``.

    ``JSONDecodeError`` counts the lines of the text before the error, so a
    refusal deep in a long buffer would cost the whole buffer, once per call
    tried. The value is decoded from a slice at ``pos``, widened only while it
    was cut off at the slice's end.
    """
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
    if buf.find("\\", pos, end) >= 0:
        colons += buf.count("\\u003a", pos, end) + buf.count("\\u003A", pos, end)
    return out.count(b":") == colons and out.count(b"null") == buf.count("null", pos, end)
