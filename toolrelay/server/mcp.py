"""``POST /mcp``: the gateway's HTTP tools as an MCP server (streamable HTTP).

Stateless: every request stands alone (no ``Mcp-Session-Id`` to keep), so
it works the same behind ``--workers N`` and several replicas, and
``tools/list`` always answers the tools in force. The gateway's API keys
guard it like every other endpoint. When the gateway listens on loopback,
the SDK's DNS-rebinding protection is on: a browser page that gets a name to
resolve to 127.0.0.1 cannot reach it.
"""

from __future__ import annotations

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

from toolrelay.io.mcp.offer import tools_server
from toolrelay.io.tools.registry import ToolRegistry
from toolrelay.server.auth import is_loopback

PATH = "/mcp"


def mcp_endpoint(tools: ToolRegistry, host: str) -> StreamableHTTPSessionManager:
    """The session manager (run it in the app's lifespan) behind ``POST /mcp``."""
    security = None
    if is_loopback(host):
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
        )
    return StreamableHTTPSessionManager(
        app=tools_server(tools.http_toolbox), stateless=True, security_settings=security
    )
