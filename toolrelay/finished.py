"""The finished parse's fast path: one clean call, read without the state machine.

Most finished outputs that hold a call are one ``<tool_call>{"name": …,
"arguments": {…}}</tool_call>`` (or, asked by the rescue prompt, one
``[TOOL_CALL]{…}[/TOOL_CALL]``) with strict JSON inside, perhaps after a line
of prose. The stream parser reads such a call with the C decoder already
(``strict_json``) but then replays its tokens through the region's state
machine, a fixed cost of tens of microseconds that dominates short calls.

``parse_one_call`` answers that common case directly, or returns None and the
caller takes the stream parser. It answers only when every step the stream
parser would take is known, so the result is the same to the character (the
property tests in ``tests/core/test_finished_fast.py`` hold the two side by
side on generated near-misses):

- the first marker in the text is ``<tool_call>`` claimed by Hermes JSON, or
  ``[TOOL_CALL]`` (so the prose before it is content, as written); or, first,
  reasoning with no marker in it: a ``<think>…</think>`` block after nothing but
  blanks, or (the template opened the reasoning, or the ``</think>`` is an
  orphan) the text up to the first ``</think>``;
- between the markers, only JSON whitespace and one object ``strict_json``
  accepts, whose keys are exactly ``name`` (a string the tool set resolves) and
  ``arguments`` (an object), in that order;
- after the closing marker only JSON whitespace, which is content too; or no
  closing marker, the text ending after the object (and blanks).

Anything else (other reasoning tags, markup in the reasoning, single quotes, a
second call, text after the call, a name the tools do not declare) goes the
slow way, where the repairs and the rejections are.

A block of Qwen3-Coder's XML parameters (and the formats that share its engine:
MiMo, Seed-OSS, MiniMax-M2) in the same place, claimed by that format, is read
by ``toolrelay.finished_xml`` under the same rules around it.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

import orjson

from toolrelay.events import ParseResult, ToolCall
from toolrelay.finished_xml import DIALECTS, MARKERS, read_xml_call
from toolrelay.formats import bracket, hermes, opener_table
from toolrelay.formats.base import Opener
from toolrelay.formats.markers import OpenerTable
from toolrelay.names import ToolSet
from toolrelay.strictjson import strict_json

# The blocks read here, by opening marker: the closing marker, and the opener that
# must claim the marker (Hermes JSON; the rescue prompt's [TOOL_CALL] block), both
# a JSON calls region ended by that marker.
_BLOCKS: dict[str, tuple[str, Opener]] = {
    "<tool_call>": ("</tool_call>", hermes.FORMAT.openers[0]),
    bracket.MARKER: ("[/TOOL_CALL]", bracket.FORMAT.openers[0]),
}
_THINK_OPEN = "<think>"
_THINK_CLOSE = "</think>"
_BLANKS = re.compile(r"[ \t\r\n]*")  # what the region skips (``skip_whitespace``)
_ONLY_BLANKS = re.compile(r"[ \t\r\n]*\Z")
# Blanks after the marker beyond which the marker search no longer lets a sniff
# claim it (``markers._MAX_BLANKS``): far under it here, so no edge is shared.
_MAX_LEAD = 64
_APART = frozenset({"arguments"})
# Every block marker read here: a text without one goes the slow way at once.
_MARKERS = ("<tool_call>", bracket.MARKER, *sorted(MARKERS - {"<tool_call>"}))


@lru_cache(maxsize=64)
def _claimed(format_name: str) -> tuple[str, ...]:
    """The blocks whose marker, followed by ``{``, opens the block's own region under
    this format: its first claimant (one with a sniff takes a JSON bracket)."""
    openers = opener_table(format_name).openers
    return tuple(
        marker
        for marker, (_close, opener) in _BLOCKS.items()
        if openers.get(marker, (None,))[0] is opener
    )


def parse_one_call(
    text: str, tools: Iterable[Any] | None, format_name: str, reasoning_open: bool | None
) -> tuple[ParseResult, bool] | None:
    """``parse_output`` of ``text`` when it is one clean call block, perhaps after a
    plain ``<think>`` block, or None (take the slow path)."""
    if not any(marker in text for marker in _MARKERS):
        return None
    table = opener_table(format_name)
    # Markers are taken in order, each the first of any active format (reasoning tags
    # and their orphan closers included) from where the last one ended: what lies
    # between them holds no marker and is reasoning or content as written.
    found = table.pattern.search(text)
    if found is None:
        return None
    reasoning: str | None = None
    opened = bool(reasoning_open)
    lead = ""  # content before a think block
    prose_at = 0  # where the content before the call begins
    if found.group() == _THINK_CLOSE and reasoning_open is not False:
        # The output starts inside reasoning (said so, or found so by this orphan).
        reasoning, opened = text[: found.start()], True
    elif found.group() == _THINK_OPEN and not reasoning_open:
        lead = text[: found.start()]
        closing = table.pattern.search(text, found.end())
        if _ONLY_BLANKS.fullmatch(lead) is None or closing is None:
            return None
        if closing.group() != _THINK_CLOSE:
            return None
        reasoning, found = text[found.end() : closing.start()], closing
    elif reasoning_open:
        return None
    if reasoning is not None:
        prose_at = found.end()
        found = table.pattern.search(text, prose_at)
        if found is None:
            return None
    start, marker = found.start(), found.group()
    body = start + len(marker)
    value_at = _BLANKS.match(text, body).end()  # type: ignore[union-attr]
    head = lead + text[prose_at:start]
    if text.startswith("<", value_at) and marker in MARKERS:
        read = _xml_block(text, start, marker, table, tools)
        if read is None:
            return None
        call, tail, written_in = read
        return ParseResult([call], head + tail, reasoning or None, formats=[written_in]), opened
    if marker not in _claimed(format_name):
        return None
    close = _BLOCKS[marker][0]
    if value_at - body > _MAX_LEAD or not text.startswith("{", value_at):
        return None
    end = _find(text, close, value_at)
    if end < 0:
        # The closing marker left out (a server that stops on it): the region ends with
        # the text, and takes the blanks after the value with it.
        end, tail = len(text), ""
    else:
        tail = text[end + len(close) :]
        if _ONLY_BLANKS.fullmatch(tail) is None:
            return None
    # A string holding the end marker runs past ``end``: refused by the check below.
    decoded = strict_json(text, value_at, apart=_APART)
    if decoded is None or _BLANKS.match(text, decoded.end).end() != end:  # type: ignore[union-attr]
        return None
    value = decoded.value
    if type(value) is not dict or len(value) != 2:
        return None
    (name_key, raw_name), (arguments_key, arguments) = value.items()
    if name_key != "name" or arguments_key != "arguments":
        return None
    if type(raw_name) is not str or type(arguments) is not dict:
        return None
    name = ToolSet(tools).resolve(raw_name)
    if name is None:
        return None
    written = decoded.objects.get(id(arguments))
    arguments_json = (orjson.dumps(arguments) if written is None else written).decode()
    call = ToolCall(_first_call_id(), name, arguments, arguments_json)
    written_in = table.format_of[_BLOCKS[marker][1].region]
    return ParseResult([call], head + tail, reasoning or None, formats=[written_in]), opened


def _find(text: str, marker: str, start: int) -> int:
    """``text.find(marker, start)``, sooner where the marker's first character is rare
    before it (a finished call's end marker, after its arguments): one memchr."""
    first = text.find(marker[0], start)
    if first < 0 or text.startswith(marker, first):
        return first
    return text.find(marker, first)


def _first_call_id() -> str:
    """The id the stream parser's context gives its first call (``Context.new_id``)."""
    return f"call_{secrets.token_hex(8)}0"


def _xml_block(
    text: str, start: int, marker: str, table: OpenerTable, tools: Iterable[Any] | None
) -> tuple[ToolCall, str, str] | None:
    """The call of the XML-parameter block at ``start``, the content after it, and its
    format; None unless it is one clean call (``toolrelay.finished_xml``) followed by
    nothing but blanks."""
    region = table.opens(text, start, marker, True)
    if not region or region not in DIALECTS:
        return None
    dialect = DIALECTS[region]
    read = read_xml_call(text, start + len(marker), dialect, ToolSet(tools))
    if read is None:
        return None
    name, arguments, arguments_json, end = read
    tail = text[end:]
    if _ONLY_BLANKS.fullmatch(tail) is None:
        return None
    call = ToolCall(_first_call_id(), name, arguments, arguments_json)
    return call, tail, table.format_of[region]
