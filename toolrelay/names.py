"""Declared-tool name matching: exact first, a unique namespaced suffix next, never a guess."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

import jsonschema_rs

from toolrelay.types import DeclaredTools, tool_specs
from toolrelay.validate import schema_validator, valid_under

log = logging.getLogger("toolrelay.names")

NAMESPACE_SEPARATORS = ("__", ".", "/", "-", ":")


def _names_of(tools: Iterable[Any] | None) -> dict[str, Mapping[str, Any]]:
    by_name: dict[str, Mapping[str, Any]] = {}
    for spec in tool_specs(tools):
        by_name.setdefault(spec.name, spec.parameters)
    return by_name


def _validators_by_name() -> dict[str, jsonschema_rs.Validator | None]:
    """Where a tool set keeps its tools' compiled checks (none compiled yet)."""
    return {}


class ToolSet:
    """The tools a request declared (entries or their :class:`ToolSpec`); with none
    declared, every name is accepted."""

    __slots__ = ("_by_name", "_cache", "_validators", "declared")

    def __init__(self, tools: Iterable[Any] | None = None) -> None:
        # A read tool list (toolrelay.choice keeps agents' lists) is mapped once: the
        # map is never changed once made, and shared by every set of that read.
        if type(tools) is DeclaredTools:
            # What the read made, read before asking derived (a Python frame).
            made = tools.made
            by_name: dict[str, Mapping[str, Any]] | None = made.get(_names_of)
            if by_name is None:
                by_name = tools.derived(_names_of, lambda: _names_of(tools))
            self._by_name = by_name
            # Shared as the map is: a declared tool's compiled check, made at its first call.
            validators: dict[str, jsonschema_rs.Validator | None] | None = made.get(
                _validators_by_name
            )
            if validators is None:
                validators = tools.derived(_validators_by_name, _validators_by_name)
            self._validators = validators
        else:
            self._by_name = _names_of(tools)
            self._validators = {}
        self.declared = tools is not None and bool(self._by_name)
        self._cache: dict[str, str | None] = {}

    def resolve(self, name: str) -> str | None:
        """The declared name a model's name stands for, or None when unknown or ambiguous."""
        name = name.strip()
        if not self.declared:
            return name or None
        if name in self._cache:
            return self._cache[name]
        resolved = self._match(name)
        self._cache[name] = resolved
        if resolved is None:
            log.info("dropped tool call to undeclared or ambiguous name %r", name)
        elif resolved != name:
            log.info("rewrote tool name %r to declared %r", name, resolved)
        return resolved

    def _match(self, name: str) -> str | None:
        if name in self._by_name:
            return name
        by_suffix = self._suffix_matches(name)
        if len(by_suffix) == 1:
            return by_suffix[0]
        if by_suffix:
            return None
        # The model may add a namespace the client did not use ("functions.get_weather").
        for sep in NAMESPACE_SEPARATORS:
            if sep in name:
                tail = name.rsplit(sep, 1)[1]
                if tail in self._by_name:
                    return tail
        return None

    def unresolved(self, name: str) -> str:
        """Why ``resolve`` found no declared tool for ``name``: a sentence for the model."""
        name = name.strip()
        if not name:
            return "the call names no tool"
        matching = self._suffix_matches(name)
        if len(matching) > 1:
            return f"the tool name {name!r} is ambiguous: it could be {_listed(matching)}"
        return f"there is no tool named {name!r}; the tools are {_listed(list(self._by_name))}"

    def _suffix_matches(self, name: str) -> list[str]:
        return [
            declared
            for declared in self._by_name
            if any(declared.endswith(sep + name) for sep in NAMESPACE_SEPARATORS)
        ]

    def parameters(self, name: str) -> Mapping[str, Any] | None:
        return self._by_name.get(name)

    def valid_as_sent(self, name: str, arguments: Any) -> bool:
        """:func:`~toolrelay.validate.valid_as_sent` of ``arguments`` against the
        parameters of ``name``, its schema compiled once per declared tool."""
        validators = self._validators
        if name in validators:
            return valid_under(validators[name], arguments)
        validator = schema_validator(self._by_name.get(name))
        if name in self._by_name:  # a name the model made up is not kept
            validators[name] = validator
        return valid_under(validator, arguments)

    def without_arguments(self, name: str) -> str | None:
        """Why a call to ``name`` that gives no arguments cannot be used; None when it can.

        Only a declared tool without required parameters may be called so:
        without declared tools nothing says the call needs no arguments.
        """
        if not self.declared:
            return "the call has no arguments, and no declared tool says it needs none"
        required = sorted(_required(self._by_name.get(name) or {}))
        if required:
            return f"the call has no arguments; {name} requires {_listed(required)}"
        return None

    def parameter_schema(self, name: str, parameter: str) -> dict[str, Any] | None:
        schema = self._by_name.get(name)
        if not schema:
            return None
        properties = schema.get("properties")
        if not isinstance(properties, Mapping):
            return None
        found = properties.get(parameter)
        return dict(found) if isinstance(found, Mapping) else None


def _properties(schema: Mapping[str, Any]) -> set[str]:
    properties = schema.get("properties")
    return set(properties) if isinstance(properties, Mapping) else set()


def _required(schema: Mapping[str, Any]) -> set[str]:
    required = schema.get("required")
    return {r for r in required if isinstance(r, str)} if isinstance(required, list) else set()


def _listed(names: list[str]) -> str:
    shown = ", ".join(names[:12])
    return shown + (f" and {len(names) - 12} more" if len(names) > 12 else "")
