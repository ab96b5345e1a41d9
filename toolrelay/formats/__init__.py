"""The registry of tool-call text formats.

Each module in this package describes one format family: the markers that
open its regions and the region parser that reads them. ``FORMATS`` lists
them in the order ``format="auto"`` tries them when two claim one marker.
Adding a format means a module here and a line in ``FORMATS``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from toolrelay.formats import (
    apertus,
    bare_json,
    bracket,
    command_r7b,
    deepseek,
    deepseek_v32,
    echoes,
    fenced,
    functionary,
    functiongemma,
    gemma4,
    glm45,
    granite,
    harmony,
    hermes,
    internlm2,
    jamba,
    kimi,
    lfm2,
    llama3_builtin,
    llama4_pythonic,
    minimax_m1,
    minimax_m2,
    mistral,
    nemotron,
    olmo3,
    phi4_functools,
    pythonic,
    qwen3_coder,
    reasoning,
    seed_oss,
    step3,
)
from toolrelay.formats.base import (
    Context,
    Format,
    Opener,
    Region,
    RegionFactory,
    Status,
    skip_whitespace,
)
from toolrelay.formats.markup import stray_token

FORMATS: tuple[Format, ...] = (
    bracket.FORMAT,
    hermes.FORMAT,
    fenced.FORMAT,
    bare_json.FORMAT,
    deepseek.FORMAT,
    kimi.FORMAT,
    mistral.FORMAT,
    harmony.FORMAT,
    granite.FORMAT,
    jamba.FORMAT,
    minimax_m1.FORMAT,
    internlm2.FORMAT,
    phi4_functools.FORMAT,
    nemotron.FORMAT,
    lfm2.FORMAT,
    apertus.FORMAT,
    command_r7b.FORMAT,
    qwen3_coder.FORMAT,
    seed_oss.FORMAT,
    glm45.FORMAT,
    minimax_m2.FORMAT,
    deepseek_v32.FORMAT,
    step3.FORMAT,
    pythonic.FORMAT,
    llama4_pythonic.FORMAT,
    olmo3.FORMAT,
    llama3_builtin.FORMAT,
    functiongemma.FORMAT,
    gemma4.FORMAT,
    functionary.FORMAT,
)

ALWAYS_ON: tuple[Format, ...] = (reasoning.FORMAT, echoes.FORMAT)


def format_names() -> list[str]:
    return [f.name for f in FORMATS]


class UnknownFormatError(ValueError):
    pass


_SNIFF_WINDOW = 64


class Dispatch:
    """Picks among formats that share one marker by what follows it."""

    __slots__ = ("_at_start", "_blanks", "_candidates", "_ctx", "_marker", "chosen")

    def __init__(self, ctx: Context, marker: str, candidates: tuple[Opener, ...]) -> None:
        self._ctx = ctx
        self._marker = marker
        self._candidates = candidates
        self.chosen: Region | None = None
        self._at_start = ctx.at_start  # the parser clears it once the opener is found
        self._blanks = 0  # blanks right after the marker, already skipped

    @property
    def may_fallback(self) -> bool:
        return self.chosen is None or bool(getattr(self.chosen, "may_fallback", False))

    def feed(self, buf: str, pos: int, final: bool) -> tuple[int, Status]:
        if self.chosen is None:
            # ``pos`` is right after the marker on every call, whatever the buffer
            # held before it; blanks already skipped are not read again.
            start = skip_whitespace(buf, pos + self._blanks)
            self._blanks = start - pos
            # A sniff decides from a few characters past the blanks, never the whole rest.
            following = buf[pos : start + _SNIFF_WINDOW]
            undecided = False
            for candidate in self._candidates:
                verdict = True if candidate.sniff is None else candidate.sniff(following)
                if verdict is None and not final:
                    undecided = True
                    break
                if verdict:
                    self.chosen = self._create(candidate)
                    break
            if self.chosen is None:
                return pos, Status.CONTINUE if undecided else Status.FALLBACK
        return self.chosen.feed(buf, pos, final)

    def _create(self, candidate: Opener) -> Region:
        """The chosen region, made as of its opener (``at_start`` included), not as of now."""
        ctx = self._ctx
        now = ctx.at_start
        ctx.at_start = self._at_start
        try:
            return candidate.region(ctx, self._marker)
        finally:
            ctx.at_start = now


@dataclass(frozen=True)
class OpenerTable:
    """Every active marker, compiled for one search per position, never twice."""

    pattern: re.Pattern[str]
    marked_pattern: re.Pattern[str] | None
    openers: dict[str, tuple[Opener, ...]]
    tokens: frozenset[str]  # special tokens: never content
    prefixes: frozenset[str]
    first_char: re.Pattern[str]  # any character a marker can start with
    longest: int

    def search(
        self, buf: str, pos: int, final: bool
    ) -> tuple[int, str, RegionFactory | None] | None:
        """The first marker at or after ``pos``.

        A marker that the buffer's end might still extend into a longer one
        (``[`` before ``[TOOL_CALLS]`` has arrived) comes back without a
        region factory: wait for more text.
        """
        found = self.pattern.search(buf, pos)
        if found is None:
            return None
        marker = found.group()
        start = found.start()
        rest = len(buf) - start
        # Only a short rest can be a longer marker's beginning: no slice of a long buffer.
        if not final and len(marker) <= rest < self.longest and buf[start:] in self.prefixes:
            return start, marker, None
        return start, marker, self._factory(marker)

    def search_marked(self, buf: str, pos: int, end: int) -> int:
        """Where the first multi-character marker starts in ``buf[pos:end]``, or -1."""
        if self.marked_pattern is None:
            return -1
        found = self.marked_pattern.search(buf, pos, end)
        return -1 if found is None else found.start()

    def _factory(self, marker: str) -> RegionFactory:
        candidates = self.openers[marker]
        if len(candidates) == 1 and candidates[0].sniff is None:
            return candidates[0].region
        return _dispatcher(candidates)

    def safe_end(self, buf: str, pos: int) -> int:
        """How far content may be released: a possible partial marker at the end is held."""
        end = len(buf)
        candidate = self.first_char.search(buf, max(pos, end - self.longest + 1))
        while candidate is not None:
            start = candidate.start()
            if buf[start:] in self.prefixes:
                return start
            candidate = self.first_char.search(buf, start + 1)
        return end


def _dispatcher(candidates: tuple[Opener, ...]) -> Callable[[Context, str], Region]:
    def factory(ctx: Context, marker: str) -> Region:
        return Dispatch(ctx, marker, candidates)

    return factory


@lru_cache(maxsize=64)
def opener_table(name: str = "auto") -> OpenerTable:
    if name == "auto":
        formats = ALWAYS_ON + FORMATS
    else:
        chosen = [f for f in FORMATS if f.name == name]
        if not chosen:
            raise UnknownFormatError(
                f"unknown format {name!r}; known formats: auto, {', '.join(format_names())}"
            )
        formats = (*ALWAYS_ON, *chosen)
    openers: dict[str, list[Opener]] = {}
    for fmt in formats:
        for opener in fmt.openers:
            openers.setdefault(opener.marker, []).append(opener)
    tokens = frozenset(t for fmt in formats for t in fmt.tokens)
    for token in tokens:
        openers.setdefault(token, [stray_token(token)])  # no region reads it: dropped
    markers = sorted(openers, key=len, reverse=True)
    multi = [m for m in markers if len(m) > 1 and not m.startswith("`")]
    prefixes = frozenset(m[:i] for m in markers for i in range(1, len(m)))
    return OpenerTable(
        pattern=re.compile("|".join(re.escape(m) for m in markers)),
        marked_pattern=re.compile("|".join(re.escape(m) for m in multi)) if multi else None,
        openers={m: tuple(o) for m, o in openers.items()},
        tokens=tokens,
        prefixes=prefixes,
        first_char=re.compile("[" + "".join(re.escape(c) for c in {p[0] for p in prefixes}) + "]"),
        longest=max(len(m) for m in markers),
    )
