"""All configured MCP servers as one tool source (:class:`~toolrelay.io.tools.source.ToolSource`).

At start every server is started (stdio) or reached (HTTP) at once; one that
fails is a :class:`McpStartupError` naming it and why, unless ``optional``,
when it is a warning and its tools are absent until it comes up (its
connection keeps trying). Stopping stops every child.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

from toolrelay.io.mcp.config import ServerConfig, configured
from toolrelay.io.mcp.connection import Connection
from toolrelay.io.mcp.tools import McpTool, Naming, Skipped, build_tools
from toolrelay.io.tools.source import SourceStartError

if TYPE_CHECKING:
    from toolrelay.io.settings import Settings

log = logging.getLogger("toolrelay.mcp")


class McpStartupError(SourceStartError):
    """Servers that could not be started, each with its reason."""


class McpServers:
    def __init__(
        self,
        configs: Sequence[ServerConfig],
        *,
        timeout: float = 15.0,
        startup_timeout: float = 30.0,
        optional: bool = False,
        naming: Naming = "auto",
    ) -> None:
        self.connections = [
            Connection(config, startup_timeout=startup_timeout, on_change=self._changed)
            for config in configs
        ]
        self.timeout = timeout
        self.optional = optional
        self.naming = naming
        self._revision = 0
        self._built: tuple[int, frozenset[str], list[McpTool], list[Skipped]] | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> McpServers:
        """The servers of ``mcp_config`` and ``mcp_servers`` (not started yet); raises
        :class:`~toolrelay.io.mcp.config.McpConfigError` for a bad configuration."""
        return cls(
            configured(settings),
            timeout=settings.tool_timeout_secs,
            startup_timeout=settings.mcp_startup_timeout,
            optional=settings.mcp_optional,
            naming=settings.mcp_tool_names,
        )

    @property
    def revision(self) -> int:
        return self._revision

    async def start(self) -> None:
        started = await asyncio.gather(*(c.start() for c in self.connections))
        failed = [c for c, ok in zip(self.connections, started, strict=True) if not ok]
        if not failed:
            return
        reasons = "; ".join(f"MCP server '{c.name}' ({c.config.shown}): {c.error}" for c in failed)
        if not self.optional:
            await self.aclose()
            raise McpStartupError(reasons)
        log.warning("%s; going on without its tools (--mcp-optional)", reasons)

    def tools(self, taken: Collection[str]) -> list[McpTool]:
        return self._build(taken)[0]

    def health(self) -> list[dict[str, Any]]:
        skipped = self._built[3] if self._built is not None else []
        out = []
        for connection in self.connections:
            entry = connection.health()
            entry["skipped"] = [
                {"tool": skip.tool, "reason": skip.reason}
                for skip in skipped
                if skip.server == connection.name
            ]
            out.append(entry)
        return out

    async def aclose(self) -> None:
        await asyncio.gather(*(c.aclose() for c in self.connections))

    def _build(self, taken: Collection[str]) -> tuple[list[McpTool], list[Skipped]]:
        key = frozenset(taken)
        built = self._built
        if built is None or built[0] != self._revision or built[1] != key:
            tools, skipped = build_tools(self.connections, key, self.naming, self.timeout)
            built = self._built = (self._revision, key, tools, skipped)
        return built[2], built[3]

    def _changed(self) -> None:
        self._revision += 1
