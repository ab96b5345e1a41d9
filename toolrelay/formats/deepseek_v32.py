"""DeepSeek-V3.2 DSML: ``<｜DSML｜invoke name="f">`` calls with typed ``<｜DSML｜parameter>`` tags.

V3.2 wraps the calls in ``<｜DSML｜function_calls>``; DeepSeek V4's template
names the block ``<｜DSML｜tool_calls>``: both are read.

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

FORMAT = Format(
    name="deepseek_v32",
    families="DeepSeek-V3.2, V4",
    description='<｜DSML｜function_calls> or <｜DSML｜tool_calls>, <｜DSML｜invoke name="f">…',
    openers=(
        xml_opener("<｜DSML｜function_calls>", DIALECT),
        xml_opener("<｜DSML｜tool_calls>", TOOL_CALLS_DIALECT),
    ),
    tokens=(
        "<｜DSML｜function_calls>",
        "</｜DSML｜function_calls>",
        "<｜DSML｜tool_calls>",
        "</｜DSML｜tool_calls>",
    ),
)
