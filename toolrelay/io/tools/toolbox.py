"""The tools a turn may run, and running one call to text.

A :class:`Toolbox` holds any objects with a name, an OpenAI declaration and an
async ``run``: declarative HTTP tools (:class:`HttpTool`), Python functions
(:class:`FunctionTool`, what ``toolrelay chat`` uses for its own tools), or
anything else that fits :class:`Tool`. Whatever happens, a call ends as a
:class:`ToolOutput` the model can read: unknown names, bad arguments, HTTP
failures and exceptions become error texts, and every text is truncated.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from typing import Any, Protocol

from toolrelay.events import ToolCall
from toolrelay.io import spans
from toolrelay.io.tools import results
from toolrelay.io.tools.definition import ToolDefinition, is_token
from toolrelay.io.tools.http import HttpToolClient
from toolrelay.io.tools.request import ArgumentsError, build_request
from toolrelay.io.tools.results import ToolOutput
from toolrelay.types import NO_PARAMETERS, ToolSource, ToolSpec
from toolrelay.validate import validate_arguments

log = logging.getLogger("toolrelay.tools")

DEFAULT_MAX_CHARS = 2000


class Tool(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def source(self) -> ToolSource:
        """Where the tool comes from (its spec's ``source``)."""
        ...

    def declaration(self) -> dict[str, Any]:
        """The tool's entry in an OpenAI ``tools`` array."""
        ...

    async def run(self, arguments: dict[str, Any], max_chars: int) -> ToolOutput:
        """Run the call; ``max_chars`` is how much of the result will be used."""
        ...


class HttpTool:
    """A declarative HTTP tool, sent through the process's shared client."""

    source: ToolSource = "http"

    def __init__(self, definition: ToolDefinition, client: HttpToolClient) -> None:
        self.definition = definition
        self.client = client
        self._method_ok = is_token(definition.method)

    @property
    def name(self) -> str:
        return self.definition.name

    def declaration(self) -> dict[str, Any]:
        return self.definition.openai_tool()

    async def run(self, arguments: dict[str, Any], max_chars: int) -> ToolOutput:
        if not self._method_ok:
            method = self.definition.method
            return ToolOutput(results.invalid_method(method, self.name), is_error=True)
        try:
            request = build_request(self.definition, arguments)
        except ArgumentsError as exc:
            return ToolOutput(results.invalid_arguments(self.name, str(exc)), is_error=True)
        return await self.client.send(request, max_chars)


class FunctionTool:
    """A Python function as a tool: it takes the arguments as keywords and
    returns text (or awaits to it); an exception becomes an error result."""

    source: ToolSource = "client"  # the program's own, as a request's tools are the client's

    def __init__(
        self,
        name: str,
        function: Callable[..., str | Awaitable[str]],
        *,
        description: str = "",
        parameters: Mapping[str, Any] | None = None,
    ) -> None:
        self._name = name
        self.function = function
        self.description = description
        self.parameters = dict(parameters or NO_PARAMETERS)

    @property
    def name(self) -> str:
        return self._name

    def declaration(self) -> dict[str, Any]:
        function: dict[str, Any] = {"name": self._name}
        if self.description:
            function["description"] = self.description
        function["parameters"] = self.parameters
        return {"type": "function", "function": function}

    async def run(self, arguments: dict[str, Any], max_chars: int) -> ToolOutput:
        answer = self.function(**arguments)
        if inspect.isawaitable(answer):
            answer = await answer
        return ToolOutput(str(answer))


class Toolbox:
    """The tools of one turn, by name, and the result limit they share."""

    def __init__(self, tools: Iterable[Tool] = (), *, max_chars: int = DEFAULT_MAX_CHARS) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            if tool.name in self._tools:
                raise ValueError(f"two tools are named {tool.name!r}")
            self._tools[tool.name] = tool
        self.max_chars = max_chars
        self._declarations = {name: tool.declaration() for name, tool in self._tools.items()}
        self._specs = tuple(
            spec
            for name, tool in self._tools.items()
            if (spec := ToolSpec.read(self._declarations[name], tool.source)) is not None
        )

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._tools)

    def declarations(self) -> list[dict[str, Any]]:
        """The OpenAI ``tools`` array declaring every tool."""
        return list(self._declarations.values())

    def specs(self) -> tuple[ToolSpec, ...]:
        """The tools read into specs, each with its ``source`` (``http``, ``mcp``, …)."""
        return self._specs

    async def run(self, call: ToolCall) -> ToolOutput:
        """The call's result for the model: never raises (but for cancellation).

        The arguments are checked against the tool's schema first (lossless
        coercions applied): a call the model got wrong comes back as a
        sentence it can act on, and the tool is not run.
        """
        tool = self._tools.get(call.name)
        if tool is None:
            return ToolOutput(results.unknown_tool(call.name), is_error=True)
        validation = validate_arguments(self._declarations[call.name], call.arguments)
        if not validation.ok:
            return ToolOutput(results.invalid_arguments(call.name, validation.reason), True)
        try:
            with spans.tool_span(call.name, call.id):
                output = await tool.run(dict(validation.arguments), self.max_chars)
        except Exception as exc:
            log.warning("tool %s raised %s", call.name, type(exc).__name__, exc_info=True)
            detail = str(exc)
            output = ToolOutput(
                f"Error: {type(exc).__name__}" + (f": {detail}" if detail else ""), is_error=True
            )
        text, cut = results.truncate(output.text, self.max_chars)
        return ToolOutput(text, output.is_error, output.text if cut else None)
