"""MCP servers' tools in toolrelay's agent loop (the client side of MCP).

* :mod:`~toolrelay.io.mcp.config` — the ``mcpServers`` format (pure).
* :mod:`~toolrelay.io.mcp.render` — results and failures as text (pure).
* :mod:`~toolrelay.io.mcp.connection` — one server, kept connected.
* :mod:`~toolrelay.io.mcp.tools` — MCP tools as toolrelay tools, and their names.
* :mod:`~toolrelay.io.mcp.servers` — every configured server as one tool source.
* :mod:`~toolrelay.io.mcp.offer` — toolrelay's own tools offered to MCP clients.

Nothing is imported here: the SDK takes a while to load, and a gateway or a
chat without MCP servers should not pay for it. Import the modules.
"""
