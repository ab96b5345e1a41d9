"""Functionary v3.2: recipient lines. ``>>>get_weather\\n{"city": "Oslo"}``.

Each segment of a MeetKai Functionary v3.2 turn names its recipient on a
line of its own: ``all`` for text to the user, ``python`` for code to run,
any other name for a tool whose JSON arguments follow. Later segments start
with ``>>>``. Only ``>>>NAME\\n`` opens a call here (a bare ``NAME\\n`` line
is far too common in prose), and the ``all\\n`` line is markup only when it
opens the output.
"""

from __future__ import annotations

import enum
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
    skip_whitespace,
)
from toolrelay.repair import escape_json_text

_MARKER = ">>>"
_MAX_NAME = 64
_WORD_RUN = re.compile(r"\w*")


class _At(enum.Enum):
    NAME = 0  # the recipient, up to the end of its line
    JSON = 1  # a tool's arguments
    CODE = 2  # python: raw code up to the next recipient


class RecipientRegion:
    """One ``>>>RECIPIENT\\n…`` segment."""

    __slots__ = ("_args", "_at", "_call", "_ctx", "_name", "_space")

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._at = _At.NAME
        self._name: list[str] = []
        self._call: Call | None = None
        self._args: ArgumentStream | None = None
        self._space = ""  # trailing whitespace of the code, held: it goes only if code follows

    @property
    def may_fallback(self) -> bool:
        if self._at is _At.NAME:
            return True
        return self._args is not None and not self._args.started

    def feed(self, buf: str, pos: int, final: bool) -> tuple[int, Status]:
        if self._at is _At.NAME:
            pos, status = self._recipient(buf, pos, final)
            if status is not None:
                return pos, status
        if self._at is _At.JSON:
            return self._json(buf, pos, final)
        return self._code(buf, pos, final)

    def _recipient(self, buf: str, pos: int, final: bool) -> tuple[int, Status | None]:
        run = _WORD_RUN.match(buf, pos)
        stop = run.end() if run else pos
        self._name.append(buf[pos:stop])
        name = "".join(self._name)
        if len(name) > _MAX_NAME:
            return stop, Status.FALLBACK
        if stop >= len(buf):
            return stop, (Status.FALLBACK if final else Status.CONTINUE)
        if buf[stop] != "\n" or not name:
            return stop, Status.FALLBACK  # '>>> print(x)' in a REPL transcript, say
        pos = stop + 1
        if name == "all":
            return pos, Status.DONE  # text for the user follows: content
        call = Call(self._ctx)
        self._call = call
        if name == "python":
            if call.set_name(name):
                call.start()
            call.arguments('{"code":"')
            self._at = _At.CODE
        else:
            call.set_name(name)
            self._args = ArgumentStream(call)
            self._at = _At.JSON
        return pos, None

    def _json(self, buf: str, pos: int, final: bool) -> tuple[int, Status]:
        args = self._args
        call = self._call
        assert args is not None and call is not None
        if not args.started:
            pos = skip_whitespace(buf, pos)
            if pos >= len(buf):
                return pos, (Status.FALLBACK if final else Status.CONTINUE)
        pos, other = args.feed(buf, pos, final)
        if not args.started:
            if other is not None:
                return pos, Status.FALLBACK  # a name line not followed by arguments
            return pos, (Status.FALLBACK if final else Status.CONTINUE)
        if args.done or other is not None or final:
            args.finish()
            call.close(pos)
            return pos, Status.DONE
        return pos, Status.CONTINUE

    def _code(self, buf: str, pos: int, final: bool) -> tuple[int, Status]:
        call = self._call
        assert call is not None
        found, safe = find_marker(buf, pos, _MARKER)
        stop = found if found >= 0 else (len(buf) if final else safe)
        text = self._space + buf[pos:stop]
        body = text.rstrip()
        self._space = text[len(body) :]
        call.arguments(escape_json_text(body))
        if found < 0 and not final:
            return stop, Status.CONTINUE
        call.arguments('"}')
        call.close(stop)
        return stop, Status.DONE


class _AllPrefix:
    """``all\\n`` opening the output: the recipient line of a text answer."""

    __slots__ = ("_markup",)

    def __init__(self, ctx: Context) -> None:
        self._markup = ctx.at_start

    def feed(self, buf: str, pos: int, final: bool) -> tuple[int, Status]:
        return pos, Status.DONE if self._markup else Status.FALLBACK


def _recipient(ctx: Context, _marker: str) -> Region:
    return RecipientRegion(ctx)


def _all_prefix(ctx: Context, _marker: str) -> Region:
    return _AllPrefix(ctx)


FORMAT = Format(
    name="functionary_v3_2",
    families="MeetKai Functionary v3.2",
    description='>>>get_weather\\n{"city": "Oslo"}, >>>python\\n<code>, all\\n<text>',
    openers=(Opener(_MARKER, _recipient), Opener("all\n", _all_prefix)),
)
