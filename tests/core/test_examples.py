"""The rescue prompt's example values are placeholders, and a copied example is rejected."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolrelay import parse_tool_calls
from toolrelay.events import ToolCall
from toolrelay.examples import example_arguments, reject_copies
from toolrelay.rescue import TOOL_CALL_CLOSE, TOOL_CALL_OPEN, build_rescue_request

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city to look up"},
                "unit": {
                    "type": "string",
                    "enum": ["celsius", "fahrenheit"],
                    "description": "Unit",
                },
                "days": {"type": "integer"},
            },
            "required": ["city", "unit"],
        },
    },
}


def call(name: str, arguments: dict[str, Any]) -> ToolCall:
    return ToolCall("call_1", name, arguments, json.dumps(arguments))


def test_every_type_gets_a_placeholder_no_real_call_carries() -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "count": {"type": "integer"},
            "ratio": {"type": "number"},
            "dry_run": {"type": "boolean"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "mode": {"type": "string", "enum": ["fast", "slow"]},
            "kind": {"const": "fixed"},
            "nothing": {"type": "null"},
            "optional": {"type": "string"},
            "where": {
                "type": "object",
                "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
                "required": ["lat", "lon"],
            },
        },
        "required": [
            "name",
            "count",
            "ratio",
            "dry_run",
            "tags",
            "mode",
            "kind",
            "nothing",
            "where",
        ],
    }
    assert example_arguments(schema) == {
        "name": "<name>",
        "count": "<count: integer>",
        "ratio": "<ratio: number>",
        "dry_run": "<dry_run: true or false>",
        "tags": ["<tags>"],
        "mode": "<mode: one of fast, slow>",
        "kind": "fixed",  # the only value it can take
        "nothing": None,
        "where": {"lat": "<lat: number>", "lon": "<lon: number>"},
    }


def test_refs_and_optional_unions_are_followed() -> None:
    # The shape pydantic produces for a model with a nested model and Optional fields.
    schema = {
        "$defs": {
            "Address": {
                "type": "object",
                "properties": {"street": {"type": "string"}},
                "required": ["street"],
            }
        },
        "type": "object",
        "properties": {
            "address": {"$ref": "#/$defs/Address"},
            "note": {"anyOf": [{"type": "null"}, {"type": "string"}]},
            "level": {"type": ["integer", "null"]},
            "wrapped": {"allOf": [{"$ref": "#/$defs/Address"}], "description": "x"},
            "dangling": {"$ref": "#/$defs/Missing"},
            "remote": {"$ref": "https://example.com/schema.json"},
        },
        "required": ["address", "note", "level", "wrapped", "dangling", "remote"],
    }
    assert example_arguments(schema) == {
        "address": {"street": "<street>"},
        "note": "<note>",
        "level": "<level: integer>",
        "wrapped": {"street": "<street>"},
        "dangling": "<dangling>",
        "remote": "<remote>",
    }


def test_recursive_schemas_stop() -> None:
    schema = {
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {"child": {"$ref": "#/$defs/Node"}},
                "required": ["child"],
            },
            "Loop": {"$ref": "#/$defs/Loop"},
        },
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/Node"}, "loop": {"$ref": "#/$defs/Loop"}},
        "required": ["root", "loop"],
    }
    example = example_arguments(schema)
    assert example["loop"] == "<loop>"
    depth, node = 0, example["root"]
    while node:
        node, depth = node["child"], depth + 1
    assert depth < 10


@pytest.mark.parametrize(
    "schema",
    [
        {},
        {"type": "object"},
        {"type": "object", "properties": {"a": {"type": "string"}}},
        {"type": "object", "required": "a"},
        {"type": "string"},
    ],
)
def test_no_required_parameters_no_example_values(schema: Any) -> None:
    assert example_arguments(schema) == {}


def test_a_copied_example_is_rejected_with_a_reason_the_model_can_act_on() -> None:
    kept, rejected = reject_copies(
        [call("get_weather", {"city": "<city>", "unit": "celsius"})], [WEATHER]
    )
    assert kept == []
    [reason] = [r.reason for r in rejected]
    assert rejected[0].name == "get_weather"
    assert json.loads(rejected[0].raw)["arguments"]["city"] == "<city>"
    assert 'arguments.city is "<city>", copied from' in reason
    assert "real value" in reason


@pytest.mark.parametrize(
    "arguments",
    [
        {"city": "Oslo", "unit": "<unit: one of celsius, fahrenheit>"},  # the example's own
        {"city": " <city> ", "unit": "celsius"},
        {"city": "<city: the city name>", "unit": "celsius"},  # shaped for its own key
        {"city": "Oslo", "unit": "celsius", "days": "<days: integer>"},
        {"city": "The city to look up", "unit": "celsius"},  # its description, written in
    ],
)
def test_any_placeholder_left_in_makes_a_copy(arguments: dict[str, Any]) -> None:
    kept, rejected = reject_copies([call("get_weather", arguments)], [WEATHER])
    assert kept == [] and len(rejected) == 1


@pytest.mark.parametrize(
    "arguments",
    [
        {"city": "Oslo", "unit": "celsius"},
        {"city": "<b>Oslo</b>", "unit": "celsius"},  # angle brackets in a real value
        {"city": "<town>", "unit": "celsius"},  # not a placeholder of ours, nor shaped for 'city'
        {"city": "Oslo", "unit": "celsius", "days": 3},
        {"city": "Unit", "unit": "celsius"},  # a one-word description may be a real value
    ],
)
def test_real_values_are_kept(arguments: dict[str, Any]) -> None:
    real = call("get_weather", arguments)
    assert reject_copies([real], [WEATHER]) == ([real], [])


def test_the_prompt_as_written_only_makes_copies() -> None:
    """Every example block in a rendered rescue prompt, parsed as a model would copy
    it, is a rejected copy: none survives as a call."""
    messages = build_rescue_request([{"role": "user", "content": "hi"}], [WEATHER], "required")
    text = "\n".join(m["content"] for m in messages)
    assert text.count(TOOL_CALL_OPEN) == text.count(TOOL_CALL_CLOSE) == 2
    parsed = parse_tool_calls(text, [WEATHER])
    kept, rejected = reject_copies(parsed.calls, [WEATHER])
    assert kept == [] and len(rejected) == 2


SCALARS = st.sampled_from(
    [{"type": t} for t in ("string", "integer", "number", "boolean")]
    + [{"enum": ["a", "b"]}, {"type": "string", "format": "date"}]
)
SCHEMAS = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.builds(lambda items: {"type": "array", "items": items}, inner),
        st.dictionaries(st.from_regex(r"[a-z]{1,6}", fullmatch=True), inner, min_size=1).map(
            lambda props: {"type": "object", "properties": props, "required": sorted(props)}
        ),
    ),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.from_regex(r"[a-z]{1,6}", fullmatch=True), SCHEMAS, min_size=1))
def test_no_example_is_a_call(properties: dict[str, Any]) -> None:
    """Whatever the schema, the example call copied as it stands is rejected."""
    parameters = {"type": "object", "properties": properties, "required": sorted(properties)}
    tool = {"type": "function", "function": {"name": "t", "parameters": parameters}}
    copied = call("t", example_arguments(parameters))
    kept, rejected = reject_copies([copied], [tool])
    assert kept == [] and len(rejected) == 1
