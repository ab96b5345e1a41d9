"""Xiaomi MiMo's compact Qwen3-Coder tags (the facts: vLLM's MiMo parsers and the xgrammar
``mimo`` structural tag; no MiMo template that escapes values was found, see
docs/formats.md). No text here is copied from another project's tests.

Every text is checked whole and streamed one character at a time and in larger cuts.
"""

from __future__ import annotations

import pytest
from issue10 import TOOLS, parsed  # type: ignore[import-not-found]

from toolrelay.formats import format_names


def call(*parameters: tuple[str, str]) -> str:
    body = "".join(f"<parameter={k}>{v}</parameter>" for k, v in parameters)
    return f"<tool_call><function=edit_file>{body}</function></tool_call>"


@pytest.mark.parametrize("fmt", ["auto", "mimo"])
def test_escapes_in_a_value_are_its_text(fmt: str) -> None:
    # No MiMo template escapes a value: "&quot;" is what the model wrote, and an edit
    # tool's old_string must match the file byte for byte.
    old = 'say &quot;hi&quot; &amp;&amp; x &lt; 3 &#39;q&#39; "raw" <b>'
    parsed(
        "Editing. " + call(("path", "a.html"), ("old_string", old)),
        calls=[("edit_file", {"path": "a.html", "old_string": old})],
        content="Editing. ",
        fmt=fmt,
    )


def test_pinned_mimo_keeps_line_breaks_around_a_value() -> None:
    # Compact: no line break is framing, so a value's own leading and trailing ones stay.
    text = call(("path", "a.py"), ("new_string", "\ndef f():\n    pass\n"))
    parsed(
        text,
        calls=[("edit_file", {"path": "a.py", "new_string": "\ndef f():\n    pass\n"})],
        fmt="mimo",
    )


def test_auto_reads_mimo_calls_as_qwen3_coder() -> None:
    text = call(("path", "a.py"), ("new_string", "\nx\n"))
    parsed(text, calls=[("edit_file", {"path": "a.py", "new_string": "x"})])


def test_a_body_that_is_not_parameters_is_rejected() -> None:
    text = "<tool_call><function=edit_file><path>a</path></function></tool_call>"
    result = parsed(text, TOOLS, calls=[], content="", fmt="mimo")
    assert len(result.rejected) == 1


def test_registered() -> None:
    assert "mimo" in format_names()
