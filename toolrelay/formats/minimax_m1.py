"""MiniMax-M1: ``<tool_calls>`` with one JSON call object per line, ``</tool_calls>``.

Multi-line objects are read too. Calls drafted inside ``<think>`` stay reasoning."""

from __future__ import annotations

from toolrelay.formats.base import Format
from toolrelay.formats.jsoncalls import JsonCallsOptions, json_opener

FORMAT = Format(
    name="minimax_m1",
    families="MiniMax-M1",
    description="<tool_calls>\\n{json}\\n{json}\\n</tool_calls>",
    openers=(json_opener("<tool_calls>", JsonCallsOptions(end_marker="</tool_calls>")),),
)
