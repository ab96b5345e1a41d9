"""Command-line flags shared by the subcommands that build ``Settings``."""

from __future__ import annotations

import argparse
from typing import Any

BACKEND_KINDS = ("auto", "openai", "vllm", "sglang", "ollama", "lmstudio", "llamacpp")
TOOL_MODES = ("auto", "native", "rescue")
LOG_LEVELS = ("debug", "info", "warning", "error")
_BACKEND_URL = "the model server's base URL, e.g. http://127.0.0.1:8000/v1"


def add_backend(parser: argparse.ArgumentParser, *, several: bool = False) -> None:
    """``--backend URL`` (repeatable when ``several``) and ``--backend-kind``."""
    if several:
        parser.add_argument(
            "--backend",
            action="append",
            help=f"{_BACKEND_URL}; repeat it for several servers of the same models, balanced "
            "(docs/backends.md)",
        )
    else:
        parser.add_argument("--backend", help=_BACKEND_URL)
    parser.add_argument("--backend-kind", choices=BACKEND_KINDS, help="default: auto (detected)")


def add_tool_mode(parser: argparse.ArgumentParser, help: str = "default: auto") -> None:
    parser.add_argument("--tool-mode", choices=TOOL_MODES, help=help)


def add_log_level(parser: argparse.ArgumentParser, default: str, help: str) -> None:
    parser.add_argument("--log-level", default=default, choices=LOG_LEVELS, help=help)


def given(args: argparse.Namespace, *names: str) -> dict[str, Any]:
    """The flags among ``names`` given on the command line: only those override
    the environment and the config file."""
    return {name: getattr(args, name) for name in names if getattr(args, name) is not None}
