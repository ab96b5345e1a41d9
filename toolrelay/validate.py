"""Checking a tool call's arguments against the tool's JSON Schema.

::

    result = validate_arguments(tool, {"city": "Oslo", "days": "3"})
    result.ok           # True: "3" became 3 for the integer parameter
    result.arguments    # {"city": "Oslo", "days": 3}
    result.coercions    # (Coercion(path="days", before="3", after=3),)
    result.errors       # (): else sentences such as "'city' is required"

``tool`` is a :class:`~toolrelay.types.ToolSpec`, an OpenAI tool entry
(``{"type": "function", "function": {...}}``), a flat ``{"name",
"parameters"}`` one, or the parameters schema itself. Each
schema is compiled once (jsonschema-rs, chosen by measurement: bench/) and kept
in a bounded cache keyed by its JSON text, so a valid call costs one cache
look-up and one native ``is_valid``. Only an invalid call pays for more: its
errors are collected, the lossless coercions applied (a string that spells a
number, a boolean or null for a parameter of that type, a JSON array or object
sent as a string, an integer for a string parameter) and what is left is
turned into messages a model can act on. Coercions never guess: a value is
changed only when the text says exactly what the schema wants.

A schema that cannot be compiled (not valid JSON Schema, or a ``$ref`` to a
document elsewhere: nothing is ever fetched) checks nothing but that the
arguments are an object; the tool's own server is left to judge them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import jsonschema_rs
import orjson

from toolrelay.events import ToolCall
from toolrelay.repair import INT_DIGITS, json_text
from toolrelay.types import NO_PARAMETERS, ToolSpec

# Compiled schemas kept; a gateway sees the same few tool sets over and over.
CACHE_SIZE = 1024
# A reply names at most this many problems of one call: enough to fix it in one go.
MAX_ERRORS = 8
_SHOWN_VALUE = 60
_SHOWN_OPTIONS = 20

_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_TYPE_NAMES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "object": "an object",
    "array": "an array",
    "null": "null",
}
# Which coercion to try first when a value may become one of several types.
_PREFERENCE = ("integer", "number", "boolean", "null", "array", "object", "string")


@dataclass(frozen=True)
class Coercion:
    """A value changed into the type its parameter declares, without loss."""

    path: str
    before: Any
    after: Any

    def __str__(self) -> str:
        return f"{_where(self.path)}: {_shown(self.before)} -> {_shown(self.after)}"


@dataclass(frozen=True)
class Validation:
    """The outcome of checking one call's arguments.

    ``arguments`` are the arguments with every coercion applied (as given
    when none was needed); ``errors`` says what is still wrong, one sentence
    each, without the tool's name (:meth:`describe` adds it).
    """

    arguments: Any = field(hash=False)
    coercions: tuple[Coercion, ...] = ()
    errors: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def reason(self) -> str:
        """The errors as one line: ``'city' is required; 'days' must be an integer; got 'x'``."""
        return "; ".join(self.errors)

    def describe(self, name: str) -> str:
        """``get_weather: 'city' is required``: the problem as a model is told it."""
        return f"{name}: {self.reason}"


def validate_arguments(tool: ToolSpec | Mapping[str, Any] | None, arguments: Any) -> Validation:
    """Check ``arguments`` against the parameters schema of ``tool`` (see the module doc)."""
    if valid_as_sent(tool, arguments):
        return Validation(arguments)
    schema = parameters_schema(tool)
    validator = _validator(schema)
    if validator is None:
        return Validation(arguments, errors=(_type_error([], ["object"], arguments),))
    try:
        return _slow_path(validator, schema, arguments)
    except ValueError:
        # Values JSON cannot carry (a lone surrogate) are the tool's to judge.
        return Validation(arguments)


def valid_as_sent(tool: ToolSpec | Mapping[str, Any] | None, arguments: Any) -> bool:
    """Whether ``arguments`` stand as they are (no coercion, no error): the one native
    check a valid call costs, without a :class:`Validation` made for it. False: ask
    :func:`validate_arguments` what is wrong, or what a coercion mends."""
    return valid_under(schema_validator(tool), arguments)


def schema_validator(tool: ToolSpec | Mapping[str, Any] | None) -> jsonschema_rs.Validator | None:
    """The compiled check of ``tool``'s parameters schema; None when there is none
    to compile (the arguments need only be an object). A caller that keeps it for a
    schema no one changes (:class:`~toolrelay.names.ToolSet`'s, of a kept tool list)
    skips the schema's encoding and the compiled cache's lookup on every call."""
    return _validator(parameters_schema(tool))


def valid_under(validator: jsonschema_rs.Validator | None, arguments: Any) -> bool:
    """:func:`valid_as_sent` with the schema's check (:func:`schema_validator`) at hand."""
    if validator is None:
        return isinstance(arguments, dict)
    try:
        return bool(validator.is_valid(arguments))
    except ValueError:
        # Values JSON cannot carry (a lone surrogate) are the tool's to judge.
        return True


def validate_call(
    call: ToolCall, tool: ToolSpec | Mapping[str, Any] | None
) -> tuple[ToolCall, Validation]:
    """The call with its coercions applied (the same call when there were none)."""
    result = validate_arguments(tool, call.arguments)
    if not result.coercions or not isinstance(result.arguments, dict):
        return call, result
    coerced = ToolCall(call.id, call.name, result.arguments, json_text(result.arguments))
    return coerced, result


def parameters_schema(tool: ToolSpec | Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The parameters schema of a tool (its spec or its entry: :data:`NO_PARAMETERS`
    when it declares none), or ``tool`` itself when it is a schema."""
    if isinstance(tool, ToolSpec):
        return tool.parameters
    if not isinstance(tool, Mapping):
        return None
    if (
        isinstance(tool.get("function"), Mapping)
        or "parameters" in tool
        or ("name" in tool and "properties" not in tool)
    ):
        spec = ToolSpec.read(tool)
        return spec.parameters if spec is not None else NO_PARAMETERS
    return tool


def _validator(schema: Mapping[str, Any] | None) -> jsonschema_rs.Validator | None:
    if not schema or schema is NO_PARAMETERS:
        return None  # nothing to check but that the arguments are an object
    try:
        key = orjson.dumps(schema)
    except TypeError:
        return None
    return _compiled(key)


@lru_cache(maxsize=CACHE_SIZE)
def _compiled(key: bytes) -> jsonschema_rs.Validator | None:
    try:
        return jsonschema_rs.validator_for(orjson.loads(key), retriever=_no_retrieval)
    except ValueError:  # jsonschema_rs.ValidationError: not a usable schema
        return None


def _no_retrieval(uri: str) -> Any:
    raise ValueError(f"{uri} is not fetched: tool schemas are checked offline")


# --- invalid arguments ---------------------------------------------------------


def _slow_path(
    validator: jsonschema_rs.Validator, schema: Mapping[str, Any] | None, arguments: Any
) -> Validation:
    coercions: list[Coercion] = []
    copied = False
    # A second pass only after the arguments themselves were decoded from a
    # string: their values are then seen for the first time.
    for _ in range(2):
        decoded = False
        for error in validator.iter_errors(arguments):
            found = _coercion(error)
            if found is None:
                continue
            coercions.append(found)
            if not error.instance_path:
                arguments, copied, decoded = found.after, True, True
                break
            if not copied:
                arguments, copied = _copy(arguments), True
            _set(arguments, error.instance_path, found.after)
        if not decoded:
            break
    errors: list[str] = []
    # Missing parameters first: they are what a model most often needs to add.
    ordered = sorted(
        validator.iter_errors(arguments),
        key=lambda error: not isinstance(error.kind, jsonschema_rs.ValidationErrorKind.Required),
    )
    for error in ordered:
        for message in _messages(error, schema):
            if message not in errors:
                errors.append(message)
    if len(errors) > MAX_ERRORS:
        errors[MAX_ERRORS:] = [f"and {len(errors) - MAX_ERRORS} more problems"]
    return Validation(arguments, tuple(coercions), tuple(errors))


def _coercion(error: jsonschema_rs.ValidationError) -> Coercion | None:
    kind = error.kind
    if isinstance(kind, jsonschema_rs.ValidationErrorKind.Type):
        types = list(kind.types)
    elif isinstance(
        kind,
        (jsonschema_rs.ValidationErrorKind.AnyOf, jsonschema_rs.ValidationErrorKind.OneOfNotValid),
    ):
        types = _branch_types(kind.context, error.instance_path)
    else:
        return None
    value = error.instance
    for kind_name in sorted(types, key=_PREFERENCE.index):
        after = _coerced(value, kind_name)
        if after is not _NOT_COERCIBLE:
            return Coercion(_path(error.instance_path), value, after)
    return None


def _branch_types(
    branches: list[list[jsonschema_rs.ValidationError]], at: list[str | int]
) -> list[str]:
    """The types of the alternatives that fail only for the value's type."""
    types: list[str] = []
    for errors in branches:
        if len(errors) != 1 or errors[0].instance_path != at:
            continue
        kind = errors[0].kind
        if isinstance(kind, jsonschema_rs.ValidationErrorKind.Type):
            types.extend(t for t in kind.types if t not in types)
    return [t for t in types if t in _PREFERENCE]


_NOT_COERCIBLE = object()


def _coerced(value: Any, kind: str) -> Any:
    """``value`` as ``kind`` when that is what it spells exactly, else _NOT_COERCIBLE."""
    if kind == "string":
        # An integer's decimal digits are the only way to write it; a float's are not.
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        return _NOT_COERCIBLE
    if not isinstance(value, str):
        return _NOT_COERCIBLE
    text = value.strip()
    if kind in ("integer", "number"):
        found = _JSON_NUMBER.fullmatch(text)
        if found is None:
            return _NOT_COERCIBLE
        if not found.group(1) and not found.group(2):
            # Beyond INT_DIGITS the digits stay a string (docs/formats.md): no int to make.
            return int(text) if len(text.lstrip("-")) <= INT_DIGITS else _NOT_COERCIBLE
        number = float(text)
        if kind == "integer":
            # Beyond 2**53 a float no longer holds every integer.
            return int(number) if number.is_integer() and abs(number) < 2**53 else _NOT_COERCIBLE
        return number if number not in (float("inf"), float("-inf")) else _NOT_COERCIBLE
    if kind == "boolean":
        lowered = text.lower()
        return {"true": True, "false": False}.get(lowered, _NOT_COERCIBLE)
    if kind == "null":
        return None if text.lower() == "null" else _NOT_COERCIBLE
    if kind in ("array", "object") and text[:1] in ("[", "{"):
        try:
            decoded = orjson.loads(text)
        except orjson.JSONDecodeError:
            return _NOT_COERCIBLE
        if isinstance(decoded, list if kind == "array" else dict):
            return decoded
    return _NOT_COERCIBLE


def _messages(error: jsonschema_rs.ValidationError, schema: Mapping[str, Any] | None) -> list[str]:
    kinds = jsonschema_rs.ValidationErrorKind
    kind = error.kind
    at = error.instance_path
    value = error.instance
    if isinstance(kind, kinds.Required):
        return [f"{_where(_path([*at, kind.property]))} is required"]
    if isinstance(kind, kinds.AdditionalProperties):
        known = _properties(schema, error.schema_path[:-1])
        hint = f" (parameters: {', '.join(known)})" if known else ""
        return [
            f"{_where(_path([*at, name]))} is not a parameter{' here' if at else ''}{hint}"
            for name in kind.unexpected
        ]
    if isinstance(kind, kinds.Type):
        return [_type_error(at, kind.types, value)]
    if isinstance(kind, kinds.Enum):
        options = ", ".join(_option(option) for option in kind.options[:_SHOWN_OPTIONS])
        if len(kind.options) > _SHOWN_OPTIONS:
            options += ", …"
        return [f"{_where(_path(at))} must be one of {options}; got {_shown(value)}"]
    if isinstance(kind, kinds.Constant):
        return [f"{_where(_path(at))} must be {_shown(kind.expected_value)}; got {_shown(value)}"]
    return [f"{_where(_path(at))} {_rule(kind, error)}{_got(kind, value)}"]


def _rule(kind: jsonschema_rs.ValidationErrorKind, error: jsonschema_rs.ValidationError) -> str:
    """What the value must be, for the keywords a tool schema commonly uses."""
    kinds = jsonschema_rs.ValidationErrorKind
    if isinstance(kind, kinds.Minimum):
        return f"must be at least {kind.limit}"
    if isinstance(kind, kinds.Maximum):
        return f"must be at most {kind.limit}"
    if isinstance(kind, kinds.ExclusiveMinimum):
        return f"must be greater than {kind.limit}"
    if isinstance(kind, kinds.ExclusiveMaximum):
        return f"must be less than {kind.limit}"
    if isinstance(kind, kinds.MultipleOf):
        return f"must be a multiple of {kind.multiple_of}"
    if isinstance(kind, kinds.MinLength):
        return f"must be at least {kind.limit} characters long"
    if isinstance(kind, kinds.MaxLength):
        return f"must be at most {kind.limit} characters long"
    if isinstance(kind, kinds.Pattern):
        return f"must match the pattern {kind.pattern}"
    if isinstance(kind, kinds.Format):
        return f"must be a valid {kind.format}"
    if isinstance(kind, kinds.MinItems):
        return f"must have at least {kind.limit} item{'s' if kind.limit != 1 else ''}"
    if isinstance(kind, kinds.MaxItems):
        return f"must have at most {kind.limit} item{'s' if kind.limit != 1 else ''}"
    if isinstance(kind, kinds.UniqueItems):
        return "must not repeat an item"
    if isinstance(kind, kinds.MinProperties):
        return f"must have at least {kind.limit} entries"
    if isinstance(kind, kinds.MaxProperties):
        return f"must have at most {kind.limit} entries"
    if isinstance(kind, (kinds.AnyOf, kinds.OneOfNotValid)):
        types = _branch_types(kind.context, error.instance_path)
        if types:
            return "must be " + " or ".join(_TYPE_NAMES[t] for t in types)
        return "matches none of the forms the schema allows"
    if isinstance(kind, kinds.OneOfMultipleValid):
        return "matches more than one of the forms the schema allows, and must match exactly one"
    if isinstance(kind, (kinds.Not, kinds.FalseSchema)):
        return "is not allowed"
    # Rarer keywords (contains, dependencies, unevaluated*): the validator's own words.
    return "is invalid: " + error.message


def _got(kind: jsonschema_rs.ValidationErrorKind, value: Any) -> str:
    kinds = jsonschema_rs.ValidationErrorKind
    if isinstance(
        kind, (kinds.Not, kinds.FalseSchema, kinds.UniqueItems, kinds.OneOfMultipleValid)
    ):
        return ""
    if isinstance(kind, (kinds.MinItems, kinds.MaxItems)) and isinstance(value, list):
        return f"; got {len(value)}"
    if isinstance(kind, (kinds.MinLength, kinds.MaxLength)) and isinstance(value, str):
        return f"; got {len(value)}"
    if isinstance(kind, (kinds.MinProperties, kinds.MaxProperties)) and isinstance(value, dict):
        return f"; got {len(value)}"
    return f"; got {_shown(value)}"


def _type_error(at: list[str | int], types: Iterable[str], value: Any) -> str:
    wanted = " or ".join(_TYPE_NAMES.get(t, t) for t in types)
    return f"{_where(_path(at))} must be {wanted}; got {_shown(value)}"


def _properties(schema: Mapping[str, Any] | None, location: list[str | int]) -> list[str]:
    """The declared property names of the subschema at ``location`` (best effort)."""
    node: Any = schema
    for part in location:
        if isinstance(node, Mapping) and isinstance(part, str):
            node = node.get(part)
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        else:
            return []
    properties = node.get("properties") if isinstance(node, Mapping) else None
    return [str(name) for name in properties] if isinstance(properties, Mapping) else []


# --- paths and values ----------------------------------------------------------


def _path(parts: Iterable[str | int]) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def _where(path: str) -> str:
    return f"'{path}'" if path else "the arguments"


def _shown(value: Any) -> str:
    if isinstance(value, str):
        text = value if len(value) <= _SHOWN_VALUE else value[: _SHOWN_VALUE - 1] + "…"
        return f"'{text}'"
    text = json_text(value)
    return text if len(text) <= _SHOWN_VALUE else text[: _SHOWN_VALUE - 1] + "…"


def _option(value: Any) -> str:
    return value if isinstance(value, str) else json_text(value)


def _set(value: Any, path: list[str | int], new: Any) -> None:
    for part in path[:-1]:
        value = value[part]
    value[path[-1]] = new


def _copy(value: Any) -> Any:
    """A copy deep enough to change values in: containers copied, leaves shared."""
    if isinstance(value, dict):
        return {key: _copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copy(item) for item in value]
    return value
