"""MCP servers' tools in toolrelay's agent loop (the client side of MCP).

* :mod:`~toolrelay.io.mcp.config` — the ``mcpServers`` format (pure).
* :mod:`~toolrelay.io.mcp.render` — results and failures as text (pure).
* :mod:`~toolrelay.io.mcp.connection` — one server, kept connected.
* :mod:`~toolrelay.io.mcp.tools` — MCP tools as toolrelay tools, and their names.
* :mod:`~toolrelay.io.mcp.servers` — every configured server as one tool source.

toolrelay's own tools served to MCP clients live in :mod:`toolrelay.server.mcp`.
"""

from toolrelay.io.mcp.config import McpConfigError, ServerConfig, load_config, merge, parse_config
from toolrelay.io.mcp.servers import McpServers, McpStartupError
from toolrelay.io.mcp.tools import McpTool

__all__ = [
    "McpConfigError",
    "McpServers",
    "McpStartupError",
    "McpTool",
    "ServerConfig",
    "load_config",
    "merge",
    "parse_config",
]
