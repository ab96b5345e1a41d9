"""The example arguments the rescue prompt shows, and how to tell a copy of them.

The rescue prompt gives each tool an example call, and a weak model copies
it: asked "Say hello to me." it answers with the example call verbatim. So
that a copy can never pass for a call the model made, every example value is
a placeholder no real call carries: a string in angle brackets naming the
parameter and, unless it is a plain string, what it takes (``"<city>"``,
``"<days: integer>"``, ``"<unit: one of celsius, fahrenheit>"``), whatever
the parameter's type. Only a ``const`` is shown as it is: it is the one
value the parameter can take.

:func:`reject_copies` then sorts a reply's calls: one whose arguments still
hold a placeholder (the example's own, or ``<name>``-shaped for its own
parameter) is a :class:`~toolrelay.events.RejectedCall`, with a reason the
model can act on when it is asked again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from toolrelay.events import RejectedCall, ToolCall
from toolrelay.types import Tool, tool_specs

# Bounds the walk through nested or recursive schemas.
_MAX_DEPTH = 6
_MAX_REF_HOPS = 16
# ``<name>`` or ``<name: what it takes>``, the shape of every placeholder.
_PLACEHOLDER = re.compile(r"<\s*([^<>:]+?)\s*(?::[^<>]*)?>")


def example_arguments(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """Example arguments for a parameters schema: every required parameter, with a
    placeholder naming it and what it takes. Local ``$ref``s, ``anyOf``/``oneOf``
    (first non-null branch) and ``allOf`` (first branch) are followed."""
    value = _example_value(parameters, "value", parameters, 0)
    return value if isinstance(value, dict) else {}


def _example_value(schema: object, name: str, root: Mapping[str, Any], depth: int) -> Any:
    resolved = _resolve_schema(schema, root)
    if "const" in resolved:
        return resolved["const"]
    enum = resolved.get("enum")
    if isinstance(enum, list) and enum:
        choices = ", ".join(str(choice) for choice in enum)
        return f"<{name}: one of {choices}>"
    schema_type = _schema_type(resolved)
    if schema_type == "object":
        properties = resolved.get("properties")
        properties = properties if isinstance(properties, Mapping) else {}
        required = resolved.get("required")
        if depth >= _MAX_DEPTH or not isinstance(required, list):
            return {}
        return {
            key: _example_value(properties.get(key, {}), key, root, depth + 1)
            for key in required
            if isinstance(key, str)
        }
    if schema_type == "array":
        items = resolved.get("items")
        if depth >= _MAX_DEPTH or not isinstance(items, Mapping):
            return []
        return [_example_value(items, name, root, depth + 1)]
    if schema_type == "null":
        return None
    if schema_type == "boolean":
        return f"<{name}: true or false>"
    if schema_type in ("integer", "number"):
        return f"<{name}: {schema_type}>"
    return f"<{name}>"


def _resolve_schema(schema: object, root: Mapping[str, Any]) -> Mapping[str, Any]:
    """Follow ``$ref`` and take the first usable branch of a combinator."""
    current = schema
    for _ in range(_MAX_REF_HOPS):
        if not isinstance(current, Mapping):
            return {}
        reference = current.get("$ref")
        if isinstance(reference, str):
            current = _follow_reference(reference, root)
            continue
        branches = next(
            (current[key] for key in ("anyOf", "oneOf", "allOf") if key in current), None
        )
        if isinstance(branches, list) and branches:
            # pydantic writes Optional[X] as anyOf [X, null]: the example shows X.
            usable = [
                b for b in branches if not (isinstance(b, Mapping) and b.get("type") == "null")
            ]
            current = usable[0] if usable else branches[0]
            continue
        return current
    return {}


def _follow_reference(reference: str, root: Mapping[str, Any]) -> object:
    if not reference.startswith("#"):
        return {}
    target: object = root
    for token in reference[1:].split("/")[1:]:
        key = token.replace("~1", "/").replace("~0", "~")
        if not isinstance(target, Mapping) or key not in target:
            return {}
        target = target[key]
    return target


def _schema_type(schema: Mapping[str, Any]) -> str:
    declared = schema.get("type")
    if isinstance(declared, list):
        declared = next((t for t in declared if t != "null"), "null")
    if isinstance(declared, str):
        return declared
    return "object" if "properties" in schema else "string"


# --- copies ----------------------------------------------------------------------


# What a copy's rejection says (and how a correction tells a copy from a wrong call).
COPIED = "copied from the tool's description or example"


def is_copy(reason: str) -> bool:
    """Whether a rejection's ``reason`` is that of a copy (:func:`reject_copies`)."""
    return COPIED in reason


def reject_copies(
    calls: Sequence[ToolCall], tools: Iterable[Tool] | None
) -> tuple[list[ToolCall], list[RejectedCall]]:
    """``calls`` split into those the model made and copies of the prompt's
    examples (a placeholder left in the arguments), rejected with a reason."""
    kept: list[ToolCall] = []
    rejected: list[RejectedCall] = []
    examples: dict[str, frozenset[str]] | None = None
    for call in calls:
        if examples is None:
            examples = _example_placeholders(tools)
        found = _placeholder_in(call.arguments, examples.get(call.name, frozenset()), "arguments")
        if found is None:
            kept.append(call)
            continue
        where, value = found
        raw = json.dumps({"name": call.name, "arguments": call.arguments}, ensure_ascii=False)
        reason = (
            f"{where} is {json.dumps(value, ensure_ascii=False)}, {COPIED}, not a real value: "
            f"call {call.name} again with the real value from the conversation, or answer "
            "without calling a tool"
        )
        rejected.append(RejectedCall(call.name, raw, reason))
    return kept, rejected


def _example_placeholders(tools: Iterable[Tool] | None) -> dict[str, frozenset[str]]:
    """Per tool: the strings a copy of its listing carries (the example's
    placeholders, and the parameters' descriptions, which weak models write in
    as values: ``{"city": "The city's name"}``)."""
    out: dict[str, frozenset[str]] = {}
    for spec in tool_specs(tools):
        parameters = spec.parameters
        copies = {*_strings(example_arguments(parameters)), *_descriptions(parameters, 0)}
        out[spec.name] = frozenset(copies)
    return out


def _descriptions(schema: object, depth: int) -> Iterator[str]:
    """The parameters' descriptions of more than one word (a one-word description
    may well be a real value)."""
    if not isinstance(schema, Mapping) or depth > _MAX_DEPTH:
        return
    properties = schema.get("properties")
    for prop in properties.values() if isinstance(properties, Mapping) else ():
        description = prop.get("description") if isinstance(prop, Mapping) else None
        if isinstance(description, str) and " " in description.strip():
            yield description.strip()
        yield from _descriptions(prop, depth + 1)
    yield from _descriptions(schema.get("items"), depth + 1)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _placeholder_in(
    value: Any, examples: frozenset[str], where: str, key: str | None = None, depth: int = 0
) -> tuple[str, str] | None:
    """The first placeholder in ``value`` and where it is, or None."""
    if isinstance(value, str):
        return (where, value) if _is_placeholder(value, examples, key) else None
    if depth > 32:
        return None  # arguments this deep come from no example of ours
    if isinstance(value, dict):
        for name, item in value.items():
            found = _placeholder_in(item, examples, f"{where}.{name}", name, depth + 1)
            if found is not None:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = _placeholder_in(item, examples, f"{where}[{index}]", key, depth + 1)
            if found is not None:
                return found
    return None


def _is_placeholder(text: str, examples: frozenset[str], key: str | None) -> bool:
    stripped = text.strip()
    if stripped in examples:
        return True
    shaped = _PLACEHOLDER.fullmatch(stripped)
    return shaped is not None and key is not None and shaped.group(1) == key
