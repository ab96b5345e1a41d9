"""The ``mcpServers`` format (pure): what other clients write is read as they
wrote it, and every mistake is an error naming the server and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolrelay.io.mcp.config import McpConfigError, ServerConfig, configured, parse_config
from toolrelay.io.settings import Settings

CLAUDE_DESKTOP = {
    "mcpServers": {
        "files": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"],
            "env": {"DEBUG": "1"},
        },
        # Claude Code's and Cline's own keys ride along.
        "search": {
            "type": "http",
            "url": "https://mcp.example.com/mcp",
            "headers": {"Authorization": "Bearer sk-1"},
            "autoApprove": ["search"],
        },
        "old": {"command": "x", "disabled": True},
    }
}


def test_a_file_as_claude_desktop_and_claude_code_write_it() -> None:
    files, search = parse_config(CLAUDE_DESKTOP)
    assert files == ServerConfig(
        "files",
        "stdio",
        command="npx",
        args=("-y", "@modelcontextprotocol/server-filesystem", "/tmp"),
        env={"DEBUG": "1"},
    )
    assert search.transport == "http"
    assert search.headers == {"Authorization": "Bearer sk-1"}
    assert search.shown == "https://mcp.example.com/mcp"


def test_filters() -> None:
    (server,) = parse_config({"s": {"command": "x", "include": ["get_*"], "exclude": ["*_v1"]}})
    assert [server.offers(name) for name in ("get_a", "get_a_v1", "put_a")] == [
        True,
        False,
        False,
    ]


@pytest.mark.parametrize(
    ("servers", "error"),
    [
        ({"a": {"command": "x", "url": "http://y"}}, "mcpServers.a: give either 'command'"),
        ({"a": {}}, "mcpServers.a: give either 'command' (stdio) or 'url' (streamable HTTP)"),
        ({"a": {"command": ""}}, "mcpServers.a.command: must be a non-empty string"),
        ({"a": {"command": "x", "args": "-y"}}, "mcpServers.a.args: must be an array of strings"),
        ({"a": {"command": "x", "env": {"K": 1}}}, "mcpServers.a.env: must be an object of string"),
        ({"a": {"url": "ftp://x"}}, "mcpServers.a.url: must be an http:// or https:// URL"),
        ({"a": {"url": "http://x", "args": []}}, "mcpServers.a.args: an HTTP server"),
        ({"a": {"url": "http://x", "type": "sse"}}, "mcpServers.a: the SSE transport"),
        ({"a": {"command": "x", "trusted": "yes"}}, "mcpServers.a.trusted: must be true or false"),
        ({"a": {"command": "x", "colour": "red"}}, "mcpServers.a: unknown key 'colour'"),
        ({"a b": {"command": "x"}}, "mcpServers.a b: a server name is letters"),
        ([], "mcpServers: must be an object mapping server names to servers"),
    ],
)
def test_mistakes_name_the_server_and_the_key(servers: object, error: str) -> None:
    with pytest.raises(McpConfigError) as caught:
        parse_config({"mcpServers": servers})
    assert str(caught.value).startswith(error)


def test_the_file_the_config_file_and_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    servers = tmp_path / "mcp.json"
    servers.write_text('{"mcpServers": {"a": {"command": "x"}}}', encoding="utf-8")
    config = tmp_path / "toolrelay.yaml"
    config.write_text(f"mcp_config: {servers}\nmcpServers:\n  b: {{url: 'http://y'}}\n")
    assert [s.name for s in configured(Settings(config=str(config)))] == ["a", "b"]
    monkeypatch.setenv("TOOLRELAY_MCP_SERVERS", '{"a": {"command": "z"}}')
    with pytest.raises(McpConfigError, match="MCP server 'a' is configured twice"):
        configured(Settings(mcp_config=str(servers)))
    # Their env and headers never reach /health's settings.
    assert "mcp_servers" not in Settings().public_dict()
