"""Llama 3.1/3.3 after ``<|python_tag|>``: built-in tool calls, or JSON calls.

``<|python_tag|>brave_search.call(query="…")`` (optionally ended by
``<|eom_id|>``) calls the built-in tool ``brave_search`` with Python keyword
arguments. The same tag also precedes Llama 3's JSON calls
(``{"name": …, "parameters": …}``, several joined by ``;``), so what follows
the tag decides which region reads it.
"""

from __future__ import annotations

from toolrelay.formats.base import Format
from toolrelay.formats.jsoncalls import JsonCallsOptions, json_opener
from toolrelay.formats.markup import bare_token, stray_token
from toolrelay.formats.pythonic import PyCallsOptions, call_follows, py_opener

_TAG = "<|python_tag|>"


def _json_follows(following: str) -> bool | None:
    stripped = following.lstrip()
    if not stripped:
        return None
    return stripped[0] == "{"


def _builtin_call_follows(following: str) -> bool | None:
    return call_follows(following, leading_space=True, suffix=".call")


FORMAT = Format(
    name="llama3_builtin",
    families="Llama 3.1/3.3 built-in tools",
    description='<|python_tag|>brave_search.call(query="…")<|eom_id|>, or JSON calls after the tag',
    openers=(
        json_opener(
            _TAG,
            JsonCallsOptions(end_marker=None, marked=True, several=True),
            sniff=_json_follows,
        ),
        py_opener(
            _TAG,
            PyCallsOptions(end_marker="<|eom_id|>", name_suffix=".call", single=True),
            sniff=_builtin_call_follows,
        ),
        bare_token(_TAG),  # raw code or prose after the tag: the text is content
        stray_token("<|eom_id|>"),
    ),
    tokens=(_TAG, "<|eom_id|>"),
)
