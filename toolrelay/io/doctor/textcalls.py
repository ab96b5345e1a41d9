"""What a model's text says about it: the call format it writes, and whether
its output starts inside reasoning."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from toolrelay import parse_tool_calls
from toolrelay.formats import format_names
from toolrelay.formats.reasoning import WRAPPERS


def detect_format(text: str, tools: Sequence[Any]) -> str | None:
    """The format (a name of ``toolrelay parse --list-formats``) the text's calls
    are written in, or None when no single format reads a call from it.

    Several formats can read one text (bare JSON inside Hermes tags, the
    Qwen3-Coder body inside Seed-OSS tags): the one that leaves the least text
    behind is the one whose markup it is; on a tie the registry's order decides.
    """
    best: tuple[int, str] | None = None
    for name in format_names():
        parsed = parse_tool_calls(text, tools=tools, format=name)
        if parsed.calls and (best is None or len(parsed.content) < best[0]):
            best = (len(parsed.content), name)
    return best[1] if best else None


def opens_inside_reasoning(text: str) -> bool:
    """Whether the text closes a reasoning block it never opened: the chat
    template wrote the opening tag into the prompt."""
    for opener, closer in WRAPPERS:
        at = text.find(closer)
        if at >= 0 and opener not in text[:at]:
            return True
    return False
