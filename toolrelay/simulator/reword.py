"""How the simulator's weak model says a prompt again in its own words.

SmolLM2-135M on llama-server, given the rescue path's late directive and a
question that needs no tool, answered with the directive's sentences reworded
("To call multiple tools, write a single block, with only the JSON object
inside it.") and a copy of the example call. The rewording here is
deterministic: a few function words swapped, commas dropped, the first letter's
case changed.
"""

from __future__ import annotations

import re

_SWAPS = {
    "several": "multiple",
    "one": "a single",
    "each": "every",
    "the": "a",
    "is": "will be",
    "with": "having",
}
_WORD = re.compile(r"[A-Za-z]+")


def reworded(directive: str) -> str:
    """The sentences of ``directive`` (not its marker, not its call blocks), reworded."""
    lines = [
        line.strip()
        for line in directive.splitlines()
        if line.strip() and not line.lstrip().startswith("[")
    ]
    return "\n".join(_reword(line) for line in lines)


def _reword(line: str) -> str:
    def swap(found: re.Match[str]) -> str:
        word = found.group()
        new = _SWAPS.get(word.lower())
        if new is None:
            return word
        return new.capitalize() if word[0].isupper() else new

    line = _WORD.sub(swap, line).replace(",", "")
    return line[0].swapcase() + line[1:]
