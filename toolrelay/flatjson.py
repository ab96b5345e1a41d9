"""What the lenient writer emits for a flat JSON object, a fragment at a time, at C speed.

A backend's native call streams its arguments as fragments of JSON that is
almost always well formed already: ``{"city":"Paris"}`` in pieces of a few
characters. Read token by token (``toolrelay.repair``), each fragment costs a
dozen Python steps. :class:`FlatObject` reads the common shape instead — one
object of string keys and values that are strings or plain scalars, written
as ``JsonWriter`` writes them, whitespace between tokens allowed — with a
regular expression per token, and hands back for each fragment exactly the
text that ``ArgumentStream`` would have emitted for it: a key held until its
value begins, a comma until the next member, a number until it ends, a
partial escape until it is complete.

Anything else (a nested value, an escape the writer rewrites, a number or
literal it would write differently, sloppy JSON) makes ``feed`` return None
before it emits anything of that fragment; the caller then reads every
fragment again with the lenient reader (its output already went out) and goes
on with it. A whole object in one fragment is read here too: the C decoder's
read of it (``strict_json``) would write the same text.

A regular expression costs about as much as the rest of a token's reading, so the
common cases are read with string methods first, each falling back to the
expression where it cannot decide (the tests hold them to it with
``fast_lanes`` off): a fragment wholly inside a string (a long value's middle,
the most frequent fragment of a long argument) is its own output; a string's
plain run (no escape, every character printable) ends at its quote; whitespace,
which compact JSON has none of, is looked for with a character test; a fragment
whose strings are plain and whose other text is structure and spaces (``{"ci``,
``ty": ``, ``"Par``) is cut at its quotes into strings and structure, read
without an expression per token.
"""

from __future__ import annotations

import re
from typing import ClassVar, Final

from mypy_extensions import mypyc_attr

from toolrelay.repair import ATOM_HOLD, canonical_atom

# Final, each of them: read where it stands, where any other global is a dict
# lookup on every use (docs/compiled.md): about 35 for a call's arguments.
_SPACE: Final = re.compile(r"[ \t\r\n]*")
_WHITESPACE: Final = " \t\r\n"
# String text the writer writes as it stands: plain characters and the escapes it
# writes itself (a surrogate, a control character, \/ and \u are rewritten). The
# surrogates are the expression's own escapes: mypyc compiles no surrogate literal.
_STRING_RUN: Final = re.compile('(?:[^"\\\\\x00-\x1f\\ud800-\\udfff]+|\\\\["\\\\bfnrt])*')
_ATOM: Final = re.compile(r"[A-Za-z0-9_+\-.]+")

# Where the object stands between two fragments.
_BEFORE: Final = 0  # before its opening brace
_KEY: Final = 1  # where a key (or the closing brace) belongs
_IN_KEY: Final = 2  # inside a key
_COLON: Final = 3  # after a key
_VALUE: Final = 4  # after a colon
_IN_STRING: Final = 5  # inside a string value
_NEXT: Final = 6  # after a value
_DONE: Final = 7  # closed


# Compiled (setup.py), and tests subclass it.
@mypyc_attr(allow_interpreted_subclasses=True)
class FlatObject:
    """Fragments of a flat JSON object in, the writer's output for each out (None: not
    this shape; nothing of that fragment was emitted)."""

    __slots__ = ("_held", "_key", "_phase", "_tail")

    # Plain text read with string methods rather than the regular expressions (the
    # tests compare with False: every fragment read by the expressions alone).
    fast_lanes: ClassVar[bool] = True

    def __init__(self) -> None:
        self._phase = _BEFORE
        self._held = ""  # a comma and a key, waiting for the next value
        self._key = ""  # the key being read, its quotes included
        self._tail = ""  # the start of a token the last fragment ended in

    @property
    def done(self) -> bool:
        return self._phase == _DONE

    def feed(self, fragment: str) -> str | None:
        phase = self._phase
        fast = self.fast_lanes
        if fast and not self._tail and "\\" not in fragment and fragment.isprintable():
            if '"' not in fragment and phase in (_IN_STRING, _IN_KEY):
                return self._inside_string(fragment)
            compact = self._compact(fragment)
            if compact is not None:
                return compact
        buf = self._tail + fragment if self._tail else fragment
        self._tail = ""
        out: list[str] = []
        pos = 0
        end = len(buf)
        while pos < end and phase != _DONE:
            if phase in (_IN_STRING, _IN_KEY):
                stop = _string_run_end(buf, pos, end, fast)
                closed = stop < end and buf[stop] == '"'
                if closed:
                    stop += 1
                elif stop == end - 1 and buf[stop] == "\\":
                    self._tail = "\\"  # an escape cut in two: held, as the lexer holds it
                elif stop < end:
                    return None
                if phase == _IN_STRING:
                    out.append(buf[pos:stop])
                    phase = _NEXT if closed else phase
                else:
                    self._key += buf[pos:stop]
                    phase = _COLON if closed else phase
                pos = end if self._tail else stop
                continue
            char = buf[pos]
            if char in _WHITESPACE or not fast:
                pos = _space_end(buf, pos, end, fast)
                if pos == end:
                    break
                char = buf[pos]
            if phase == _VALUE:
                if char == '"':
                    out.append(self._held + '"')
                    self._held = ""
                    phase = _IN_STRING
                    pos += 1
                    continue
                match = _ATOM.match(buf, pos)
                if match is None:
                    return None  # a nested value, or no value
                stop = match.end()
                atom = match.group()
                if stop == end:
                    if len(atom) >= ATOM_HOLD:
                        return None  # held again and again it would be read in quadratic time
                    self._tail = atom  # it may go on: held, as the lexer holds it
                    break
                try:
                    written = canonical_atom(atom)
                except ValueError:
                    return None
                if written != atom:
                    return None
                out.append(self._held + atom)
                self._held = ""
                phase = _NEXT
                pos = stop
            elif phase == _KEY and char == '"':
                self._key = '"'
                phase = _IN_KEY
                pos += 1
            elif phase == _COLON and char == ":":
                self._held += self._key + ":"
                self._key = ""
                phase = _VALUE
                pos += 1
            elif phase == _NEXT and char == ",":
                self._held = ","
                phase = _KEY
                pos += 1
            elif char == "}" and (phase in (_NEXT, _KEY)):
                out.append("}")  # (a trailing comma held is dropped, as the writer drops it)
                self._held = ""
                phase = _DONE
            elif phase == _BEFORE and char == "{":
                out.append("{")
                phase = _KEY
                pos += 1
            else:
                return None
        self._phase = phase
        return "".join(out)

    def _compact(self, fragment: str) -> str | None:
        """What the token loop emits for a fragment of JSON whose strings are plain (no
        escape, every character printable: the caller checked) and whose only text
        outside them is the structure (``{``, ``:``, ``,``, ``}``) and spaces: the quotes
        cut it into strings and structure, with no expression per token. None (the
        state untouched): anything else (an atom, a mistake), left to the token loop."""
        phase, held, key = self._phase, self._held, self._key
        out: list[str] = []
        for number, part in enumerate(fragment.split('"')):
            if number:  # a quote before this part: a string opens or closes
                if phase == _IN_STRING:
                    out.append('"')
                    phase = _NEXT
                elif phase == _IN_KEY:
                    key += '"'
                    phase = _COLON
                elif phase == _VALUE:
                    out.append(held + '"')
                    held = ""
                    phase = _IN_STRING
                elif phase == _KEY:
                    key = '"'
                    phase = _IN_KEY
                else:
                    return None
            if phase == _IN_STRING:
                out.append(part)
                continue
            if phase == _IN_KEY:
                key += part
                continue
            for char in part:
                if char == ":" and phase == _COLON:
                    held += key + ":"
                    key = ""
                    phase = _VALUE
                elif char == "," and phase == _NEXT:
                    held = ","
                    phase = _KEY
                elif char == "}" and phase in (_NEXT, _KEY):
                    out.append("}")  # (a trailing comma held is dropped, as the writer drops it)
                    self._phase, self._held, self._key = _DONE, "", key
                    return "".join(out)  # (what follows the object is not read)
                elif char == "{" and phase == _BEFORE:
                    out.append("{")
                    phase = _KEY
                elif char != " ":  # (the one blank a printable fragment may hold: skipped)
                    return None  # an atom or a mistake: the token loop's
        self._phase, self._held, self._key = phase, held, key
        return "".join(out)

    def _inside_string(self, fragment: str) -> str:
        """What the token loop emits for a plain fragment that stays inside the string
        it is in: itself in a value; nothing in a key, which waits for its value."""
        if self._phase == _IN_STRING:
            return fragment
        self._key += fragment
        return ""


def _plain(text: str) -> bool:
    """Text a string holds as it stands: no quote, no escape, nothing unprintable
    (a control character or a surrogate is never printable)."""
    return '"' not in text and "\\" not in text and text.isprintable()


def _string_run_end(buf: str, pos: int, end: int, fast: bool) -> int:
    """Where ``_STRING_RUN`` ends at ``pos``; ``fast``: found with string methods when
    the run is plain text up to a quote or the end (the usual string), else by it."""
    if fast:
        quote = buf.find('"', pos)
        stop = end if quote < 0 else quote
        if _plain(buf[pos:stop]):
            return stop
    return _STRING_RUN.match(buf, pos).end()  # type: ignore[union-attr]


def _space_end(buf: str, pos: int, end: int, fast: bool) -> int:
    """Where ``_SPACE`` ends at ``pos``; ``fast`` (``buf[pos]`` being whitespace): one
    space, as ``json.dumps`` writes after a colon or a comma, without the expression."""
    if fast and (pos + 1 == end or buf[pos + 1] not in _WHITESPACE):
        return pos + 1
    return _SPACE.match(buf, pos).end()  # type: ignore[union-attr]
