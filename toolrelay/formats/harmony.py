"""gpt-oss Harmony: channels carry reasoning, answers and calls.

``<|channel|>analysis<|message|>…<|end|>`` is reasoning;
``<|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json``
``<|message|>{json}<|call|>`` is a call (the recipient may also sit in the role header, before
``<|channel|>``); ``<|channel|>final<|message|>…`` is the answer. The
message ends at ``<|end|>``, ``<|call|>`` or ``<|return|>``. ``<|call|>`` is
a stop token: text after it was not generated for this turn and is dropped.
"""

from __future__ import annotations

import re

from toolrelay.formats.base import (
    ArgumentStream,
    Call,
    Context,
    Format,
    Opener,
    Region,
    Status,
    find_marker,
)

_MESSAGE = "<|message|>"
_ENDS = ("<|end|>", "<|call|>", "<|return|>")
_END = re.compile("|".join(re.escape(marker) for marker in _ENDS))
_RECIPIENT = re.compile(r"to=(?:functions\.)?([\w\-.]+)")
_MAX_HEADER = 256


class HarmonyRegion:
    """One Harmony message: header up to ``<|message|>``, then its body."""

    __slots__ = ("_args", "_call", "_ctx", "_header", "_header_length", "_kind")

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._header: list[str] = []
        self._header_length = 0
        # "", then "call", "reasoning" or "content" once the header is read; "stopped"
        # after <|call|>.
        self._kind = ""
        self._call: Call | None = None
        self._args: ArgumentStream | None = None

    @property
    def may_fallback(self) -> bool:
        return not self._kind

    def feed(self, buf: str, pos: int, final: bool) -> tuple[int, Status]:
        if self._kind == "stopped":
            return len(buf), (Status.DONE if final else Status.CONTINUE)
        if not self._kind:
            limit = pos + _MAX_HEADER - self._header_length + len(_MESSAGE)
            found, safe = find_marker(buf, pos, _MESSAGE, limit)
            stop = found if found >= 0 else safe
            read = self._header_length + stop - pos
            if read > _MAX_HEADER or (found < 0 and final):
                # No <|message|> where a header ends: the marker was text, not a message.
                return pos, Status.FALLBACK
            self._header.append(buf[pos:stop])
            self._header_length = read
            if found < 0:
                return stop, Status.CONTINUE
            pos = found + len(_MESSAGE)
            self._classify("".join(self._header))
        if self._kind == "call":
            return self._call_body(buf, pos, final)
        end, marker_len = _body_end(buf, pos, final)
        stop = end if end >= 0 else (len(buf) if final else _safe_body_end(buf, pos))
        emit = self._ctx.reasoning if self._kind == "reasoning" else self._ctx.content
        emit(buf[pos:stop])
        if end >= 0:
            return end + marker_len, Status.DONE
        return stop, (Status.DONE if final else Status.CONTINUE)

    def _classify(self, header: str) -> None:
        recipient = _RECIPIENT.search(header)
        if recipient is not None:
            self._kind = "call"
            call = Call(self._ctx)
            call.set_name(recipient.group(1))
            self._call = call
            self._args = ArgumentStream(call)
        elif "analysis" in header:
            self._kind = "reasoning"
        else:
            self._kind = "content"

    def _call_body(self, buf: str, pos: int, final: bool) -> tuple[int, Status]:
        args = self._args
        call = self._call
        assert args is not None and call is not None
        if not args.done:
            pos, other = args.feed(buf, pos, final)
            if not (args.done or other is not None or final):
                return pos, Status.CONTINUE
            args.finish()
            if not args.started:
                call.dropped = True
            call.end()
        end, marker_len = _body_end(buf, pos, final)
        if end >= 0:
            if buf.startswith("<|call|>", end):
                self._kind = "stopped"
                return self.feed(buf, end + marker_len, final)
            return end + marker_len, Status.DONE
        if final:
            return len(buf), Status.DONE
        return _safe_body_end(buf, pos), Status.CONTINUE


def _body_end(buf: str, pos: int, final: bool) -> tuple[int, int]:
    """The first message-ending marker at or after ``pos``, and its length."""
    found = _END.search(buf, pos)
    return (-1, 0) if found is None else (found.start(), found.end() - found.start())


def _safe_body_end(buf: str, pos: int) -> int:
    return min(find_marker(buf, pos, marker)[1] for marker in _ENDS)


def _region(ctx: Context, _marker: str) -> Region:
    return HarmonyRegion(ctx)


FORMAT = Format(
    name="harmony",
    description="gpt-oss Harmony: <|channel|>commentary to=functions.NAME …{json}<|call|>",
    openers=(
        Opener("<|start|>assistant", _region),
        Opener("<|channel|>", _region),
    ),
)
