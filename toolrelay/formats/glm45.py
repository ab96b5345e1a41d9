"""GLM-4.5/4.6/4.7: ``<tool_call>f\\n<arg_key>p</arg_key>\\n<arg_value>v</arg_value></tool_call>``.

The name is bare text after the opener; GLM-4.7 may glue it to the first
``<arg_key>``, and GLM-4.6 sometimes writes its line breaks as a literal
backslash-n; a JSON object after the name (drift toward Hermes) is read as
the arguments. ``<tool_call>`` is shared with Hermes and Qwen3-Coder: it is
GLM's when an identifier follows, alone on its line or before a tag.
"""

from __future__ import annotations

import re

from toolrelay.formats.base import Format, skip_whitespace
from toolrelay.formats.xmlparams import TAG_LIMIT, Dialect, xml_opener

DIALECT = Dialect(
    section_end="</tool_call>",
    invoke=None,
    parameter="arg_key",
    param_open="<arg_key>",
    value_tag="arg_value",
    literal_newlines=True,
    json_arguments=True,  # drift toward Hermes: "<tool_call>f\n{json}</tool_call>"
)

_NAME = re.compile(r"[A-Za-z_][\w.:/-]*")


def starts_name(following: str) -> bool | None:
    """After ``<tool_call>``: a tool name, then a line break or a tag?"""
    start = skip_whitespace(following, 0)
    if start == len(following):
        return None
    found = _NAME.match(following, start)
    if found is None:
        return False
    end = found.end()
    if end - start > TAG_LIMIT:
        return False
    while end < len(following) and following[end] in " \t":
        end += 1
    rest = following[end : end + 2]
    if not rest or rest == "\\":
        return None
    return rest[0] in "\r\n<" or rest == "\\n"


FORMAT = Format(
    name="glm45",
    families="GLM-4.5, 4.6, 4.7",
    description="<tool_call>f<arg_key>p</arg_key><arg_value>v</arg_value></tool_call>",
    openers=(xml_opener("<tool_call>", DIALECT, sniff=starts_name),),
)
