"""NVIDIA Nemotron Nano v2: ``<TOOLCALL>[{json}, …]</TOOLCALL>``."""

from __future__ import annotations

from toolrelay.formats.base import Format
from toolrelay.formats.jsoncalls import JsonCallsOptions, json_opener

FORMAT = Format(
    name="nemotron",
    families="NVIDIA Nemotron Nano v2",
    description="<TOOLCALL>[{json}]</TOOLCALL>",
    openers=(json_opener("<TOOLCALL>", JsonCallsOptions(end_marker="</TOOLCALL>")),),
    tokens=("<TOOLCALL>", "</TOOLCALL>"),
)
