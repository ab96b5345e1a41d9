"""Marker search: every active format's opening markers compiled into one
table, and the search that finds the next marker in model text without
looking at any character twice.

The registry (:mod:`toolrelay.formats`) chooses the formats;
:func:`compile_openers` turns their openers into an :class:`OpenerTable`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from toolrelay.formats.base import Format, Opener, RegionFactory
from toolrelay.formats.markup import stray_token

_SNIFF_WINDOW = 64
# Blanks waited through after a shared marker before no sniff may claim it: a call
# never sits that far from its marker, and the wait holds the blanks in the buffer.
_MAX_BLANKS = 256
_BLANKS = re.compile(r"[ \t\r\n]*")


def _sniff(
    candidates: tuple[Opener, ...], buf: str, pos: int, final: bool
) -> Opener | Literal[False] | None:
    """The candidate that claims what follows the marker (at ``pos``).

    One without a sniff claims anything; one with a sniff claims what its sniff
    does, past the blanks. None when none does (the marker is text), False when
    one cannot tell until more text comes.
    """
    start = _BLANKS.match(buf, pos, pos + _MAX_BLANKS + 1).end()  # type: ignore[union-attr]
    too_far = start - pos > _MAX_BLANKS
    # A sniff decides from a few characters past the blanks, never the whole rest.
    following = buf[pos : start + _SNIFF_WINDOW]
    for candidate in candidates:
        if candidate.sniff is None:
            return candidate  # the blanks do not matter to it, however many
        if too_far:
            continue
        verdict = candidate.sniff(following)
        if verdict is None and not final:
            return False
        if verdict:
            return candidate
    return None


@dataclass(frozen=True)
class OpenerTable:
    """Every active marker, compiled for one search per position, never twice."""

    pattern: re.Pattern[str]
    marked_pattern: re.Pattern[str] | None
    openers: dict[str, tuple[Opener, ...]]
    # The format each region is read for (the first format listed, of two sharing one).
    format_of: dict[RegionFactory, str]
    tokens: frozenset[str]  # special tokens: never content
    prefixes: frozenset[str]
    partial: re.Pattern[str]  # a proper beginning of a marker, running to the end
    longest: int
    # For ``MarkerSearch``: the markers that begin with a character rare in prose (not
    # a letter, digit or space), and their first characters; the others, each with its
    # first such character and where it sits in the marker.
    anchored_pattern: re.Pattern[str]
    anchors: str
    worded: tuple[tuple[str, str, int], ...]

    def search(self, buf: str, pos: int) -> tuple[int, str] | None:
        """The first marker at or after ``pos`` (the longest, of those starting there)."""
        found = self.pattern.search(buf, pos)
        return None if found is None else (found.start(), found.group())

    def opens(
        self, buf: str, start: int, marker: str, final: bool
    ) -> RegionFactory | Literal[False] | None:
        """What the marker at ``start`` opens: a region, nothing (it is text), or False: wait.

        Wait when the buffer's end might still extend it into a longer marker
        (``[`` before ``[TOOL_CALLS]`` has arrived), or when the formats that
        share it must see more of what follows to tell whose it is
        (``<tool_call>`` opens Hermes JSON, Qwen3-Coder XML and GLM blocks).
        """
        rest = len(buf) - start
        # Only a short rest can be a longer marker's beginning: no slice of a long buffer.
        if not final and len(marker) <= rest < self.longest and buf[start:] in self.prefixes:
            return False
        candidates = self.openers[marker]
        if len(candidates) == 1 and candidates[0].sniff is None:
            return candidates[0].region
        chosen = _sniff(candidates, buf, start + len(marker), final)
        return chosen.region if isinstance(chosen, Opener) else chosen

    def search_marked(self, buf: str, pos: int, end: int) -> int:
        """Where the first multi-character marker starts in ``buf[pos:end]``, or -1."""
        if self.marked_pattern is None:
            return -1
        found = self.marked_pattern.search(buf, pos, end)
        return -1 if found is None else found.start()

    def safe_end(self, buf: str, pos: int) -> int:
        """How far content may be released: a possible partial marker at the end is held."""
        end = len(buf)
        held = self.partial.search(buf, max(pos, end - self.longest + 1))
        return end if held is None else held.start()


def compile_openers(formats: Iterable[Format]) -> OpenerTable:
    """The table of every opener of ``formats`` (the first format listed wins a
    marker two claim, unless a sniff says otherwise)."""
    formats = tuple(formats)
    openers: dict[str, list[Opener]] = {}
    format_of: dict[RegionFactory, str] = {}
    for fmt in formats:
        for opener in fmt.openers:
            openers.setdefault(opener.marker, []).append(opener)
            format_of.setdefault(opener.region, fmt.name)
    tokens = frozenset(t for fmt in formats for t in fmt.tokens)
    for token in tokens:
        openers.setdefault(token, [stray_token(token)])  # no region reads it: dropped
    markers = sorted(openers, key=len, reverse=True)
    # A marker whose every format says what must follow it is only found where that does.
    follows = {
        marker: "|".join(f"(?:{c.follows})" for c in candidates)
        for marker, candidates in openers.items()
        if all(c.follows is not None for c in candidates)
    }
    multi = [m for m in markers if len(m) > 1 and not m.startswith("`")]
    prefixes = frozenset(m[:i] for m in markers for i in range(1, len(m)))
    anchored = [m for m in markers if not (m[0].isalnum() or m[0] == " ")]
    worded = []
    for marker in markers:
        if marker not in anchored:
            offset = next(i for i, c in enumerate(marker) if not c.isalnum() and c != " ")
            worded.append((marker, marker[offset], offset))
    shared = {m: tuple(o) for m, o in openers.items()}
    return OpenerTable(
        pattern=re.compile(_trie(markers, follows)),
        marked_pattern=re.compile(_trie(multi)) if multi else None,
        openers=shared,
        format_of=format_of,
        tokens=tokens,
        prefixes=prefixes,
        partial=re.compile(_trie(sorted(prefixes, key=len, reverse=True)) + r"\Z"),
        longest=max(len(m) for m in markers),
        anchored_pattern=re.compile(_trie(anchored, follows)),
        anchors="".join(sorted({m[0] for m in anchored})),
        worded=tuple(worded),
    )


def _trie(markers: list[str], follows: dict[str, str] | None = None) -> str:
    """One pattern for all the markers, their common beginnings written once.

    An alternation of many literals tries each at every position; a trie
    looks at each character once. Where a marker is the beginning of a
    longer one the longer is tried first, so, as with an alternation of the
    markers longest first, the longest marker at a position is the match.
    A marker with a ``follows`` expression matches only where it is followed
    by what that expression matches (a lookahead: it is not part of the match).
    """
    follows = follows or {}
    root: dict[str, Any] = {}
    for marker in markers:
        node = root
        for char in marker:
            node = node.setdefault(char, {})
        node[""] = follows.get(marker)  # a marker ends here

    def pattern(node: dict[str, Any]) -> str:
        branches = [re.escape(char) + pattern(child) for char, child in node.items() if char]
        ends = "" in node
        lookahead = node.get("")
        if lookahead is not None:
            return "(?:" + "|".join([*branches, f"(?={lookahead})"]) + ")"
        if not branches:
            return ""
        inner = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        if ends:  # a marker ends here: the longer ones are optional
            return inner + "?" if len(branches) == 1 and len(inner) <= 2 else f"(?:{inner})?"
        return inner

    return pattern(root)


class MarkerSearch:
    """One parser's search for markers, at memchr speed on long text.

    A regular expression of many markers looks at every character; on a
    long buffer this looks for the first character of each marker that
    begins with one rare in prose (``<``, ``[``, ``{``, a backquote, …) with
    ``str.find``, and runs the pattern of those markers only from there. The
    few markers that begin with a letter or a space (``functools[``,
    `` to=functions.``) are looked for by their first rare character, then
    whole, and only before the first marker of the others. What it finds is
    what ``OpenerTable.search`` finds. A marker every format turns away on
    sight (a bracket in prose) is passed over here, as text, without a region
    made for it.

    Every position found is remembered for the buffer, so that however many
    markers are turned away, no text is searched twice.
    """

    __slots__ = ("_buf", "_from", "_hit", "_next", "_until", "_word_at", "table")

    def __init__(self, table: OpenerTable) -> None:
        self.table = table
        self._buf: str | None = None
        self._next: list[int] = []  # per anchor: where it next occurs, -1 none, -2 unknown
        self._from = -1  # the first anchored marker at or after here is ``_hit``
        self._hit: tuple[int, str] | None = None
        # Per worded marker: where it next occurs, or -1: not before ``_until``.
        self._word_at: list[int] = []
        self._until: list[int] = []

    def search(
        self, buf: str, pos: int, final: bool
    ) -> tuple[int, str, RegionFactory | None] | None:
        """The first marker at or after ``pos`` and what it opens (None: wait for more text)."""
        table = self.table
        while True:
            found = table.search(buf, pos) if len(buf) - pos < _SHORT else self.anchored(buf, pos)
            if found is None:
                return None
            start, marker = found
            opens = table.opens(buf, start, marker, final)
            if opens is False:
                return start, marker, None
            if opens is not None:
                return start, marker, opens
            pos = start + 1

    def anchored(self, buf: str, pos: int) -> tuple[int, str] | None:
        """``OpenerTable.search``, by anchors."""
        if buf is not self._buf:
            self._buf = buf
            self._next = [-2] * len(self.table.anchors)
            self._from = -1
            self._word_at = [-1] * len(self.table.worded)
            self._until = [0] * len(self.table.worded)
        hit = self._hit
        if self._from < 0 or pos < self._from or (hit is not None and pos > hit[0]):
            hit = self._hit = self._first_anchored(buf, pos)
            self._from = pos
        worded = self._first_worded(buf, pos, len(buf) if hit is None else hit[0])
        return hit if worded is None else worded

    def _first_anchored(self, buf: str, pos: int) -> tuple[int, str] | None:
        """The first marker at or after ``pos`` that begins with an anchor."""
        table = self.table
        following = self._next
        pattern = table.anchored_pattern
        longest = table.longest
        span = _STRETCH
        while True:
            # The first two anchors: where a marker may start.
            best = second = -1
            for k, char in enumerate(table.anchors):
                at = following[k]
                if at == -1:
                    continue  # no more of it in this buffer
                if at < pos:
                    at = following[k] = buf.find(char, pos)
                    if at < 0:
                        continue
                if best < 0 or at < best:
                    best, second = at, best
                elif second < 0 or at < second:
                    second = at
            if best < 0:
                return None
            # One regular expression search covers the next stretch: dense anchors
            # ('<' in markup, brackets in code and prose) are searched in C, not one by
            # one; the stretch doubles while nothing is found in it.
            stretch = len(buf) if second < 0 else max(second, best + span)
            end = min(len(buf), stretch + longest)
            hit = pattern.search(buf, best, end)
            if hit is not None and hit.start() < stretch:
                start = hit.start()
                if end < len(buf):
                    # What must follow a marker may lie past the end searched: look again.
                    hit = pattern.match(buf, start)
                if hit is not None:
                    return start, hit.group()
                pos = start + 1
                continue
            if stretch >= len(buf):
                return None
            pos = stretch
            span *= 2

    def _first_worded(self, buf: str, pos: int, end: int) -> tuple[int, str] | None:
        """The first marker starting in ``buf[pos:end]`` that begins with a letter or space."""
        found: tuple[int, str] | None = None
        word_at = self._word_at
        until = self._until
        for k, (marker, anchor, offset) in enumerate(self.table.worded):
            at = word_at[k]
            if at < pos:
                if until[k] >= end:
                    continue  # none before ``end``
                start = max(pos, until[k])
                stop = min(len(buf), end + len(marker) - 1)  # a marker starting before end
                # Its rare character first (memchr), then, if that was not it, the whole.
                at = buf.find(anchor, start + offset, stop) - offset
                if at >= start and not buf.startswith(marker, at):
                    at = buf.find(marker, at + 1, stop)
                if at < start:
                    at = -1
                    until[k] = end
                word_at[k] = at
            # Longest first: of two starting together, the longer is kept.
            if 0 <= at < end and (found is None or at < found[0]):
                found = (at, marker)
        return found


# Below this many characters one regular expression search costs less than the
# str.find calls of the anchored search; and at least this many are searched at
# once from an anchor that is not a marker's.
_SHORT = 256
_STRETCH = 256
