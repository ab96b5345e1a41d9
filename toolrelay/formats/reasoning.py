"""Reasoning wrappers: ``<think>…</think>`` and its relatives go to ``reasoning``.

``<think>`` (Qwen3, DeepSeek-R1, GLM, MiniMax, Nemotron), ``<seed:think>``
(Seed-OSS), ``<|START_THINKING|>`` (Command R7B), ``<|inner_prefix|>``
(Apertus). A closing tag with no opening one (templates that open the think
block in the prompt) is dropped from content.

Calls inside a closed think block are drafts and stay reasoning. When the
block never closes, the calls in it are parsed at the end of the output.
There an opener of the same kind is text: its block could never close
either (its closer appears nowhere after it), so unclosed blocks nest at most
one deep per kind, however many openers the model repeats.
"""

from __future__ import annotations

from typing import Protocol

from toolrelay.events import ContentDelta
from toolrelay.formats.base import Context, Format, Opener, Region, Status, find_marker

WRAPPERS = (
    ("<think>", "</think>"),
    ("<seed:think>", "</seed:think>"),
    ("<|START_THINKING|>", "<|END_THINKING|>"),
    ("<|inner_prefix|>", "<|inner_suffix|>"),
)


class _MarkerSearch(Protocol):
    def search_marked(self, buf: str, pos: int, end: int) -> int: ...

    def safe_end(self, buf: str, pos: int) -> int: ...


class ThinkRegion:
    """Streams reasoning until the closing tag; holds back a call written inside."""

    __slots__ = ("_at_start", "_closer", "_ctx", "_held", "_holding")

    def __init__(self, ctx: Context, closer: str) -> None:
        self._ctx = ctx
        # Reasoning is not output: what follows a think block at the start of the
        # output still starts the output (a bare JSON or pythonic call there counts).
        self._at_start = ctx.at_start
        self._closer = closer
        self._holding = False
        self._held: list[str] = []

    def feed(self, buf: str, pos: int, final: bool) -> tuple[int, Status]:
        ctx = self._ctx
        table: _MarkerSearch = ctx.openers
        found, safe = find_marker(buf, pos, self._closer)
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
            return found + len(self._closer), Status.DONE
        if final:
            self._parse_held_calls()
            return len(buf), Status.DONE
        return limit, Status.CONTINUE

    def _parse_held_calls(self) -> None:
        """The think block never closed: read the calls in it; its prose stays reasoning."""
        from toolrelay.stream import StreamParser  # the parser is this module's user

        ctx = self._ctx
        earlier = ctx.events
        ctx.events = []
        ctx.unclosed.add(self._closer)
        nested = StreamParser(_context=ctx, format=ctx.format_name)
        produced = nested.feed("".join(self._held)) + nested.close()
        ctx.unclosed.discard(self._closer)
        ctx.events = earlier
        for event in produced:
            if isinstance(event, ContentDelta):
                ctx.reasoning(event.text)
            else:
                ctx.events.append(event)


class _AsText:
    """An opener inside an unclosed block of its own kind: text, not markup."""

    __slots__ = ()

    def feed(self, buf: str, pos: int, final: bool) -> tuple[int, Status]:
        return pos, Status.FALLBACK


class _StrayCloser:
    """A closing tag whose opening tag was in the prompt: drop it."""

    __slots__ = ()

    def feed(self, buf: str, pos: int, final: bool) -> tuple[int, Status]:
        return pos, Status.DONE


def _opener(opening: str, closing: str) -> tuple[Opener, Opener]:
    def think(ctx: Context, _marker: str) -> Region:
        if closing in ctx.unclosed:
            return _AsText()
        return ThinkRegion(ctx, closing)

    def stray(_ctx: Context, _marker: str) -> Region:
        return _StrayCloser()

    return Opener(opening, think), Opener(closing, stray)


FORMAT = Format(
    name="reasoning",
    description="<think>…</think> and other reasoning wrappers",
    openers=tuple(o for opening, closing in WRAPPERS for o in _opener(opening, closing)),
)
