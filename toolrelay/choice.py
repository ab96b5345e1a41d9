"""``tool_choice``: which declared tools a round may call, and whether it must.

Native and rescued rounds read it alike (:class:`ToolChoicePlan`, made once per
round); the rescue prompt (:mod:`toolrelay.rescue`) renders the plan's tools.

Agents send the same tool list with every turn, and reading a list into specs
costs about 2.5 µs a tool: a list of JSON values is read once
(:func:`declared_tools`) and its read kept, by the list's JSON (what the backend
is sent), for the last :data:`TOOL_LISTS_KEPT` lists; encoding a list is a few
times cheaper than reading it. The read is a
:class:`~toolrelay.types.DeclaredTools`: what requests derive from the specs
(the name map, the rescue prompt, ...) is kept with it, under the same rule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Final, Literal

import orjson

from toolrelay.errors import RequestError
from toolrelay.jsonbytes import dumps as _dumps
from toolrelay.types import NO_TOOLS, DeclaredTools, Tool, ToolChoice, ToolSpec

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
    declared: DeclaredTools = field(default=NO_TOOLS, hash=False, compare=False)


# The plans of a request without tools, most requests: made once (plans are frozen).
_AUTO_WITHOUT_TOOLS = ToolChoicePlan("auto")
_NONE_WITHOUT_TOOLS = ToolChoicePlan("none")
# A kept list holds its JSON and a decoded copy (about 4.4x its bytes in all), and
# what is derived from it (its name map; on rescue routes its prompt, some 1.5x its
# bytes): 128 lists of 20 agent tools (12 kB each) hold about 7-10 MB.
TOOL_LISTS_KEPT = 128
# What is not JSON (a spec, a dataclass, a datetime, a str subclass) is no key:
# such a list is read afresh each time.
_KEY_OPTIONS: Final[int] = (
    orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)


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
    declared = declared_tools(tools)
    if tool_choice is None or tool_choice == "auto":
        return _auto_plan(declared) if declared else _AUTO_WITHOUT_TOOLS
    if tool_choice == "none":
        return ToolChoicePlan("none", declared=declared) if declared else _NONE_WITHOUT_TOOLS
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


def _auto_plan(declared: DeclaredTools) -> ToolChoicePlan:
    """The ``auto`` plan of ``declared``, made once per read (plans are frozen): most
    requests with tools leave the choice to the model, and a kept list's read is
    shared by every request that sends it."""
    plan: ToolChoicePlan | None = declared.made.get(_auto_plan)
    if plan is None:
        plan = declared.derived(
            _auto_plan, lambda: ToolChoicePlan("auto", declared, declared=declared)
        )
    return plan


def declared_tools(tools: Sequence[Tool] | None) -> DeclaredTools:
    """``tools`` read into specs: a list of JSON values from the kept read of an
    equal list, a read (a :class:`DeclaredTools`) as it is, anything else afresh.
    Raises :class:`~toolrelay.errors.RequestError` for a list that is no tool list."""
    if tools is None:
        return NO_TOOLS
    if type(tools) is DeclaredTools:
        return tools
    if type(tools) is list and tools:
        key = _list_key(tools)
        if key is not None:
            return _read_list(key)
    return _read_entries(tools)


def _list_key(tools: list[Tool]) -> bytes | None:
    """The list's JSON, or None when it holds something JSON does not."""
    try:
        return _dumps(tools, option=_KEY_OPTIONS)
    except TypeError:  # orjson.JSONEncodeError is one
        return None


@lru_cache(maxsize=TOOL_LISTS_KEPT)
def _read_list(key: bytes) -> DeclaredTools:
    """The specs of the list ``key`` encodes, read from a copy of its own: no
    request's values are kept. A list that is not valid raises, and is not kept."""
    return _read_entries(orjson.loads(key))


def _read_entries(tools: object) -> DeclaredTools:
    if not isinstance(tools, Sequence) or isinstance(tools, str):
        raise RequestError("'tools' must be an array", "tools")
    if not tools:
        return NO_TOOLS
    return DeclaredTools(checked_spec(tool, f"tools[{index}]") for index, tool in enumerate(tools))


def checked_spec(tool: object, where: str) -> ToolSpec:
    """The spec of a declared tool (a missing ``type`` means ``function``); a
    :class:`RequestError` naming ``where`` when the entry is not one."""
    spec = ToolSpec.read(tool) if isinstance(tool, (dict, ToolSpec, Mapping)) else None
    if spec is not None:
        return spec
    if not isinstance(tool, Mapping):
        raise RequestError(f"{where} must be an object", "tools")
    tool_type = tool.get("type", "function")
    if not isinstance(tool_type, str):
        raise RequestError(f"{where}.type must be a string", "tools")
    raise RequestError(f"{where} has no {tool_type}.name", "tools")


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
    declared: DeclaredTools, tool_choice: Mapping[str, Any]
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
