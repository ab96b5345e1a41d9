"""Constraints that make a tool call valid by construction, for servers that
decode under one (pure: tools in, constraint values out).

Three shapes, for what model servers accept:

- :func:`call_schema`: a JSON Schema whose every instance is one call,
  ``{"name": <an allowed tool>, "arguments": <valid for that tool>}`` (sent as a
  ``response_format`` / ``json_schema``): the whole answer is the call.
- :func:`call_structural_tag`: vLLM's and SGLang's structural tag: prose runs
  free, and what follows the call marker is held to the named tool's schema
  and the closing marker.
- :func:`text_without`: a GBNF grammar of any text without the call marker,
  for ``tool_choice: "none"``.
- :func:`call_grammar`: a GBNF grammar for llama.cpp's lazy grammars
  (``grammar_lazy`` with the marker as trigger): after the marker, a call to an
  allowed name whose arguments are a JSON object, then the closing marker.
  llama.cpp takes a JSON schema only for a whole answer (its ``json_schema``
  and ``grammar`` exclude each other), so the arguments' own schema is not in
  the grammar: they are still checked after the answer, as every call is.

A schema an engine cannot take (a recursive or external ``$ref``) gives None:
the round then goes unconstrained, as it would without a constraint.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal, get_args

from toolrelay.types import ToolSpec

ConstraintKind = Literal["json_schema", "grammar", "structural_tag"]
CONSTRAINT_KINDS: tuple[str, ...] = get_args(ConstraintKind)

# Where a schema keeps the definitions its local references name.
_LOCAL_ROOTS = ("$defs", "definitions")


class _Unsupported(Exception):
    """The schema holds something a constraint engine cannot take."""


def engine_schema(parameters: Mapping[str, Any]) -> dict[str, Any] | None:
    """``parameters`` with every local ``$ref`` replaced by what it names, so that
    it can be embedded in a larger schema; None when a reference is recursive,
    external or dangling (no engine takes those inlined)."""
    try:
        inlined = _inline(parameters, parameters, ())
    except _Unsupported:
        return None
    return inlined if isinstance(inlined, dict) else None


def _inline(value: Any, root: Mapping[str, Any], seen: tuple[str, ...]) -> Any:
    """A schema (a mapping or a boolean) with its references inlined."""
    if not isinstance(value, Mapping):
        return value
    ref = value.get("$ref")
    if isinstance(ref, str):
        if ref in seen:
            raise _Unsupported(f"recursive $ref {ref}")
        resolved = _inline(_resolve(ref, root), root, (*seen, ref))
        rest = {k: v for k, v in value.items() if k != "$ref"}
        if not rest:
            return resolved
        # Siblings of a $ref apply too (2019-09 and later): both must hold.
        return {"allOf": [resolved, _inline(rest, root, seen)]}
    if "$dynamicRef" in value or "$recursiveRef" in value:
        raise _Unsupported("dynamic $ref")
    out: dict[str, Any] = {}
    for key, item in value.items():
        if key in _LOCAL_ROOTS:
            continue
        if key in _SCHEMA_MAPS and isinstance(item, Mapping):
            out[key] = {name: _inline(sub, root, seen) for name, sub in item.items()}
        elif key in _SCHEMA_LISTS and isinstance(item, list):
            out[key] = [_inline(sub, root, seen) for sub in item]
        elif key in _SCHEMAS:
            out[key] = _inline(item, root, seen)
        else:  # a literal (const, enum, default, ...) or a plain keyword value
            out[key] = item
    return out


# The keywords whose value is a schema, a map of schemas or a list of schemas.
_SCHEMAS = frozenset(
    {
        "items",
        "additionalItems",
        "additionalProperties",
        "unevaluatedItems",
        "unevaluatedProperties",
        "contains",
        "propertyNames",
        "not",
        "if",
        "then",
        "else",
    }
)
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "dependentSchemas"})
_SCHEMA_LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems", "items"})


def _resolve(ref: str, root: Mapping[str, Any]) -> Any:
    if not ref.startswith("#/"):
        raise _Unsupported(f"non-local $ref {ref}")
    node: Any = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, Mapping) or part not in node:
            raise _Unsupported(f"dangling $ref {ref}")
        node = node[part]
    return node


def _constrainable(tools: Sequence[ToolSpec]) -> list[tuple[ToolSpec, dict[str, Any]]] | None:
    """Each tool with its engine schema; None when there is none or one cannot be
    constrained (a custom tool takes free text, not a JSON call)."""
    if not tools:
        return None
    out = []
    for tool in tools:
        schema = engine_schema(tool.parameters) if tool.kind == "function" else None
        if schema is None:
            return None
        out.append((tool, schema))
    return out


def call_schema(tools: Sequence[ToolSpec]) -> dict[str, Any] | None:
    """The JSON Schema of one call to one of ``tools``; None when one of their
    schemas cannot be constrained."""
    constrainable = _constrainable(tools)
    if constrainable is None:
        return None
    variants = [
        {
            "type": "object",
            "properties": {"name": {"const": tool.name}, "arguments": schema},
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }
        for tool, schema in constrainable
    ]
    return variants[0] if len(variants) == 1 else {"anyOf": variants}


def call_opening(name: str) -> str:
    """What a call written in the rescue format holds before its arguments."""
    return '{"name": ' + json.dumps(name, ensure_ascii=False) + ', "arguments": '


def call_structural_tag(
    tools: Sequence[ToolSpec], opener: str, closer: str
) -> dict[str, Any] | None:
    """vLLM's and SGLang's ``structural_tag`` response format: after ``opener``
    (the trigger), one of ``tools`` called with arguments valid for its schema,
    then ``closer``; None when a schema cannot be constrained."""
    constrainable = _constrainable(tools)
    if constrainable is None:
        return None
    return {
        "type": "structural_tag",
        "structures": [
            {"begin": opener + call_opening(tool.name), "schema": schema, "end": "}" + closer}
            for tool, schema in constrainable
        ],
        "triggers": [opener],
    }


def call_grammar(
    tools: Sequence[ToolSpec], opener: str, closer: str, *, many: bool = True
) -> str | None:
    """A GBNF grammar (llama.cpp) for what follows ``opener`` once it is written:
    the call block(s), each a call to one of ``tools`` by name with a JSON object
    as arguments, closed by ``closer``; ``many=False`` allows one block only.
    None when a tool is not a JSON-called function."""
    if not tools or any(tool.kind != "function" for tool in tools):
        return None
    names = " | ".join(_gbnf_literal(json.dumps(t.name, ensure_ascii=False)) for t in tools)
    rules = [
        # Nothing after the last closing marker: the answer ends there.
        "root ::= block" + (" (ws block)*" if many else ""),
        (
            f"block ::= {_gbnf_literal(opener)} ws "
            '"{" ws "\\"name\\"" ws ":" ws name ws "," ws "\\"arguments\\"" ws ":" ws object ws '
            f'"}}" ws {_gbnf_literal(closer)}'
        ),
        f"name ::= {names}",
        *_JSON_RULES,
    ]
    return "\n".join(rules) + "\n"


def text_without(marker: str) -> str | None:
    """A GBNF grammar (llama.cpp) of every text that does not hold ``marker``:
    one rule per state of the automaton that looks for it (how much of the
    marker the text ends with), each character moving to the next state and no
    move reaching the whole marker. None for an empty marker."""
    if not marker:
        return None
    chars = sorted(set(marker))
    others = "[^" + "".join(f"\\x{ord(c):02X}" if ord(c) < 256 else c for c in chars) + "]"
    rules = ["root ::= s0"]
    for state in range(len(marker)):
        moves = [f"{others} s{_after(marker, 0, '')}"]
        for char in chars:
            after = _after(marker, state, char)
            if after < len(marker):
                moves.append(f"{_gbnf_literal(char)} s{after}")
        rules.append(f"s{state} ::= ( " + " | ".join(moves) + " )?")
    return "\n".join(rules) + "\n"


def _after(marker: str, state: int, char: str) -> int:
    """How much of ``marker`` a text ends with that ended with ``state`` characters
    of it and then ``char``: the longest prefix of the marker it ends with."""
    text = marker[:state] + char
    return next(k for k in range(min(len(text), len(marker)), -1, -1) if text.endswith(marker[:k]))


# JSON values, as RFC 8259 has them (llama.cpp's own grammars spell them alike).
_JSON_RULES = (
    'object ::= "{" ws ( member ( ws "," ws member )* )? ws "}"',
    'member ::= string ws ":" ws value',
    'array ::= "[" ws ( value ( ws "," ws value )* )? ws "]"',
    'value ::= object | array | string | number | "true" | "false" | "null"',
    'string ::= "\\"" ( [^"\\\\\\x00-\\x1F] | escape )* "\\""',
    'escape ::= "\\\\" ( ["\\\\/bfnrt] | "u" [0-9a-fA-F]{4} )',
    'number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?',
    # Bounded, as llama.cpp's own: a model may not stall in blanks forever.
    "ws ::= [ \\t\\n]{0,20}",
)


def _gbnf_literal(text: str) -> str:
    """``text`` as a GBNF string literal."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    escaped = escaped.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    return f'"{escaped}"'
