"""Typing of text parameter values by the tool's JSON Schema.

XML-style formats deliver every parameter as text; the schema says what it
was meant to be. A value that does not fit its declared type is kept as the
model wrote it rather than guessed at.

A schema may allow several types, as a list (``"type": ["string", "null"]``)
or with ``anyOf``/``oneOf``; both are read alike. When ``string`` is one of
them, the text becomes another type only when it is that type's JSON
spelling exactly (``null``, ``42``, ``true``, a JSON object): a string that
is not only a string keeps its text otherwise (``"042"``, ``"yes"``). Without
``string``, the text is read leniently for each type in turn.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

import orjson

from toolrelay.repair import repair_json

_TRUE = {"true", "yes", "1"}
_FALSE = {"false", "no", "0"}
_NULL = {"null", "none", ""}


def schema_types(schema: Mapping[str, Any] | None) -> list[str]:
    """The JSON types a schema allows, in order, "null" last."""
    if not schema:
        return []
    found: list[str] = []
    declared = schema.get("type")
    if isinstance(declared, str):
        found.append(declared)
    elif isinstance(declared, list):
        found.extend(t for t in declared if isinstance(t, str))
    for key in ("anyOf", "oneOf", "allOf"):
        options = schema.get(key)
        if isinstance(options, list):
            for option in options:
                if isinstance(option, Mapping):
                    found.extend(schema_types(option))
    if not found and "enum" in schema:
        found.append("string")
    if not found and "properties" in schema:
        found.append("object")
    unique = list(dict.fromkeys(found))
    return [t for t in unique if t != "null"] + (["null"] if "null" in unique else [])


def is_string_schema(schema: Mapping[str, Any] | None) -> bool:
    """The value can only be a string: its text streams as one."""
    return schema_types(schema) == ["string"]


def is_nullable_string(schema: Mapping[str, Any] | None) -> bool:
    """A string or null (``Optional[str]``): a string once its text cannot be ``null``."""
    return schema_types(schema) == ["string", "null"]


def could_be_null(text: str) -> bool:
    """Whether the text of a nullable string so far may still turn out to be ``null``."""
    left = text.lstrip()
    word = left.rstrip()
    if word != left:  # blanks after the word: nothing more can join it
        return word in ("", "null")
    return "null".startswith(word)


_MISSING = object()


def _as_type(text: str, kind: str) -> Any:
    stripped = text.strip()
    lowered = stripped.lower()
    if kind == "string":
        return text
    if kind in ("integer", "number"):
        number = _number(stripped)
        if number is None:
            return _MISSING
        if kind == "integer":
            return int(number) if float(number).is_integer() else _MISSING
        return number
    if kind == "boolean":
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        return _MISSING
    if kind == "null":
        return None if lowered in _NULL else _MISSING
    if kind in ("object", "array"):
        expected = dict if kind == "object" else list
        value = _escaped_json(stripped)
        if not isinstance(value, expected):
            value = repair_json(stripped, depth=1, lossless=True)
        return value if isinstance(value, expected) else _MISSING
    return _MISSING


_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_JSON_LITERALS = {"true": True, "false": False}


def _as_exact(text: str, kind: str) -> Any:
    """``text`` as a ``kind`` value only if it is that value's JSON spelling (blanks aside)."""
    stripped = text.strip()
    if kind == "null":
        return None if stripped == "null" else _MISSING
    if kind == "boolean":
        return _JSON_LITERALS.get(stripped, _MISSING)
    if kind in ("integer", "number"):
        return _as_type(stripped, kind) if _JSON_NUMBER.fullmatch(stripped) else _MISSING
    if kind in ("object", "array"):
        brackets = "{}" if kind == "object" else "[]"
        if stripped[:1] == brackets[0] and stripped[-1:] == brackets[1]:
            return _as_type(stripped, kind)
    return _MISSING


def _number(text: str) -> int | float | None:
    """The finite number ``text`` spells, an int when it is written as one."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _escaped_json(text: str) -> Any:
    """JSON that the model escaped as if writing it inside a string: ``[{\\"id\\": 1}]``.

    Lenient repair would read such text as a truncated ``[{}]``, so it is
    decoded first; None when the text is not of that kind. Parameter values
    sit inside the arguments object: one level of MAX_DEPTH is theirs.
    """
    if '\\"' not in text:
        return None
    try:
        unescaped = orjson.loads('"' + text + '"')
    except orjson.JSONDecodeError:
        return None
    return repair_json(unescaped, depth=1) if isinstance(unescaped, str) else None


def coerce_text(text: str, schema: Mapping[str, Any] | None) -> Any:
    """The value a text parameter stands for under ``schema``.

    Without a schema, text that is a JSON literal (number, boolean, null,
    object, array) becomes that value and anything else stays a string.
    """
    types = schema_types(schema)
    if not types:
        value = _escaped_json(text.strip())
        if not isinstance(value, (dict, list)):
            value = repair_json(text.strip(), depth=1) if _looks_like_json(text) else _MISSING
        return text if value is _MISSING or (value is None and text.strip() != "null") else value
    if "string" in types and len(types) > 1:
        for kind in types:
            if kind != "string":
                value = _as_exact(text, kind)
                if value is not _MISSING:
                    return value
        return text
    for kind in types:
        value = _as_type(text, kind)
        if value is not _MISSING:
            return value
    return text


# What a text float() reads may begin with: a sign, a point, inf or nan, or a digit
# (any decimal digit: float() reads them all).
_NUMBER_START = frozenset("+-.0123456789iInN")


def _looks_like_json(text: str) -> bool:
    stripped = text.strip()
    if not stripped:
        return False
    if stripped[0] in "{[":
        return stripped[-1] in "}]"
    if stripped in ("true", "false", "null"):
        return True
    if stripped[0] not in _NUMBER_START and not stripped[0].isdecimal():
        return False  # float() would say so too, after reading all of a long text
    try:
        float(stripped)
    except ValueError:
        return False
    return stripped.lower() not in ("nan", "inf", "-inf", "infinity", "-infinity")
