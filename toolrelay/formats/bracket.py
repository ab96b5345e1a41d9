"""``[TOOL_CALL]{"name": …, "arguments": {…}}[/TOOL_CALL]``: toolrelay's rescue format.

The rescue prompt asks for this format because a server with a
``<tool_call>`` parser or stop token cannot intercept it. Models leak
``<tool_call>``/``<arguments>`` tags into the block and write the shorthand
``{"get_weather", "arguments": {…}}``; both are repaired. A call to a tool
without parameters may leave ``arguments`` out. Once a block has been met,
fenced JSON is no longer read for calls (seed 000's fallback; see
``fenced``).
"""

from __future__ import annotations

from toolrelay.formats.base import Context, Format, Opener, Region
from toolrelay.formats.jsoncalls import JsonCallsOptions, json_opener

MARKER = "[TOOL_CALL]"
_BLOCK = json_opener(MARKER, JsonCallsOptions(end_marker="[/TOOL_CALL]")).region


def _region(ctx: Context, marker: str) -> Region:
    ctx.bracket_seen = True
    return _BLOCK(ctx, marker)


FORMAT = Format(
    name="bracket",
    families="toolrelay's rescue prompt (any model asked for it)",
    description="[TOOL_CALL]{json}[/TOOL_CALL] (toolrelay's rescue prompt format)",
    openers=(Opener(MARKER, _region),),
    tokens=(MARKER, "[/TOOL_CALL]"),
)
