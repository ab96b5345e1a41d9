"""Reasoning wrappers: ``<think>…</think>`` and its relatives go to ``reasoning``.

``<think>`` (Qwen3, QwQ, DeepSeek-R1, GLM, MiniMax, Nemotron, Kimi),
``<seed:think>`` (Seed-OSS), ``<|START_THINKING|>`` (Command R7B and
Command A, whose answer may start with ``<|START_TEXT|>`` without closing
the thinking first), ``<|inner_prefix|>`` (Apertus), ``[THINK]`` (Magistral,
Ministral 3) Gemma 4's ``<|channel>thought…<channel|>`` and Kimi K3's
``<|open|>think<|sep|>…<|close|>think<|sep|>`` and MiniMax-M3's ``<mm:think>``.

Many templates open the reasoning in the prompt (``<think>\\n`` after the
assistant header), so the output starts inside it and shows only the
closing tag. The stream parser is told so by its ``reasoning_open`` flag
and then starts in a ``ThinkRegion`` that any closing tag ends. Without the
flag, a closing tag met before any opening one is an *orphan*: it is
dropped from content and ``Context.orphan_close`` records it (the gateway
learns the flag from it; ``parse_tool_calls`` reads the finished text again
with the flag).

Calls inside a closed think block are drafts and stay reasoning. When the
block never closes, the calls in it are parsed at the end of the output.
There an opener of the same kind is text: its block could never close
either (its closer appears nowhere after it), so unclosed blocks nest at most
one deep per kind, however many openers the model repeats.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Protocol

from toolrelay.events import ContentDelta
from toolrelay.formats.base import Context, Format, Opener, Region, Status
from toolrelay.formats.markup import stray_token

# (opening, closing): each opening tag's reasoning ends at its closing tag.
WRAPPERS = (
    ("<think>", "</think>"),
    ("<seed:think>", "</seed:think>"),
    ("<|START_THINKING|>", "<|END_THINKING|>"),
    ("<|inner_prefix|>", "<|inner_suffix|>"),
    ("[THINK]", "[/THINK]"),
    # Gemma 4: the channel's name and the line break after it are its header.
    ("<|channel>thought\n", "<channel|>"),
    ("<|channel>thought", "<channel|>"),
    ("<|open|>think<|sep|>", "<|close|>think<|sep|>"),  # Kimi K3
    ("<mm:think>", "</mm:think>"),  # MiniMax-M3
)
# Markers that end reasoning too, without closing it first (Command A's answer).
ALSO_ENDS = {"<|START_THINKING|>": ("<|START_TEXT|>",)}
CLOSERS = tuple(dict.fromkeys(closing for _, closing in WRAPPERS))
# What ends reasoning that the chat template opened: any closing tag.
OPEN_ENDS = (*CLOSERS, *(m for ends in ALSO_ENDS.values() for m in ends))


class _MarkerSearch(Protocol):
    def search_marked(self, buf: str, pos: int, end: int) -> int: ...

    def safe_end(self, buf: str, pos: int) -> int: ...


@lru_cache(maxsize=16)
def _ends_pattern(ends: tuple[str, ...]) -> tuple[re.Pattern[str], frozenset[str]]:
    ordered = sorted(ends, key=len, reverse=True)
    prefixes = frozenset(m[:i] for m in ends for i in range(1, len(m)))
    return re.compile("|".join(re.escape(m) for m in ordered)), prefixes


class ThinkRegion:
    """Streams reasoning until one of its end markers; holds back a call written inside."""

    __slots__ = (
        "_at_start",
        "_ctx",
        "_end_markers",
        "_ends",
        "_held",
        "_holding",
        "_longest",
        "_prefixes",
    )

    def __init__(self, ctx: Context, ends: tuple[str, ...]) -> None:
        self._ctx = ctx
        # Reasoning is not output: what follows a think block at the start of the
        # output still starts the output (a bare JSON or pythonic call there counts).
        self._at_start = ctx.at_start
        ctx.unmark()  # reasoning holds no call to report
        self._end_markers = frozenset(ends)
        self._ends, self._prefixes = _ends_pattern(ends)
        self._longest = max(len(m) for m in ends)
        self._holding = False
        self._held: list[str] = []
        ctx.reasoning_seen = True

    def _find_end(self, buf: str, pos: int) -> tuple[int, int, int]:
        """The first end marker at or after ``pos``: start, length; else -1, 0, and the
        position up to which the text holds no part of one."""
        found = self._ends.search(buf, pos)
        if found is not None:
            return found.start(), found.end() - found.start(), found.start()
        end = len(buf)
        for start in range(max(pos, end - self._longest + 1), end):
            if buf[start:] in self._prefixes:
                return -1, 0, start
        return -1, 0, end

    def feed(self, buf: str, pos: int, final: bool) -> tuple[int, Status]:
        ctx = self._ctx
        table: _MarkerSearch = ctx.openers
        found, length, safe = self._find_end(buf, pos)
        if found >= 0:
            limit = found
        elif final:
            limit = len(buf)
        else:
            # Hold back a possible partial call marker as well as a partial closer.
            limit = safe if self._holding else min(safe, table.safe_end(buf, pos))
        if not self._holding:
            call_at = table.search_marked(buf, pos, found if found >= 0 else len(buf))
            if call_at >= 0:
                ctx.reasoning(buf[pos:call_at])
                self._holding = True
                pos = call_at
            else:
                ctx.reasoning(buf[pos:limit])
        if self._holding:
            self._held.append(buf[pos:limit])
        if found >= 0:
            ctx.reasoning("".join(self._held))
            ctx.at_start = self._at_start
            return found + length, Status.DONE
        if final:
            self._parse_held_calls()
            return len(buf), Status.DONE
        return limit, Status.CONTINUE

    def _parse_held_calls(self) -> None:
        """The think block never closed: read the calls in it; its prose stays reasoning."""
        ctx = self._ctx
        assert ctx.read_nested is not None, "a think region runs inside a parser"
        earlier = ctx.events
        saved = ctx.save_raw()
        ctx.events = []
        ctx.base = 0
        added = self._end_markers - ctx.unclosed
        ctx.unclosed |= added
        produced = ctx.read_nested(ctx, "".join(self._held))
        ctx.unclosed -= added
        ctx.events = earlier
        ctx.restore_raw(saved)
        for event in produced:
            if isinstance(event, ContentDelta):
                ctx.reasoning(event.text)
            else:
                ctx.events.append(event)


class _AsText:
    """An opener inside an unclosed block of its own kind: text, not markup."""

    __slots__ = ("_ctx", "_opener")

    def __init__(self, ctx: Context, opener: str) -> None:
        self._ctx = ctx
        self._opener = opener

    def feed(self, buf: str, pos: int, final: bool) -> tuple[int, Status]:
        # Said here rather than by falling back: the opener is a special token, which
        # the parser drops when a region falls back on it.
        self._ctx.content(self._opener)
        return pos, Status.DONE


class _OrphanCloser:
    """A closing tag with no opening one: the template opened the reasoning. Dropped."""

    __slots__ = ()

    def feed(self, buf: str, pos: int, final: bool) -> tuple[int, Status]:
        return pos, Status.DONE


def _orphan(ctx: Context, _marker: str) -> Region:
    if not ctx.reasoning_seen:
        ctx.orphan_close = True
    return _OrphanCloser()


def open_reasoning(ctx: Context) -> Region:
    """The region for output that starts inside reasoning (``reasoning_open``)."""
    return ThinkRegion(ctx, OPEN_ENDS)


def _think(opening: str, closing: str) -> Opener:
    ends = (closing, *ALSO_ENDS.get(opening, ()))

    def think(ctx: Context, _marker: str) -> Region:
        if closing in ctx.unclosed:
            return _AsText(ctx, opening)
        return ThinkRegion(ctx, ends)

    return Opener(opening, think)


FORMAT = Format(
    name="reasoning",
    description="<think>…</think> and other reasoning wrappers",
    openers=(
        *(_think(opening, closing) for opening, closing in WRAPPERS),
        *(Opener(closing, _orphan) for closing in CLOSERS),
        # Gemma 4's other channels carry nothing: their header is markup.
        stray_token("<|channel>"),
    ),
    tokens=(*(m for pair in WRAPPERS for m in pair), "<|channel>"),
)
