"""The gateway's logging: text lines or JSON objects, and the access log.

Every module logs to ``toolrelay.<area>``; the access log (one line per
request) is ``toolrelay.access``. With ``--log-format json`` each record is
one JSON object, and the access log's fields (``method``, ``path``,
``model``, ``mode``, ``status``, ``duration_ms``, ``request_id``) are keys
of their own.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from pythonjsonlogger.json import JsonFormatter
from starlette.types import ASGIApp, Message, Receive, Scope, Send

access_log = logging.getLogger("toolrelay.access")

# What a handler learns about its request (model, tool mode) for the access log;
# kept in the ASGI scope so that no handler needs to know about logging.
NOTES = "toolrelay.notes"


def configure_logging(level: str, fmt: str) -> None:
    handler = logging.StreamHandler()
    if fmt == "json":
        handler.setFormatter(
            JsonFormatter(
                "{asctime}{levelname}{name}{message}",
                style="{",
                rename_fields={"levelname": "level", "name": "logger", "asctime": "time"},
            )
        )
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


def note(scope: Scope, **values: Any) -> None:
    """Record facts about this request (``model``, ``mode``) for its access-log line."""
    scope.setdefault(NOTES, {}).update(values)


class AccessLog:
    """One log line per HTTP request, written when the response is over."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not access_log.isEnabledFor(logging.INFO):
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 0

        async def send_and_watch(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_and_watch)
        finally:
            notes = scope.get(NOTES, {})
            fields = {
                "method": scope["method"],
                "path": scope["path"],
                "model": notes.get("model", "-"),
                "mode": notes.get("mode", "-"),
                "status": status,
                "duration_ms": round((time.perf_counter() - started) * 1000, 1),
                "request_id": notes.get("request_id", "-"),
            }
            access_log.info(
                "%(method)s %(path)s model=%(model)s mode=%(mode)s %(status)s "
                "%(duration_ms)sms %(request_id)s",
                fields,
                extra=fields,
            )
