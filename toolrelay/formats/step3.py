"""StepFun Step-3: ``<steptml:invoke>`` calls inside DeepSeek-style section tokens.

``<｜tool_calls_begin｜><｜tool_call_begin｜>[function<｜tool_sep｜>f\\n]<steptml:invoke
name="f"><steptml:parameter name="p">v</steptml:parameter></steptml:invoke>
<｜tool_call_end｜><｜tool_calls_end｜>``, calls separated by ``<｜tool_sep｜>``.
String values keep their whitespace exactly (edit tools match text
byte for byte); typed values are trimmed and coerced.
"""

from __future__ import annotations

from toolrelay.formats.base import Format
from toolrelay.formats.xmlparams import Dialect, xml_opener

DIALECT = Dialect(
    section_end="<｜tool_calls_end｜>",
    invoke="steptml:invoke",
    parameter="steptml:parameter",
    param_open="<steptml:parameter ",
    skip_tags=frozenset({"<｜tool_call_begin｜>", "<｜tool_call_end｜>", "<｜tool_sep｜>"}),
    name_separator="<｜tool_sep｜>",
)

FORMAT = Format(
    name="step3",
    families="StepFun Step-3",
    description='<｜tool_calls_begin｜>…<steptml:invoke name="f"><steptml:parameter name="p">…',
    openers=(
        xml_opener("<｜tool_calls_begin｜>", DIALECT),
        # A call whose section token was left out.
        xml_opener("<｜tool_call_begin｜>", DIALECT),
    ),
    tokens=(
        "<｜tool_calls_begin｜>",
        "<｜tool_calls_end｜>",
        "<｜tool_call_begin｜>",
        "<｜tool_call_end｜>",
        "<｜tool_sep｜>",
    ),
)
