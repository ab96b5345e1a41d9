"""Cohere Command R7B and Command A: ``<|START_ACTION|>[{…}]<|END_ACTION|>``.

Each object is ``{"tool_call_id": …, "tool_name": …, "parameters": …}``.

Plain answers come wrapped in ``<|START_RESPONSE|>…<|END_RESPONSE|>``
(Command R7B) or ``<|START_TEXT|>…<|END_TEXT|>`` (Command A, Cohere 2):
those markers are dropped and the text between them is content, as is the
turn's ``<|END_OF_TURN_TOKEN|>``. Thinking (``<|START_THINKING|>``) is a
reasoning wrapper, which ``<|START_TEXT|>`` also ends.
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
    families="Cohere Command R7B, Command A (Cohere 2)",
    description="<|START_ACTION|>[{tool_call_id, tool_name, parameters}]<|END_ACTION|>",
    openers=(
        json_opener("<|START_ACTION|>", JsonCallsOptions(end_marker="<|END_ACTION|>")),
        *(
            Opener(marker, _drop)
            for marker in (
                "<|START_RESPONSE|>",
                "<|END_RESPONSE|>",
                "<|START_TEXT|>",
                "<|END_TEXT|>",
                "<|END_OF_TURN_TOKEN|>",
            )
        ),
    ),
    tokens=(
        "<|START_ACTION|>",
        "<|END_ACTION|>",
        "<|START_RESPONSE|>",
        "<|END_RESPONSE|>",
        "<|START_TEXT|>",
        "<|END_TEXT|>",
        "<|END_OF_TURN_TOKEN|>",
    ),
)
