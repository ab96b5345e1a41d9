"""Seed-OSS: Qwen3-Coder's parameters inside ``<seed:tool_call>…</seed:tool_call>``.

``<seed:think>`` is reasoning (see ``reasoning``); budget tags such as
``<seed:cot_budget_reflect>`` are not tool markup and stay in the content.
"""

from __future__ import annotations

from dataclasses import replace

from toolrelay.formats import qwen3_coder
from toolrelay.formats.base import Format
from toolrelay.formats.xmlparams import xml_opener

# Seed-OSS's template writes values inline (<parameter=p>VALUE</parameter>): nothing to trim.
DIALECT = replace(qwen3_coder.DIALECT, section_end="</seed:tool_call>", trim=False)

FORMAT = Format(
    name="seed_oss",
    families="ByteDance Seed-OSS",
    description="<seed:tool_call><function=f><parameter=p>v</parameter></function></seed:tool_call>",
    openers=(xml_opener("<seed:tool_call>", DIALECT),),
    tokens=("<seed:tool_call>", "</seed:tool_call>"),
)
