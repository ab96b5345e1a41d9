"""DeepSeek V3/R1 and V3.1 special-token sections.

V3/R1: ``<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME``
then the arguments in a ```json fence, ``<｜tool▁call▁end｜>``, …,
``<｜tool▁calls▁end｜>``. V3.1 writes ``NAME<｜tool▁sep｜>{json}`` instead.
The bars are FULLWIDTH (U+FF5C) and the word separator is U+2581. A section
marker with no call in it is not a call, and stays content as it was.
"""

from __future__ import annotations

from toolrelay.formats.base import Context, Format, Opener, Region
from toolrelay.formats.sections import Header, SectionMarkers, SectionRegion

_MARKERS = SectionMarkers(
    call_begin="<｜tool▁call▁begin｜>",
    separator="<｜tool▁sep｜>",
    call_end="<｜tool▁call▁end｜>",
    section_end="<｜tool▁calls▁end｜>",
)


def _header(text: str) -> Header | None:
    if not text:
        return None
    if text == "function":
        return Header(name=None, name_line_follows=True)
    return Header(name=text)


def _region(ctx: Context, _marker: str) -> Region:
    return SectionRegion(ctx, _MARKERS, _header)


FORMAT = Format(
    name="deepseek",
    description="DeepSeek V3/R1/V3.1: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>…",
    openers=(Opener("<｜tool▁calls▁begin｜>", _region),),
)
