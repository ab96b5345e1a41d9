"""toolrelay.constrain: every call a constraint admits is a valid call.

The references: jsonschema-rs judges calls against the constraint and the
arguments against the tool's own schema (refs and all), on calls drawn from
the tools' schemas, some of them spoiled; the GBNF grammar is read by a Lark
Earley parser (tests/core/gbnf.py).
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema_rs
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.core.gbnf import accepts, parser
from tests.strategies import json_trees
from toolrelay.constrain import (
    call_grammar,
    call_schema,
    call_structural_tag,
    engine_schema,
    text_without,
)
from toolrelay.rescue import TOOL_CALL_CLOSE, TOOL_CALL_OPEN
from toolrelay.types import ToolSpec

_names = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True)
_scalars = st.sampled_from(
    [
        {"type": "string"},
        {"type": "string", "maxLength": 5},
        {"type": "integer", "minimum": 0, "maximum": 9},
        {"type": "number"},
        {"type": "boolean"},
        {"type": "null"},
        {"enum": ["a", "b", 3]},
        {"const": "fixed"},
        {"$ref": "#/$defs/unit"},
    ]
)


@st.composite
def _value_schemas(draw: st.DrawFn, depth: int = 2) -> dict[str, Any]:
    if depth == 0 or draw(st.booleans()):
        return draw(_scalars)
    if draw(st.booleans()):
        return {"type": "array", "items": draw(_value_schemas(depth - 1)), "maxItems": 3}
    return draw(_object_schemas(depth - 1))


@st.composite
def _object_schemas(draw: st.DrawFn, depth: int = 2) -> dict[str, Any]:
    keys = draw(st.lists(_names, max_size=3, unique=True))
    properties = {key: draw(_value_schemas(depth)) for key in keys}
    required = [key for key in keys if draw(st.booleans())]
    schema: dict[str, Any] = {"type": "object", "properties": properties, "required": required}
    if draw(st.booleans()):
        schema["additionalProperties"] = False
    return schema


@st.composite
def _tool_lists(draw: st.DrawFn) -> list[ToolSpec]:
    names = draw(st.lists(_names, min_size=1, max_size=3, unique=True))
    tools = []
    for name in names:
        parameters = draw(_object_schemas())
        parameters["$defs"] = {"unit": {"enum": ["celsius", "fahrenheit"]}}
        tools.append(ToolSpec(name, parameters=parameters))
    return tools


_ANY_JSON = json_trees(
    st.none() | st.booleans() | st.integers(-3, 12) | st.text(max_size=3),
    st.text(max_size=3),
    leaves=4,
    width=2,
    object_width=2,
)
_SAMPLES = {
    "string": st.text(max_size=6),
    "integer": st.integers(-2, 12),
    "number": st.floats(allow_nan=False, allow_infinity=False),
    "boolean": st.booleans(),
    "null": st.none(),
}


@st.composite
def _instances(draw: st.DrawFn, schema: Any, root: Any, spoil: bool) -> Any:
    """A value for ``schema`` (the subset the strategies above write), mostly valid;
    with ``spoil``, now and then anything at all instead."""
    if spoil and draw(st.integers(0, 9)) == 0:
        return draw(_ANY_JSON)
    if "$ref" in schema:
        return draw(_instances(root["$defs"][schema["$ref"].rsplit("/", 1)[1]], root, spoil))
    if "enum" in schema:
        return draw(st.sampled_from(schema["enum"]))
    if "const" in schema:
        return schema["const"]
    kind = schema["type"]
    if kind == "array":
        return draw(st.lists(_instances(schema["items"], root, spoil), max_size=3))
    if kind == "object":
        out = {}
        for key, sub in schema["properties"].items():
            if key in schema["required"] or draw(st.booleans()):
                out[key] = draw(_instances(sub, root, spoil))
        if spoil and draw(st.booleans()):
            out[draw(st.text(max_size=3))] = draw(_ANY_JSON)
        return out
    return draw(_SAMPLES[kind])


def _valid(schema: Any, instance: Any) -> bool:
    return bool(jsonschema_rs.validator_for(schema).is_valid(instance))


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_the_schema_admits_exactly_the_valid_calls(data: st.DataObject) -> None:
    """Whatever the constraint admits is a call of an allowed tool with valid
    arguments, and every such call is admitted: it takes nothing away."""
    tools = data.draw(_tool_lists())
    schema = call_schema(tools)
    assert schema is not None
    tool = data.draw(st.sampled_from(tools))
    parameters = dict(tool.parameters)
    arguments = data.draw(_instances(parameters, parameters, spoil=True))
    name = data.draw(st.sampled_from([tool.name, tool.name + "x"]))
    call: Any = {"name": name, "arguments": arguments}
    if data.draw(st.integers(0, 9)) == 0:
        call = data.draw(st.sampled_from([{"name": name}, {**call, "extra": 1}, [call]]))
    well_formed = isinstance(call, dict) and set(call) == {"name", "arguments"}
    allowed = {t.name for t in tools}
    expected = (
        well_formed
        and name in allowed
        and _valid(dict(next(t for t in tools if t.name == name).parameters), arguments)
    )
    assert _valid(schema, call) == expected


def test_a_named_tool_is_its_own_schema() -> None:
    tool = ToolSpec("get_weather", parameters={"type": "object", "properties": {}})
    schema = call_schema([tool])
    assert schema is not None
    assert schema["properties"]["name"] == {"const": "get_weather"}
    assert "anyOf" not in schema


def test_recursive_or_external_references_cannot_be_constrained() -> None:
    recursive = {
        "type": "object",
        "properties": {"tree": {"$ref": "#/$defs/node"}},
        "$defs": {"node": {"type": "object", "properties": {"kids": {"$ref": "#/$defs/node"}}}},
    }
    assert engine_schema(recursive) is None
    assert engine_schema({"$ref": "https://example.com/schema.json"}) is None
    assert engine_schema({"$ref": "#/$defs/missing"}) is None
    plain = ToolSpec("ok")
    assert call_schema([plain, ToolSpec("tree", parameters=recursive)]) is None
    assert call_structural_tag([ToolSpec("tree", parameters=recursive)], "<a>", "</a>") is None


def test_literals_are_not_read_as_references() -> None:
    schema = {
        "type": "object",
        "properties": {"default": {"const": {"$ref": "#/nowhere"}}, "$defs": {"type": "string"}},
    }
    assert engine_schema(schema) == schema


def test_custom_tools_take_free_text_and_are_not_constrained() -> None:
    assert call_schema([ToolSpec("patch", kind="custom")]) is None
    assert call_grammar([ToolSpec("patch", kind="custom")], "<a>", "</a>") is None


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_the_structural_tag_holds_each_tool_to_its_schema(data: st.DataObject) -> None:
    tools = data.draw(_tool_lists())
    tag = call_structural_tag(tools, TOOL_CALL_OPEN, TOOL_CALL_CLOSE)
    assert tag is not None and tag["triggers"] == [TOOL_CALL_OPEN]
    structure = data.draw(st.sampled_from(tag["structures"]))
    schema = structure["schema"]
    arguments = data.draw(_instances(schema, schema, spoil=True))
    # The engine lets through what fits the structure's schema, and only that.
    assume(_valid(schema, arguments))
    # What the engine lets through: begin, arguments, end; read back as the rescue
    # format's call, it is a valid call of the tool the structure names.
    text = structure["begin"] + json.dumps(arguments) + structure["end"]
    assert text.startswith(TOOL_CALL_OPEN) and text.endswith(TOOL_CALL_CLOSE)
    call = json.loads(text[len(TOOL_CALL_OPEN) : -len(TOOL_CALL_CLOSE)])
    tool = next(tool for tool in tools if tool.name == call["name"])
    assert _valid(dict(tool.parameters), call["arguments"])


_json_objects = st.dictionaries(
    st.text(max_size=6),
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(max_size=6),
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
        ),
        max_leaves=6,
    ),
    max_size=3,
)


def _block(name: str, arguments: Any, indent: int | None = None) -> str:
    call = json.dumps({"name": name, "arguments": arguments}, indent=indent, ensure_ascii=False)
    return f"{TOOL_CALL_OPEN}{call}{TOOL_CALL_CLOSE}"


_TOOLS = [ToolSpec("get_weather"), ToolSpec('odd "name"\\x')]
_MANY = parser(call_grammar(_TOOLS, TOOL_CALL_OPEN, TOOL_CALL_CLOSE) or "")
_ONE = parser(call_grammar(_TOOLS, TOOL_CALL_OPEN, TOOL_CALL_CLOSE, many=False) or "")


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(_TOOLS), _json_objects, st.sampled_from([None, 1]))
def test_the_grammar_admits_each_call_in_the_rescue_format(
    tool: ToolSpec, arguments: dict[str, Any], indent: int | None
) -> None:
    block = _block(tool.name, arguments, indent)
    assert accepts(_MANY, block)
    assert accepts(_ONE, block)
    assert accepts(_MANY, block + "\n" + block)


@settings(max_examples=80, deadline=None)
@given(_json_objects, st.text(max_size=8))
def test_the_grammar_admits_no_other_name_and_nothing_but_calls(
    arguments: dict[str, Any], name: str
) -> None:
    if name not in {tool.name for tool in _TOOLS}:
        assert not accepts(_MANY, _block(name, arguments))
    block = _block("get_weather", arguments)
    assert not accepts(_ONE, block + block)
    assert not accepts(_MANY, block + " and more prose")
    # Arguments that are not an object, and a missing closing marker, are out too.
    assert not accepts(_MANY, _block("get_weather", [arguments]))
    assert not accepts(_MANY, block[: -len(TOOL_CALL_CLOSE)])


_WITHOUT = parser(text_without(TOOL_CALL_OPEN) or "")
# Text near the marker: its own characters, most of all.
_near_marker = st.text(
    alphabet=st.sampled_from([*TOOL_CALL_OPEN, "x", " ", "\n", "é"]), max_size=30
)


@settings(max_examples=150, deadline=None)
@given(_near_marker, _near_marker)
def test_the_grammar_for_none_admits_exactly_the_texts_without_the_marker(
    before: str, after: str
) -> None:
    for text in (before, before + TOOL_CALL_OPEN + after, before + TOOL_CALL_OPEN[:-1] + after):
        assert accepts(_WITHOUT, text) == (TOOL_CALL_OPEN not in text)
