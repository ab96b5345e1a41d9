"""One MCP server, kept connected: started (or reached), listed, called, restarted.

A :class:`Connection` runs a supervisor task that owns the SDK's
:class:`mcp.Client` (the SDK wants a client entered and left in one task):
it connects, lists the tools (every page), and then waits. A
``notifications/tools/list_changed`` from the server makes it list them
again; a connection that is lost (a stdio child that exited, an HTTP server
that went away, noticed by a failed call or by a ping every 15 seconds of
quiet) is retried after 1, 2, 4 … 30 seconds, and its tools stay
declared meanwhile: their calls answer that the server is not running.

Calls run from any task with their own timeout. Stopping a connection stops
a stdio child the way the SDK does (stdin closed, then SIGTERM, then SIGKILL).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import tempfile
import warnings
from collections.abc import Callable
from typing import IO, Any, Literal

import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from pydantic import ValidationError

from toolrelay import __version__
from toolrelay.io.mcp import render
from toolrelay.io.mcp.config import ServerConfig
from toolrelay.io.tools.results import ToolOutput

log = logging.getLogger("toolrelay.mcp")

State = Literal["starting", "ready", "failed", "stopped"]
# Backoff between reconnection attempts, in seconds.
FIRST_RETRY = 1.0
LAST_RETRY = 30.0
# Seconds between pings of an idle connection.
PING_INTERVAL = 15.0
# How much of a stdio child's standard error a failure quotes.
_STDERR_TAIL = 400
_CLIENT_INFO = types.Implementation(name="toolrelay", version=__version__)


class Connection:
    """A configured MCP server and its current tools."""

    def __init__(
        self,
        config: ServerConfig,
        *,
        startup_timeout: float = 30.0,
        ping_interval: float = PING_INTERVAL,
        on_change: Callable[[], None] = lambda: None,
    ) -> None:
        self.config = config
        self.startup_timeout = startup_timeout
        self.ping_interval = ping_interval
        self.on_change = on_change
        self.state: State = "stopped"
        self.error: str | None = None
        self.tools: tuple[types.Tool, ...] = ()
        self.server_info: str | None = None
        self._client: Client | None = None
        self._task: asyncio.Task[None] | None = None
        self._attempted = asyncio.Event()
        self._wake = asyncio.Event()
        self._lost = False
        self._stderr: IO[str] | None = None

    @property
    def name(self) -> str:
        return self.config.name

    async def start(self) -> bool:
        """Start the supervisor and wait for the first attempt; whether it connected."""
        if self._task is None:
            self.state = "starting"
            self._task = asyncio.create_task(self._supervise(), name=f"mcp:{self.name}")
        await self._attempted.wait()
        return self.state == "ready"

    async def aclose(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self.state = "stopped"

    async def call(self, tool: str, arguments: dict[str, Any], timeout: float) -> ToolOutput:
        """Run ``tools/call``; every failure comes back as an error text."""
        client = self._client
        if client is None or self.state != "ready":
            reason = self.error or "it has not started yet"
            return ToolOutput(render.server_down(self.name, reason), is_error=True)
        try:
            result = await client.call_tool(tool, arguments, read_timeout_seconds=timeout)
        except MCPError as exc:
            if exc.code == types.REQUEST_TIMEOUT:
                return ToolOutput(render.no_answer(self.name, timeout), is_error=True)
            if exc.code == types.CONNECTION_CLOSED:
                reason = self._lose(exc.message)
                return ToolOutput(render.server_died(self.name, reason), is_error=True)
            return ToolOutput(render.refused(self.name, exc.message), is_error=True)
        text = render.result_text(result)
        if result.is_error:
            return ToolOutput(render.tool_failed(tool, text), is_error=True)
        return ToolOutput(text)

    def health(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "transport": self.config.transport,
            "where": self.config.shown,
            "state": self.state,
            "server": self.server_info,
            "tools": len(self.tools),
            "error": self.error,
        }

    def _lose(self, reason: str) -> str:
        """The connection broke: note why, and let the supervisor reconnect."""
        if not self._lost:
            self._lost = True
            self.state = "failed"
            self.error = self._with_stderr(f"the connection was lost ({reason})")
            log.warning("MCP server %s: %s; reconnecting", self.name, self.error)
            self._wake.set()
        return self.error or reason

    async def _supervise(self) -> None:
        delay = FIRST_RETRY
        while True:
            self._lost = False
            self._stderr = None
            try:
                await self._connected_session()
                delay = FIRST_RETRY  # it ran: the next failure starts the backoff again
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.state = "failed"
                self.error = self._with_stderr(_reason(exc, self.config.command))
                level = logging.ERROR if not self._attempted.is_set() else logging.WARNING
                log.log(level, "MCP server %s (%s): %s", self.name, self.config.shown, self.error)
            finally:
                self._client = None
                if self._stderr is not None:
                    self._stderr.close()
                self._attempted.set()
            await asyncio.sleep(delay)
            delay = min(delay * 2, LAST_RETRY)

    async def _connected_session(self) -> None:
        async with contextlib.AsyncExitStack() as stack:
            client = await stack.enter_async_context(
                Client(
                    await self._transport(stack),
                    mode="legacy",  # the initialize handshake: what every server of today speaks
                    read_timeout_seconds=self.startup_timeout,
                    message_handler=self._on_message,
                    client_info=_CLIENT_INFO,
                    cache=None,
                )
            )
            await self._serve(client)

    async def _serve(self, client: Client) -> None:
        """List the tools, then keep them current until the connection is lost."""
        info = client.server_info
        self.server_info = f"{info.name} {info.version}".strip() if info else None
        await self._list(client)
        self._client = client
        self.state, self.error = "ready", None
        self._attempted.set()
        log.info(
            "MCP server %s (%s) ready: %s",
            self.name,
            self.config.shown,
            ", ".join(tool.name for tool in self.tools) or "no tools",
        )
        while not self._lost:
            try:
                await asyncio.wait_for(self._wake.wait(), self.ping_interval)
            except asyncio.TimeoutError:
                await self._ping(client)
                continue
            self._wake.clear()
            if not self._lost:
                await self._list(client)

    async def _ping(self, client: Client) -> None:
        """Notice a server that died while idle (a child that exited): its next call
        would fail anyway, but /health should say so and the restart begin now."""
        try:
            with warnings.catch_warnings():
                # Deprecated in the 2026 revision; this connection speaks the 2025 one.
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await client.send_ping()
        except MCPError as exc:
            if exc.code == types.CONNECTION_CLOSED:
                self._lose(exc.message)

    async def _transport(self, stack: contextlib.AsyncExitStack) -> Any:
        config = self.config
        if config.transport == "http":
            # Given to the transport, so closed by us (the SDK closes only its own).
            http = await stack.enter_async_context(
                create_mcp_http_client(headers=dict(config.headers) or None)
            )
            return streamable_http_client(config.url, http_client=http)
        # Kept open until the connection ends (closed in _supervise), read on failure.
        self._stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
        parameters = StdioServerParameters(
            command=config.command, args=list(config.args), env=dict(config.env), cwd=config.cwd
        )
        return stdio_client(parameters, errlog=self._stderr)

    async def _list(self, client: Client) -> None:
        tools: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(100):  # a server whose pages never end cannot hang the start
            page = await client.list_tools(cursor=cursor)
            tools += page.tools
            cursor = page.next_cursor
            if cursor is None:
                break
        changed = tuple(tools) != self.tools
        self.tools = tuple(tools)
        if changed:
            self.on_change()

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            log.info("MCP server %s: its tools changed, listing them again", self.name)
            self._wake.set()
        elif isinstance(message, Exception):
            log.debug("MCP server %s: %s", self.name, message)

    def _with_stderr(self, reason: str) -> str:
        stream = self._stderr
        if stream is None or stream.closed:
            return reason
        try:
            stream.seek(0)
            tail = stream.read()[-_STDERR_TAIL:].strip()
        except (OSError, ValueError):
            return reason
        return f"{reason}; its standard error ends: {tail}" if tail else reason


def _reason(exc: BaseException, command: str) -> str:
    """The first real cause in an exception (anyio wraps them in groups)."""
    # anyio's task groups wrap failures in (Base)ExceptionGroups (a backport on 3.10).
    while getattr(exc, "exceptions", None):
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    if isinstance(exc, MCPError):
        if exc.code == types.REQUEST_TIMEOUT:
            return "no answer to the MCP handshake in time"
        return exc.message
    if isinstance(exc, ValidationError):
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(part) for part in first["loc"])
        return f"an answer that breaks the MCP schema ({exc.title}: {where}: {first['msg']})"
    if isinstance(exc, FileNotFoundError):
        return f"command not found: {exc.filename or command}"
    if isinstance(exc, OSError):
        return f"cannot start it: {exc.strerror or exc}"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
