"""Error bodies in each API's own shape."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import Response

# The `type` OpenAI uses for each status class.
_OPENAI_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "conflict_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(body), status, headers, media_type="application/json")


def openai_error_body(
    message: str, status: int, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    kind = _OPENAI_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def openai_error(
    message: str, status: int, param: str | None = None, code: str | None = None
) -> Response:
    return json_response(openai_error_body(message, status, param, code), status)


def ollama_error(message: str, status: int) -> Response:
    return json_response({"error": message}, status)


def error_for_path(path: str, message: str, status: int) -> Response:
    """Ollama's shape under /api, OpenAI's everywhere else."""
    if path.startswith("/api/") and not path.startswith("/api/v1/"):
        return ollama_error(message, status)
    return openai_error(message, status)
