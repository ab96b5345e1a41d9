"""gpt-oss Harmony: channels carry reasoning, answers and calls.

``<|channel|>analysis<|message|>…<|end|>`` is reasoning;
``<|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json``
``<|message|>{json}<|call|>`` is a call; ``<|channel|>final<|message|>…`` is
the answer. The recipient may sit after the channel (as above) or before it,
in the role header: ``<|start|>assistant to=functions.NAME<|channel|>…`` —
and since the prompt ends with ``<|start|>assistant``, the output itself may
begin with ``to=functions.NAME<|channel|>…``. ``to=assistant`` (a stray
commentary header) names no tool. Blanks around tokens and around ``=`` are
accepted, as fine-tunes write them.

A message ends at ``<|end|>``, ``<|call|>`` or ``<|return|>``, or where the
next message's ``<|start|>`` or ``<|channel|>`` begins (a ``final`` message
written right after ``analysis`` without an ``<|end|>``). ``<|call|>`` is a
stop token: text after it was not generated for this turn and is dropped.
Harmony's tokens are markup wherever they stand.
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
from toolrelay.formats.markup import stray_token

_MESSAGE = "<|message|>"
_ENDS = ("<|end|>", "<|call|>", "<|return|>")
_NEXT_MESSAGE = ("<|start|>", "<|channel|>")  # end a message without being consumed
_END = re.compile("|".join(re.escape(marker) for marker in _ENDS))
_END_OR_NEXT = re.compile("|".join(re.escape(marker) for marker in _ENDS + _NEXT_MESSAGE))
_RECIPIENT = re.compile(r"\bto\s*=\s*([\w\-.]+(?:\s*\.\s*[\w\-]+)*)")
_NOT_TOOLS = frozenset({"assistant", "user", "all"})
_MAX_HEADER = 256


class HarmonyRegion:
    """One Harmony message: header up to ``<|message|>``, then its body."""

    __slots__ = (
        "_args",
        "_call",
        "_ctx",
        "_header",
        "_header_length",
        "_kind",
        "_opener",
    )

    def __init__(self, ctx: Context, opener: str) -> None:
        self._ctx = ctx
        self._opener = opener
        # The recipient opener is part of the header it opens.
        self._header: list[str] = [opener] if "to=" in opener else []
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
        if self._kind == "content":
            # An answer (final, or a commentary preamble) is read as any text is: the
            # parser finds what markup is in it, and its end token is dropped as markup.
            return pos, Status.DONE
        end, marker_len = _body_end(buf, pos, _END_OR_NEXT)
        stop = end if end >= 0 else (len(buf) if final else _safe_body_end(buf, pos))
        self._ctx.reasoning(buf[pos:stop])
        if end >= 0:
            consumed = marker_len if buf.startswith(_ENDS, end) else 0
            return end + consumed, Status.DONE
        return stop, (Status.DONE if final else Status.CONTINUE)

    def _classify(self, header: str) -> None:
        recipient = _RECIPIENT.search(header)
        name = "" if recipient is None else re.sub(r"\s+", "", recipient.group(1))
        if name and name not in _NOT_TOOLS:
            self._kind = "call"
            call = Call(self._ctx)
            call.set_name(name.removeprefix("functions."))
            self._call = call
            self._args = ArgumentStream(call)
        else:
            self._kind = "reasoning" if "analysis" in header else "content"
            self._ctx.unmark()  # no call in this message

    def _call_body(self, buf: str, pos: int, final: bool) -> tuple[int, Status]:
        args = self._args
        call = self._call
        assert args is not None and call is not None
        if not args.done:
            pos, other = args.feed(buf, pos, final)
            if not (args.done or other is not None or final):
                return pos, Status.CONTINUE
            args.finish()
        end, marker_len = _body_end(buf, pos, _END)
        if end < 0 and not final:
            return _safe_body_end(buf, pos), Status.CONTINUE
        close_at = end + marker_len if end >= 0 else len(buf)
        call.close(close_at)
        if end >= 0 and buf.startswith("<|call|>", end):
            self._kind = "stopped"
            return self.feed(buf, close_at, final)
        return close_at, Status.DONE


def _body_end(buf: str, pos: int, ends: re.Pattern[str]) -> tuple[int, int]:
    """The first marker of ``ends`` at or after ``pos``, and its length."""
    found = ends.search(buf, pos)
    return (-1, 0) if found is None else (found.start(), found.end() - found.start())


def _safe_body_end(buf: str, pos: int) -> int:
    return min(find_marker(buf, pos, marker)[1] for marker in _ENDS + _NEXT_MESSAGE)


def _region(ctx: Context, marker: str) -> Region:
    return HarmonyRegion(ctx, marker)


FORMAT = Format(
    name="harmony",
    families="gpt-oss-20b/120b and fine-tunes",
    description="gpt-oss Harmony: <|channel|>commentary to=functions.NAME …{json}<|call|>",
    openers=(
        Opener("<|start|>", _region),
        Opener("<|channel|>", _region),
        # The role header's recipient, when the output starts in it: " to=functions.X…".
        Opener(" to=functions.", _region),
        Opener("to=functions.", _region),
        *(stray_token(marker) for marker in (*_ENDS, _MESSAGE, "<|constrain|>")),
    ),
    tokens=("<|start|>", "<|channel|>", _MESSAGE, *_ENDS, "<|constrain|>"),
)
