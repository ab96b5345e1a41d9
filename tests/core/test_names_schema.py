"""Declared-tool name matching and schema typing of text values."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from toolrelay import parse_tool_calls
from toolrelay.names import ToolSet
from toolrelay.schema import coerce_text


def tools(*names: str) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": name}} for name in names]


@pytest.mark.parametrize("separator", ["__", ".", "/", "-", ":"])
def test_a_short_name_matches_one_namespaced_tool(separator: str) -> None:
    declared = ToolSet(tools(f"github{separator}create_issue", "get_weather"))
    assert declared.resolve("create_issue") == f"github{separator}create_issue"


def test_exact_wins_and_nothing_is_guessed(caplog: pytest.LogCaptureFixture) -> None:
    declared = ToolSet(tools("create_issue", "github__create_issue", "jira__create_issue"))
    assert declared.resolve("create_issue") == "create_issue"
    ambiguous = ToolSet(tools("github__create_issue", "jira__create_issue"))
    with caplog.at_level(logging.INFO, logger="toolrelay.names"):
        assert ambiguous.resolve("create_issue") is None
        assert ambiguous.resolve("delete_repo") is None
    assert "ambiguous" in caplog.text
    assert ToolSet(tools("get_weather")).resolve("functions.get_weather") == "get_weather"


def test_without_tools_any_name_is_accepted() -> None:
    assert ToolSet(None).resolve("anything") == "anything"
    assert ToolSet([]).resolve("anything") == "anything"


def test_a_rewritten_name_is_logged_and_an_unknown_call_leaves_no_markup(
    caplog: pytest.LogCaptureFixture,
) -> None:
    text = (
        'A <tool_call>{"name": "create_issue", "arguments": {}}</tool_call>'
        'B <tool_call>{"name": "rm_rf", "arguments": {}}</tool_call>C'
    )
    with caplog.at_level(logging.INFO, logger="toolrelay.names"):
        result = parse_tool_calls(text, tools("github__create_issue"))
    assert [c.name for c in result.calls] == ["github__create_issue"]
    assert result.content == "A B C"
    assert "rewrote tool name 'create_issue'" in caplog.text
    assert "dropped tool call" in caplog.text


@pytest.mark.parametrize(
    ("text", "schema", "value"),
    [
        ("42", {"type": "integer"}, 42),
        (" 4.0 ", {"type": "integer"}, 4),
        ("4.5", {"type": "integer"}, "4.5"),
        ("3.14", {"type": "number"}, 3.14),
        ("inf", {"type": "number"}, "inf"),
        ("True", {"type": "boolean"}, True),
        ("no", {"type": "boolean"}, False),
        ("null", {"anyOf": [{"type": "integer"}, {"type": "null"}]}, None),
        ("7", {"type": ["integer", "null"]}, 7),
        ('{"a": [1]}', {"type": "object"}, {"a": [1]}),
        ("[1, 2,]", {"type": "array"}, [1, 2]),
        ("  keep my spaces ", {"type": "string"}, "  keep my spaces "),
        ("42", {"type": "string"}, "42"),
        ("42", None, 42),
        ("hello", None, "hello"),
        ("{not json}", None, "{not json}"),
        ("red", {"enum": ["red", "green"]}, "red"),
    ],
)
def test_coerce_text(text: str, schema: dict[str, Any] | None, value: Any) -> None:
    assert coerce_text(text, schema) == value
