"""Phi-4-mini and FireFunction v2: ``functools[{json}, …]``."""

from __future__ import annotations

from toolrelay.formats.base import Format
from toolrelay.formats.jsoncalls import JsonCallsOptions, json_opener

FORMAT = Format(
    name="functools",
    description="functools[{json}, …] (Phi-4-mini, FireFunction v2)",
    openers=(json_opener("functools", JsonCallsOptions(several=False)),),
)
