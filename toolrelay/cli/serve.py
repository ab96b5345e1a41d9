"""``toolrelay serve``: the OpenAI-compatible gateway in front of a model server."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import Any

from pydantic import ValidationError

from toolrelay.cli.flags import add_backend, add_log_level, add_tool_mode, given

log = logging.getLogger("toolrelay.serve")


def configure(parser: argparse.ArgumentParser) -> None:
    from toolrelay.io.settings import environment_help

    parser.description = (
        "Run the OpenAI-compatible gateway in front of a model server: native tool calling "
        "where the backend does it right, the rescue path where it does not."
    )
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = (
        "Flags win over environment variables, which win over the config file.\n"
        "Environment variables:\n"
        f"{environment_help()}\n\n"
        "Full reference: docs/gateway.md (settings, config file, endpoints, errors)."
    )
    add_backend(parser, several=True)
    add_tool_mode(parser)
    parser.add_argument(
        "--model",
        help="the catch-all: requests for a model no alias matches and the backend does not "
        "list go to this model",
    )
    parser.add_argument(
        "--model-alias",
        action="append",
        metavar="CLIENT=BACKEND",
        help="serve the client's model name CLIENT (a glob allowed: 'claude-*') with the "
        "backend's model BACKEND; repeatable",
    )
    parser.add_argument(
        "--validation",
        choices=("repair", "warn", "off"),
        help="tool calls that do not fit their schema: re-ask the model once (repair, the "
        "default), pass them on with a warning (warn), or leave them alone (off)",
    )
    parser.add_argument(
        "--constrain",
        choices=("auto", "off", "json_schema", "grammar", "structural_tag"),
        help="constrained decoding of tool calls where the server offers it: auto (the "
        "default), off, or one kind only (docs/constrained.md)",
    )
    parser.add_argument(
        "--builtin-tools",
        choices=("drop", "error"),
        help="tools only OpenAI's or Anthropic's servers run (web_search, ...): leave them "
        "out with a warning (drop, the default) or refuse the request (error)",
    )
    parser.add_argument("--host", help="default: 127.0.0.1")
    parser.add_argument("--port", type=int, help="default: 8787")
    parser.add_argument(
        "--workers",
        type=int,
        help="gateway processes sharing the port, counters summed across them (default: 1)",
    )
    parser.add_argument(
        "--redis-url",
        metavar="URL",
        help="share learned facts and the /api/tools override between replicas through this "
        "Redis, e.g. redis://127.0.0.1:6379/0 (TOOLRELAY_REDIS_URL; default: none, each "
        "process keeps its own); serve stops at startup if it does not answer",
    )
    parser.add_argument(
        "--forwarded-allow-ips",
        metavar="IPS",
        help="behind a reverse proxy: trust its X-Forwarded-For/-Proto headers when it "
        "connects from one of these comma-separated addresses ('*' for any; also "
        "FORWARDED_ALLOW_IPS; default: none, the headers are not read)",
    )
    parser.add_argument("--config", help="a YAML or JSON config file")
    parser.add_argument(
        "--inspector",
        action="store_true",
        default=None,
        help="serve the request inspector at /ui: recent requests, each attempt's raw answer "
        "and what was parsed, tool-call quality per model (TOOLRELAY_INSPECTOR; docs/inspector.md)",
    )
    parser.add_argument(
        "--otel",
        action="store_true",
        default=None,
        help="export OpenTelemetry traces over OTLP/HTTP (the toolrelay[otel] extra; also on "
        "when OTEL_EXPORTER_OTLP_ENDPOINT is set)",
    )
    add_log_level(
        parser,
        "info",
        "what the log shows: info has one line per request and every fact learned "
        "or fallback taken (default: info)",
    )
    parser.add_argument(
        "--log-format",
        default="text",
        choices=("text", "json"),
        help="text lines, or one JSON object per line for log collectors (default: text)",
    )
    mcp = parser.add_argument_group("MCP servers whose tools toolrelay runs (docs/mcp.md)")
    mcp.add_argument(
        "--mcp-config",
        metavar="FILE",
        help='a JSON file {"mcpServers": {...}} as Claude Desktop, Claude Code and Cursor '
        "write it (TOOLRELAY_MCP_CONFIG)",
    )
    mcp.add_argument(
        "--mcp-optional",
        action="store_true",
        default=None,
        help="start even when an MCP server does not: a warning, and its tools are absent "
        "until it comes up (TOOLRELAY_MCP_OPTIONAL)",
    )
    mcp.add_argument(
        "--mcp-tool-names",
        choices=("auto", "prefixed"),
        help="MCP tools keep their names unless one is taken, then SERVER__tool (auto, the "
        "default), or are always SERVER__tool (prefixed)",
    )
    tools = parser.add_argument_group(
        "HTTP tools run by toolrelay (docs/agent.md; also in the environment and the config file)"
    )
    tools.add_argument(
        "--tools-file",
        metavar="FILE",
        help="JSON array of tool definitions, read once at startup (LLM_TOOLS_FILE; "
        "default: none, tools disabled)",
    )
    tools.add_argument(
        "--tools-enabled",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="master switch (LLM_TOOLS_ENABLED; default: on when a tools file is given)",
    )
    tools.add_argument(
        "--tool-max-iterations",
        type=int,
        metavar="N",
        help="tool rounds per turn before a last round without tools "
        "(LLM_TOOL_MAX_ITERATIONS; default: 4)",
    )
    tools.add_argument(
        "--tool-timeout-secs",
        type=float,
        metavar="S",
        help="timeout of one tool HTTP request (LLM_TOOL_TIMEOUT_SECS; default: 15)",
    )
    tools.add_argument(
        "--tool-result-max-chars",
        type=int,
        metavar="N",
        help="tool results are cut to this many characters "
        "(LLM_TOOL_RESULT_MAX_CHARS; default: 2000)",
    )


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from toolrelay.io.mcp.config import McpConfigError
    from toolrelay.io.settings import Settings, describe_error
    from toolrelay.io.tools.registry import ToolsError
    from toolrelay.io.urls import redact_url
    from toolrelay.server import create_app
    from toolrelay.server.app import settle_collector
    from toolrelay.server.auth import is_loopback
    from toolrelay.server.logs import configure_logging, secrets_of
    from toolrelay.server.tracing import TracingUnavailable

    explicit = given(
        args,
        "backend",
        "backend_kind",
        "tool_mode",
        "model",
        "model_alias",
        "validation",
        "constrain",
        "builtin_tools",
        "host",
        "port",
        "workers",
        "redis_url",
        "config",
        "inspector",
        "otel",
        "tools_file",
        "tools_enabled",
        "tool_max_iterations",
        "tool_timeout_secs",
        "tool_result_max_chars",
        "mcp_config",
        "mcp_optional",
        "mcp_tool_names",
    )
    if "backend" in explicit:
        first, *replicas = explicit["backend"]
        explicit["backend"] = first
        if replicas:
            explicit["backend_replicas"] = replicas
    try:
        settings = Settings(**explicit)
    except ValidationError as exc:
        print(f"toolrelay serve: invalid settings:\n{describe_error(exc)}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as exc:
        print(f"toolrelay serve: invalid settings: {exc}", file=sys.stderr)
        return 2
    if not settings.admin_token and not settings.tools_api_open and not is_loopback(settings.host):
        print(
            f"toolrelay serve: listening on {settings.host}, beyond this machine, anyone who "
            "can reach the port could replace the HTTP tools (POST /api/tools): set "
            "TOOLRELAY_ADMIN_TOKEN, or TOOLRELAY_TOOLS_API_OPEN=true to allow it",
            file=sys.stderr,
        )
        return 2
    configure_logging(args.log_level, args.log_format, secrets_of(settings))
    try:
        app = create_app(settings)
    except ToolsError as exc:
        print(f"toolrelay serve: invalid tools: {exc}", file=sys.stderr)
        return 2
    except McpConfigError as exc:
        print(f"toolrelay serve: invalid MCP configuration: {exc}", file=sys.stderr)
        return 2
    except TracingUnavailable as exc:
        print(f"toolrelay serve: {exc}", file=sys.stderr)
        return 2
    if settings.redis_url:
        import asyncio

        from toolrelay.io.shared import SharedStateError, check_redis

        try:
            asyncio.run(check_redis(settings.redis_url))
        except SharedStateError as exc:
            print(f"toolrelay serve: {exc}", file=sys.stderr)
            return 2
    backends = settings.backend_configs()
    for backend in backends:
        kind = "kind detected at startup" if backend.kind == "auto" else f"kind {backend.kind}"
        log.info(
            "backend %s: %s (%s, tool mode %s)",
            backend.name,
            redact_url(backend.url),
            kind,
            backend.tool_mode,
        )
    if not backends:
        log.warning("no model server is configured (--backend): the LLM is disabled")
    if not settings.api_keys and not is_loopback(settings.host):
        log.warning(
            "listening on %s, beyond this machine, with no API key: anyone who can reach "
            "port %s can use the backends; set TOOLRELAY_API_KEYS",
            settings.host,
            settings.port,
        )
    log.info("toolrelay serve: listening on http://%s:%s/v1", settings.host, settings.port)
    if settings.workers > 1:
        _serve_workers(settings, explicit, args)
        return 0
    settle_collector()
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        log_level=args.log_level,
        log_config=None,  # uvicorn's records go through our handler and format
        access_log=False,  # ours (toolrelay.access) knows the model and the tool mode
        **proxy_options(args.forwarded_allow_ips),
    )
    return 0


def proxy_options(trusted: str | None) -> dict[str, Any]:
    """uvicorn's reading of proxy headers, only when addresses are trusted (the
    flag, else uvicorn's own ``FORWARDED_ALLOW_IPS``). uvicorn reads them by
    default, trusting 127.0.0.1: one more layer on every request and send
    (issue 29), for a client address and scheme the gateway itself never uses."""
    trusted = trusted or os.environ.get("FORWARDED_ALLOW_IPS")
    if not trusted:
        return {"proxy_headers": False}
    return {"proxy_headers": True, "forwarded_allow_ips": trusted}


def _serve_workers(settings: Any, explicit: dict[str, Any], args: argparse.Namespace) -> None:
    """``settings.workers`` processes on one port, sharing their counters.

    Each worker builds its own app from the environment: the flags given here
    are passed on as ``TOOLRELAY_*`` variables, which keep their precedence over
    the config file. Learned facts and the /api/tools override stay per worker
    unless ``TOOLRELAY_REDIS_URL`` shares them (with every other replica too).
    """
    import shutil
    import tempfile

    import uvicorn

    from toolrelay.server.app import WORKER_LOGGING

    shared = tempfile.mkdtemp(prefix="toolrelay-counters-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = shared
    for name, value in explicit.items():
        text = value if isinstance(value, str) else json.dumps(value)
        os.environ[f"TOOLRELAY_{name.upper()}"] = text
    os.environ[WORKER_LOGGING] = f"{args.log_level}:{args.log_format}"
    log.info("toolrelay serve: %d workers", settings.workers)
    try:
        uvicorn.run(
            "toolrelay.server.app:app_from_environment",
            factory=True,
            workers=settings.workers,
            host=settings.host,
            port=settings.port,
            log_level=args.log_level,
            log_config=None,
            access_log=False,
            **proxy_options(args.forwarded_allow_ips),
        )
    finally:
        shutil.rmtree(shared, ignore_errors=True)
