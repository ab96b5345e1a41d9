"""``toolrelay serve``: the OpenAI-compatible gateway in front of a model server."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from pydantic import ValidationError

_KINDS = ("auto", "openai", "vllm", "sglang", "ollama", "lmstudio", "llamacpp")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--backend", help="the model server's base URL, e.g. http://127.0.0.1:8000/v1"
    )
    parser.add_argument("--backend-kind", choices=_KINDS, help="default: auto (detected)")
    parser.add_argument("--tool-mode", choices=("auto", "native", "rescue"), help="default: auto")
    parser.add_argument("--model", help="force every request onto this model")
    parser.add_argument("--host", help="default: 127.0.0.1")
    parser.add_argument("--port", type=int, help="default: 8787")
    parser.add_argument("--config", help="a YAML or JSON config file")
    parser.add_argument(
        "--log-level", default="info", choices=("debug", "info", "warning", "error")
    )


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from toolrelay.io.settings import Settings
    from toolrelay.server import create_app

    # Only the flags given on the command line override the environment and the file.
    explicit: dict[str, Any] = {
        key: value
        for key, value in {
            "backend": args.backend,
            "backend_kind": args.backend_kind,
            "tool_mode": args.tool_mode,
            "model": args.model,
            "host": args.host,
            "port": args.port,
            "config": args.config,
        }.items()
        if value is not None
    }
    try:
        settings = Settings(**explicit)
    except (ValidationError, OSError, ValueError) as exc:
        print(f"toolrelay serve: invalid settings: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    backends = ", ".join(f"{b.url} ({b.kind})" for b in settings.backend_configs())
    print(
        f"toolrelay serve: http://{settings.host}:{settings.port}/v1 in front of {backends}",
        file=sys.stderr,
    )
    uvicorn.run(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        log_level=args.log_level,
        access_log=False,
    )
    return 0
