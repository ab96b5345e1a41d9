"""Upstream lines that repeat across a backend's streams but for their id,
``created`` and usage numbers, read without decoding them.

Every stream of a backend opens with the same role chunk and ends with the same
finish chunk (and, asked for it, a usage chunk), byte for byte but for a few
values: the completion's id and ``created``, which change with each stream, and
the usage's numbers. :class:`LineShapes` (one for each backend's client, shared
by its streams) learns such a line's *shape* from one chunk decoded the usual
way, with those values as holes of the lengths they had, and reads a later
stream's line of that shape by comparing the bytes around the holes and
classing the bytes in them (``translate``): no ``orjson.loads`` of the line.

It is exact, not a guess, by the kind of probe :mod:`.fragments` makes. A shape
is learned only from a chunk that orjson writes as its payload byte for byte,
and only when orjson writes the chunk with other values in the holes (a probe:
each hole's value of the same length, every byte another, a string's letters
and an integer's digits) as the line with those values' tokens in the holes.
Then the holes are where orjson writes those values (:func:`_written_alike`),
and a line of the shape with printable ASCII but a quote or a backslash in its
string holes and an integer's digits in its integer holes is what orjson writes
of the learned chunk with those values, which it decodes to that chunk with
those values. A later line is read through a shape only then; anything else is
decoded the usual way (tests/gateway/test_argument_chunks.py holds the two paths
to each other). A server that writes otherwise (spaces, keys in another order,
escapes, ids that are not ASCII) teaches nothing.

A line is learned only when it carries no text and no call (content, reasoning,
a call's opening or argument fragment change with every chunk; :mod:`.plain`
and :mod:`.fragments` read them per stream). What is handed on is what the
round's chunk reader (``ChunkReader.take``, the only reader of a stream opened
with ``plain``) reads of the chunk: its first choice and its usage, made anew
for each line, since the reader keeps them (the usage, the finish's choice); a
chunk it reads nothing of (the role's, with empty content) comes as an empty one.

Memory is bounded: a backend keeps :data:`_SHAPES` shapes at most, and one that
never read a line gives its place to the next learned; a backend whose lines
fail the probe, or teach in vain, stops learning after :data:`_FAILURES` of them.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from toolrelay.jsonbytes import dumps as _dumps

# Final, as every constant here: read where it stands (docs/compiled.md).
# What each byte is in a string hole: ``s`` a printable ASCII character orjson
# writes as it is (not a quote or a backslash), ``x`` anything else.
_STRING_BYTES: Final = bytes(
    0x73 if 0x20 <= byte < 0x7F and byte not in (0x22, 0x5C) else 0x78 for byte in range(256)
)
# What each byte is in an integer hole: ``d`` a digit, ``x`` anything else.
_DIGIT_BYTES: Final = bytes(0x64 if 0x30 <= byte <= 0x39 else 0x78 for byte in range(256))
# Shapes a backend keeps at most: its role line, a finish line or two, its usage line.
_SHAPES: Final = 8
# Holes a shape has at most (each has its own probe digit, below).
_HOLES: Final = 8
# The longest line a shape is learned from: a role's, finish's or usage's is short.
_LONGEST: Final = 4096
# Lines a backend may fail to learn (a probe that does not hold), or learn in vain
# (a shape that never read a line gives its place), before it learns no more.
_FAILURES: Final = 32
# Digits an integer hole may hold: any such number is a 64-bit one, which orjson
# writes as its digits.
_DIGITS: Final = 18
# The length of ``data:``, which starts every line a shape is learned from.
_FIELD: Final = len(b"data:")
# The probe's letters, for a string hole (one of them differs from any byte).
_LETTERS: Final = b"ab"
# The probe's first digits, one per integer hole (none is 0: no leading zero).
_FIRST_DIGITS: Final = b"123456789"
# What a chunk that carries calls holds (the stream's content frame drops at it).
_CALLS: Final = b'"tool_calls"'
_CALLS_TEXT: Final = b"tool_calls"


class _Hole:
    """Where a value stands in a learned line: its key, its kind and its bytes'
    place (a shape's holes have the lengths of the line it was learned from)."""

    __slots__ = ("classes", "end", "expected", "key", "number", "start", "usage")

    def __init__(self, usage: bool, key: str, number: bool, start: int, end: int) -> None:
        self.usage = usage  # a key of the chunk's usage, else of the chunk
        self.key = key
        self.number = number  # an integer's digits, else a string's characters
        self.start, self.end = start, end  # in the line
        self.classes = _DIGIT_BYTES if number else _STRING_BYTES
        self.expected = (b"d" if number else b"s") * (end - start)


class _Shape:
    """A learned line: its length, its bytes around and between the holes, and what
    the round's chunk reader reads of its chunk (its first choice and its usage)."""

    __slots__ = (
        "between",
        "calls",
        "choice",
        "choice_nested",
        "head",
        "holes",
        "length",
        "starts",
        "tail",
        "usage",
        "usage_nested",
        "used",
    )

    def __init__(self, line: bytes, holes: list[_Hole], chunk: dict[str, Any]) -> None:
        self.length = len(line)
        self.holes = holes
        self.head = line[: holes[0].start]
        self.tail = line[holes[len(holes) - 1].end :]
        # The bytes between two holes, and where each starts.
        self.between = [line[holes[at - 1].end : holes[at].start] for at in range(1, len(holes))]
        self.starts = [holes[at - 1].end for at in range(1, len(holes))]
        # The line holds the key of calls whatever its holes hold (a quote borders
        # a string hole, which holds none, and a number's digits are none of it),
        # or when a string hole holds the key's name.
        self.calls = any(_CALLS in part for part in [self.head, self.tail, *self.between])
        # What ChunkReader.take reads (and keeps): the first choice, when the choices
        # are a list that opens with one; the usage, when it is a non-empty object.
        # A chunk it reads neither of, nor anything in them, it reads as an empty one.
        choices = chunk.get("choices")
        choice = choices[0] if type(choices) is list and choices else None
        self.choice: dict[str, Any] | None = choice if type(choice) is dict else None
        usage = chunk.get("usage")
        self.usage: dict[str, Any] | None = usage if type(usage) is dict and usage else None
        if self.usage is None and self.choice is not None and _inert(self.choice):
            self.choice = None
        self.choice_nested = _nested(self.choice)
        self.usage_nested = _nested(self.usage)
        self.used = False  # it read a line: it keeps its place

    def read(self, line: bytes) -> dict[str, Any] | None:
        """What the round's chunk reader reads of ``line``'s chunk, when ``line`` is in
        this shape: its first choice and its usage, new; None: not in it."""
        if len(line) != self.length or not line.endswith(self.tail):
            return None
        if not line.startswith(self.head):
            return None
        between = self.between
        starts = self.starts
        for at in range(len(between)):
            part = between[at]
            start = starts[at]
            if line[start : start + len(part)] != part:
                return None
        for hole in self.holes:
            token = line[hole.start : hole.end]
            if token.translate(hole.classes) != hole.expected:
                return None
            if hole.number and len(token) > 1 and token[0] == 0x30:  # a leading zero
                return None
        self.used = True
        read: dict[str, Any] = {}
        if self.choice is not None:
            read["choices"] = [_fresh(self.choice, self.choice_nested)]
        if self.usage is not None:
            usage = _fresh(self.usage, self.usage_nested)
            for hole in self.holes:
                if hole.usage:
                    usage[hole.key] = _number(line, hole.start, hole.end)
            read["usage"] = usage
        return read

    def holds_calls(self, line: bytes) -> bool:
        """Whether ``line``, read in this shape, holds the key of calls."""
        if self.calls:
            return True
        for hole in self.holes:
            if not hole.number and line[hole.start : hole.end] == _CALLS_TEXT:
                return True
        return False


def _nested(values: dict[str, Any] | None) -> list[str]:
    """The keys of ``values`` that hold a dict or a list."""
    if values is None:
        return []
    return [key for key, value in values.items() if type(value) is dict or type(value) is list]


def _fresh(values: dict[str, Any], nested: list[str]) -> dict[str, Any]:
    """``values`` made again (:func:`_copied`), told the keys that hold a dict or a
    list (``nested``): a copy of it, those made again too."""
    made = values.copy()
    for key in nested:
        made[key] = _copied(values[key])
    return made


def _number(line: bytes, start: int, end: int) -> int:
    """The integer whose digits stand in ``line`` from ``start`` to ``end``."""
    value = 0
    for at in range(start, end):
        value = value * 10 + line[at] - 0x30
    return value


class LineShapes:
    """The shapes of one backend's lines that carry no text (its streams' share)."""

    __slots__ = ("_by_length", "_failures", "_shapes", "calls")

    def __init__(self) -> None:
        self._shapes: list[_Shape] = []
        # The shapes by their lines' length: most lines are of none (one lookup).
        self._by_length: dict[int, list[_Shape]] = {}
        self._failures = _FAILURES
        self.calls = False  # the line read last holds the key of calls

    def read(self, line: bytes) -> dict[str, Any] | None:
        """What the round's chunk reader reads of an SSE line's chunk, when the line
        is in a learned shape (:meth:`_Shape.read`); None: decode it the usual way."""
        shapes = self._by_length.get(len(line))
        if shapes is None:
            return None
        for shape in shapes:
            read = shape.read(line)
            if read is not None:
                self.calls = shape.holds_calls(line)
                return read
        return None

    def learn(self, payload: bytes, chunk: dict[str, Any], line: bytes) -> None:
        """Learn the shape of ``line`` (its payload ``payload``, decoded: ``chunk``)
        if it carries no text and orjson writes it so (the probe)."""
        if self._failures == 0 or len(line) > _LONGEST or _streams_own(chunk):
            return
        shapes = self._shapes
        place = len(shapes)
        if place == _SHAPES:
            # Full: the place of one that never read a line (a line with a number
            # not in a hole, say), or none.
            place = _unused(shapes)
            if place < 0:
                return
        shape = _learned(payload, chunk, line)
        if shape is None:
            self._failures -= 1
            return
        if place == len(shapes):
            shapes.append(shape)
        else:
            self._failures -= 1  # the one it replaces was learned in vain
            shapes[place] = shape
        by_length: dict[int, list[_Shape]] = {}
        for known in shapes:
            by_length.setdefault(known.length, []).append(known)
        self._by_length = by_length


def _unused(shapes: list[_Shape]) -> int:
    """The place of the first shape that never read a line; -1: none."""
    for at, shape in enumerate(shapes):
        if not shape.used:
            return at
    return -1


def _streams_own(chunk: dict[str, Any]) -> bool:
    """Whether a chunk carries what changes with each stream: content, reasoning, calls."""
    choices = chunk.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return False
    delta = choices[0].get("delta")
    if not isinstance(delta, dict):
        return False
    return _carries(delta)


def _inert(choice: dict[str, Any]) -> bool:
    """Whether the chunk's reader (``ChunkReader.take``) reads nothing from a chunk
    with this first choice and no usage: no finish reason, no reasoning, content
    or calls; it reads the same from an empty chunk. (The stream's error check
    read the chunk already.)"""
    if choice.get("finish_reason"):
        return False
    delta = choice.get("delta")
    if not isinstance(delta, dict):
        return True
    return not _carries(delta)


def _carries(delta: dict[str, Any]) -> bool:
    """Whether a delta carries calls, content or reasoning (the calls looked at
    first: on a stream with tools the lines decoded are its calls')."""
    return bool(
        delta.get("tool_calls")
        or delta.get("content")
        or delta.get("reasoning_content")
        or delta.get("reasoning")
    )


# A hole found in a payload: where its value's bytes begin and end, whether it is
# the usage's, its key, whether it is an integer.
_Found = tuple[int, int, bool, str, bool]


def _learned(payload: bytes, chunk: dict[str, Any], line: bytes) -> _Shape | None:
    """The shape of ``line``, with the chunk's id, ``created`` and usage numbers as
    holes, when the probe confirms it; None otherwise."""
    found: list[_Found] = []
    _find(payload, chunk, False, found)
    usage: Any = chunk.get("usage")
    if type(usage) is dict:
        _find(payload, usage, True, found)
    if not found or len(found) > _HOLES:
        return None
    found.sort(key=_start)
    for at in range(1, len(found)):
        if found[at][0] <= found[at - 1][1]:  # overlapping or touching: a look-alike
            return None
    if _dumps(chunk) != payload:  # not written as orjson writes it
        return None
    # The payload in the line: the blanks and ``data:`` around it are the same on
    # every line of the server's, else the line is decoded the usual way.
    offset = line.find(payload, _FIELD)
    holes = [
        _Hole(in_usage, key, number, offset + begin, offset + end)
        for begin, end, in_usage, key, number in found
    ]
    probes = [
        _probe(payload[begin:end], number, index)
        for index, (begin, end, _, _, number) in enumerate(found)
    ]
    # (The chunk was handed on as its line's item: it is put back before anything
    # else runs; the shape keeps copies of what it hands on.)
    if not _written_alike(chunk, line, holes, probes):
        return None
    return _Shape(line, holes, _copied(chunk))


def _start(found: _Found) -> int:
    return found[0]


def _find(payload: bytes, values: dict[str, Any], usage: bool, found: list[_Found]) -> None:
    """The bytes of the holes among ``values`` (the chunk's or its usage's) in the
    payload, where a token of theirs first stands after their key: an id of
    printable ASCII orjson writes as it is, an integer ``created``, a usage's
    integers (not booleans, not negative)."""
    for key, value in values.items():
        if usage or key == "created":
            if type(value) is not int or value < 0:
                continue
            token = str(value).encode()
            if len(token) > _DIGITS:
                continue
            number = True
        elif key == "id":
            if type(value) is not str or not value or not value.isascii():
                continue
            token = value.encode()
            if token.translate(_STRING_BYTES) != b"s" * len(token):
                continue
            number = False
        else:
            continue
        named = _dumps(key) + b":" + (token if number else b'"' + token + b'"')
        at = payload.find(named)
        if at < 0:
            continue
        begin = at + len(named) - len(token) - (0 if number else 1)
        found.append((begin, begin + len(token), usage, key, number))


def _probe(token: bytes, number: bool, index: int) -> str | int:
    """Another value for a hole of ``token``'s bytes: as many bytes, each another
    (letters for a string, digits for an integer, whose first tells the hole)."""
    if not number:
        return bytes(_LETTERS[0] if byte != _LETTERS[0] else _LETTERS[1] for byte in token).decode()
    first = [digit for digit in _FIRST_DIGITS if digit != token[0]][index]
    rest = bytes(48 if byte != 48 else 49 for byte in token[1:])  # "0", else "1"
    return int(bytes([first]) + rest)


def _written_alike(
    chunk: dict[str, Any], line: bytes, holes: list[_Hole], probes: list[str | int]
) -> bool:
    """Whether orjson writes ``chunk`` with the probes in its holes as ``line``'s
    payload with the probes' tokens in the holes.

    Why it is exact: orjson writes a value's token in place, so it writes the
    chunk with any values in the holes as the same bytes around their tokens,
    and decodes what it writes to the same chunk. Both writings, the learned
    payload (checked) and the probe's, differ from each other exactly where
    orjson writes the holes' values (each probe byte is another byte, and the
    values are separated by their keys); the line's two payloads differ exactly
    in the holes. The writings are the payloads, so the holes are the same runs
    of bytes, each the same value's (two holes of the same length have
    different probes: a string's letters, an integer's own first digit), and
    the bytes between them are orjson's: any values of the holes' lengths
    written in them (an id's characters orjson writes as they are, an integer's
    digits) are what orjson writes of the chunk with those values."""
    usage: Any = chunk.get("usage")
    kept: list[Any] = []
    for hole, probe in zip(holes, probes, strict=True):
        held = usage if hole.usage else chunk
        kept.append(held[hole.key])
        held[hole.key] = probe
    try:
        written = _dumps(chunk)
    except orjson.JSONEncodeError:
        return False
    finally:
        for hole, value in zip(holes, kept, strict=True):
            (usage if hole.usage else chunk)[hole.key] = value
    made = []
    start = 0
    for hole, probe in zip(holes, probes, strict=True):
        made.append(line[start : hole.start])
        made.append(str(probe).encode())
        start = hole.end
    made.append(line[start:])
    return written == b"".join(made)[_FIELD:].strip()


def _copied(value: Any) -> Any:
    """A decoded value made again: its dicts and lists new, its scalars shared."""
    if type(value) is dict:
        return {key: _copied(item) for key, item in value.items()}
    if type(value) is list:
        return [_copied(item) for item in value]
    return value
