"""Liquid LFM2 (JSON mode): ``<|tool_call_start|>[{json}, …]<|tool_call_end|>``."""

from __future__ import annotations

from toolrelay.formats.base import Format
from toolrelay.formats.jsoncalls import JsonCallsOptions, json_opener

FORMAT = Format(
    name="lfm2",
    description="<|tool_call_start|>[{json}]<|tool_call_end|>",
    openers=(json_opener("<|tool_call_start|>", JsonCallsOptions(end_marker="<|tool_call_end|>")),),
)
