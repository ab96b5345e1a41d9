"""The gateway's own API keys (``TOOLRELAY_API_KEYS``): optional bearer tokens.

With keys configured every endpoint but ``/``, ``/health``, the documentation
and the inspector's page (not its API) wants one of them, as ``Authorization:
Bearer KEY`` (OpenAI's SDKs) or ``x-api-key: KEY`` (Anthropic's). Keys are
compared in constant time, every key every time, so the answer's timing tells
nothing about them. The key is the gateway's: it is taken off the request, so
it never reaches a backend.
The admin token (``TOOLRELAY_ADMIN_TOKEN``) is one of the keys too, so that
the one token opens ``POST /api/tools``.
"""

from __future__ import annotations

import hmac
import ipaddress

import orjson
from starlette.types import ASGIApp, Receive, Scope, Send

from toolrelay.server.errors import APIError

# Reachable without a key: a load balancer's health check, the docs and the
# root's one-line description (a client's first probe).
OPEN_PATHS = ("/health", "/docs", "/openapi.json", "/ui/assets")
# Open as they are, not below: the inspector's page holds no data (its API does).
OPEN_PAGES = ("/", "/ui")
# The endpoints that read the client's Authorization themselves (the admin token).
ADMIN_PATHS = ("/api/tools", "/api/facts", "/ui/api")
_CREDENTIALS = (b"authorization", b"x-api-key")


class ApiKeys:
    """ASGI middleware: refuses requests without one of ``keys``."""

    def __init__(self, app: ASGIApp, keys: list[str]) -> None:
        self.app = app
        self._keys = [key.encode() for key in keys]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or _is_open(scope["path"]):
            await self.app(scope, receive, send)
            return
        if not self._known(_presented(scope)):
            await _refuse(scope, receive, send)
            return
        if not _is_admin(scope["path"]):  # which checks the admin token itself
            headers = [(k, v) for k, v in scope["headers"] if k not in _CREDENTIALS]
            scope = {**scope, "headers": headers}
        await self.app(scope, receive, send)

    def _known(self, presented: bytes | None) -> bool:
        if presented is None:
            return False
        found = False
        for key in self._keys:
            found |= hmac.compare_digest(key, presented)
        return found


def _is_open(path: str) -> bool:
    return path in OPEN_PAGES or any(path == p or path.startswith(p + "/") for p in OPEN_PATHS)


def _is_admin(path: str) -> bool:
    return any(path == p or path.startswith(p + "/") for p in ADMIN_PATHS)


def admin_token_accepted(header: str | None, token: str) -> bool:
    """Whether an ``Authorization`` header carries ``token`` as its bearer token."""
    scheme, _, given = (header or "").partition(" ")
    # Constant time: how much of a guess matches must not show in the timing.
    return hmac.compare_digest(
        given.strip().encode() if scheme.lower() == "bearer" else b"", token.encode()
    )


def admin_refusal(header: str | None, token: str | None, endpoint: str) -> APIError | None:
    """The 401 for an admin ``endpoint`` when the admin token is set and not given."""
    if not token or admin_token_accepted(header, token):
        return None
    return APIError(
        401,
        f"{endpoint} needs the admin token: Authorization: Bearer <token>",
        type="authentication_error",
        code="invalid_admin_token",
    )


def _presented(scope: Scope) -> bytes | None:
    for name, value in scope["headers"]:
        if name == b"authorization":
            scheme, _, token = value.partition(b" ")
            if scheme.lower() == b"bearer" and token.strip():
                return bytes(token.strip())
        elif name == b"x-api-key" and value:
            return bytes(value)
    return None


async def _refuse(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] == "websocket":
        await receive()  # websocket.connect
        await send({"type": "websocket.close", "code": 1008, "reason": "invalid API key"})
        return
    error = APIError(
        401,
        "Invalid or missing API key: this gateway wants one of its keys as "
        "'Authorization: Bearer KEY' or 'x-api-key: KEY'.",
        code="invalid_api_key",
    )
    body = orjson.dumps(error.to_dict())
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"www-authenticate", b"Bearer"),
    ]
    await send({"type": "http.response.start", "status": 401, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the gateway on this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything
