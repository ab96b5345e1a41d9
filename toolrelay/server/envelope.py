"""What every HTTP request gets around it, in one layer: its ``x-request-id``,
its access-log line, and a 500 in the error shape when a bug escapes.

These were three middlewares (Starlette's ``ServerErrorMiddleware``, a
request-id middleware, the access log), each wrapping ``send`` again, so each
streamed chunk passed three wrappers. One layer watches ``send`` once, through a
plain function (no coroutine per chunk), and the fronts' endpoints are reached
without Starlette's error middleware (:class:`~toolrelay.server.app.GatewayApp`).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Awaitable, Callable
from typing import Final

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolrelay.io import ids
from toolrelay.server.asgi import send_json
from toolrelay.server.errors import api_error
from toolrelay.server.logs import NOTES, access_log

# The ids' function as a global, read at each call: tests switch it (patch), where
# a compiled module's function imported by name would be called directly.
unique_hex: Callable[[], str] = ids.unique_hex

# Final: compiled code reads them where they stand, not from the module's dict
# (a lookup for each header the loop of _request_id compares).
_SAFE_REQUEST_ID: Final = re.compile(rb"[\w.:/=+-]{1,128}")
_REQUEST_ID: Final = b"x-request-id"
_NOTES: Final = NOTES


class Envelope:
    """``x-request-id`` on every response (the client's own when it sent a sane
    one, a fresh one otherwise), one access-log line per request when the
    response is over, and a JSON error (a 500 for a bug) for an exception that
    escapes before the response started (raised on, for the server to log)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        request_id = _request_id(scope)
        # logs.note's work written out: its keyword arguments made a Python frame
        # and a dict of every request's.
        scope.setdefault(_NOTES, {})["request_id"] = request_id.decode()
        status = 0

        def watched(message: Message) -> Awaitable[None]:
            # A plain function handing on send's awaitable: no frame of its own
            # left on each chunk's path.
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", ()), (_REQUEST_ID, request_id)]
            return send(message)

        try:
            await self.app(scope, receive, watched)
        except Exception as exc:
            if not status:
                error = api_error(exc, f"internal error: {scope['method']} {scope['path']}")
                await send_json(watched, error.status, error.to_dict(), error.headers)
            raise
        finally:
            if access_log.isEnabledFor(logging.INFO):
                _log(scope, status, started, request_id)


def _request_id(scope: Scope) -> bytes:
    # Each header's name by its index, its value only for the name sought: the
    # headers are untyped to the compiler, and unpacking each pair took an
    # iterator of its own and three steps of it.
    for pair in scope["headers"]:
        if pair[0] == _REQUEST_ID and _SAFE_REQUEST_ID.fullmatch(pair[1]):
            return bytes(pair[1])
    return b"req_" + unique_hex().encode()


def _log(scope: Scope, status: int, started: float, request_id: bytes) -> None:
    notes = scope.get(_NOTES, {})
    method, path = scope["method"], scope["path"]
    model, mode = notes.get("model", "-"), notes.get("mode", "-")
    duration_ms = round((time.perf_counter() - started) * 1000, 1)
    request = request_id.decode()
    fields = {
        "method": method,
        "path": path,
        "model": model,
        "mode": mode,
        "status": status,
        "duration_ms": duration_ms,
        "request_id": request,
    }
    # The line written here, not by the record from a template and a mapping:
    # a message without arguments is not formatted again by each reader of it
    # (the secrets filter and the formatter). The fields ride along as keys of
    # their own for ``--log-format json``.
    line = f"{method} {path} model={model} mode={mode} {status} {duration_ms}ms {request}"
    access_log.info(line, extra=fields)
