"""Constrained decoding, as the simulated server does it (``--constraints``).

The request fields read are those of the servers toolrelay constrains:
``response_format`` (``json_schema``, and vLLM's and SGLang's
``structural_tag``), llama.cpp's ``json_schema`` and ``grammar``
(``grammar_lazy``, ``grammar_triggers``), vLLM's ``structured_outputs.json``
and legacy ``guided_json``, Ollama's ``format`` on ``/api/chat``.

``honour`` applies them to the scripted answer as a decoder would let it
through: under a JSON schema the answer becomes an instance of it (the
scripted call that fits, else values made up from the schema); under a
structural tag the first call after the trigger is kept when its arguments fit
the structure's schema, else given arguments that do. A GBNF grammar is
accepted but not applied (the simulator runs no grammar engine). ``ignore``
reads nothing; ``refuse`` answers a constrained request with a 400.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import jsonschema_rs

ConstraintsMode = Literal["honour", "ignore", "refuse"]


@dataclass(frozen=True)
class Structure:
    begin: str
    schema: Mapping[str, Any]
    end: str


@dataclass(frozen=True)
class Requested:
    """A constraint a request carries."""

    # The request field that carries it, for a refusal's message.
    field: str
    # The whole answer's schema (json_schema, structured outputs, Ollama's format).
    schema: Mapping[str, Any] | None = None
    # A structural tag: its structures and triggers.
    structures: tuple[Structure, ...] = ()
    triggers: tuple[str, ...] = ()


def requested(body: Mapping[str, Any], *, ollama: bool = False) -> Requested | None:
    """The constraint ``body`` asks for, if any."""
    if ollama:
        shape = body.get("format")
        return Requested("format", schema=shape) if isinstance(shape, Mapping) else None
    response_format = body.get("response_format")
    if isinstance(response_format, Mapping):
        kind = response_format.get("type")
        if kind == "json_schema":
            inner = response_format.get("json_schema")
            schema = inner.get("schema") if isinstance(inner, Mapping) else None
            if isinstance(schema, Mapping):
                return Requested("response_format", schema=schema)
        if kind == "structural_tag":
            return _structural_tag(response_format)
    for field, schema in (
        ("json_schema", body.get("json_schema")),
        ("guided_json", body.get("guided_json")),
        ("structured_outputs", _get(body.get("structured_outputs"), "json")),
    ):
        if isinstance(schema, Mapping):
            return Requested(field, schema=schema)
    if isinstance(body.get("grammar"), str):
        return Requested("grammar")
    return None


def _get(value: Any, key: str) -> Any:
    return value.get(key) if isinstance(value, Mapping) else None


def _structural_tag(response_format: Mapping[str, Any]) -> Requested | None:
    structures = [
        Structure(item["begin"], item.get("schema") or {}, item["end"])
        for item in response_format.get("structures") or ()
        if isinstance(item, Mapping)
        and isinstance(item.get("begin"), str)
        and isinstance(item.get("end"), str)
    ]
    triggers = [t for t in response_format.get("triggers") or () if isinstance(t, str)]
    if not structures or not triggers:
        return None
    return Requested("response_format", structures=tuple(structures), triggers=tuple(triggers))


_Call = tuple[str | None, str, str]


def constrained(constraint: Requested, content: str, calls: list[_Call]) -> tuple[str, list[_Call]]:
    """The answer a decoder under ``constraint`` lets through, from the scripted one."""
    if constraint.schema is not None:
        return _whole(constraint.schema, content, calls), []
    if constraint.structures:
        return _after_trigger(constraint, content), calls
    return content, calls


def _whole(schema: Mapping[str, Any], content: str, calls: list[_Call]) -> str:
    fits = jsonschema_rs.validator_for(dict(schema)).is_valid
    candidates: list[Any] = [json.loads(text) for text in _json_texts(content)]
    candidates += [{"name": name, "arguments": _object(arguments)} for _, name, arguments in calls]
    for candidate in candidates:
        if fits(candidate):
            return json.dumps(candidate)
    return json.dumps(instance(schema))


def _after_trigger(constraint: Requested, content: str) -> str:
    at = min((content.find(t) for t in constraint.triggers if t in content), default=-1)
    if at < 0:
        return content
    written = next(iter(_json_texts(content[at:])), None)
    call = json.loads(written) if written is not None else {}
    name = call.get("name") if isinstance(call, dict) else None
    structure = next(
        (s for s in constraint.structures if isinstance(name, str) and json.dumps(name) in s.begin),
        constraint.structures[0],
    )
    arguments = call.get("arguments") if isinstance(call, dict) else None
    if not jsonschema_rs.validator_for(dict(structure.schema)).is_valid(arguments):
        arguments = instance(structure.schema)
    return content[:at] + structure.begin + json.dumps(arguments) + structure.end


def _json_texts(text: str) -> list[str]:
    """Each JSON object written in ``text``, in order, as written."""
    decoder = json.JSONDecoder()
    found, at = [], text.find("{")
    while at >= 0:
        try:
            value, end = decoder.raw_decode(text, at)
        except ValueError:
            at = text.find("{", at + 1)
            continue
        if isinstance(value, dict):
            found.append(text[at:end])
        at = text.find("{", end)
    return found


def _object(arguments: str) -> Any:
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments


_SAMPLES: dict[str, Any] = {
    "string": "example",
    "integer": 1,
    "number": 1.0,
    "boolean": True,
    "null": None,
}


def instance(schema: Any) -> Any:
    """A value a decoder under ``schema`` could write: the first choice of each
    alternative, the required properties, sample scalars."""
    if not isinstance(schema, Mapping):
        return {}
    if "const" in schema:
        return schema["const"]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]
    for key in ("anyOf", "oneOf", "allOf"):
        options = schema.get(key)
        if isinstance(options, Sequence) and options:
            return instance(options[0])
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = kind[0] if kind else None
    if kind == "array":
        return [instance(schema.get("items"))] * int(schema.get("minItems") or 0)
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties") or {}
        return {key: instance(properties.get(key)) for key in schema.get("required") or ()}
    return _SAMPLES.get(kind, "example") if isinstance(kind, str) else {}
