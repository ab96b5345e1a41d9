"""AI21 Jamba: ``<tool_calls>[{json}, …]</tool_calls>``."""

from __future__ import annotations

from toolrelay.formats.base import Format
from toolrelay.formats.jsoncalls import JsonCallsOptions, json_opener

FORMAT = Format(
    name="jamba",
    families="AI21 Jamba 1.5+",
    description="<tool_calls>[{json}, …]</tool_calls>",
    openers=(json_opener("<tool_calls>", JsonCallsOptions(end_marker="</tool_calls>")),),
    tokens=("</tool_calls>",),
)
