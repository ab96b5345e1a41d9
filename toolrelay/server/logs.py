"""The gateway's logging: text lines or JSON objects, and the access log.

Every module logs to ``toolrelay.<area>``; the access log (one line per
request) is ``toolrelay.access``. With ``--log-format json`` each record is
one JSON object, and the access log's fields (``method``, ``path``,
``model``, ``mode``, ``status``, ``duration_ms``, ``request_id``) are keys
of their own; the line is written by :class:`~toolrelay.server.envelope.Envelope`.

No level prints a credential: every record passes :class:`RedactSecrets`,
which hides the values of credential headers (what uvicorn and websockets
write at ``debug`` about a handshake) and the gateway's own secrets
(its API keys, the admin token, the backends' keys) wherever they appear.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable
from typing import Any

from pythonjsonlogger.json import JsonFormatter
from starlette.types import Scope

from toolrelay.io.settings import Settings

access_log = logging.getLogger("toolrelay.access")

# What a handler learns about its request (model, tool mode) for the access log;
# kept in the ASGI scope so that no handler needs to know about logging.
NOTES = "toolrelay.notes"


_HIDDEN = "***"
# A credential header and its value, as a log line writes it: "Authorization:
# Bearer k", "authorization=...", or a repr such as (b'x-api-key', b'k').
_CREDENTIAL_HEADER = re.compile(
    r"\b((?:proxy-)?authorization|x-api-key|api-key|x-admin-token|(?:set-)?cookie)"
    r"(['\"]?\s*[:=,]\s*(?-i:b)?['\"]?)([^\r\n'\"]*)",
    re.IGNORECASE,
)
# A text without one of these words holds no credential header: the regex is skipped.
_HEADER_WORDS = ("authorization", "api-key", "admin-token", "cookie")
# Shorter "secrets" would hide ordinary words.
_MIN_SECRET = 4


class Redactor:
    """Hides credential header values and the given secrets in a text."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self.secrets = sorted({s for s in secrets if len(s) >= _MIN_SECRET}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        cleaned = text
        lowered = text.lower()
        if any(word in lowered for word in _HEADER_WORDS):
            cleaned = _CREDENTIAL_HEADER.sub(lambda m: m.group(1) + m.group(2) + _HIDDEN, text)
        for secret in self.secrets:
            cleaned = cleaned.replace(secret, _HIDDEN)
        return cleaned


class RedactSecrets(logging.Filter):
    """Hides credential header values and the given secrets in every record."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        self.redact = Redactor(secrets)

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = self.redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


def secrets_of(settings: Settings) -> list[str]:
    """The credentials the settings hold: never to be logged."""
    found = [*settings.api_keys, settings.admin_token or "", settings.api_key or ""]
    found += [backend.api_key or "" for backend in settings.backend_configs()]
    return [secret for secret in found if secret]


class _SecondClock:
    """``formatTime`` with the default format, its seconds written once per
    second: every record of a busy gateway's second shares them."""

    _second = -1
    _stamp = ""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        second = int(record.created)
        if second != self._second:
            # As logging.Formatter writes it (its converter, its default format).
            self._stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(second))
            self._second = second
        return f"{self._stamp},{int(record.msecs):03d}"


class _TextFormatter(_SecondClock, logging.Formatter):
    pass


class _JsonFormatter(_SecondClock, JsonFormatter):
    pass


def configure_logging(level: str, fmt: str, secrets: Iterable[str] = ()) -> None:
    # What no line the gateway writes shows, not looked up for every record (the
    # logging HOWTO's "Optimization"): the caller's source line (a walk up the
    # stack), the thread, the process.
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    handler = logging.StreamHandler()
    handler.addFilter(RedactSecrets(secrets))
    if fmt == "json":
        handler.setFormatter(
            _JsonFormatter(
                "{asctime}{levelname}{name}{message}",
                style="{",
                rename_fields={"levelname": "level", "name": "logger", "asctime": "time"},
            )
        )
    else:
        handler.setFormatter(_TextFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


def note(scope: Scope, **values: Any) -> None:
    """Record facts about this request (``model``, ``mode``) for its access-log line.
    The compiled request path (the envelope, the fronts' turn) writes its own into
    ``scope[NOTES]`` directly: a call of this costs a Python frame."""
    scope.setdefault(NOTES, {}).update(values)
