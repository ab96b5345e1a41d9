"""Kimi K2: ``<|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:0
<|tool_call_argument_begin|>{json}<|tool_call_end|>…<|tool_calls_section_end|>``.

The header ``functions.NAME:IDX`` is also the call's id and is kept as the
OpenAI tool-call id. A bare ``IDX`` header lost its name, and a header
without ``:IDX`` is malformed: either call is rejected (never given to a tool
by the shape of its arguments, which would invent the call).

The section markers are optional, as in the servers' parsers: a
``<|tool_call_begin|>`` with no section around it opens a call, and a call
the output ends in needs no ``<|tool_call_end|>``.
"""

from __future__ import annotations

import re

from toolrelay.formats.base import Context, Format, Opener, Region
from toolrelay.formats.sections import Header, SectionMarkers, SectionRegion

_MARKERS = SectionMarkers(
    call_begin="<|tool_call_begin|>",
    separator="<|tool_call_argument_begin|>",
    call_end="<|tool_call_end|>",
    section_end="<|tool_calls_section_end|>",
)
_NAMED = re.compile(r"(?:functions\.)?([\w\-./]+?):(\d+)")


def _header(text: str) -> Header | None:
    named = _NAMED.fullmatch(text)
    if named is None:
        return None
    return Header(name=named.group(1), native_id=text)


def _region(ctx: Context, marker: str) -> Region:
    return SectionRegion(ctx, _MARKERS, _header, opener=marker)


FORMAT = Format(
    name="kimi_k2",
    families="Kimi K2, K2-Thinking",
    description="Kimi K2: <|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:0 …",
    openers=(
        Opener("<|tool_calls_section_begin|>", _region),
        Opener(_MARKERS.call_begin, _region),
    ),
)
