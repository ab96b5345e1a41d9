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
"""

from __future__ import annotations

import re

from toolrelay.repair import ATOM_HOLD, canonical_atom

_SPACE = re.compile(r"[ \t\r\n]*")
# String text the writer writes as it stands: plain characters and the escapes it
# writes itself (a surrogate, a control character, \/ and \u are rewritten).
_STRING_RUN = re.compile('(?:[^"\\\\\x00-\x1f\ud800-\udfff]+|\\\\["\\\\bfnrt])*')
_ATOM = re.compile(r"[A-Za-z0-9_+\-.]+")

# Where the object stands between two fragments.
_BEFORE = 0  # before its opening brace
_KEY = 1  # where a key (or the closing brace) belongs
_IN_KEY = 2  # inside a key
_COLON = 3  # after a key
_VALUE = 4  # after a colon
_IN_STRING = 5  # inside a string value
_NEXT = 6  # after a value
_DONE = 7  # closed


class FlatObject:
    """Fragments of a flat JSON object in, the writer's output for each out (None: not
    this shape; nothing of that fragment was emitted)."""

    __slots__ = ("_held", "_key", "_phase", "_tail")

    def __init__(self) -> None:
        self._phase = _BEFORE
        self._held = ""  # a comma and a key, waiting for the next value
        self._key = ""  # the key being read, its quotes included
        self._tail = ""  # the start of a token the last fragment ended in

    @property
    def done(self) -> bool:
        return self._phase == _DONE

    def feed(self, fragment: str) -> str | None:
        buf = self._tail + fragment if self._tail else fragment
        self._tail = ""
        out: list[str] = []
        phase = self._phase
        pos = 0
        end = len(buf)
        while pos < end and phase != _DONE:
            if phase in (_IN_STRING, _IN_KEY):
                stop = _STRING_RUN.match(buf, pos).end()  # type: ignore[union-attr]
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
            pos = _SPACE.match(buf, pos).end()  # type: ignore[union-attr]
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
