"""What a model echoes from its prompt: tool-result wrappers and toolrelay's directive marker.

Weak models repeat the prompt's framing. A chat template hands a tool result
back inside a wrapper (``<tool_response>…</tool_response>`` for Hermes and
Qwen, ``[TOOL_RESULTS]…`` for Mistral, …; the rescue path's own
``[TOOL_RESULT name=… id=…]…[/TOOL_RESULT]``), and a model that writes one
in its answer is repeating the result, not answering: the whole wrapper is
markup. It ends at its closing marker, else at the first blank line (where
an answer would start a new paragraph), else with the output. The rescue
path's ``[SYSTEM DIRECTIVE]`` marker is toolrelay's own and dropped wherever
it stands; the directive's text itself is removed by :mod:`toolrelay.echo`.
"""

from __future__ import annotations

from toolrelay.formats.base import Context, Format, Opener, Region, Status, find_marker
from toolrelay.formats.markup import stray_token

DIRECTIVE_MARKER = "[SYSTEM DIRECTIVE]"

# (opening, closing) markers of the tool-result wrappers chat templates use.
WRAPPERS = (
    ("<tool_response>", "</tool_response>"),  # Hermes, Qwen2.5/3, Qwen3-Coder, GLM
    ("[TOOL_RESULT", "[/TOOL_RESULT]"),  # toolrelay's rescue path
    ("[TOOL_RESULTS]", "[/TOOL_RESULTS]"),  # Mistral
    ("<|START_TOOL_RESULT|>", "<|END_TOOL_RESULT|>"),  # Command R7B
    ("<｜tool▁outputs▁begin｜>", "<｜tool▁outputs▁end｜>"),  # DeepSeek V3/R1
    ("<｜tool▁output▁begin｜>", "<｜tool▁output▁end｜>"),
    ("<|tool_response_start|>", "<|tool_response_end|>"),  # LFM2
    ("<|tool_response>", "<tool_response|>"),  # Gemma 4
    ("<start_function_response>", "<end_function_response>"),  # FunctionGemma
    ("<seed:tool_response>", "</seed:tool_response>"),  # Seed-OSS
    ("<|start_header_id|>ipython<|end_header_id|>", "<|eot_id|>"),  # Llama 3.x
)
_PARAGRAPH = "\n\n"


class EchoRegion:
    """Drops text up to the closing marker (consumed) or a blank line (kept)."""

    __slots__ = ("_at_start", "_closer", "_ctx")

    def __init__(self, ctx: Context, closer: str) -> None:
        self._ctx = ctx
        # An echo is not output: what follows it at the start still starts the output.
        self._at_start = ctx.at_start
        self._closer = closer

    def feed(self, buf: str, pos: int, final: bool) -> tuple[int, Status]:
        closer_at, closer_safe = find_marker(buf, pos, self._closer)
        blank_at = buf.find(_PARAGRAPH, pos, closer_at if closer_at >= 0 else len(buf))
        if blank_at >= 0:
            return self._done(blank_at)
        if closer_at >= 0:
            return self._done(closer_at + len(self._closer))
        if final:
            return self._done(len(buf))
        # Drop what certainly holds neither marker; keep a possible partial one
        # (a line break at the end may start a blank line).
        blank_safe = len(buf) - 1 if buf.endswith("\n") else len(buf)
        return max(pos, min(closer_safe, blank_safe)), Status.CONTINUE

    def _done(self, pos: int) -> tuple[int, Status]:
        self._ctx.at_start = self._at_start
        return pos, Status.DONE


def _wrapper(opening: str, closing: str) -> tuple[Opener, Opener]:
    def echo(ctx: Context, _marker: str) -> Region:
        return EchoRegion(ctx, closing)

    return Opener(opening, echo), stray_token(closing)


FORMAT = Format(
    name="echoes",
    description="echoed tool-result wrappers (<tool_response>…) and the [SYSTEM DIRECTIVE] marker",
    openers=(
        *(opener for opening, closing in WRAPPERS for opener in _wrapper(opening, closing)),
        stray_token(DIRECTIVE_MARKER),
    ),
)
