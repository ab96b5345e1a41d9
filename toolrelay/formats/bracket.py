"""``[TOOL_CALL]{"name": …, "arguments": {…}}[/TOOL_CALL]``: toolrelay's rescue format.

The rescue prompt asks for this format because a server with a
``<tool_call>`` parser or stop token cannot intercept it. Models leak
``<tool_call>``/``<arguments>`` tags into the block and write the shorthand
``{"get_weather", "arguments": {…}}``; both are repaired. A call to a tool
without parameters may leave ``arguments`` out.
"""

from __future__ import annotations

from toolrelay.formats.base import Format
from toolrelay.formats.jsoncalls import JsonCallsOptions, json_opener

FORMAT = Format(
    name="bracket",
    description="[TOOL_CALL]{json}[/TOOL_CALL] (toolrelay's rescue prompt format)",
    openers=(json_opener("[TOOL_CALL]", JsonCallsOptions(end_marker="[/TOOL_CALL]")),),
)
