"""DeepSeek-V3.2 DSML: ``<｜DSML｜invoke name="f">`` calls with typed ``<｜DSML｜parameter>`` tags.

V3.2 wraps the calls in ``<｜DSML｜function_calls>``; DeepSeek V4's template
names the block ``<｜DSML｜tool_calls>``: both are read. A model (or a server
that decodes without special tokens) may write every tag without its
``｜DSML｜`` token: ``<function_calls><invoke name="f"><parameter name="p"
string="true">``. OLMo 3 (``<function_calls>``) and Jamba (``<tool_calls>``)
share those block tags, so the block is DSML only when an ``<invoke`` opens it.

``string="true"`` marks a value as text and ``string="false"`` as JSON; the
tool's schema, when there is one, wins over the attribute. Values are kept
exactly as written (the template writes them inline). A lone ``arguments``
or ``input`` parameter that the tool does not declare is the model wrapping
the whole arguments object: it is unwrapped.
"""

from __future__ import annotations

from dataclasses import replace

from toolrelay.formats.base import Format
from toolrelay.formats.xmlparams import Dialect, xml_opener

DIALECT = Dialect(
    section_end="</｜DSML｜function_calls>",
    invoke="｜DSML｜invoke",
    parameter="｜DSML｜parameter",
    param_open="<｜DSML｜parameter ",
    string_attribute=True,
    unwrap=True,
)

TOOL_CALLS_DIALECT = replace(DIALECT, section_end="</｜DSML｜tool_calls>")
PLAIN = replace(
    DIALECT,
    section_end="</function_calls>",
    invoke="invoke",
    parameter="parameter",
    param_open="<parameter ",
)
PLAIN_TOOL_CALLS = replace(PLAIN, section_end="</tool_calls>")

_INVOKE = "<invoke"


def _invoke_follows(following: str) -> bool | None:
    """After a block tag without the DSML token: does an ``<invoke`` open the block?"""
    stripped = following.lstrip()
    if len(stripped) < len(_INVOKE) + 1:
        return None if (_INVOKE + " ").startswith(stripped) else False
    return stripped.startswith(_INVOKE) and stripped[len(_INVOKE)] in " \t\n"


FORMAT = Format(
    name="deepseek_v32",
    families="DeepSeek-V3.2, V4",
    description='<｜DSML｜function_calls> or <｜DSML｜tool_calls>, <｜DSML｜invoke name="f">…',
    openers=(
        xml_opener("<｜DSML｜function_calls>", DIALECT),
        xml_opener("<｜DSML｜tool_calls>", TOOL_CALLS_DIALECT),
        xml_opener("<function_calls>", PLAIN, sniff=_invoke_follows),
        xml_opener("<tool_calls>", PLAIN_TOOL_CALLS, sniff=_invoke_follows),
    ),
    tokens=(
        "<｜DSML｜function_calls>",
        "</｜DSML｜function_calls>",
        "<｜DSML｜tool_calls>",
        "</｜DSML｜tool_calls>",
    ),
)
