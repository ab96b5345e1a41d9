"""``tool_choice``: which declared tools a round may call, and whether it must.

Native and rescued rounds read it alike (:class:`ToolChoicePlan`, made once per
round); the rescue prompt (:mod:`toolrelay.rescue`) renders the plan's tools.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from toolrelay.errors import RequestError
from toolrelay.types import Tool, ToolChoice, ToolSpec

ChoiceMode = Literal["auto", "none", "required"]


class ToolChoiceError(RequestError):
    """``tool_choice`` is malformed or names a tool that ``tools`` does not declare."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "tool_choice")


@dataclass(frozen=True)
class ToolChoicePlan:
    """What a ``tool_choice`` means for one request.

    ``declared`` are every declared tool, ``tools`` those the model may call,
    both in declared order, read once into specs. ``forced_name`` is set when
    the choice names one tool, which is then the only entry of ``tools``.
    """

    mode: ChoiceMode
    tools: tuple[ToolSpec, ...] = field(default=(), hash=False)
    forced_name: str | None = None
    declared: tuple[ToolSpec, ...] = field(default=(), hash=False, compare=False)


def resolve_tool_choice(tools: Sequence[Tool] | None, tool_choice: ToolChoice) -> ToolChoicePlan:
    """Interpret ``tool_choice`` against the declared ``tools``.

    Accepts ``None``/``"auto"``, ``"none"``, ``"required"``,
    ``{"type": "function", "function": {"name": ...}}``,
    ``{"type": "custom", "custom": {"name": ...}}`` and
    ``{"type": "allowed_tools", "allowed_tools": {"mode": ..., "tools": [...]}}``.
    Raises :class:`ToolChoiceError` for anything else, or for a name that
    ``tools`` does not declare, and :class:`~toolrelay.errors.RequestError` for a malformed
    ``tools`` array.
    """
    declared = _declared_tools(tools)
    if tool_choice is None or tool_choice == "auto":
        return ToolChoicePlan("auto", declared, declared=declared)
    if tool_choice == "none":
        return ToolChoicePlan("none", declared=declared)
    if tool_choice == "required":
        if not declared:
            raise ToolChoiceError("tool_choice 'required' needs at least one tool in 'tools'")
        return ToolChoicePlan("required", declared, declared=declared)
    if isinstance(tool_choice, str):
        raise ToolChoiceError(
            f"unknown tool_choice {tool_choice!r}: expected 'none', 'auto', 'required' "
            "or an object naming a tool"
        )
    if not isinstance(tool_choice, Mapping):
        raise ToolChoiceError("tool_choice must be a string or an object")
    choice_type = tool_choice.get("type")
    if choice_type in ("function", "custom"):
        identity = _choice_identity(tool_choice, "tool_choice")
        chosen = (_find_tool(declared, *identity),)
        return ToolChoicePlan("required", chosen, identity[1], declared)
    if choice_type == "allowed_tools":
        return _resolve_allowed_tools(declared, tool_choice)
    raise ToolChoiceError(
        f"unknown tool_choice type {choice_type!r}: expected 'function', 'custom' "
        "or 'allowed_tools'"
    )


def _declared_tools(tools: Sequence[Tool] | None) -> tuple[ToolSpec, ...]:
    if tools is None:
        return ()
    if not isinstance(tools, Sequence) or isinstance(tools, str):
        raise RequestError("'tools' must be an array", "tools")
    return tuple(checked_spec(tool, f"tools[{index}]") for index, tool in enumerate(tools))


def checked_spec(tool: object, where: str) -> ToolSpec:
    """The spec of a declared tool; a missing ``type`` means ``function``."""
    if isinstance(tool, ToolSpec):
        return tool
    if not isinstance(tool, Mapping):
        raise RequestError(f"{where} must be an object", "tools")
    tool_type = tool.get("type", "function")
    if not isinstance(tool_type, str):
        raise RequestError(f"{where}.type must be a string", "tools")
    spec = ToolSpec.read(tool)
    if spec is None:
        raise RequestError(f"{where} has no {tool_type}.name", "tools")
    return spec


def _choice_identity(entry: Mapping[str, Any], where: str) -> tuple[str, str]:
    """``(type, name)`` of a tool named by ``tool_choice``."""
    entry_type = entry.get("type", "function")
    name = _entry_name(entry, entry_type) if isinstance(entry_type, str) else None
    if name is None:
        raise ToolChoiceError(f"{where} has no {entry_type}.name")
    return entry_type, name


def _entry_name(entry: Mapping[str, Any], entry_type: str) -> str | None:
    """The name in ``{"type": T, T: {"name": ...}}``, or in the flat ``{"name": ...}`` form."""
    body = entry.get(entry_type)
    name = body.get("name") if isinstance(body, Mapping) else entry.get("name")
    return name if isinstance(name, str) and name else None


def _find_tool(declared: Sequence[ToolSpec], tool_type: str, name: str) -> ToolSpec:
    for tool in declared:
        if (tool.kind, tool.name) == (tool_type, name):
            return tool
    names = ", ".join(tool.name for tool in declared) or "none"
    raise ToolChoiceError(
        f"tool_choice names the {tool_type} tool {name!r}, which 'tools' does not declare "
        f"(declared: {names})"
    )


def _resolve_allowed_tools(
    declared: tuple[ToolSpec, ...], tool_choice: Mapping[str, Any]
) -> ToolChoicePlan:
    allowed = tool_choice.get("allowed_tools")
    if not isinstance(allowed, Mapping):
        raise ToolChoiceError("tool_choice of type 'allowed_tools' needs an 'allowed_tools' object")
    mode = allowed.get("mode")
    if mode not in ("auto", "required"):
        raise ToolChoiceError(
            f"tool_choice allowed_tools.mode must be 'auto' or 'required', not {mode!r}"
        )
    entries = allowed.get("tools")
    if not isinstance(entries, Sequence) or isinstance(entries, str) or not entries:
        raise ToolChoiceError("tool_choice allowed_tools.tools must be a non-empty array")
    wanted: set[tuple[str, str]] = set()
    for index, entry in enumerate(entries):
        where = f"tool_choice allowed_tools.tools[{index}]"
        if not isinstance(entry, Mapping):
            raise ToolChoiceError(f"{where} must be an object")
        identity = _choice_identity(entry, where)
        _find_tool(declared, *identity)
        wanted.add(identity)
    chosen = tuple(tool for tool in declared if (tool.kind, tool.name) in wanted)
    return ToolChoicePlan("required" if mode == "required" else "auto", chosen, declared=declared)
