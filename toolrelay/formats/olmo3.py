"""OLMo 3: ``<function_calls>get_weather(city='Oslo')\nget_time()</function_calls>``.

Python calls one a line, no list brackets; JSON literals (``null``,
``true``) are as welcome as Python's. Other formats may put XML in a
``<function_calls>`` block, so the block is OLMo's only when a call
``name(`` opens it.
"""

from __future__ import annotations

from toolrelay.formats.base import Format
from toolrelay.formats.pythonic import PyCallsOptions, call_follows, py_opener


def _calls_follow(following: str) -> bool | None:
    return call_follows(following, leading_space=True)


FORMAT = Format(
    name="olmo3",
    families="OLMo 3",
    description="<function_calls>get_weather(city='Oslo')\\nget_time()</function_calls>",
    openers=(
        py_opener(
            "<function_calls>",
            PyCallsOptions(end_marker="</function_calls>"),
            sniff=_calls_follow,
        ),
    ),
)
