"""``toolrelay launch CLIENT``: a coding agent on any model server, through the gateway.

The gateway starts in this process on a free 127.0.0.1 port; the client's
settings go into a temporary config home (``clients.py`` says what, per
client); the client runs in the foreground with the user's terminal, and
when it exits the gateway stops, the home is deleted and its exit status is
``toolrelay launch``'s. ``--print CLIENT`` shows the settings instead, for a
gateway the user runs.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from types import FrameType
from typing import Any

import httpx

from toolrelay.cli.flags import add_backend, add_log_level, add_tool_mode, given
from toolrelay.cli.launch.clients import CLIENTS, Client, Target

DEFAULT_GATEWAY = "http://127.0.0.1:8787"
# Everything after ``--`` is the client's (toolrelay.cli.main reads this).
PASSES_ON = True


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Run a coding agent (Claude Code, Codex CLI, opencode, llm) on any model server: "
        "start the gateway on a free loopback port, give the client its settings in a "
        "temporary config home, run it in this terminal, stop the gateway when it exits."
    )
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = (
        "--print writes, instead of launching:\n"
        + "".join(f"  {name:9} {client.printed_as}\n" for name, client in CLIENTS.items())
        + "\nExamples:\n"
        "  toolrelay launch claude --backend http://127.0.0.1:8000/v1\n"
        "  toolrelay launch codex --backend http://127.0.0.1:11434 -- exec 'fix the tests'\n"
        "  toolrelay launch --print opencode --gateway http://127.0.0.1:8787\n"
        "Full reference: docs/clients.md."
    )
    parser.usage = "toolrelay launch [options] CLIENT [-- CLIENT-ARGS]"
    parser.add_argument("client", choices=sorted(CLIENTS), help="the agent to run")
    parser.add_argument(
        "--print",
        action="store_true",
        help="print the client's settings for a gateway you run (--gateway) and exit",
    )
    parser.add_argument(
        "--gateway",
        metavar="URL",
        help=f"with --print: the gateway's URL (default: {DEFAULT_GATEWAY})",
    )
    add_backend(parser)
    add_tool_mode(parser)
    parser.add_argument(
        "--model",
        help="the backend's model; every model name the client asks for goes to it "
        "(default: the first model the backend lists)",
    )
    parser.add_argument("--config", help="the gateway's YAML or JSON config file")
    parser.add_argument(
        "--log-file",
        metavar="FILE",
        help="append the gateway's log to FILE (default: none; the client owns the terminal)",
    )
    add_log_level(parser, "info", "with --log-file: what the log shows (default: info)")


def run(args: argparse.Namespace) -> int:
    client = CLIENTS[args.client]
    client_args = list(args.passed_on)
    if args.print:
        return _print(client, args)
    program = shutil.which(client.program)
    if program is None:
        _say(f"{client.program} is not on PATH; install it with: {client.install}")
        return 127
    return _launch(client, program, client_args, args)


def _print(client: Client, args: argparse.Namespace) -> int:
    gateway = (args.gateway or DEFAULT_GATEWAY).rstrip("/").removesuffix("/v1")
    model = args.model
    if model is None:
        try:
            model = _first_model(gateway)
        except LaunchError as exc:
            _say(f"{exc}; give --model NAME")
            return 2
    sys.stdout.write(client.printed(Target(gateway, model)))
    return 0


def _launch(client: Client, program: str, client_args: list[str], args: Any) -> int:
    from pydantic import ValidationError

    from toolrelay.io.settings import Settings, describe_error
    from toolrelay.io.urls import redact_url
    from toolrelay.server import create_app
    from toolrelay.server.background import BackgroundServer

    _log_to(args.log_file, args.log_level)
    explicit = given(args, "backend", "backend_kind", "tool_mode", "config", "model")
    try:
        settings = Settings(**explicit)
        if settings.model is None:
            # Asked once, of a gateway with no forced model: the backend's own list.
            with BackgroundServer(create_app(settings)) as probe:
                explicit["model"] = _first_model(probe.url)
            settings = Settings(**explicit)
    except ValidationError as exc:
        _say(f"invalid settings:\n{describe_error(exc)}")
        return 2
    except (OSError, ValueError) as exc:
        _say(f"invalid settings: {exc}")
        return 2
    except LaunchError as exc:
        _say(f"{exc}; give --model NAME")
        return 2
    assert settings.model is not None
    with (
        tempfile.TemporaryDirectory(prefix=f"{client.name}-", dir=_homes()) as folder,
        BackgroundServer(create_app(settings)) as gateway,
    ):
        home = Path(folder)
        setup = client.setup(Target(gateway.url, settings.model), home)
        for name, content in setup.files.items():
            (home / name).write_text(content, encoding="utf-8")
        env = {name: value for name, value in os.environ.items() if name not in setup.unset}
        env.update(setup.env)
        _say(
            f"gateway on {gateway.url} in front of {redact_url(settings.backend)} "
            f"(model {settings.model}, tool mode {settings.tool_mode}); starting {client.program}"
        )
        return foreground([program, *client_args], env)


def foreground(argv: list[str], env: dict[str, str]) -> int:
    """Run ``argv`` with this terminal until it exits; its exit status, shell-style.

    Ctrl-C reaches the whole foreground process group: the client decides what
    it means (most interrupt their current turn), and this process, whose
    gateway the client still needs, lets it pass. A handler rather than
    ``SIG_IGN``: ``exec`` resets handlers, so the client gets the default.
    """
    previous_int = signal.signal(signal.SIGINT, _let_pass)
    try:
        child = subprocess.Popen(argv, env=env)
    except OSError as exc:
        signal.signal(signal.SIGINT, previous_int)
        _say(f"cannot start {argv[0]}: {exc}")
        return 126

    def pass_on(signum: int, frame: FrameType | None) -> None:
        child.send_signal(signum)

    previous_term = signal.signal(signal.SIGTERM, pass_on)
    previous_hup = signal.signal(signal.SIGHUP, pass_on)
    try:
        status = child.wait()
    finally:
        signal.signal(signal.SIGINT, previous_int)
        signal.signal(signal.SIGTERM, previous_term)
        signal.signal(signal.SIGHUP, previous_hup)
    return 128 - status if status < 0 else status


def _let_pass(signum: int, frame: FrameType | None) -> None:
    """SIGINT while the client runs: the client handles it."""


class LaunchError(Exception):
    pass


def _first_model(gateway: str) -> str:
    url = gateway + "/v1/models"
    try:
        answer = httpx.get(url, timeout=30)
        answer.raise_for_status()
        models = [entry["id"] for entry in answer.json().get("data", [])]
    except (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise LaunchError(f"cannot list the models at {url}: {exc}") from None
    if not models:
        raise LaunchError(f"{url} lists no model")
    return str(models[0])


def _homes() -> Path:
    """Where the config homes go: not the system's temporary folder, where Codex
    refuses to put the helper commands (apply_patch) its shell tool runs."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    folder = Path(cache) / "toolrelay" / "launch"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _log_to(path: str | None, level: str) -> None:
    root = logging.getLogger()
    if path is None:
        # The client owns the terminal: gateway lines would land in its screen.
        root.handlers[:] = [logging.NullHandler()]
        root.setLevel(logging.CRITICAL)
        return
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # The model listing asked of the gateway: its own access line says enough.
    for chatty in ("httpx", "httpcore"):
        logging.getLogger(chatty).setLevel(logging.WARNING)


def _say(text: str) -> None:
    print(f"toolrelay launch: {text}", file=sys.stderr, flush=True)
