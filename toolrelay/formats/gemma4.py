"""Gemma 4: ``<|tool_call>call:get_weather{city:<|"|>Oslo<|"|>}<tool_call|>``.

FunctionGemma's call syntax with ``<|"|>`` as the string delimiter; the
engine is ``functiongemma.DslCallRegion``. Gemma 4's template delimits every
string and nothing else: a delimited value is a string whatever it spells
(unless the tool's schema types it), and a bare ``None``, which the template
writes for a null item of a list, is null.
"""

from __future__ import annotations

from toolrelay.formats.base import Format
from toolrelay.formats.functiongemma import DslOptions, dsl_opener
from toolrelay.formats.markup import stray_token

FORMAT = Format(
    name="gemma4",
    families="Gemma 4",
    description='<|tool_call>call:get_weather{city:<|"|>Oslo<|"|>}<tool_call|>',
    openers=(
        dsl_opener(
            "<|tool_call>",
            DslOptions(delimiter='<|"|>', end_marker="<tool_call|>", strings_delimited=True),
        ),
        stray_token("<tool_call|>"),
    ),
    tokens=("<|tool_call>", "<tool_call|>", '<|"|>'),
)
