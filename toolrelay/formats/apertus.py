"""Swiss AI Apertus: ``<|tools_prefix|>[{"NAME": {args}}, …]<|tools_suffix|>``.

The function name is the key of each object."""

from __future__ import annotations

from toolrelay.formats.base import Format
from toolrelay.formats.jsoncalls import JsonCallsOptions, json_opener

FORMAT = Format(
    name="apertus",
    families="Swiss AI Apertus",
    description='<|tools_prefix|>[{"NAME": {args}}]<|tools_suffix|>',
    openers=(
        json_opener(
            "<|tools_prefix|>",
            JsonCallsOptions(end_marker="<|tools_suffix|>", name_as_key=True),
        ),
    ),
    tokens=("<|tools_prefix|>", "<|tools_suffix|>"),
)
