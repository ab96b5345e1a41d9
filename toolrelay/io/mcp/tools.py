"""MCP tools as toolrelay tools: their names, their declarations, running a call.

Names: an MCP tool keeps its own name, its characters outside ``A-Z a-z 0-9
_ -`` replaced by ``_`` (what OpenAI-compatible servers accept). When that
name is taken (by an HTTP tool, the chat agent's own, or a tool of another
MCP server, as its own name or as the ``SERVER__name`` it is given) every MCP
tool that wants it is called ``SERVER__name`` instead; with
``mcp_tool_names: prefixed`` every MCP tool is. Names are cut to 64
characters; a name still used after that gets ``_2``, ``_3`` … at its end.

Descriptions and input schemas are passed on as the server wrote them. A
schema that is not an object schema (what a tool's arguments must be), or not
valid JSON Schema, leaves its tool out, with the reason in ``/health``.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import jsonschema_rs
import mcp_types as types

from toolrelay.io.mcp.connection import Connection
from toolrelay.io.tools.definition import ToolDefinitionError, check_parameters
from toolrelay.io.tools.results import ToolOutput
from toolrelay.types import ToolSource

log = logging.getLogger("toolrelay.mcp")

Naming = Literal["auto", "prefixed"]
SEPARATOR = "__"
MAX_NAME = 64
_NOT_IN_NAME = re.compile(r"[^A-Za-z0-9_-]")


class McpTool:
    """One tool of one MCP server, under the name the model sees."""

    source: ToolSource = "mcp"

    def __init__(
        self, name: str, tool: types.Tool, parameters: dict[str, Any], connection: Connection,
        timeout: float,
    ) -> None:  # fmt: skip
        self._name = name
        self.tool = tool
        self.parameters = parameters
        self.connection = connection
        self.timeout = timeout

    @property
    def name(self) -> str:
        return self._name

    @property
    def server(self) -> str:
        return self.connection.name

    @property
    def trusted(self) -> bool:
        return self.connection.config.trusted

    def declaration(self) -> dict[str, Any]:
        function: dict[str, Any] = {"name": self._name}
        if self.tool.description:
            function["description"] = self.tool.description
        function["parameters"] = self.parameters
        return {"type": "function", "function": function}

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self._name}
        if self.tool.description:
            out["description"] = self.tool.description
        out["parameters"] = self.parameters
        out["source"] = self.source
        out["server"] = self.server
        out["mcp_name"] = self.tool.name
        return out

    async def run(self, arguments: dict[str, Any], max_chars: int) -> ToolOutput:
        return await self.connection.call(self.tool.name, arguments, self.timeout)


@dataclass(frozen=True)
class Skipped:
    server: str
    tool: str
    reason: str


def build_tools(
    connections: Sequence[Connection], taken: Collection[str], naming: Naming, timeout: float
) -> tuple[list[McpTool], list[Skipped]]:
    """Every offered tool of ``connections``, named apart from ``taken`` and each other."""
    wanted: list[tuple[Connection, types.Tool, dict[str, Any]]] = []
    skipped: list[Skipped] = []
    for connection in connections:
        for tool in connection.tools:
            if not connection.config.offers(tool.name):
                continue
            try:
                parameters = _checked_schema(tool.input_schema)
            except ValueError as exc:
                skipped.append(Skipped(connection.name, tool.name, f"inputSchema: {exc}"))
                continue
            wanted.append((connection, tool, parameters))
    own = [_clean(tool.name) for _, tool, _ in wanted]
    with_server = [
        _clean(connection.name + SEPARATOR + tool.name) for connection, tool, _ in wanted
    ]
    plain = Counter(own)
    clash = {
        index
        for index, name in enumerate(own)
        if naming == "prefixed" or plain[name] > 1 or name in taken
    }
    # A tool's own name is also wanted when a prefixed tool is given it.
    given = {with_server[index] for index in clash}
    prefixed = clash | {index for index, name in enumerate(own) if name in given}
    # The own names are kept first, so a prefixed name numbered apart never takes one.
    used = set(taken) | {name for index, name in enumerate(own) if index not in prefixed}
    tools = []
    for index, (connection, tool, parameters) in enumerate(wanted):
        name = own[index]
        if index in prefixed:
            name = _numbered(with_server[index], used)
            used.add(name)
        tools.append(McpTool(name, tool, parameters, connection, timeout))
    for skip in skipped:
        log.warning("MCP server %s: tool %r left out: %s", skip.server, skip.tool, skip.reason)
    return tools, skipped


def _checked_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema, checked as an HTTP tool's ``parameters`` is, and compiled: a schema
    that is not JSON Schema would fail every request to a backend that enforces it."""
    try:
        parameters = check_parameters(dict(schema))
    except ToolDefinitionError as exc:
        raise ValueError(exc.reason) from None
    try:
        jsonschema_rs.validator_for(parameters)
    except ValueError as exc:  # jsonschema_rs.ValidationError is one
        first = str(exc).splitlines()[0]
        raise ValueError(f"not valid JSON Schema: {first}") from None
    return parameters


def _numbered(name: str, used: set[str]) -> str:
    """``name``, or ``name_2``, ``name_3`` … when it is used (names that differ only
    by characters a function name cannot have, names cut at 64 characters)."""
    number = 2
    candidate = name
    while candidate in used:
        suffix = f"_{number}"
        candidate = name[: MAX_NAME - len(suffix)] + suffix
        number += 1
    return candidate


def _clean(name: str) -> str:
    return _NOT_IN_NAME.sub("_", name)[:MAX_NAME] or "_"
