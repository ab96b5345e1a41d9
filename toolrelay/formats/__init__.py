"""The registry of tool-call text formats.

Each module in this package describes one format family: the markers that
open its regions and the region parser that reads them. ``FORMATS`` lists
them in the order ``format="auto"`` tries them when two claim one marker.
Adding a format means a module here and a line in ``FORMATS``.
:func:`opener_table` gives the markers of the formats a name selects,
compiled for search (:mod:`toolrelay.formats.markers`).
"""

from __future__ import annotations

from functools import lru_cache

from toolrelay.errors import ToolrelayError
from toolrelay.formats import (
    apertus,
    bare_json,
    bracket,
    command_r7b,
    deepseek,
    deepseek_v32,
    echoes,
    ernie45,
    fenced,
    functionary,
    functiongemma,
    gemma4,
    glm45,
    granite,
    harmony,
    hermes,
    internlm2,
    jamba,
    kimi,
    kimi_k3,
    lfm2,
    llama3_builtin,
    llama4_pythonic,
    longcat,
    mimo,
    minicpm5,
    minimax_m1,
    minimax_m2,
    minimax_m3,
    mistral,
    nemotron,
    olmo3,
    phi4_functools,
    pythonic,
    qwen3_coder,
    reasoning,
    seed_oss,
    step3,
)
from toolrelay.formats.base import Format
from toolrelay.formats.markers import OpenerTable, compile_openers

FORMATS: tuple[Format, ...] = (
    bracket.FORMAT,
    hermes.FORMAT,
    fenced.FORMAT,
    bare_json.FORMAT,
    deepseek.FORMAT,
    kimi.FORMAT,
    kimi_k3.FORMAT,
    mistral.FORMAT,
    harmony.FORMAT,
    granite.FORMAT,
    deepseek_v32.FORMAT,  # before Jamba: a <tool_calls> block of <invoke> tags
    jamba.FORMAT,
    minimax_m1.FORMAT,
    internlm2.FORMAT,
    phi4_functools.FORMAT,
    nemotron.FORMAT,
    lfm2.FORMAT,
    apertus.FORMAT,
    command_r7b.FORMAT,
    minicpm5.FORMAT,  # before Qwen3-Coder: a <function name=…> call of <param> tags
    qwen3_coder.FORMAT,
    mimo.FORMAT,  # after Qwen3-Coder: auto reads its calls as Qwen3-Coder's
    seed_oss.FORMAT,
    glm45.FORMAT,
    minimax_m2.FORMAT,
    minimax_m3.FORMAT,
    step3.FORMAT,
    pythonic.FORMAT,
    llama4_pythonic.FORMAT,
    olmo3.FORMAT,
    llama3_builtin.FORMAT,
    functiongemma.FORMAT,
    gemma4.FORMAT,
    functionary.FORMAT,
    longcat.FORMAT,
    ernie45.FORMAT,
)

ALWAYS_ON: tuple[Format, ...] = (reasoning.FORMAT, echoes.FORMAT)


def format_names() -> list[str]:
    return [f.name for f in FORMATS]


class UnknownFormatError(ToolrelayError, ValueError):
    """A format name toolrelay does not know."""

    status = 400


@lru_cache(maxsize=64)
def opener_table(name: str = "auto") -> OpenerTable:
    if name == "auto":
        formats = ALWAYS_ON + FORMATS
    else:
        chosen = [f for f in FORMATS if f.name == name]
        if not chosen:
            raise UnknownFormatError(
                f"unknown format {name!r}; known formats: auto, {', '.join(format_names())}"
            )
        formats = (*ALWAYS_ON, *chosen)
    return compile_openers(formats)
