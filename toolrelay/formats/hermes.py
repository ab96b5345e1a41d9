"""Hermes: ``<tool_call>{"name": …, "arguments": {…}}</tool_call>``, and its drift.

Hermes 2 Pro/3, Qwen2.5/3, QwQ, Granite 4 and many fine-tunes. Lenient
variants seen in the wild are accepted too: ``<tools>``, ``<tool>``,
``<json>`` wrappers, several comma-separated calls in one block, a missing
closing tag, stringified arguments.
"""

from __future__ import annotations

from toolrelay.formats.base import Format
from toolrelay.formats.jsoncalls import JsonCallsOptions, json_opener


def starts_json(following: str) -> bool | None:
    stripped = following.lstrip()
    if not stripped:
        return None
    return stripped[0] in "{["


def _tagged(tag: str) -> JsonCallsOptions:
    return JsonCallsOptions(end_marker=f"</{tag}>")


FORMAT = Format(
    name="hermes",
    families="Hermes 2 Pro/3, Qwen2.5, Qwen3, QwQ, Granite 3.1/4, many fine-tunes",
    description='<tool_call>{"name": …, "arguments": …}</tool_call> (also <tools>, <tool>, <json>)',
    openers=(
        json_opener("<tool_call>", _tagged("tool_call"), sniff=starts_json),
        json_opener("<tools>", _tagged("tools"), sniff=starts_json),
        json_opener("<tool>", _tagged("tool"), sniff=starts_json),
        json_opener("<json>", _tagged("json"), sniff=starts_json),
        json_opener("<JSON>", _tagged("JSON"), sniff=starts_json),
    ),
    tokens=("</tool_call>",),
)
