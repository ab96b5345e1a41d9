"""DeepSeek-V3.2 DSML: ``<｜DSML｜invoke name="f">`` calls with typed ``<｜DSML｜parameter>`` tags.

``string="true"`` marks a value as text and ``string="false"`` as JSON; the
tool's schema, when there is one, wins over the attribute. Values are kept
exactly as written (the template writes them inline). A lone ``arguments``
or ``input`` parameter that the tool does not declare is the model wrapping
the whole arguments object: it is unwrapped.
"""

from __future__ import annotations

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

FORMAT = Format(
    name="deepseek_v32",
    description='<｜DSML｜function_calls><｜DSML｜invoke name="f"><｜DSML｜parameter name="p" …>',
    openers=(xml_opener("<｜DSML｜function_calls>", DIALECT),),
)
