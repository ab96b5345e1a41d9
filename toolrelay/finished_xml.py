"""The finished parse's fast path for one clean XML-parameter call block.

``<tool_call>\\n<function=f>\\n<parameter=p>\\nvalue\\n</parameter>\\n</function>\\n</tool_call>``
(Qwen3-Coder; MiMo's, Seed-OSS's and MiniMax-M2's tags are the same engine,
``toolrelay.formats.xmlparams``) is read here by the steps the region takes
for it, with its own pieces (tags, the line-break trim, the value's typing by
the tool's schema, the JSON it writes), without the state machine's per-tag
bookkeeping and events. ``read_xml_call`` answers only for the clean case:

- after the block's marker, only blanks and tags; the first tag opens one call
  whose name the tool set resolves; then only ``<parameter>`` tags, each value
  ended by its own closing tag (not by markup that shows the tag was lost, nor
  by a closing tag of the call or block, which may be data: the slow path
  decides); then the call's closing tag and the block's;
- a dialect without the habits that need more (GLM's key and value tags,
  DSML's string attribute and wrapped arguments, separators, XML escapes).

Anything else returns None and the caller takes the stream parser. The
property tests in ``tests/core/test_finished_xml.py`` hold the two equal.
"""

from __future__ import annotations

import re
from typing import Any

from toolrelay.formats import mimo, minimax_m2, qwen3_coder, seed_oss
from toolrelay.formats.base import RegionFactory
from toolrelay.formats.xmlparams import (
    NULL_WINDOW,
    Dialect,
    TagRead,
    Trim,
    ValueMode,
    parse_tag,
    read_tag,
    value_mode,
)
from toolrelay.names import ToolSet
from toolrelay.repair import escape_json_text, json_text
from toolrelay.schema import coerce_text, could_be_null

_BLANKS = re.compile(r"[ \t\r\n]*")  # what the region skips between tags (``_skip_space``)


def _plain(dialect: Dialect) -> bool:
    """The dialect's calls are tags and parameter values, and nothing else."""
    return (
        dialect.invoke is not None
        and dialect.value_tag is None
        and not dialect.skip_tags
        and dialect.name_separator is None
        and not dialect.literal_newlines
        and not dialect.string_attribute
        and not dialect.unwrap
        and not dialect.xml_text
    )


# The block openers read here, with their dialects.
_OPENERS = [
    (fmt.openers[0], dialect)
    for fmt, dialect in (
        (qwen3_coder.FORMAT, qwen3_coder.DIALECT),
        (mimo.FORMAT, mimo.DIALECT),
        (seed_oss.FORMAT, seed_oss.DIALECT),
        (minimax_m2.FORMAT, minimax_m2.DIALECT),
    )
    if _plain(dialect)
]
DIALECTS: dict[RegionFactory, Dialect] = {opener.region: dialect for opener, dialect in _OPENERS}
MARKERS = frozenset(opener.marker for opener, _dialect in _OPENERS)


def _next_tag(text: str, pos: int) -> tuple[Any, int, int, str | None] | None:
    """The tag after the blanks at ``pos``: it, where it starts and ends, and the
    blanks after the last line break before it (the indentation ``Trim`` drops)."""
    start = _BLANKS.match(text, pos).end()  # type: ignore[union-attr]
    if not text.startswith("<", start):
        return None
    kind, end = read_tag(text, start, True)
    if kind is not TagRead.COMPLETE:
        return None
    run = text[pos:start]
    line = run.rfind("\n")
    indent = None if line < 0 else run[line + 1 :].replace("\r", "")
    return parse_tag(text[start + 1 : end - 1]), start, end, indent


def read_xml_call(
    text: str, pos: int, dialect: Dialect, tools: ToolSet
) -> tuple[str, dict[str, Any], str, int] | None:
    """The one call of the block whose marker ends at ``pos``: its name, arguments and
    their text, and where the block's closing marker ends; None: not the clean case."""
    found = _next_tag(text, pos)
    if found is None:
        return None
    tag, _start, end, _indent = found
    if tag.closing or tag.name != dialect.invoke:
        return None
    name = tools.resolve(tag.value or "")
    if name is None:
        return None
    written: list[str] = []
    values: dict[str, Any] = {}
    while True:
        found = _next_tag(text, end)
        if found is None:
            return None
        tag, start, end, indent = found
        if text[start:end] == dialect.section_end or tag.name != dialect.parameter:
            if tag.closing and tag.name == dialect.invoke:
                break
            return None
        if tag.closing:
            return None
        key = (tag.value or "").strip()
        close = dialect.value_end.search(text, end)
        if close is None or close.group() != dialect.value_close:
            return None
        schema = tools.parameter_schema(name, key) if tools.declared else None
        mode = value_mode(schema)
        trim = Trim((indent or "") if dialect.trim else None)
        certain = trim.push(text[end : close.start()])
        rest = trim.close()
        prefix = f'{"," if written else "{"}"{escape_json_text(key)}":'
        if (
            mode is ValueMode.MAYBE_NULL
            and certain
            and (len(certain) > NULL_WINDOW or not could_be_null(certain))
        ):
            mode = ValueMode.STREAM  # a string after all (``_value_text``)
        # A key written twice: both in the text, the last value where the first was.
        if mode is ValueMode.STREAM:
            values[key] = certain + rest
            written.append(f'{prefix}"{escape_json_text(certain)}{escape_json_text(rest)}"')
        else:
            values[key] = value = coerce_text(certain + rest, schema or None)
            written.append(prefix + json_text(value))
        end = close.end()
    found = _next_tag(text, end)
    if found is None or text[found[1] : found[2]] != dialect.section_end:
        return None
    # The values are what their text decodes to (each written by ``json_text`` from it):
    # the region decodes it once a string has streamed, to the same values.
    return name, values, "".join(written) + "}" if written else "{}", found[2]
