"""Cohere Command R7B: ``<|START_ACTION|>[{…}]<|END_ACTION|>``.

Each object is ``{"tool_call_id": …, "tool_name": …, "parameters": …}``.

Plain answers come wrapped in ``<|START_RESPONSE|>…<|END_RESPONSE|>``: those
two markers are dropped and the text between them is content. Thinking
(``<|START_THINKING|>``) is a reasoning wrapper.
"""

from __future__ import annotations

from toolrelay.formats.base import Context, Format, Opener, Region, Status
from toolrelay.formats.jsoncalls import JsonCallsOptions, json_opener


class _DropMarker:
    __slots__ = ()

    def feed(self, buf: str, pos: int, final: bool) -> tuple[int, Status]:
        return pos, Status.DONE


def _drop(_ctx: Context, _marker: str) -> Region:
    return _DropMarker()


FORMAT = Format(
    name="command_r7b",
    description="<|START_ACTION|>[{tool_call_id, tool_name, parameters}]<|END_ACTION|>",
    openers=(
        json_opener("<|START_ACTION|>", JsonCallsOptions(end_marker="<|END_ACTION|>")),
        Opener("<|START_RESPONSE|>", _drop),
        Opener("<|END_RESPONSE|>", _drop),
    ),
)
