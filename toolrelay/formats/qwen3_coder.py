"""Qwen3-Coder XML: ``<tool_call><function=f><parameter=p>v</parameter></function></tool_call>``.

Qwen3-Coder, Qwen3-Next/3.5+ and Step-3.5 write each parameter as raw text on
its own lines. Drift seen in the wild is accepted: the ``<tool_call>``
wrapper left out (``<function=f>`` opens the call itself), a missing
``</parameter>``, and Functionary v3.1's JSON body
``<function=f>{"city": "Oslo"}</function>``, and the Hermes drift
``<function name="f">{…}</function>``. ``<tool_call>`` is shared with
Hermes (JSON) and GLM-4.5 (a bare name): the text after it decides.
"""

from __future__ import annotations

from toolrelay.formats.base import Format
from toolrelay.formats.xmlparams import Dialect, xml_opener

FUNCTION_TAG = "<function="
NAMED_FUNCTION_TAG = "<function name="

DIALECT = Dialect(
    section_end="</tool_call>",
    invoke="function",
    parameter="parameter",
    param_open="<parameter=",
    trim=True,
    json_arguments=True,
)


def starts_function_tag(following: str) -> bool | None:
    """After ``<tool_call>``: is this a ``<function=…>`` (or ``<function name=…>``) block?"""
    stripped = following.lstrip()
    verdicts = set()
    for tag in (FUNCTION_TAG, NAMED_FUNCTION_TAG):
        if len(stripped) < len(tag):
            verdicts.add(None if tag.startswith(stripped) else False)
        else:
            verdicts.add(stripped.startswith(tag))
    return True if True in verdicts else (None if None in verdicts else False)


FORMAT = Format(
    name="qwen3_coder",
    families="Qwen3-Coder, Qwen3-Next, Qwen3.5+, Step-3.5, Nemotron 3 Nano, Functionary v3.1",
    description="<tool_call><function=f><parameter=p>v</parameter></function></tool_call>",
    openers=(
        xml_opener("<tool_call>", DIALECT, sniff=starts_function_tag),
        xml_opener(FUNCTION_TAG, DIALECT, bare=True),
        xml_opener(NAMED_FUNCTION_TAG, DIALECT, bare=True),
    ),
)
