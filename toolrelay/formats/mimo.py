"""Xiaomi MiMo (V2-Flash, V2.6): Qwen3-Coder's tags, written compact.

``<tool_call><function=f><parameter=p>v</parameter></function></tool_call>``
with each value written as it is, on no lines of its own: unlike
``qwen3_coder`` no line break around a value is framing, so a value keeps a
leading or trailing line break (vLLM's MiMo parser does not trim them
either). Values are not unescaped: no MiMo template was found that escapes
them (docs/formats.md, *MiMo values are verbatim*), so ``&quot;`` in a value
is those six characters. ``format="auto"`` reads these calls as
``qwen3_coder``, which drops one line break framing a value; pin ``mimo``
for MiMo.
"""

from __future__ import annotations

from toolrelay.formats.base import Format
from toolrelay.formats.qwen3_coder import starts_function_tag
from toolrelay.formats.xmlparams import Dialect, xml_opener

DIALECT = Dialect(
    section_end="</tool_call>",
    invoke="function",
    parameter="parameter",
    param_open="<parameter=",
)

FORMAT = Format(
    name="mimo",
    families="Xiaomi MiMo-V2-Flash, MiMo-V2.6",
    description="<tool_call><function=f><parameter=p>v</parameter></function></tool_call>, compact",
    openers=(xml_opener("<tool_call>", DIALECT, sniff=starts_function_tag),),
)
