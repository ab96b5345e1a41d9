"""The root of toolrelay's own errors.

Each error carries the HTTP status an answer to it has (as h11's
``ProtocolError`` carries its ``error_status_hint``), so that the gateway maps
every failure to a response in one place (``toolrelay.server.errors.api_error``)
and a library user can catch :class:`ToolrelayError` alone.
"""

from __future__ import annotations


class ToolrelayError(Exception):
    """A failure toolrelay reports; ``status`` is the HTTP status of an answer to it."""

    status: int = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class RequestError(ToolrelayError, ValueError):
    """A request toolrelay cannot serve as it is (a 400); ``param`` names the
    request field at fault."""

    status = 400

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param
