"""``toolrelay doctor``: probe a model server's tool calling and say what to set.

Exit status: 0 whenever the probes ran, whatever they found; 1 when the
backend cannot be reached; 2 for wrong arguments (a bad config file, no
model to probe, a --save file that cannot take the result).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError
from rich import box
from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from toolrelay.cli.flags import add_backend, given

_MARKS = {"ok": ("✔", "green"), "warn": ("!", "yellow"), "fail": ("✘", "red"), "info": ("·", "")}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Send a short, fixed set of probe requests to a model server and report how its "
        "tool calling behaves, the settings toolrelay will use, and the server flags that "
        "fix what it recognises."
    )
    add_backend(parser)
    parser.add_argument("--model", help="the model to probe (default: the first one listed)")
    parser.add_argument("--config", help="a YAML or JSON config file (backend, api_key)")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    parser.add_argument(
        "--save", metavar="FILE", help="write the settings into this config file (YAML or JSON)"
    )
    parser.add_argument(
        "--timeout", type=float, default=120.0, metavar="SECONDS", help="per probe (default 120)"
    )


def run(args: argparse.Namespace) -> int:
    from toolrelay.io.backends import Backend, BackendError
    from toolrelay.io.backends.http import Limits
    from toolrelay.io.doctor import ModelUnknown, examine, save
    from toolrelay.io.settings import Settings, describe_error, load_config_file
    from toolrelay.io.urls import redact_url

    explicit = given(args, "backend", "backend_kind", "config")
    try:
        settings = Settings(**explicit)
        if args.save and Path(args.save).exists():
            load_config_file(args.save)  # fail before probing, not after
    except ValidationError as exc:
        return _fail(args, f"invalid settings:\n{describe_error(exc)}", 2)
    except (OSError, ValueError) as exc:
        return _fail(args, f"invalid settings: {exc}", 2)
    config = settings.backend_configs()[0]
    err = Console(stderr=True)

    async def main() -> Any:
        limits = Limits(timeout=args.timeout, connect_timeout=min(args.timeout, 10.0))
        backend = Backend(config, limits=limits)
        try:
            return await examine(backend, args.model, _progress(err))
        finally:
            await backend.aclose()

    try:
        report = asyncio.run(main())
    except BackendError as exc:
        return _fail(
            args, f"cannot reach the backend at {redact_url(config.url)}: {exc.message}", 1
        )
    except ModelUnknown as exc:
        return _fail(args, str(exc), 2)
    saved = None
    if args.save:
        try:
            save(args.save, report.config())
            saved = args.save
        except (OSError, ValueError) as exc:
            return _fail(args, f"cannot save to {args.save}: {exc}", 2)
    if args.json:
        sys.stdout.write(orjson.dumps(report.to_dict(), option=orjson.OPT_INDENT_2).decode())
        sys.stdout.write("\n")
    else:
        _print(Console(), report, saved)
    return 0


def _fail(args: argparse.Namespace, message: str, status: int) -> int:
    print(f"toolrelay doctor: {message}", file=sys.stderr)
    if args.json:
        print(orjson.dumps({"error": message}).decode())
    return status


def _progress(err: Console) -> Any:
    def show(probe: Any, number: int, total: int) -> None:
        err.print(f"[dim]probe {number}/{total}: {probe.name} — {probe.purpose}[/dim]")

    return show


def _print(out: Console, report: Any, saved: str | None) -> None:
    from toolrelay.io.doctor import snippet

    out.print(
        Text.assemble(
            ("toolrelay doctor", "bold"), f"  {report.model} at {report.shown_url} ({report.kind})"
        )
    )
    checks = Table(box=box.SIMPLE, show_header=True, header_style="bold")
    checks.add_column("check")
    checks.add_column("result")
    for check in report.diagnosis.checks:
        mark, style = _MARKS[check.level]
        checks.add_row(Text(f"{mark} {check.title}", style=style), check.verdict)
    out.print(checks)
    probes = Table(box=box.SIMPLE, header_style="bold")
    probes.add_column("probe")
    probes.add_column("seconds", justify="right")
    probes.add_column("what came back")
    for seen in report.observations:
        probes.add_row(seen.probe.name, f"{seen.seconds:.2f}", _outcome(seen))
    out.print(probes)
    if report.constraints:
        listed = ", ".join(map(str, report.constraints))
        out.print(Text(f"constrained decoding: {listed}"), highlight=False)
    out.print(Text("Settings toolrelay will use (config file):", style="bold"))
    out.print(Text(snippet(report.config()).rstrip()), highlight=False)
    if saved:
        out.print(f"saved to {saved}: toolrelay serve --config {saved}")
    if report.diagnosis.fixes:
        out.print(Text("\nFix the server:", style="bold"))
        for fix in report.diagnosis.fixes:
            flags = f": {fix.flags}" if fix.flags else ""
            out.print(Text(f"- {fix.problem}{flags}"), highlight=False)
            out.print(Padding(Text(fix.advice, style="dim"), (0, 0, 0, 2)), highlight=False)


def _outcome(seen: Any) -> str:
    if seen.skipped:
        return f"skipped: {seen.skipped}"
    if seen.error:
        return f"error: {seen.error}"
    parts = []
    if seen.calls:
        parts.append("calls " + ", ".join(c.name for c in seen.calls))
    if seen.text_calls:
        names = ", ".join(c.name for c in seen.text_calls)
        parts.append(f"text calls ({seen.text_format}) {names}")
    text = " ".join(seen.content.split())
    if text and not seen.text_calls:
        parts.append(repr(text if len(text) <= 48 else text[:47] + "…"))
    if not parts:
        parts.append("nothing")
    return "; ".join(parts)
