"""Schema typing with type lists and whitespace as data, in every XML-style format (issue 10)."""

from __future__ import annotations

from typing import Any

import pytest
from issue10 import EDIT, parsed, tool  # type: ignore[import-not-found]

from toolrelay import StreamParser, ToolCallArgumentsDelta
from toolrelay.schema import coerce_text

TYPED = tool(
    "typed",
    nullable={"type": ["string", "null"]},
    either={"type": ["string", "integer"]},
    blob={"type": ["string", "object"]},
    flag={"type": ["string", "boolean"]},
    count={"type": ["integer", "null"]},
    union={"anyOf": [{"type": "string"}, {"type": "integer"}]},
)


@pytest.mark.parametrize(
    ("text", "schema", "value"),
    [
        ("null", {"type": ["string", "null"]}, None),
        ("", {"type": ["string", "null"]}, ""),
        ("nullable", {"type": ["string", "null"]}, "nullable"),
        ("42", {"type": ["string", "integer"]}, 42),
        ("042", {"type": ["string", "integer"]}, "042"),
        ("4 2", {"type": ["string", "integer"]}, "4 2"),
        ('{"a": [1]}', {"type": ["string", "object"]}, {"a": [1]}),
        ("{not json}", {"type": ["string", "object"]}, "{not json}"),
        ("{not}", {"type": "object"}, "{not}"),
        ("true", {"type": ["string", "boolean"]}, True),
        ("yes", {"type": ["string", "boolean"]}, "yes"),
        ("", {"type": ["integer", "null"]}, None),
        ("7", {"type": ["integer", "null"]}, 7),
        ("42", {"anyOf": [{"type": "string"}, {"type": "integer"}]}, 42),
        ("null", {"anyOf": [{"type": "string"}, {"type": "null"}]}, None),
    ],
)
def test_type_lists_are_typed_like_any_of(text: str, schema: dict[str, Any], value: Any) -> None:
    assert coerce_text(text, schema) == value


FORMATS = {
    "qwen3_coder": (
        "<tool_call>\n<function=typed>\n{}</function>\n</tool_call>",
        "<parameter={k}>\n{v}\n</parameter>\n",
    ),
    "seed_oss": (
        "<seed:tool_call>\n<function=typed>\n{}</function>\n</seed:tool_call>",
        "<parameter={k}>{v}</parameter>\n",
    ),
    "glm45": (
        "<tool_call>typed\n{}</tool_call>",
        "<arg_key>{k}</arg_key>\n<arg_value>{v}</arg_value>\n",
    ),
    "minimax_m2": (
        '<minimax:tool_call>\n<invoke name="typed">\n{}</invoke>\n</minimax:tool_call>',
        '<parameter name="{k}">{v}</parameter>\n',
    ),
    "deepseek_v32": (
        '<｜DSML｜function_calls>\n<｜DSML｜invoke name="typed">\n{}</｜DSML｜invoke>\n'
        "</｜DSML｜function_calls>",
        '<｜DSML｜parameter name="{k}" string="true">{v}</｜DSML｜parameter>\n',
    ),
    "step3": (
        '<｜tool_calls_begin｜><｜tool_call_begin｜><steptml:invoke name="typed">{}'
        "</steptml:invoke><｜tool_call_end｜><｜tool_calls_end｜>",
        '<steptml:parameter name="{k}">{v}</steptml:parameter>',
    ),
}


def _call(fmt: str, values: dict[str, str]) -> str:
    block, parameter = FORMATS[fmt]
    return block.format("".join(parameter.format(k=k, v=v) for k, v in values.items()))


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_type_lists_in_every_xml_format(fmt: str) -> None:
    text = _call(
        fmt,
        {
            "nullable": "null",
            "either": "42",
            "blob": '{"a": 1}',
            "flag": "yes",
            "count": "3",
            "union": "007",
        },
    )
    want = {"nullable": None, "either": 42, "blob": {"a": 1}, "flag": "yes", "count": 3}
    want["union"] = "007"
    parsed(text, [TYPED], calls=[("typed", want)], content="", fmt=fmt)


OLD = "    if x:\n        pass\n\n"  # an edit tool's old_string: trailing newlines are data


@pytest.mark.parametrize("fmt", ["seed_oss", "glm45", "minimax_m2", "deepseek_v32", "step3"])
def test_inline_templates_keep_every_character_of_a_string(fmt: str) -> None:
    text = _call(fmt, {"old_string": OLD, "path": " a b.py "}).replace("typed", "edit_file")
    parsed(
        text,
        [EDIT],
        calls=[("edit_file", {"old_string": OLD, "path": " a b.py "})],
        content="",
        fmt=fmt,
    )


def test_qwen3_coder_trims_only_the_line_breaks_its_template_writes() -> None:
    # The template writes '<parameter=p>\n' + value + '\n</parameter>\n'.
    text = _call("qwen3_coder", {"old_string": OLD, "path": " a b.py "}).replace(
        "typed", "edit_file"
    )
    parsed(
        text,
        [EDIT],
        calls=[("edit_file", {"old_string": OLD, "path": " a b.py "})],
        content="",
    )


def test_a_nullable_string_streams_once_it_cannot_be_null() -> None:
    parser = StreamParser([TYPED])
    parser.feed("<tool_call>\n<function=typed>\n<parameter=nullable>\nnu")
    events = parser.feed("mbers are fun, and long")
    deltas = "".join(e.text for e in events if isinstance(e, ToolCallArgumentsDelta))
    assert deltas == '{"nullable":"numbers are fun, and long'
