"""MiniMax-M2: ``<minimax:tool_call><invoke name="f"><parameter name="p">v</parameter>…``.

Values may sit on their own lines, as in Qwen3-Coder: the framing line
breaks are dropped.
"""

from __future__ import annotations

from toolrelay.formats.base import Format
from toolrelay.formats.xmlparams import Dialect, xml_opener

DIALECT = Dialect(
    section_end="</minimax:tool_call>",
    invoke="invoke",
    parameter="parameter",
    param_open="<parameter ",
)

FORMAT = Format(
    name="minimax_m2",
    families="MiniMax-M2",
    description='<minimax:tool_call><invoke name="f"><parameter name="p">v</parameter></invoke>',
    openers=(xml_opener("<minimax:tool_call>", DIALECT),),
    tokens=("<minimax:tool_call>", "</minimax:tool_call>"),
)
