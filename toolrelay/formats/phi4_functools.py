"""Phi-4-mini and FireFunction v2: ``functools[{json}, …]``.

``functools`` is also a word people write (``import functools``): only the
bracket right after it makes it markup, as in the reference parsers.
"""

from __future__ import annotations

from toolrelay.formats.base import Format
from toolrelay.formats.jsoncalls import JsonCallsOptions, json_opener


def _list_follows(following: str) -> bool | None:
    return following.startswith("[") if following else None


FORMAT = Format(
    name="functools",
    description="functools[{json}, …] (Phi-4-mini, FireFunction v2)",
    openers=(json_opener("functools", JsonCallsOptions(several=False), sniff=_list_follows),),
)
