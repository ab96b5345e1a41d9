"""OpenAI error objects: every error the gateway gives has this shape."""

from __future__ import annotations

from typing import Any


class APIError(Exception):
    """An error answered to the client; ``param`` names the request field at fault."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        type: str = "invalid_request_error",
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.type = type
        self.code = code

    def to_dict(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }


def invalid(message: str, param: str | None = None) -> APIError:
    return APIError(400, message, param=param)


def upstream(status: int, message: str) -> APIError:
    """The backend's failure: its own 4xx as is, 502/504 as a gateway error."""
    if status < 500:
        return APIError(status, message, type="invalid_request_error", code="backend_error")
    code = "backend_timeout" if status == 504 else "backend_unavailable"
    return APIError(status, message, type="api_error", code=code)
