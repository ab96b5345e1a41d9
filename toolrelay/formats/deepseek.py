"""DeepSeek V3/R1 and V3.1 special-token sections.

V3/R1: ``<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME``
then the arguments in a ```json fence, ``<｜tool▁call▁end｜>``, …,
``<｜tool▁calls▁end｜>``. V3.1 writes ``NAME<｜tool▁sep｜>{json}`` instead.
Either begin token may be left out, as R1's distills and V3.1 do: a call
with no section around it (``<｜tool▁call▁begin｜>`` opens it), and a call
whose header follows the section's token (or the last call's end) directly.
The bars are FULLWIDTH (U+FF5C) and the word separator is U+2581; some
Ollama templates spell the tokens with ASCII bars (``<|tool▁calls▁begin|>``),
and a model then writes every token of its section that way. A section
marker with no call in it is not a call, and stays content as it was.
"""

from __future__ import annotations

from toolrelay.formats.base import Context, Format, Opener, Region
from toolrelay.formats.sections import Header, SectionMarkers, SectionRegion


def _markers(bar: str) -> SectionMarkers:
    return SectionMarkers(
        call_begin=f"<{bar}tool▁call▁begin{bar}>",
        separator=f"<{bar}tool▁sep{bar}>",
        call_end=f"<{bar}tool▁call▁end{bar}>",
        section_end=f"<{bar}tool▁calls▁end{bar}>",
        call_begin_optional=True,
    )


_FULLWIDTH = _markers("｜")
_ASCII = _markers("|")


def _header(text: str) -> Header | None:
    if not text:
        return None
    if text == "function":
        return Header(name=None, name_line_follows=True)
    return Header(name=text)


def _region(ctx: Context, marker: str) -> Region:
    markers = _ASCII if marker.startswith("<|") else _FULLWIDTH
    return SectionRegion(ctx, markers, _header, opener=marker)


FORMAT = Format(
    name="deepseek",
    families="DeepSeek-V3/V3-0324, R1 and its distills, V3.1, V3.2-Exp",
    description="DeepSeek V3/R1/V3.1: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>…",
    openers=(
        Opener("<｜tool▁calls▁begin｜>", _region),
        Opener("<|tool▁calls▁begin|>", _region),
        Opener(_FULLWIDTH.call_begin, _region),
        Opener(_ASCII.call_begin, _region),
    ),
)
