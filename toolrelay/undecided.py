"""Streaming before anyone knows whether the template opened the reasoning.

A finished parse decides from the whole text (``parse_tool_calls`` with
``reasoning_open=None``): a closing reasoning tag before any opening one means
the output started inside reasoning, and everything before that tag is
reasoning, drafted calls included. A stream cannot see its end, so until a
model's flag is known (a gateway learns it from the first such answer, or
reads it from the chat template), :class:`UndecidedStreamParser` holds the
output back and decides as soon as the text can tell:

- an orphan closing tag: the held text is read again as opened reasoning;
- an opening reasoning tag first (no later tag can be an orphan), more than
  ``hold_chars`` characters (:data:`HOLD_CHARS`) without a closing tag, or
  the end of the output: it was not opened, and what was held goes out.

Up to the bound the stream and the finished parse agree exactly; an orphan
closing tag later than ``hold_chars`` characters into the output is where they
can differ (the text before it has gone out as content, as with
``reasoning_open=False``). The bound keeps such a stream responsive: at most
that much text waits, once per model until its flag is learned.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from toolrelay.events import Event
from toolrelay.stream import StreamParser

# Characters held back at most while the output may still turn out to be reasoning.
HOLD_CHARS = 4096


class UndecidedStreamParser:
    """A :class:`StreamParser` for output that may or may not start inside reasoning."""

    __slots__ = (
        "_events",
        "_format",
        "_held",
        "_held_chars",
        "_hold",
        "_parser",
        "_probe",
        "_tools",
    )

    def __init__(
        self,
        tools: Iterable[Any] | None = None,
        format: str = "auto",
        *,
        hold_chars: int = HOLD_CHARS,
    ) -> None:
        self._tools = list(tools) if tools is not None else None  # read twice, maybe
        self._format = format
        self._hold = hold_chars
        # Reads the output as not opened, as the finished parse first does.
        self._probe = StreamParser(self._tools, format)
        self._held: list[str] = []
        self._held_chars = 0
        self._parser: StreamParser | None = None  # the parser in charge, once decided
        self._events: list[Event] = []

    @property
    def decided(self) -> bool:
        return self._parser is not None

    @property
    def opened(self) -> bool | None:
        """Whether the output started inside reasoning; None while undecided."""
        if self._parser is None:
            return None
        return self._parser is not self._probe

    @property
    def orphan_close(self) -> bool:
        """A closing reasoning tag came before any opening one (as StreamParser's)."""
        return self._probe.orphan_close

    def call_format(self, index: int) -> str:
        """As StreamParser's: the format call ``index`` was written in."""
        return (self._parser or self._probe).call_format(index)

    def feed(self, delta: str) -> list[Event]:
        if self._parser is not None:
            return self._parser.feed(delta)
        self._held.append(delta)
        self._held_chars += len(delta)
        self._events += self._probe.feed(delta)
        return self._decide(final=False)

    def close(self) -> list[Event]:
        if self._parser is not None:
            return self._parser.close()
        self._events += self._probe.close()
        return self._decide(final=True)

    def _decide(self, final: bool) -> list[Event]:
        probe = self._probe
        if probe.orphan_close:
            opened = StreamParser(self._tools, self._format, reasoning_open=True)
            events = opened.feed("".join(self._held))
            if final:
                events += opened.close()
            return self._settle(opened, events)
        if final or probe.reasoning_seen or self._held_chars > self._hold:
            return self._settle(probe, self._events)
        return []

    def _settle(self, parser: StreamParser, events: list[Event]) -> list[Event]:
        self._parser = parser
        self._held = []
        self._events = []
        return events


def stream_parser(
    tools: Iterable[Any] | None = None, format: str = "auto", *, reasoning_open: bool | None
) -> StreamParser | UndecidedStreamParser:
    """The stream parser for a known flag, or one that holds back until the text tells."""
    if reasoning_open is None:
        return UndecidedStreamParser(tools, format)
    return StreamParser(tools, format, reasoning_open=reasoning_open)
