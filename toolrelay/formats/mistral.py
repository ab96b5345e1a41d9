"""Mistral: ``[TOOL_CALLS]`` then a JSON array (before tokenizer v11) or ``NAME{json}`` (v11+).

Mistral 7B v0.3, Mixtral, Nemo and Small ≤3.1 write
``[TOOL_CALLS] [{"name": …, "arguments": …}]`` (Nemo adds a 9-character
``id``). Small 3.2, Magistral, Devstral and Ministral 3 write
``[TOOL_CALLS]NAME[ARGS]{json}``, once per call (``[ARGS]`` is left out by
older v11 tokenizers); Small 3.2's template puts the call's id in between:
``[TOOL_CALLS]NAME[CALL_ID]abcdefghi[ARGS]{json}``. A name that the output
ends on, or that the next ``[TOOL_CALLS]`` follows, is a call without
arguments. Some servers and fine-tunes close the calls with
``[/TOOL_CALLS]``: markup, dropped. ``[THINK]…[/THINK]`` is reasoning (see
``reasoning``). A ``[TOOL_CALLS]`` followed by none of these is not a call:
the marker is dropped and the text after it is content.
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
    skip_whitespace,
    starts_or_partial,
)
from toolrelay.formats.jsoncalls import JsonCallsOptions, json_opener
from toolrelay.formats.markup import stray_token

_MARKER = "[TOOL_CALLS]"
_CLOSER = "[/TOOL_CALLS]"
_CALL_ID = "[CALL_ID]"
_ARGS = "[ARGS]"
_NAME = re.compile(r"[A-Za-z_][\w\-.]*")
_NAME_REST = re.compile(r"[\w\-.]*")  # a name that began in an earlier delta
_ID = re.compile(r"[A-Za-z0-9]*")
_MAX_ID = 64


def _json_follows(following: str) -> bool | None:
    stripped = following.lstrip()
    if not stripped:
        return None
    return stripped[0] in "[{"


class NameThenJsonRegion:
    """``NAME[CALL_ID]id[ARGS]{json}`` after the marker (each part but the name optional)."""

    __slots__ = ("_args", "_call", "_ctx", "_id", "_in_id", "_name")

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._name: list[str] = []
        self._id: list[str] = []
        self._in_id = False  # reading the id after [CALL_ID]
        self._call: Call | None = None
        self._args: ArgumentStream | None = None

    @property
    def may_fallback(self) -> bool:
        return self._args is None

    def feed(self, buf: str, pos: int, final: bool) -> tuple[int, Status]:
        if self._args is None:
            pos, status = self._head(buf, pos, final)
            if status is not None:
                return pos, status
        assert self._args is not None and self._call is not None
        args = self._args
        pos, other = args.feed(buf, pos, final)
        if args.done or other is not None or final:
            args.finish()
            self._call.close(pos)
            return pos, Status.DONE
        return pos, Status.CONTINUE

    def _head(self, buf: str, pos: int, final: bool) -> tuple[int, Status | None]:
        """The name, the id and ``[ARGS]``; None once the arguments begin."""
        if self._in_id:
            found = _ID.match(buf, pos)
            stop = found.end() if found else pos
            self._id.append(buf[pos:stop])
            if sum(map(len, self._id)) > _MAX_ID:
                return pos, Status.DROP_OPENER
            pos = stop
            if pos >= len(buf) and not final:
                return pos, Status.CONTINUE
            self._in_id = False
        elif not self._id:
            found = (_NAME_REST if any(self._name) else _NAME).match(buf, pos)
            stop = found.end() if found else pos
            self._name.append(buf[pos:stop])
            pos = stop
            if pos >= len(buf) and not final:
                return pos, Status.CONTINUE
        name = "".join(self._name)
        if not name:
            return pos, Status.DROP_OPENER
        after = skip_whitespace(buf, pos)
        for marker in (_CALL_ID, _ARGS, _MARKER, _CLOSER):
            at = starts_or_partial(buf, after, marker)
            if at is None and not final:
                return pos, Status.CONTINUE
            if not at:
                continue
            if marker == _CALL_ID and not self._id:
                self._in_id = True
                self._id.append("")
                return self._head(buf, after + len(marker), final)
            if marker == _ARGS:
                after = skip_whitespace(buf, after + len(marker))
                break
            if marker in (_MARKER, _CLOSER):
                self._no_arguments(name, after)  # the next call, or the end of the calls
                return after, Status.DONE
        if after >= len(buf):
            if not final:
                return pos, Status.CONTINUE
            self._no_arguments(name, after)  # a name the output ends on
            return after, Status.DONE
        if buf[after] != "{":
            return pos, Status.DROP_OPENER  # '[TOOL_CALLS]Hello there': not a call
        call = Call(self._ctx)
        call.native_id = "".join(self._id) or None
        call.set_name(name)
        self._call = call
        self._args = ArgumentStream(call)
        return after, None

    def _no_arguments(self, name: str, pos: int) -> None:
        call = Call(self._ctx)
        call.native_id = "".join(self._id) or None
        if call.set_name(name):
            reason = self._ctx.tools.without_arguments(call.name or "")
            if reason is not None:
                call.reject(reason)
        call.close(pos)


def _name_then_json(ctx: Context, _marker: str) -> Region:
    return NameThenJsonRegion(ctx)


FORMAT = Format(
    name="mistral",
    families="Mistral 7B v0.3, Mixtral, Nemo, Small 3.x, Magistral, Devstral, Ministral 3",
    description="[TOOL_CALLS] [{json}, …] (pre-v11) or [TOOL_CALLS]NAME[CALL_ID]id[ARGS]{json}",
    openers=(
        json_opener(_MARKER, JsonCallsOptions(several=False), sniff=_json_follows),
        Opener(_MARKER, _name_then_json),
        stray_token(_CLOSER),
    ),
    tokens=(_MARKER, _CLOSER, _CALL_ID, _ARGS),
)
