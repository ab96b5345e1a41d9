"""The server's HTTP tools: the tools file, the runtime override, the turn's toolbox.

The tools file (``LLM_TOOLS_FILE``) is read once, at startup. ``POST
/api/tools`` replaces its definitions in memory, from the next turn on: a turn
takes its :class:`~toolrelay.io.tools.Toolbox` when it starts and keeps it to
the end. The override lives behind :class:`ToolStore`, so that replicas can
share it: the in-process :class:`MemoryToolStore` is the default,
:class:`toolrelay.io.shared.tools.RedisToolStore` the shared one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

import orjson

from toolrelay.errors import ToolrelayError
from toolrelay.io.tools.definition import ToolDefinition, parse_definitions
from toolrelay.io.tools.http import HttpToolClient
from toolrelay.io.tools.source import SourcedTool, ToolSource
from toolrelay.io.tools.toolbox import DEFAULT_MAX_CHARS, HttpTool, Tool, Toolbox

Source = Literal["file", "request", "none"]


class ToolsError(ToolrelayError, ValueError):
    """Definitions that cannot be used (a bad file at startup, a bad request body)."""

    status = 400


class ToolsUnavailable(ToolrelayError, RuntimeError):
    """The store cannot take new definitions now (its Redis does not answer)."""

    status = 503


@dataclass(frozen=True)
class ActiveTools:
    """The definitions in force and where they came from (``GET /api/tools``)."""

    definitions: tuple[ToolDefinition, ...]
    source: Source


class ToolStore(Protocol):
    """Where the definitions in force live."""

    @property
    def active(self) -> ActiveTools:
        """The definitions in force: the override when one was set, else the file's.

        Held in memory (a shared store keeps its copy current from Redis's
        messages): every request reads it, so reading it waits for nothing."""
        ...

    async def replace(self, definitions: tuple[ToolDefinition, ...]) -> ActiveTools:
        """Install ``definitions`` (the override) and return what is now in force.

        Raises :class:`ToolsUnavailable` when the store cannot take them now."""
        ...

    async def aclose(self) -> None: ...


class MemoryToolStore:
    """The override in this process's memory: gone at restart, as seed 002 says."""

    def __init__(self, file_definitions: tuple[ToolDefinition, ...] = ()) -> None:
        # A plain attribute, read by every request (a property costs a call).
        self.active = ActiveTools(file_definitions, "file" if file_definitions else "none")

    async def replace(self, definitions: tuple[ToolDefinition, ...]) -> ActiveTools:
        self.active = ActiveTools(definitions, "request")
        return self.active

    async def aclose(self) -> None:
        return None


def decode_definitions(raw: bytes) -> tuple[ToolDefinition, ...]:
    """Definitions from the bytes of a tools file or a ``POST /api/tools`` body.

    Raises :class:`ToolsError` saying what is wrong: empty, not UTF-8, not
    JSON, not an array, no definition, or which entry and field is bad.
    """
    if not raw.strip():
        raise ToolsError("the body is empty: send a JSON array of tool definitions")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolsError(f"not UTF-8 text (byte {exc.start} is invalid)") from None
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise ToolsError(f"not valid JSON: {exc}") from None
    try:
        return parse_definitions(data)
    except ValueError as exc:
        raise ToolsError(str(exc)) from None


def load_tools_file(path: str, max_bytes: int | None = None) -> tuple[ToolDefinition, ...]:
    """The definitions of the tools file; a :class:`ToolsError` naming the file otherwise.

    ``max_bytes`` is the gateway's request-body limit: the file is held to the
    limits a ``POST /api/tools`` body is held to."""
    try:
        with Path(path).open("rb") as file:
            raw = file.read() if max_bytes is None else file.read(max_bytes + 1)
    except OSError as exc:
        raise ToolsError(f"tools file {path}: {exc.strerror or exc}") from None
    if max_bytes is not None and len(raw) > max_bytes:
        raise ToolsError(f"tools file {path}: larger than {max_bytes} bytes (max_body_bytes)")
    try:
        return decode_definitions(raw)
    except ToolsError as exc:
        raise ToolsError(f"tools file {path}: {exc}") from None


class ToolRegistry:
    """The tools a server runs: the HTTP tools of the store (one shared client)
    and those of its other sources (MCP servers), merged into each turn's toolbox."""

    def __init__(
        self,
        store: ToolStore,
        client: HttpToolClient,
        max_chars: int = DEFAULT_MAX_CHARS,
        sources: Sequence[ToolSource] = (),
    ) -> None:
        self.store = store
        self.client = client
        self.max_chars = max_chars
        self.sources = tuple(sources)
        self._built: tuple[tuple[ToolDefinition, ...], tuple[int, ...], Toolbox] | None = None
        self._http: tuple[tuple[ToolDefinition, ...], Toolbox] | None = None

    def idle(self) -> bool:
        """No tool to run, as most gateways are: no other source, no HTTP definition.
        One check per request, since ``POST /api/tools`` may add definitions."""
        return not self.sources and not self.store.active.definitions

    def toolbox(self) -> Toolbox:
        """The tools for a turn that starts now (empty when none are defined)."""
        active = self.store.active
        revisions = tuple(source.revision for source in self.sources)
        built = self._built
        if built is None or built[0] != active.definitions or built[1] != revisions:
            tools: list[Tool] = [HttpTool(d, self.client) for d in active.definitions]
            tools += self.sourced(active.definitions)
            built = self._built = (
                active.definitions,
                revisions,
                Toolbox(tools, max_chars=self.max_chars),
            )
        return built[2]

    async def http_toolbox(self) -> Toolbox:
        """The HTTP tools alone (what toolrelay serves to MCP clients); a coroutine,
        as the MCP offer asks of its provider."""
        active = self.store.active
        built = self._http
        if built is None or built[0] != active.definitions:
            tools = [HttpTool(d, self.client) for d in active.definitions]
            built = self._http = (active.definitions, Toolbox(tools, max_chars=self.max_chars))
        return built[1]

    def sourced(self, definitions: tuple[ToolDefinition, ...]) -> list[SourcedTool]:
        """The other sources' tools, named apart from these HTTP tools and each other."""
        taken = {definition.name for definition in definitions}
        out: list[SourcedTool] = []
        for source in self.sources:
            tools = source.tools(frozenset(taken))
            taken.update(tool.name for tool in tools)
            out += tools
        return out

    async def start(self) -> None:
        for source in self.sources:
            await source.start()

    async def aclose(self) -> None:
        for source in self.sources:
            await source.aclose()
        await self.client.aclose()
        await self.store.aclose()
