"""Liquid LFM2 / LFM2.5: calls between ``<|tool_call_start|>`` and ``<|tool_call_end|>``.

The models' own syntax, which their chat templates and llama.cpp's parser
use, is a Python list of calls: ``<|tool_call_start|>[get_weather(city="Oslo"),
get_time()]<|tool_call_end|>`` (JSON literals ``true``/``null`` allowed).
Asked for JSON in the system prompt, LFM2 writes a JSON array of call
objects instead: ``<|tool_call_start|>[{"name": …, "arguments": …}]<|tool_call_end|>``.
What follows the marker decides which one it is.
"""

from __future__ import annotations

from toolrelay.formats.base import Format
from toolrelay.formats.jsoncalls import JsonCallsOptions, json_opener
from toolrelay.formats.pythonic import PyCallsOptions, py_opener

_START = "<|tool_call_start|>"
_END = "<|tool_call_end|>"


def _json_follows(following: str) -> bool | None:
    """A JSON body: '{', or '[' then '{' (a Python list begins with a name)."""
    stripped = following.lstrip()
    if not stripped:
        return None
    if stripped[0] != "[":
        return stripped[0] == "{"
    rest = stripped[1:].lstrip()
    return (rest[0] == "{") if rest else None


FORMAT = Format(
    name="lfm2",
    families="Liquid LFM2, LFM2.5",
    description="<|tool_call_start|>[get_weather(city='Oslo')]<|tool_call_end|> (or a JSON array)",
    openers=(
        json_opener(_START, JsonCallsOptions(end_marker=_END), sniff=_json_follows),
        py_opener(_START, PyCallsOptions(end_marker=_END)),
    ),
    # (The end token is also Kimi K2's call end, which a malformed Kimi section shows as written.)
    tokens=(_START,),
)
