"""Command-line flags shared by the subcommands that build ``Settings``."""

from __future__ import annotations

import argparse
from typing import Any

BACKEND_KINDS = ("auto", "openai", "vllm", "sglang", "ollama", "lmstudio", "llamacpp")


def given(args: argparse.Namespace, *names: str) -> dict[str, Any]:
    """The flags among ``names`` given on the command line: only those override
    the environment and the config file."""
    return {name: getattr(args, name) for name in names if getattr(args, name) is not None}
