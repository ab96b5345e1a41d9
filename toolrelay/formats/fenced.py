"""Calls in fenced code blocks: ```json {"tool": …, "input": …} ``` and the like.

Models without a native format, and models that drift, wrap a call object
(or an array of them) in a Markdown fence. A fence whose body is not a call
stays content, untouched.
"""

from __future__ import annotations

from toolrelay.formats.base import Format
from toolrelay.formats.jsoncalls import JsonCallsOptions, json_opener

_FENCE_BODY = JsonCallsOptions(end_marker="```", marked=False, several=True)

FORMAT = Format(
    name="fenced_json",
    description='```json {"name"|"tool": …, "arguments"|"input": …} ``` in a code fence',
    openers=(
        json_opener("```json\n", _FENCE_BODY),
        json_opener("```json", _FENCE_BODY),
        json_opener("```tool_call\n", _FENCE_BODY),
        json_opener("```\n", _FENCE_BODY),
    ),
)
