"""Mistral: ``[TOOL_CALLS]`` then a JSON array (before tokenizer v11) or ``NAME{json}`` (v11+).

Mistral 7B v0.3, Mixtral, Nemo and Small ≤3.1 write
``[TOOL_CALLS] [{"name": …, "arguments": …}]`` (Nemo adds a 9-character
``id``). Small 3.2, Magistral and Devstral write ``[TOOL_CALLS]NAME{json}``,
once per call, and newer tokenizers put ``[ARGS]`` between name and JSON.
A ``[TOOL_CALLS]`` followed by neither is not a call: the marker is dropped
and the text after it is content.
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

_MARKER = "[TOOL_CALLS]"
_NAME = re.compile(r"[A-Za-z_][\w\-.]*")
_NAME_REST = re.compile(r"[\w\-.]*")  # a name that began in an earlier delta


def _json_follows(following: str) -> bool | None:
    stripped = following.lstrip()
    if not stripped:
        return None
    return stripped[0] in "[{"


class NameThenJsonRegion:
    """``NAME{json}`` or ``NAME[ARGS]{json}`` after the marker: one call."""

    __slots__ = ("_args", "_call", "_ctx", "_name")

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._name: list[str] = []
        self._call: Call | None = None
        self._args: ArgumentStream | None = None

    def feed(self, buf: str, pos: int, final: bool) -> tuple[int, Status]:
        if self._args is None:
            found = (_NAME_REST if any(self._name) else _NAME).match(buf, pos)
            stop = found.end() if found else pos
            self._name.append(buf[pos:stop])
            pos = stop
            if pos >= len(buf) and not final:
                return pos, Status.CONTINUE
            after = skip_whitespace(buf, pos)
            marker = starts_or_partial(buf, after, "[ARGS]")
            if marker is None and not final:
                return pos, Status.CONTINUE
            if marker:
                after = skip_whitespace(buf, after + len("[ARGS]"))
            name = "".join(self._name)
            if after >= len(buf):
                if not final:
                    return pos, Status.CONTINUE
                return after, Status.DONE  # a name and nothing else: an unusable call
            if not name or buf[after] != "{":
                return pos, Status.DROP_OPENER if not name else Status.DONE
            call = Call(self._ctx)
            call.set_name(name)
            self._call = call
            self._args = ArgumentStream(call)
            pos = after
        pos, other = self._args.feed(buf, pos, final)
        if self._args.done or other is not None or final:
            self._args.finish()
            assert self._call is not None
            self._call.end()
            return pos, Status.DONE
        return pos, Status.CONTINUE


def _name_then_json(ctx: Context, _marker: str) -> Region:
    return NameThenJsonRegion(ctx)


FORMAT = Format(
    name="mistral",
    description="[TOOL_CALLS] [{json}, …] (pre-v11) or [TOOL_CALLS]NAME{json} (v11+)",
    openers=(
        json_opener(_MARKER, JsonCallsOptions(several=False), sniff=_json_follows),
        Opener(_MARKER, _name_then_json),
    ),
)
