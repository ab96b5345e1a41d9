"""The engine for special-token section formats: a section of calls, each a header and JSON.

``<section> (<call> HEADER <sep> {json} <end>)* </section>`` is the shape of
DeepSeek V3/R1/V3.1 and Kimi K2; the modules for those formats say what the
markers are and how a header names the call.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from toolrelay.formats.base import (
    ArgumentStream,
    Call,
    Context,
    Status,
    find_marker,
    skip_whitespace,
    starts_or_partial,
)

_MAX_HEADER = 256


@dataclass(frozen=True)
class Header:
    """What a call's header says: its name (None: on the line after it), its id."""

    name: str | None
    native_id: str | None = None
    name_line_follows: bool = False  # DeepSeek V3: "function<sep>NAME\n```json…"


HeaderReader = Callable[[str], "Header | None"]


@dataclass(frozen=True)
class SectionMarkers:
    call_begin: str
    separator: str
    call_end: str
    section_end: str
    # DeepSeek: a call may leave out its begin token, its header right after the last
    # token ("<｜tool▁calls▁begin｜>function<｜tool▁sep｜>f…").
    call_begin_optional: bool = False


class _State(enum.Enum):
    BETWEEN = 0
    HEADER = 1
    NAME_LINE = 2
    OPEN_FENCE = 3  # before the arguments: an optional ```json
    ARGUMENTS = 4
    CLOSE_FENCE = 5  # after the arguments: an optional ```
    CALL_END = 6


class SectionRegion:
    """Reads calls until the section's end marker (or the end of the output)."""

    __slots__ = (
        "_args",
        "_call",
        "_ctx",
        "_header",
        "_header_length",
        "_markers",
        "_read_header",
        "_seen",
        "_state",
    )

    def __init__(
        self,
        ctx: Context,
        markers: SectionMarkers,
        read_header: HeaderReader,
        opener: str = "",
    ) -> None:
        self._ctx = ctx
        self._markers = markers
        self._read_header = read_header
        self._state = _State.BETWEEN
        self._header: list[str] = []
        self._header_length = 0
        self._call: Call | None = None
        self._args: ArgumentStream | None = None
        self._seen = False  # a call marker was seen: the section is real
        if opener == markers.call_begin:
            # A call without its section (Kimi K2 writes them): the opener began the call,
            # which is real once its header's separator is read (else the text stays).
            self._state = _State.HEADER

    def _begin_call(self, pos: int, implicit: bool = False) -> None:
        # A call without its begin token is real only once its header's separator is read.
        self._seen = self._seen or not implicit
        self._state = _State.HEADER
        self._header.clear()
        self._ctx.mark(pos)

    @property
    def may_fallback(self) -> bool:
        return not self._seen

    def feed(self, buf: str, pos: int, final: bool) -> tuple[int, Status]:
        while True:
            state = self._state
            if state is _State.BETWEEN:
                pos, status = self._between(buf, pos, final)
            elif state is _State.HEADER:
                pos, status = self._read_header_text(buf, pos, final)
            elif state is _State.NAME_LINE:
                pos, status = self._name_line(buf, pos, final)
            elif state is _State.OPEN_FENCE:
                pos, status = self._open_fence(buf, pos, final)
            elif state is _State.ARGUMENTS:
                pos, status = self._arguments(buf, pos, final)
            elif state is _State.CLOSE_FENCE:
                pos, status = self._close_fence(buf, pos, final)
            else:
                pos, status = self._call_end(buf, pos, final)
            if status is not None:
                return pos, status

    def _between(self, buf: str, pos: int, final: bool) -> tuple[int, Status | None]:
        markers = self._markers
        pos = skip_whitespace(buf, pos)
        if pos >= len(buf):
            return pos, (self._end_status() if final else Status.CONTINUE)
        for marker, state in ((markers.call_begin, _State.HEADER), (markers.section_end, None)):
            at = starts_or_partial(buf, pos, marker)
            if at:
                if state is None:
                    return pos + len(marker), self._end_status()
                self._begin_call(pos)
                return pos + len(marker), None
            if at is None and not final:
                return pos, Status.CONTINUE
        if markers.call_begin_optional and (buf[pos].isalnum() or buf[pos] == "_"):
            # A header begins with its name (or "function"); another token is no call.
            self._begin_call(pos, implicit=True)
            return pos, None
        return pos, self._end_status()

    def _end_status(self) -> Status:
        return Status.DONE if self._seen else Status.FALLBACK

    def _read_header_text(self, buf: str, pos: int, final: bool) -> tuple[int, Status | None]:
        markers = self._markers
        # A header is short: only so much text is searched for its end, wherever the
        # deltas happen to be cut.
        limit = pos + _MAX_HEADER - self._header_length
        found, safe = find_marker(buf, pos, markers.separator, limit + len(markers.separator))
        ended, end_safe = find_marker(buf, pos, markers.call_end, limit + len(markers.call_end))
        found = found if found < limit else -1
        ended = ended if ended < limit else -1
        if ended >= 0 and (found < 0 or ended < found):
            # A call that closed before its header did: nothing to read, skip it.
            self._header.clear()
            self._header_length = 0
            self._state = _State.BETWEEN
            return ended + len(markers.call_end), None
        if found < 0:
            stop = min(safe, end_safe, limit)
            if stop >= limit or final:
                # No separator where a header ends: what was read is not a call.
                return (stop if stop >= limit else len(buf)), self._end_status()
            self._header.append(buf[pos:stop])
            self._header_length += stop - pos
            return stop, Status.CONTINUE
        self._header.append(buf[pos:found])
        self._seen = True
        header_text = "".join(self._header)
        self._header_length = 0
        header = self._read_header(header_text.strip())
        self._header.clear()
        call = Call(self._ctx)
        if header is None:
            call.reject(f"the call's header {header_text.strip()!r} names no tool")
        else:
            call.native_id = header.native_id
            if header.name is not None:
                call.set_name(header.name)
        self._call = call
        self._args = ArgumentStream(call)
        if header is not None and header.name_line_follows:
            self._state = _State.NAME_LINE
        else:
            self._state = _State.OPEN_FENCE
        return found + len(markers.separator), None

    def _name_line(self, buf: str, pos: int, final: bool) -> tuple[int, Status | None]:
        newline = buf.find("\n", pos)
        if newline < 0 and not final:
            self._header.append(buf[pos:])
            return len(buf), Status.CONTINUE
        stop = newline if newline >= 0 else len(buf)
        name = ("".join(self._header) + buf[pos:stop]).strip()
        self._header.clear()
        assert self._call is not None
        if name:
            self._call.set_name(name)
        else:
            self._call.reject("the call names no tool")
        self._state = _State.OPEN_FENCE
        return stop, None

    # A fence is looked for once, in its own state: a second ``` after the first
    # must read the same whether or not a delta ended between them.

    def _open_fence(self, buf: str, pos: int, final: bool) -> tuple[int, Status | None]:
        pos = skip_whitespace(buf, pos)
        fence = starts_or_partial(buf, pos, "```json")
        if fence is None and not final:
            return pos, Status.CONTINUE
        self._state = _State.ARGUMENTS
        return (pos + len("```json") if fence else pos), None

    def _arguments(self, buf: str, pos: int, final: bool) -> tuple[int, Status | None]:
        args = self._args
        assert args is not None
        pos, other = args.feed(buf, pos, final)
        if args.done or other is not None or final:
            args.finish()
            self._state = _State.CLOSE_FENCE
            return pos, None
        return pos, Status.CONTINUE

    def _close_fence(self, buf: str, pos: int, final: bool) -> tuple[int, Status | None]:
        pos = skip_whitespace(buf, pos)
        fence = starts_or_partial(buf, pos, "```")
        if fence is None and not final:
            return pos, Status.CONTINUE
        self._state = _State.CALL_END
        return (pos + 3 if fence else pos), None

    def _call_end(self, buf: str, pos: int, final: bool) -> tuple[int, Status | None]:
        markers = self._markers
        pos = skip_whitespace(buf, pos)
        at_end = starts_or_partial(buf, pos, markers.call_end)
        if at_end is None and not final:
            return pos, Status.CONTINUE
        end = pos + len(markers.call_end) if at_end else pos
        self._end_call(end)
        self._state = _State.BETWEEN
        return end, None

    def _end_call(self, pos: int) -> None:
        call = self._call
        self._call = None
        self._args = None
        if call is None:
            return
        if call.name is None:
            # Never given to a tool by the shape of its arguments: that would invent it.
            call.reject("the call names no tool")
        call.close(pos)
