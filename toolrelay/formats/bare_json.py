"""Calls with no marker at all: a JSON object or array of them in the text.

Llama 3.x (``{"name": …, "parameters": …}``, several joined by ``;``), xLAM
and constrained-decoding output (``[{"name": …, "arguments": …}]``), and
models that paste a call into prose. The value must be a call through and
through (a name, and arguments that are an object; a declared name when
tools are declared), otherwise it is content.
"""

from __future__ import annotations

import re

from toolrelay.formats.base import Format, Opener
from toolrelay.formats.jsoncalls import JsonCallsOptions, json_opener

_BARE = JsonCallsOptions(marked=False)


def _first_is(marker: str, allowed: str) -> Opener:
    """``marker`` opens a bare value when the first character after the blanks is one of
    ``allowed``.

    Prose and code are full of brackets; this turns almost all of them away
    in the marker search itself, before any Python looks at them.
    """

    def sniff(following: str) -> bool | None:
        stripped = following.lstrip()
        if not stripped:
            return None
        return stripped[0] in allowed

    # str.lstrip and \s strip the same characters (str.isspace).
    follows = r"\s*(?:[" + re.escape(allowed) + r"]|\Z)"
    return json_opener(marker, _BARE, sniff=sniff, follows=follows)


FORMAT = Format(
    name="bare_json",
    families="Llama 3.1/3.2/3.3, Llama 4 JSON mode, xLAM, constrained decoding, llama.cpp generic",
    description='{"name": …, "arguments"|"parameters": …} or a JSON array of such objects',
    openers=(
        _first_is("{", "\"'"),  # a call object's first key is always quoted
        _first_is("[", "{"),  # a list of call objects
    ),
)
