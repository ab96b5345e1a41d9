"""``POST /mcp``: the gateway's HTTP tools as an MCP server (streamable HTTP).

Stateless: every request stands alone (no ``Mcp-Session-Id`` to keep), so
it works the same behind ``--workers N`` and several replicas, and
``tools/list`` always answers the tools in force. The gateway's API keys
guard it like every other endpoint. When the gateway listens on loopback,
the SDK's DNS-rebinding protection is on: a browser page that gets a name to
resolve to 127.0.0.1 cannot reach it.

The SDK is loaded, and its session manager started, by the first request to
``/mcp``: it takes a while to import, and a gateway nobody asks over MCP
should not start slower for it.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from starlette.types import Receive, Scope, Send

from toolrelay.io import spans
from toolrelay.io.tools.registry import ToolRegistry
from toolrelay.server.auth import is_loopback
from toolrelay.server.logs import note
from toolrelay.server.tracing import SPAN

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext
    from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
    from mcp.server.transport_security import TransportSecuritySettings

PATH = "/mcp"


class McpEndpoint:
    """The ASGI app at ``/mcp``; :meth:`aclose` at the app's shutdown."""

    def __init__(self, tools: ToolRegistry, host: str) -> None:
        self.tools = tools
        self.host = host
        self._app: StreamableHTTPASGIApp | None = None
        self._lock = asyncio.Lock()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        app = self._app or await self._start()
        await app(scope, receive, send)

    async def aclose(self) -> None:
        if self._task is not None:
            self._stop.set()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _start(self) -> StreamableHTTPASGIApp:
        async with self._lock:
            if self._app is not None:
                return self._app
            from mcp.server.streamable_http_manager import (
                StreamableHTTPASGIApp,
                StreamableHTTPSessionManager,
            )

            from toolrelay.io.mcp.offer import tools_server

            manager = StreamableHTTPSessionManager(
                app=tools_server(self.tools.http_toolbox, _observed),
                stateless=True,
                security_settings=self._security(),
            )
            running = asyncio.Event()

            async def hold() -> None:
                # The manager's task group is entered and left in this one task.
                async with manager.run():
                    running.set()
                    await self._stop.wait()

            self._task = asyncio.create_task(hold(), name="mcp-endpoint")
            started = asyncio.ensure_future(running.wait())
            await asyncio.wait({self._task, started}, return_when=asyncio.FIRST_COMPLETED)
            if not running.is_set():
                started.cancel()
                await self._task  # it ended: raise what stopped it
            self._app = StreamableHTTPASGIApp(manager)
            return self._app

    def _security(self) -> TransportSecuritySettings | None:
        from mcp.server.transport_security import TransportSecuritySettings

        if not is_loopback(self.host):
            return None
        return TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
        )


def _observed(ctx: ServerRequestContext[Any], method: str, tool: str | None) -> Any:
    """A request's handling under its HTTP request's span, its method and tool noted
    for the span, the access log and the inspector. The SDK runs the handler in its
    own task, so the request's context does not reach it: its scope (the HTTP
    request the SDK hands over) does."""
    scope = getattr(ctx.request, "scope", None)
    if not isinstance(scope, dict):
        return spans.under(None)
    note(scope, mcp_method=method, **({"tool": tool} if tool else {}))
    return spans.under(scope.get(SPAN))
