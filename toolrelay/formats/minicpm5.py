"""MiniCPM-5: ``<function name="f"><param name="p">v</param></function>``.

OpenBMB's template writes each call bare, no block around it; a string
holding ``<``, ``&`` or a line break goes in ``<![CDATA[…]]>``, whose text is
the value whatever tags it holds. Its server reads the calls as XML, so
entity escapes in a string outside a CDATA section (``&quot;``, ``&#38;``)
are decoded. Other values are written as Python writes them (``True``,
``{'a': 1}``, raw, escapes and all) and typed by the tool's schema.
``<function name=`` also opens the Hermes drift that Qwen3-Coder's format
reads (``<function name="f">{json}</function>``): the call is MiniCPM-5's
when a ``<param`` tag (or the call's end) follows.
"""

from __future__ import annotations

from toolrelay.formats.base import Format
from toolrelay.formats.xmlparams import Dialect, xml_opener

MARKER = "<function name="

DIALECT = Dialect(
    section_end="</function>",
    invoke="function",
    parameter="param",
    param_open="<param ",
    xml_text=True,
)

_PARAMS = ("<param ", "<param>", "</function>")


def params_follow(following: str) -> bool | None:
    """After ``<function name=``: the rest of the tag, then a ``<param`` or the end?"""
    close = following.find(">")
    if close < 0:
        return None if "\n" not in following else False
    rest = following[close + 1 :].lstrip()
    if any(rest.startswith(tag) for tag in _PARAMS):
        return True
    if any(tag.startswith(rest) for tag in _PARAMS):
        return None
    return False


FORMAT = Format(
    name="minicpm5",
    families="OpenBMB MiniCPM-5",
    description='<function name="f"><param name="p">v</param></function>',
    openers=(xml_opener(MARKER, DIALECT, sniff=params_follow, bare=True),),
)
