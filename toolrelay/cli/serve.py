"""``toolrelay serve``: the OpenAI-compatible gateway in front of a model server."""

from __future__ import annotations

import argparse
import logging
import sys

from pydantic import ValidationError

from toolrelay.cli.flags import BACKEND_KINDS, given

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
    parser.add_argument(
        "--backend", help="the model server's base URL, e.g. http://127.0.0.1:8000/v1"
    )
    parser.add_argument("--backend-kind", choices=BACKEND_KINDS, help="default: auto (detected)")
    parser.add_argument("--tool-mode", choices=("auto", "native", "rescue"), help="default: auto")
    parser.add_argument("--model", help="force every request onto this model")
    parser.add_argument(
        "--validation",
        choices=("repair", "warn", "off"),
        help="tool calls that do not fit their schema: re-ask the model once (repair, the "
        "default), pass them on with a warning (warn), or leave them alone (off)",
    )
    parser.add_argument("--host", help="default: 127.0.0.1")
    parser.add_argument("--port", type=int, help="default: 8787")
    parser.add_argument("--config", help="a YAML or JSON config file")
    parser.add_argument(
        "--log-level",
        default="info",
        choices=("debug", "info", "warning", "error"),
        help="what the log shows: info has one line per request and every fact learned "
        "or fallback taken (default: info)",
    )
    parser.add_argument(
        "--log-format",
        default="text",
        choices=("text", "json"),
        help="text lines, or one JSON object per line for log collectors (default: text)",
    )


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from toolrelay.io.settings import Settings, describe_error
    from toolrelay.server import create_app
    from toolrelay.server.logs import configure_logging

    explicit = given(
        args,
        "backend",
        "backend_kind",
        "tool_mode",
        "model",
        "validation",
        "host",
        "port",
        "config",
    )
    try:
        settings = Settings(**explicit)
    except ValidationError as exc:
        print(f"toolrelay serve: invalid settings:\n{describe_error(exc)}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as exc:
        print(f"toolrelay serve: invalid settings: {exc}", file=sys.stderr)
        return 2
    configure_logging(args.log_level, args.log_format)
    for backend in settings.backend_configs():
        kind = "kind detected at startup" if backend.kind == "auto" else f"kind {backend.kind}"
        log.info(
            "backend %s: %s (%s, tool mode %s)", backend.name, backend.url, kind, backend.tool_mode
        )
    log.info("toolrelay serve: listening on http://%s:%s/v1", settings.host, settings.port)
    uvicorn.run(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        log_level=args.log_level,
        log_config=None,  # uvicorn's records go through our handler and format
        access_log=False,  # ours (toolrelay.access) knows the model and the tool mode
    )
    return 0
