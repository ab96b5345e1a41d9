"""MCP server configuration: the ``mcpServers`` format other clients write (pure).

::

    {"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."]},
        "search": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer …"}}
    }}

A server with ``command`` is started as a child and spoken to over stdio; one
with ``url`` over streamable HTTP. toolrelay's own keys, beside those:
``include`` / ``exclude`` (tool names, ``*`` globs allowed), ``trusted``
(``toolrelay chat`` runs its tools without asking) and ``disabled``. Keys
other clients write for themselves (``autoApprove``, ``timeout``, …) are
accepted and ignored, so a file written for them works here as it is.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from toolrelay.errors import ToolrelayError

if TYPE_CHECKING:
    from toolrelay.io.settings import Settings

Transport = Literal["stdio", "http"]
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
_OWN_KEYS = frozenset({"include", "exclude", "trusted", "disabled"})
_STDIO_KEYS = frozenset({"command", "args", "env", "cwd"})
_HTTP_KEYS = frozenset({"url", "headers"})
# What other clients write in the same file: their business, not an error here.
_OTHER_CLIENTS_KEYS = frozenset(
    {"type", "transport", "autoApprove", "alwaysAllow", "timeout", "description", "name"}
)
_HTTP_TYPES = frozenset({"http", "streamable-http", "streamableHttp", "streamable_http"})


class McpConfigError(ToolrelayError, ValueError):
    """A configuration that cannot be used, naming the server and the key."""

    status = 400


@dataclass(frozen=True)
class ServerConfig:
    """One MCP server: how to reach it and which of its tools to offer."""

    name: str
    transport: Transport
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    trusted: bool = False

    def offers(self, tool_name: str) -> bool:
        """Whether the ``include`` / ``exclude`` filters let this tool through."""
        if self.include and not any(fnmatch.fnmatchcase(tool_name, p) for p in self.include):
            return False
        return not any(fnmatch.fnmatchcase(tool_name, p) for p in self.exclude)

    @property
    def shown(self) -> str:
        """Where the server is, without secrets: the command, or the URL without user info."""
        if self.transport == "stdio":
            return self.command
        from toolrelay.io.urls import redact_url

        return redact_url(self.url)


def parse_config(data: Any, where: str = "mcpServers") -> tuple[ServerConfig, ...]:
    """The servers of a decoded ``{"mcpServers": {...}}`` document (or its inner mapping)."""
    if isinstance(data, Mapping) and "mcpServers" in data:
        unknown = [key for key in data if key != "mcpServers"]
        if unknown:
            raise McpConfigError(f"{where}: unknown top-level key {unknown[0]!r}")
        data = data["mcpServers"]
    if not isinstance(data, Mapping):
        raise McpConfigError(f"{where}: must be an object mapping server names to servers")
    servers = []
    for name, entry in data.items():
        server = _server(str(name), entry, where)
        if server is not None:
            servers.append(server)
    return tuple(servers)


def load_config(path: str) -> tuple[ServerConfig, ...]:
    """The servers of an MCP configuration file (JSON), errors naming the file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise McpConfigError(f"MCP config {path}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise McpConfigError(f"MCP config {path}: not valid JSON: {exc}") from None
    return parse_config(data, f"MCP config {path}")


def merge(*groups: tuple[ServerConfig, ...]) -> tuple[ServerConfig, ...]:
    """Servers from several places; a name given twice is an error."""
    seen: dict[str, ServerConfig] = {}
    for group in groups:
        for server in group:
            if server.name in seen:
                raise McpConfigError(f"MCP server {server.name!r} is configured twice")
            seen[server.name] = server
    return tuple(seen.values())


def configured(settings: Settings) -> tuple[ServerConfig, ...]:
    """The servers of ``mcp_config`` and ``mcp_servers`` (the config file's ``mcpServers``)."""
    from_file = load_config(settings.mcp_config) if settings.mcp_config else ()
    inline = parse_config(settings.mcp_servers, "mcpServers") if settings.mcp_servers else ()
    return merge(from_file, inline)


def _server(name: str, entry: Any, where: str) -> ServerConfig | None:
    at = f"{where}.{name}"
    if not name or not set(name) <= _NAME_CHARS:
        raise McpConfigError(f"{at}: a server name is letters, digits, '_' or '-'")
    if not isinstance(entry, Mapping):
        raise McpConfigError(f"{at}: must be an object")
    known = _OWN_KEYS | _STDIO_KEYS | _HTTP_KEYS | _OTHER_CLIENTS_KEYS
    unknown = [key for key in entry if key not in known]
    if unknown:
        raise McpConfigError(f"{at}: unknown key {unknown[0]!r}")
    if _flag(entry, "disabled", at):
        return None
    kind = entry.get("type", entry.get("transport"))
    if kind == "sse":
        raise McpConfigError(
            f"{at}: the SSE transport (replaced by streamable HTTP in MCP 2025-03-26) is not "
            "supported; give the server's streamable HTTP endpoint as 'url'"
        )
    has_command, has_url = "command" in entry, "url" in entry
    if has_command == has_url:
        raise McpConfigError(f"{at}: give either 'command' (stdio) or 'url' (streamable HTTP)")
    if kind is not None and kind != "stdio" and kind not in _HTTP_TYPES:
        raise McpConfigError(f"{at}.type: {kind!r} is not stdio or http")
    include, exclude = _strings(entry, "include", at), _strings(entry, "exclude", at)
    trusted = _flag(entry, "trusted", at)
    if has_command:
        stray = [key for key in _HTTP_KEYS if key in entry]
        if stray:
            raise McpConfigError(f"{at}.{stray[0]}: a stdio server (with 'command') takes no url")
        command = entry["command"]
        if not isinstance(command, str) or not command.strip():
            raise McpConfigError(f"{at}.command: must be a non-empty string")
        cwd = entry.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            raise McpConfigError(f"{at}.cwd: must be a string")
        return ServerConfig(
            name,
            "stdio",
            command=command,
            args=_strings(entry, "args", at),
            env=_string_map(entry, "env", at),
            cwd=cwd,
            include=include,
            exclude=exclude,
            trusted=trusted,
        )
    stray = [key for key in _STDIO_KEYS if key in entry]
    if stray:
        raise McpConfigError(f"{at}.{stray[0]}: an HTTP server (with 'url') takes no {stray[0]}")
    url = entry["url"]
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise McpConfigError(f"{at}.url: must be an http:// or https:// URL")
    headers = _string_map(entry, "headers", at)
    return ServerConfig(
        name, "http", url=url, headers=headers, include=include, exclude=exclude, trusted=trusted
    )


def _strings(entry: Mapping[str, Any], key: str, at: str) -> tuple[str, ...]:
    value = entry.get(key, [])
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise McpConfigError(f"{at}.{key}: must be an array of strings")
    return tuple(value)


def _string_map(entry: Mapping[str, Any], key: str, at: str) -> dict[str, str]:
    value = entry.get(key, {})
    if not isinstance(value, Mapping) or not all(isinstance(v, str) for v in value.values()):
        raise McpConfigError(f"{at}.{key}: must be an object of string values")
    return {str(k): v for k, v in value.items()}


def _flag(entry: Mapping[str, Any], key: str, at: str) -> bool:
    value = entry.get(key, False)
    if not isinstance(value, bool):
        raise McpConfigError(f"{at}.{key}: must be true or false")
    return value
