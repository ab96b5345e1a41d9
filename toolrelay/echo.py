"""What a model echoes of the prompt toolrelay wrote, removed from its answer.

Weak models repeat their prompt: the rescue path's tool listing, the late
``[SYSTEM DIRECTIVE]``, the strict re-ask's demands, the stuck detector's
note, and the example calls (see :mod:`toolrelay.examples`). None of that is
the model's answer. :class:`EchoFilter` takes the texts
toolrelay injected into one round and drops every line of the answer that
repeats one of their lines (whitespace aside), or a long enough start of one
(weak models break off mid-sentence, and so does the token limit). The
answer reaches the filter after the parser took its markup out (call
blocks, the directive's marker), so the injected texts are compared as the
parser leaves them too.

A line is held back only while it could still be an echo: once it differs
from every injected line it goes out at once, so a stream is delayed by at
most one line, and only by a line that starts like one of ours.

What is left goes through `toolrelay.reworded`, which drops
the lines and sentences that reword the prompt rather than repeat it.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import replace
from functools import cache, lru_cache

from toolrelay.correction import CORRECTION_MARKER
from toolrelay.events import (
    CallRejected,
    ContentDelta,
    Event,
    ToolCallArgumentsDelta,
    ToolCallEnd,
    ToolCallStart,
)
from toolrelay.examples import reject_copies
from toolrelay.formats import opener_table
from toolrelay.formats.echoes import DIRECTIVE_MARKER, WRAPPERS
from toolrelay.parse import parse_tool_calls
from toolrelay.reworded import Rewordings
from toolrelay.types import Tool

_SPACES = re.compile(r"\s+")
# Shorter injected lines ("Rules:") are too common to remove from an answer.
_MIN_LINE = 6
# A line that only starts like an injected one must be this long to be an echo.
_MIN_PARTIAL = 16


def _normalize(text: str) -> str:
    return _SPACES.sub(" ", text).strip()


@lru_cache(maxsize=64)
def _own_lines(injected: tuple[str, ...]) -> tuple[frozenset[str], tuple[str, ...]]:
    """The injected texts' lines as the parser leaves them, long enough to be an
    echo, as a set and sorted. Cached: parsing the tool listing is most of a
    filter's cost, and a client's rounds send the same prompt texts again and again."""
    lines = {
        _normalize(line)
        for text in injected
        for line in parse_tool_calls(text).content.splitlines()
    }
    own = frozenset(line for line in lines if len(line) >= _MIN_LINE)
    return own, tuple(sorted(own))


class EchoFilter:
    """Feed the content of one answer; what comes back is it without echoed lines."""

    __slots__ = ("_held", "_lines", "_norm", "_reworded", "_set", "_undecided")

    def __init__(self, injected: Iterable[str]) -> None:
        injected = tuple(injected)
        # What is left goes on to the sentences that reword the prompt.
        self._reworded = Rewordings(injected)
        self._set, self._lines = _own_lines(injected)
        self._held: list[str] = []  # the current line, while it may be an echo
        self._norm = ""  # the held text, normalised
        self._undecided = True  # False once the current line is known not to be an echo

    def __bool__(self) -> bool:
        return bool(self._lines) or bool(self._reworded)

    def feed(self, text: str) -> str:
        return self._reworded.feed(self._exact(text))

    def close(self) -> str:
        held = "" if self._echo() else "".join(self._held)
        self._reset()
        return self._reworded.feed(held) + self._reworded.close()

    def _exact(self, text: str) -> str:
        """``text`` without the lines that repeat an injected one."""
        out: list[str] = []
        start = 0
        while start < len(text):
            newline = text.find("\n", start)
            end = len(text) if newline < 0 else newline
            self._extend(text[start:end], out)
            if newline < 0:
                break
            if not self._echo():
                out.append("".join(self._held) + "\n")
            self._reset()
            start = newline + 1
        return "".join(out)

    def _echo(self) -> bool:
        """Whether the held line, now complete, repeats an injected one."""
        norm = self._norm.rstrip()
        return self._undecided and (
            norm in self._set or (len(norm) >= _MIN_PARTIAL and self._starts_a_line(norm))
        )

    def _extend(self, piece: str, out: list[str]) -> None:
        if not piece:
            return
        if not self._undecided:
            out.append(piece)
            return
        self._held.append(piece)
        addition = _SPACES.sub(" ", piece)
        if not self._norm:
            addition = addition.lstrip()
        elif self._norm.endswith(" ") and addition.startswith(" "):
            addition = addition[1:]
        self._norm += addition
        # Compared without a trailing blank: the injected lines have none.
        if not self._starts_a_line(self._norm.rstrip()):
            out.append("".join(self._held))
            self._held.clear()
            self._undecided = False

    def _starts_a_line(self, prefix: str) -> bool:
        at = bisect_left(self._lines, prefix)
        return at < len(self._lines) and self._lines[at].startswith(prefix)

    def _reset(self) -> None:
        self._held.clear()
        self._norm = ""
        self._undecided = True


def remove_echoes(text: str, injected: Iterable[str]) -> str:
    """``text`` without the lines that repeat the ``injected`` texts."""
    echo = EchoFilter(injected)
    if not echo:
        return text
    return echo.feed(text) + echo.close()


@cache
def _markup() -> tuple[re.Pattern[str], frozenset[str]]:
    """The markers that are markup anywhere, as one pattern, and their beginnings."""
    table = opener_table()
    markers = {*table.tokens, DIRECTIVE_MARKER, CORRECTION_MARKER}
    # The tag-like openers (`<tool_call>`, `[TOOL_CALLS]`), not bare `{` or fences.
    markers.update(m for m in table.openers if len(m) >= 4 and m[0] in "<[")
    for opening, closing in WRAPPERS:
        markers.update((opening, closing))
    # A rescue result header carries attributes: `[TOOL_RESULT name=… id=…]` is one piece.
    alternatives = [r"\[TOOL_RESULT[^\]\n]*\]"]
    alternatives += (re.escape(m) for m in sorted(markers, key=len, reverse=True))
    beginnings = frozenset(m[:i] for m in markers if m[0] in "<[" for i in range(1, len(m)))
    return re.compile("|".join(alternatives)), beginnings


def markup_removed(text: str, injected: Iterable[str] = ()) -> str:
    """What a model wrote, kept as words when its answer is nothing but markup and
    echoes: the tags of every format and wrapper taken out (their text stays), and
    the lines repeating what toolrelay wrote (``injected``) dropped. The last
    resort of a round that would otherwise answer with nothing at all."""
    pattern, beginnings = _markup()
    # Compared tags and all: the block's JSON stays in the words, so it must in ours.
    own = {_normalize(pattern.sub("", line)) for part in injected for line in part.splitlines()}
    own = {line for line in own if len(line) >= _MIN_LINE}
    lines = [
        line for line in pattern.sub("", text).splitlines() if not _repeats(_normalize(line), own)
    ]
    words = "\n".join(lines).strip()
    # A tag the token limit cut off (`[`, `<tool_`) is markup too.
    cut = max(words.rfind("["), words.rfind("<"))
    if cut >= 0 and words[cut:] in beginnings:
        words = words[:cut]
    return re.sub(r"\n{3,}", "\n\n", words).strip()


def _repeats(line: str, own: set[str]) -> bool:
    """Whether ``line`` is one of ``own``, or a long enough start of one."""
    if line in own:
        return True
    return len(line) >= _MIN_PARTIAL and any(mine.startswith(line) for mine in own)


class EchoCleaner:
    """A streamed answer's events without its echoes.

    Content goes through an :class:`EchoFilter`. When ``tools`` is given
    (the prompt showed their examples), each call is held until it is
    complete: a copy of an example becomes a :class:`CallRejected`, a real
    call goes out whole, and later calls' indices close the gap. Other
    events pass as they are.
    """

    __slots__ = ("_held", "_shift", "_text", "_tools", "removed_calls")

    def __init__(self, injected: Iterable[str], tools: Sequence[Tool] | None = None) -> None:
        self._text = EchoFilter(injected)
        self._tools = tools
        self._held: list[Event] = []
        self.removed_calls = 0  # copies of examples, rejected
        self._shift = 0  # calls that never went out: later indices close the gap

    def __bool__(self) -> bool:
        return bool(self._text) or self._tools is not None

    def feed(self, events: Iterable[Event]) -> list[Event]:
        out: list[Event] = []
        for event in events:
            if isinstance(event, ContentDelta):
                text = self._text.feed(event.text) if self._text else event.text
                if text:
                    out.append(ContentDelta(text))
            elif isinstance(event, ToolCallStart | ToolCallArgumentsDelta | ToolCallEnd):
                self._call_event(event, out)
            elif isinstance(event, CallRejected) and event.index is not None:
                self._cut_call(event, out)
            else:
                out.append(event)
        return out

    def close(self) -> list[Event]:
        """What was held back: the last line of content (a call never ended is dropped)."""
        self._held.clear()
        text = self._text.close() if self._text else ""
        return [ContentDelta(text)] if text else []

    def _cut_call(self, event: CallRejected, out: list[Event]) -> None:
        """A started call whose text ended inside a string: held, it never went out."""
        if self._tools is None:
            index = event.index
            assert index is not None
            out.append(replace(event, index=index - self._shift))
            return
        self._held.clear()
        self._shift += 1
        out.append(CallRejected(event.call))

    def _call_event(
        self, event: ToolCallStart | ToolCallArgumentsDelta | ToolCallEnd, out: list[Event]
    ) -> None:
        if self._shift:
            event = replace(event, index=event.index - self._shift)
        if self._tools is None:
            out.append(event)
            return
        self._held.append(event)
        if not isinstance(event, ToolCallEnd):
            return
        _, copies = reject_copies([event.call], self._tools)
        if copies:
            out.append(CallRejected(copies[0]))
            self.removed_calls += 1
            self._shift += 1
        else:
            out.extend(self._held)
        self._held.clear()
