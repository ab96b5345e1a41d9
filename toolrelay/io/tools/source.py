"""Tools that come from elsewhere than the tools file, merged into every turn's toolbox.

The agent loop, ``/ws``, the gateway's server tools and ``toolrelay chat``
all take a :class:`~toolrelay.io.tools.Toolbox`; where its tools came from is
the registry's business. A :class:`ToolSource` (the MCP servers of
``--mcp-config``, :mod:`toolrelay.io.mcp`) offers tools beside the HTTP ones:
it picks names that clash with none of ``taken`` (the HTTP tools', or the
chat agent's own), and bumps ``revision`` whenever its tools change.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, Protocol

from toolrelay.errors import ToolrelayError
from toolrelay.io.tools.toolbox import Tool


class SourceStartError(ToolrelayError, RuntimeError):
    """A source that cannot start (an MCP server that does not): the message says
    which and why, in one line."""

    status = 503


class SourcedTool(Tool, Protocol):
    def to_dict(self) -> dict[str, Any]:
        """The tool's entry in ``GET /api/tools`` (with its ``source``)."""
        ...


class ToolSource(Protocol):
    @property
    def revision(self) -> int:
        """A number that changes whenever :meth:`tools` would answer differently."""
        ...

    def tools(self, taken: Collection[str]) -> Sequence[SourcedTool]:
        """The tools offered now, named apart from each other and from ``taken``."""
        ...

    def health(self) -> list[dict[str, Any]]:
        """How each part of the source is doing (``/health``)."""
        ...

    async def start(self) -> None: ...

    async def aclose(self) -> None: ...
