"""Phi-4-mini and FireFunction v2: ``functools[{json}, …]``.

``functools`` is also a word people write (``import functools``): only the
bracket right after it makes it markup, as in the reference parsers, so the
bracket is part of the marker (and the list's own first bracket).
"""

from __future__ import annotations

from toolrelay.formats.base import Format
from toolrelay.formats.jsoncalls import JsonCallsOptions, json_opener

FORMAT = Format(
    name="functools",
    families="Phi-4-mini, FireFunction v2",
    description="functools[{json}, …] (Phi-4-mini, FireFunction v2)",
    openers=(json_opener("functools[", JsonCallsOptions(several=False)),),
)
