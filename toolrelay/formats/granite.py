"""Granite: ``<|tool_call|>[{json}, …]`` (3.0, a special token) and granite-20b-fc's
``<function_call> {json}`` repeated. Granite 3.1 writes ``<tool_call>[…]``, which Hermes reads."""

from __future__ import annotations

from toolrelay.formats.base import Format
from toolrelay.formats.jsoncalls import JsonCallsOptions, json_opener

FORMAT = Format(
    name="granite",
    families="Granite 3.0, granite-20b-functioncalling",
    description="<|tool_call|>[{json}] (Granite 3.x) or <function_call> {json} (granite-20b-fc)",
    openers=(
        json_opener("<|tool_call|>", JsonCallsOptions()),
        json_opener("<function_call>", JsonCallsOptions()),
    ),
    tokens=("<|tool_call|>",),
)
