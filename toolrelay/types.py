"""The shapes the core passes around, named once (as Starlette's ``types.py``).

Requests and messages stay plain JSON values (dicts, as the wire has them:
unknown fields pass through untouched); the names below say which is which.
A declared tool is the one shape with a type of its own, :class:`ToolSpec`,
read once from the client's entry and used by everyone that reads a tool:
name matching (:mod:`toolrelay.names`), argument checks
(:mod:`toolrelay.validate`), the rescue prompt (:mod:`toolrelay.rescue`), the
stuck detector, the agent loop and the round. A tool list read into specs is
a :class:`DeclaredTools`, which also keeps what is derived from those specs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, TypeGuard, TypeVar

# One chat message as OpenAI's Chat Completions API has it (``role``, ``content``, ...).
Message = dict[str, Any]
# A request or response body as decoded JSON.
Body = dict[str, Any]
# A tool as a client sent it: ``{"type": "function", "function": {...}}``.
ToolEntry = Mapping[str, Any]
# ``tool_choice`` as a client sent it: ``"auto"``, ``"none"``, ``"required"`` or an object.
ToolChoice = str | Mapping[str, Any] | None
# Token counts as a backend reports them (``prompt_tokens``, ...).
Usage = dict[str, Any]

# Where a tool comes from: the client's request (or, in a program that runs
# the agent loop itself, its own functions: toolrelay chat's file tools),
# toolrelay's declarative HTTP tools, or an MCP server.
ToolSource = Literal["client", "http", "mcp"]

# The parameters of a tool that declares none (or declares them as something
# other than an object): it takes an object, with no particular keys. This is
# the one default; every reader of a tool sees it.
NO_PARAMETERS: Mapping[str, Any] = MappingProxyType({"type": "object", "properties": {}})


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One declared tool, read from its entry once.

    ``kind`` is the entry's ``type`` (``function``; ``custom`` tools take free
    text and have no parameters); ``parameters`` is its JSON Schema,
    :data:`NO_PARAMETERS` when the entry gives none; ``strict`` is OpenAI's
    ``strict`` flag.
    """

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(default_factory=lambda: NO_PARAMETERS, hash=False)
    strict: bool = False
    kind: str = "function"
    source: ToolSource = "client"

    @classmethod
    def read(cls, entry: object, source: ToolSource = "client") -> ToolSpec | None:
        """The spec of an OpenAI tool entry, of a flat ``{"name", "parameters"}``
        one, or of a bare name; None when it names no tool."""
        if not isinstance(entry, dict):  # a dict (decoded JSON) is the usual case
            if isinstance(entry, ToolSpec):
                return entry
            if isinstance(entry, str):
                return cls(entry, source=source) if entry else None
            if not isinstance(entry, Mapping):
                return None
        kind = entry.get("type", "function")
        if not isinstance(kind, str):
            return None
        body = entry.get(kind)
        spec: Mapping[str, Any] = body if _is_mapping(body) else entry
        name = spec.get("name")
        if not isinstance(name, str) or not name:
            return None
        description = spec.get("description")
        parameters = spec.get("parameters")
        return cls(
            name,
            description.strip() if isinstance(description, str) else "",
            parameters if _is_mapping(parameters) else NO_PARAMETERS,
            spec.get("strict") is True,
            kind,
            source,
        )


def _is_mapping(value: object) -> TypeGuard[Mapping[str, Any]]:
    # dict first: an exact match ends the check before the Mapping ABC is asked.
    return isinstance(value, (dict, Mapping))


# A tool as the core's functions take it: the client's entry or its spec.
Tool = ToolEntry | ToolSpec

_Derived = TypeVar("_Derived")


class DeclaredTools(tuple[ToolSpec, ...]):
    """A tool list read into specs, and what requests derive from it.

    A tuple of the specs, so everything that takes a tool list takes it; and a
    memo of what is made from them (the name map, the rescue prompt, a front's
    check of the entries they were read from), made once per read:
    :func:`toolrelay.choice.declared_tools` keeps the read of each of the last
    lists sent, so a list an agent sends every turn is read, mapped and
    rendered once. What is kept is shared: no reader changes it.
    """

    def __init__(self, specs: Iterable[ToolSpec] = ()) -> None:
        # tuple.__new__ took the specs.
        # What derived made, by key: compiled callers read it before calling
        # derived (a Python method: a frame each call, and their ``make`` made).
        self.made: dict[object, Any] = {}

    def derived(self, key: object, make: Callable[[], _Derived]) -> _Derived:
        """What ``make`` derives from these specs (``key`` names it), made on first
        asking; when ``make`` raises, nothing is kept. Two threads asking at once
        may both make it: each gets an equal value."""
        derived = self.made
        if key in derived:
            value: _Derived = derived[key]
            return value
        value = derived[key] = make()
        return value


# The read of no tools (every request without them).
NO_TOOLS = DeclaredTools()


def tool_specs(tools: Iterable[object] | None, source: ToolSource = "client") -> list[ToolSpec]:
    """The specs of the entries that name a tool, in order (specs pass through)."""
    specs = []
    for entry in tools or ():
        spec = ToolSpec.read(entry, source)
        if spec is not None:
            specs.append(spec)
    return specs
