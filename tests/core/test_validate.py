"""Argument validation against a tool's JSON Schema: coercions and messages."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import json_trees
from toolrelay.events import ToolCall
from toolrelay.validate import parameters_schema, validate_arguments, validate_call

WEATHER: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer", "minimum": 1, "maximum": 14},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "metric": {"type": "boolean"},
                "ratio": {"type": "number"},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
                "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
                "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
                "where": {
                    "type": "object",
                    "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
                    "required": ["lat", "lon"],
                },
            },
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}


def test_valid_arguments_pass_untouched() -> None:
    arguments = {"city": "Oslo", "days": 3, "where": {"lat": 59.9, "lon": 10.7}}
    result = validate_arguments(WEATHER, arguments)
    assert result.ok and result.arguments is arguments
    assert result.coercions == () and result.errors == ()


@pytest.mark.parametrize(
    ("given_value", "key", "expected"),
    [
        ("3", "days", 3),
        (" 3 ", "days", 3),
        ("1e1", "days", 10),
        ("4.0", "days", 4),
        ("true", "metric", True),
        ("False", "metric", False),
        ("0.25", "ratio", 0.25),
        ("-2", "ratio", -2),
        ('["a", "b"]', "tags", ["a", "b"]),
        ("7", "limit", 7),
        ("null", "limit", None),
        (12345, "zip", "12345"),
    ],
)
def test_lossless_coercions_are_applied_and_reported(
    given_value: Any, key: str, expected: Any
) -> None:
    arguments = {"city": "Oslo", key: given_value}
    before = copy.deepcopy(arguments)
    result = validate_arguments(WEATHER, arguments)
    assert result.ok, result.errors
    assert result.arguments == {"city": "Oslo", key: expected}
    assert type(result.arguments[key]) is type(expected)
    [coercion] = result.coercions
    assert (coercion.path, coercion.before, coercion.after) == (key, given_value, expected)
    assert arguments == before, "the caller's arguments are never changed in place"


@pytest.mark.parametrize(
    ("given_value", "key"),
    [
        ("three", "days"),
        ("1.5", "days"),
        ("3 days", "days"),
        ("yes", "metric"),
        ("1", "metric"),
        (1, "metric"),
        ("NaN", "ratio"),
        ("Infinity", "ratio"),
        ("a", "tags"),
        ('{"a": 1}', "tags"),
        (1.5, "city"),
        (True, "city"),
        ("None", "limit"),
    ],
)
def test_guesses_are_not_coercions(given_value: Any, key: str) -> None:
    result = validate_arguments(WEATHER, {"city": "Oslo", key: given_value})
    assert not result.ok
    assert result.coercions == ()
    assert result.arguments[key] == given_value


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "'city' is required"),
        (
            {"city": "Oslo", "unit": "celcius"},
            "'unit' must be one of celsius, fahrenheit; got 'celcius'",
        ),
        ({"city": "Oslo", "days": "three"}, "'days' must be an integer; got 'three'"),
        ({"city": "Oslo", "days": 0}, "'days' must be at least 1; got 0"),
        ({"city": "Oslo", "days": "15"}, "'days' must be at most 14; got 15"),
        ({"city": 7.5}, "'city' must be a string; got 7.5"),
        (
            {"city": "Oslo", "town": "Oslo"},
            "'town' is not a parameter "
            "(parameters: city, days, unit, metric, ratio, tags, limit, zip, where)",
        ),
        ({"city": "Oslo", "tags": ["a", None]}, "'tags[1]' must be a string; got null"),
        ({"city": "Oslo", "tags": ["a", "b", "c", "d"]}, "'tags' must have at most 3 items; got 4"),
        ({"city": "Oslo", "where": {"lat": 1}}, "'where.lon' is required"),
        ({"city": "Oslo", "limit": "some"}, "'limit' must be an integer or null; got 'some'"),
        (
            {"city": "Oslo", "zip": "N1 9GU"},
            "'zip' must match the pattern ^[0-9]{5}$; got 'N1 9GU'",
        ),
        ("Oslo", "the arguments must be an object; got 'Oslo'"),
        ([1, 2], "the arguments must be an object; got [1,2]"),
    ],
)
def test_errors_say_what_to_change(arguments: Any, message: str) -> None:
    result = validate_arguments(WEATHER, arguments)
    assert not result.ok
    assert message in result.errors, result.errors


def test_every_problem_is_named_at_once_and_the_tool_name_leads() -> None:
    result = validate_arguments(WEATHER, {"unit": "kelvin", "days": "3"})
    assert result.describe("get_weather") == (
        "get_weather: 'city' is required; 'unit' must be one of celsius, fahrenheit; got 'kelvin'"
    )
    assert result.arguments["days"] == 3, "coercions hold in an invalid call too"


def test_arguments_that_are_a_json_object_in_a_string_are_decoded() -> None:
    result = validate_arguments(WEATHER, '{"city": "Oslo", "days": "2"}')
    assert result.ok and result.arguments == {"city": "Oslo", "days": 2}
    assert [c.path for c in result.coercions] == ["", "days"]


def test_long_values_and_many_problems_are_cut_short() -> None:
    many = {
        "type": "object",
        "properties": {f"p{i}": {"type": "integer"} for i in range(20)},
        "required": [f"p{i}" for i in range(20)],
    }
    result = validate_arguments(many, {})
    assert len(result.errors) == 9
    assert result.errors[-1] == "and 12 more problems"
    long = validate_arguments(WEATHER, {"city": "Oslo", "days": "x" * 500})
    assert len(long.reason) < 120


@pytest.mark.parametrize(
    "tool",
    [
        None,
        {},
        {"type": "function", "function": {"name": "noop"}},
        {"name": "noop", "parameters": {}},
        # Not JSON Schema: nothing can be checked but the arguments' shape.
        {"type": "object", "properties": {"a": {"type": "str"}}},
        # Nothing is ever fetched: a remote reference leaves the schema unchecked.
        {"$ref": "http://127.0.0.1:9/schema.json"},
    ],
)
def test_without_a_usable_schema_any_object_is_valid(tool: Any) -> None:
    assert validate_arguments(tool, {"anything": [1, 2]}).ok
    assert not validate_arguments(tool, "text").ok


def test_the_schema_is_found_in_each_kind_of_tool_entry() -> None:
    schema = WEATHER["function"]["parameters"]
    assert parameters_schema(WEATHER) is schema
    assert parameters_schema({"name": "get_weather", "parameters": schema}) is schema
    assert parameters_schema(schema) is schema


def test_local_references_are_followed() -> None:
    schema = {
        "type": "object",
        "properties": {"when": {"$ref": "#/$defs/day"}},
        "$defs": {"day": {"type": "integer", "minimum": 1}},
    }
    assert validate_arguments(schema, {"when": "2"}).arguments == {"when": 2}
    assert validate_arguments(schema, {"when": 0}).errors == ("'when' must be at least 1; got 0",)


def test_validate_call_rewrites_arguments_json_only_when_coerced() -> None:
    call = ToolCall(
        "call_1", "get_weather", {"city": "Oslo", "days": "2"}, '{"city":"Oslo","days":"2"}'
    )
    coerced, result = validate_call(call, WEATHER)
    assert result.ok and coerced.arguments_json == '{"city":"Oslo","days":2}'
    assert coerced.id == call.id and coerced.name == call.name
    plain = ToolCall("call_2", "get_weather", {"city": "Oslo"}, '{"city":"Oslo"}')
    assert validate_call(plain, WEATHER)[0] is plain


JSON = json_trees(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    st.text(max_size=5),
    leaves=12,
    width=4,
    object_width=4,
)


@settings(max_examples=150, deadline=None)
@given(arguments=JSON)
def test_any_json_value_gets_an_answer_and_coercions_are_lossless(arguments: Any) -> None:
    result = validate_arguments(WEATHER, arguments)
    assert result.ok or result.errors
    for coercion in result.coercions:
        if isinstance(coercion.before, str):
            # Each coercion reads the text back as JSON: nothing is invented.
            assert orjson.loads(coercion.before.strip().lower()) == coercion.after or (
                isinstance(coercion.after, int) and float(coercion.before) == coercion.after
            )
        else:
            assert str(coercion.before) == coercion.after


@settings(max_examples=100, deadline=None)
@given(
    city=st.text(max_size=20),
    days=st.integers(min_value=1, max_value=14),
    metric=st.booleans(),
)
def test_stringified_scalars_come_back_as_they_were(city: str, days: int, metric: bool) -> None:
    original = {"city": city, "days": days, "metric": metric}
    sent = {"city": city, "days": str(days), "metric": str(metric).lower()}
    result = validate_arguments(WEATHER, sent)
    assert result.ok and result.arguments == original


SCHEMA_KEYWORDS = st.sampled_from(
    [
        "type",
        "properties",
        "required",
        "enum",
        "items",
        "anyOf",
        "oneOf",
        "minimum",
        "pattern",
        "additionalProperties",
        "$ref",
        "const",
        "format",
        "maxLength",
        "not",
        "$defs",
    ]
)
SCHEMAS = st.recursive(
    st.dictionaries(SCHEMA_KEYWORDS, JSON, max_size=4),
    lambda inner: st.dictionaries(
        SCHEMA_KEYWORDS, inner | st.lists(inner, max_size=3) | JSON, max_size=4
    ),
    max_leaves=10,
)


@settings(max_examples=300, deadline=None)
@given(schema=SCHEMAS, arguments=JSON)
def test_no_schema_a_client_sends_makes_validation_raise(schema: Any, arguments: Any) -> None:
    result = validate_arguments(schema, arguments)
    assert result.ok or all(isinstance(error, str) and error for error in result.errors)
