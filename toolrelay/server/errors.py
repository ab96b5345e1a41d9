"""OpenAI error objects: every error the gateway gives has this shape, and
:func:`api_error`, the one place a failure becomes one."""

from __future__ import annotations

from typing import Any

from toolrelay.errors import RequestError, ToolrelayError
from toolrelay.io.backends.errors import BackendError


class APIError(ToolrelayError):
    """An error answered to the client; ``param`` names the request field at fault."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        type: str = "invalid_request_error",
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.param = param
        self.type = type
        self.code = code
        # Response headers that go with the error (Retry-After, WWW-Authenticate).
        self.headers = headers or {}

    def to_dict(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }


def api_error(exc: BaseException, bug: str = "toolrelay failed") -> APIError:
    """The error to answer for ``exc``: an :class:`APIError` as it is; a request
    toolrelay cannot serve (:class:`~toolrelay.errors.RequestError`) as a 400
    naming its field; a backend's failure as :func:`upstream` says; anything
    else, a bug of ours, as a 500 ``server_error`` saying ``bug``."""
    if isinstance(exc, APIError):
        return exc
    if isinstance(exc, RequestError):
        return invalid(exc.message, exc.param)
    if isinstance(exc, BackendError):
        return upstream(exc)
    if isinstance(exc, ToolrelayError):
        return APIError(exc.status, exc.message, type="server_error")
    return APIError(500, bug, type="server_error")


def invalid(message: str, param: str | None = None) -> APIError:
    return APIError(400, message, param=param)


def upstream(exc: BackendError) -> APIError:
    """The backend's failure: its own 4xx as is, its 5xx as a 502 ``backend_error``
    (it is up: it answered), 502 ``backend_unavailable`` when it never answered,
    503 ``backend_busy`` (with ``Retry-After``) when every slot to it is taken,
    504 ``backend_timeout`` when it did not answer in time."""
    headers = {"retry-after": str(exc.retry_after)} if exc.retry_after is not None else None
    if exc.status < 500:
        return APIError(
            exc.status,
            exc.message,
            type="invalid_request_error",
            code="backend_error",
            headers=headers,
        )
    if exc.status in (503, 504):
        code = "backend_busy" if exc.status == 503 else "backend_timeout"
    else:
        code = "backend_unavailable" if exc.upstream_status is None else "backend_error"
    return APIError(exc.status, exc.message, type="api_error", code=code, headers=headers)
