"""Meituan LongCat-Flash: Hermes's JSON call object in ``<longcat_tool_call>`` tags.

``<longcat_tool_call>{"name": "f", "arguments": {…}}</longcat_tool_call>``,
one block per call; a missing closing tag is read as in Hermes (the facts
are vLLM's ``longcat`` parser, a Hermes parser with these two tags).
"""

from __future__ import annotations

from toolrelay.formats.base import Format
from toolrelay.formats.jsoncalls import JsonCallsOptions, json_opener

FORMAT = Format(
    name="longcat",
    families="Meituan LongCat-Flash",
    description='<longcat_tool_call>{"name": …, "arguments": …}</longcat_tool_call>',
    openers=(
        json_opener("<longcat_tool_call>", JsonCallsOptions(end_marker="</longcat_tool_call>")),
    ),
    tokens=("<longcat_tool_call>", "</longcat_tool_call>"),
)
