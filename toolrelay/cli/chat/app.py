"""Putting a chat together: settings, workspace, toolbox, backend, model,
then an interactive session or one message."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from dataclasses import replace
from typing import TYPE_CHECKING

from pydantic import ValidationError
from rich.text import Text

from toolrelay.cli.chat.approval import AlwaysApprove, Approver, AskUser, NobodyToAsk
from toolrelay.cli.chat.repl import Repl
from toolrelay.cli.chat.session import ChatSession
from toolrelay.cli.chat.toolbox import ToolOptions, ToolsFileError, build_toolbox
from toolrelay.cli.chat.view import TurnView, consoles
from toolrelay.cli.chat.workspace import Workspace
from toolrelay.cli.flags import given
from toolrelay.io.backends import BackendError, Backends
from toolrelay.io.engine import LoopConfig
from toolrelay.io.mcp.config import McpConfigError, configured
from toolrelay.io.settings import Settings, describe_error
from toolrelay.io.tools import Toolbox
from toolrelay.io.tools.source import SourceStartError

if TYPE_CHECKING:
    from toolrelay.io.mcp.servers import McpServers
from toolrelay.server.agent import loop_config


class Usage(Exception):
    """Wrong arguments: exit status 2."""


def main(args: argparse.Namespace) -> int:
    # The trace already shows fallbacks and loop-guard verdicts the log would repeat.
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    try:
        settings, workspace = _settings(args)
    except Usage as exc:
        return _fail(str(exc), 2)
    terminal = sys.stdin.isatty()
    approver: Approver = AlwaysApprove() if args.yes else AskUser() if terminal else NobodyToAsk()
    loop = asyncio.new_event_loop()
    try:
        servers = _mcp_servers(settings)
    except McpConfigError as exc:
        return _fail(f"invalid MCP configuration: {exc}", 2)
    try:
        if servers is not None:
            loop.run_until_complete(servers.start())
        toolbox, client = build_toolbox(
            ToolOptions(
                workspace=workspace,
                approver=approver,
                builtins=not args.no_builtins,
                tools_file=args.tools,
                max_chars=args.max_result_chars,
                command_timeout=args.command_timeout,
                http_timeout=settings.tool_timeout_secs,
                mcp=servers,
                ask_mcp=not args.yes,
            )
        )
    except SourceStartError as exc:
        loop.close()
        return _fail(str(exc), 1)
    except ToolsFileError as exc:
        if servers is not None:
            loop.run_until_complete(servers.aclose())
        loop.close()
        return _fail(str(exc), 2)
    backends = Backends(settings)
    try:
        return _chat(args, settings, backends, toolbox, loop, terminal and args.message is None)
    finally:
        loop.run_until_complete(backends.aclose())
        if client is not None:
            loop.run_until_complete(client.aclose())
        if servers is not None:
            loop.run_until_complete(servers.aclose())
        loop.close()


def _mcp_servers(settings: Settings) -> McpServers | None:
    """The configured MCP servers, or None (the SDK, slow to import, is then not loaded)."""
    if not configured(settings):
        return None
    from toolrelay.io.mcp.servers import McpServers

    return McpServers.from_settings(settings)


def _settings(args: argparse.Namespace) -> tuple[Settings, Workspace]:
    if args.max_rounds < 0 or args.max_result_chars < 1 or args.command_timeout <= 0:
        raise Usage(
            "--max-rounds must be 0 or more, --max-result-chars and --command-timeout above 0"
        )
    try:
        flags = ("backend", "backend_kind", "tool_mode", "config", "mcp_config", "mcp_optional")
        settings = Settings(**given(args, *flags))
    except ValidationError as exc:
        raise Usage(f"invalid settings:\n{describe_error(exc)}") from None
    except (OSError, ValueError) as exc:
        raise Usage(f"invalid settings: {exc}") from None
    try:
        workspace = Workspace.at(args.workdir or ".", confined=not args.no_confine)
    except OSError as exc:
        raise Usage(f"--workdir {args.workdir}: {exc.strerror or exc}") from None
    return settings, workspace


def _chat(
    args: argparse.Namespace,
    settings: Settings,
    backends: Backends,
    toolbox: Toolbox,
    loop: asyncio.AbstractEventLoop,
    interactive: bool,
) -> int:
    trace, answer = consoles(interactive)
    try:
        model = (
            args.model
            or settings.model
            or loop.run_until_complete(backends.default.default_model())
        )
    except BackendError as exc:
        where = backends.default.base_url
        return _fail(f"cannot use the backend at {where}: {exc.message} (name a --model?)", 1)
    session = ChatSession(
        backends.for_model(model), model, toolbox, _loop_config(args, settings, model), settings
    )  # fmt: skip
    if interactive:
        return Repl(session, trace, loop).run(_banner(session))
    text = args.message if args.message is not None else sys.stdin.read()
    if not text.strip():
        return _fail("nothing to ask: give -m MESSAGE, or the message on standard input", 2)
    view = TurnView(trace, answer)
    try:
        loop.run_until_complete(session.turn(text, view))
    except BackendError as exc:
        view.close()
        return _fail(f"the backend failed: {exc.message}", 1)
    return 0


def _loop_config(args: argparse.Namespace, settings: Settings, model: str) -> LoopConfig:
    # The gateway's loop settings (the stuck detector's mode per model), with
    # chat's own round limit: an agent at work needs more than a voice turn's 4.
    return replace(loop_config(settings, model), max_iterations=args.max_rounds)


def _banner(session: ChatSession) -> Text:
    backend = session.backend
    tools = ", ".join(session.toolbox.names) or "none"
    return Text.assemble(
        ("toolrelay chat", "bold"),
        f"  {session.model} at {backend.base_url}\n",
        ("tools: ", "dim"),
        (tools, "dim"),
        ("\nCtrl-C cancels a turn, Ctrl-D leaves, /reset forgets the conversation", "dim"),
    )


def _fail(message: str, status: int) -> int:
    print(f"toolrelay chat: {message}", file=sys.stderr)
    return status
