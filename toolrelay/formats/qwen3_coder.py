"""Qwen3-Coder XML: ``<tool_call><function=f><parameter=p>v</parameter></function></tool_call>``.

Qwen3-Coder, Qwen3-Next/3.5+ and Step-3.5 write each parameter as raw text on
its own lines. Drift seen in the wild is accepted: the ``<tool_call>``
wrapper left out (``<function=f>`` opens the call itself), a missing
``</parameter>``, and Functionary v3.1's JSON body
``<function=f>{"city": "Oslo"}</function>``. ``<tool_call>`` is shared with
Hermes (JSON) and GLM-4.5 (a bare name): the text after it decides.
"""

from __future__ import annotations

from toolrelay.formats.base import Format
from toolrelay.formats.xmlparams import Dialect, xml_opener

FUNCTION_TAG = "<function="

DIALECT = Dialect(
    section_end="</tool_call>",
    invoke="function",
    parameter="parameter",
    param_open="<parameter=",
    json_arguments=True,
)


def starts_function_tag(following: str) -> bool | None:
    """After ``<tool_call>``: is this a ``<function=…>`` block?"""
    stripped = following.lstrip()
    if len(stripped) < len(FUNCTION_TAG):
        return None if FUNCTION_TAG.startswith(stripped) else False
    return stripped.startswith(FUNCTION_TAG)


FORMAT = Format(
    name="qwen3_coder",
    description="<tool_call><function=f><parameter=p>v</parameter></function></tool_call>",
    openers=(
        xml_opener("<tool_call>", DIALECT, sniff=starts_function_tag),
        xml_opener(FUNCTION_TAG, DIALECT, bare=True),
    ),
)
