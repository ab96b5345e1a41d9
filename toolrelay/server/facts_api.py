"""``GET|DELETE /api/facts``: what the gateway learned about models, and forgetting it.

``GET /api/facts`` lists every live fact of every backend with when and why it
was learned (``/health`` shows the same). ``DELETE /api/facts`` forgets them
all; ``DELETE /api/facts/{fact}`` one kind (``swallows_streamed_calls``, ...);
``?model=NAME`` and ``?backend=NAME`` narrow either. A forgotten fact is
learned again only from new evidence (or probed again). With
``TOOLRELAY_REDIS_URL`` the other replicas forget it too. ``DELETE`` wants the
admin token when ``TOOLRELAY_ADMIN_TOKEN`` is set, like ``POST /api/tools``.
Answers ``200 {ok, facts}`` or ``{ok, forgotten}``; ``400`` for an unknown
fact; ``404`` for an unknown backend; ``401`` without the admin token.
"""

from __future__ import annotations

import logging
from typing import Any, cast

import orjson
from starlette.requests import Request
from starlette.responses import Response

from toolrelay.io.backends import Backend
from toolrelay.io.backends.facts import FACTS, Fact
from toolrelay.server.auth import admin_refusal
from toolrelay.server.errors import APIError
from toolrelay.server.gateway import Gateway

log = logging.getLogger("toolrelay.facts")


class FactsApi:
    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway

    async def get(self, request: Request) -> Response:
        try:
            backends = self._backends(request)
        except APIError as exc:
            return _error(exc)
        facts = [{"backend": b.name, **fact} for b in backends for fact in b.facts.details()]
        return _json(200, {"ok": True, "facts": facts})

    async def delete(self, request: Request) -> Response:
        refused = admin_refusal(
            request.headers.get("authorization"),
            self.gateway.settings.admin_token,
            "DELETE /api/facts",
        )
        if refused is not None:
            return _error(refused, {"www-authenticate": "Bearer"})
        name = request.path_params.get("fact")
        if name is not None and name not in FACTS:
            known = ", ".join(sorted(FACTS))
            return _error(APIError(400, f"Unknown fact {name!r}; known: {known}", code="no_fact"))
        try:
            backends = self._backends(request)
        except APIError as exc:
            return _error(exc)
        model = request.query_params.get("model")
        fact = cast("Fact | None", name)
        forgotten = [
            {"backend": backend.name, "model": which_model, "fact": which, "value": value}
            for backend in backends
            for which_model, which, value in backend.facts.forget(model, fact)
        ]
        for entry in forgotten:
            log.info(
                "backend %s, model %s: forgot %s (DELETE /api/facts)",
                entry["backend"],
                entry["model"],
                entry["fact"],
            )
        return _json(200, {"ok": True, "forgotten": forgotten})

    def _backends(self, request: Request) -> list[Backend]:
        name = request.query_params.get("backend")
        backends = [b for b in self.gateway.backends if name is None or b.name == name]
        if name is not None and not backends:
            known = ", ".join(b.name for b in self.gateway.backends) or "none"
            raise APIError(
                404, f"No backend is named {name!r} (backends: {known})", code="no_backend"
            )
        return backends


def _error(error: APIError, headers: dict[str, str] | None = None) -> Response:
    return _json(error.status, {"ok": False, **error.to_dict()}, headers)


def _json(status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(body), status, headers, media_type="application/json")


_FACTS_ERROR = {
    "application/json": {"schema": {"$ref": "#/components/schemas/ToolsError"}},
}
_SCOPE = [
    {"name": "model", "in": "query", "required": False, "schema": {"type": "string"}},
    {"name": "backend", "in": "query", "required": False, "schema": {"type": "string"}},
]
_FORGET = {
    "tags": ["facts"],
    "summary": "Forget learned facts (all, or one kind), for a model or backend",
    "security": [{"adminToken": []}],
    "parameters": _SCOPE,
    "responses": {
        "200": {"description": "{ok: true, forgotten: [{backend, model, fact, value}]}"},
        "400": {"description": "An unknown fact", "content": _FACTS_ERROR},
        "401": {"description": "The admin token is set and not given", "content": _FACTS_ERROR},
        "404": {"description": "No backend by that name", "content": _FACTS_ERROR},
    },
}
OPENAPI_PATHS: dict[str, Any] = {
    "/api/facts": {
        "get": {
            "tags": ["facts"],
            "summary": "What the gateway learned about each model: when, why, until when",
            "parameters": _SCOPE[1:],
            "responses": {"200": {"description": "{ok: true, facts: [...]}"}},
        },
        "delete": _FORGET,
    },
    "/api/facts/{fact}": {
        "delete": {
            **_FORGET,
            "parameters": [
                {
                    "name": "fact",
                    "in": "path",
                    "required": True,
                    "schema": {"type": "string", "enum": sorted(FACTS)},
                },
                *_SCOPE,
            ],
        }
    },
}


def document(spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` with the facts endpoints added (under the tag ``facts``)."""
    spec.setdefault("paths", {}).update(OPENAPI_PATHS)
    tags = spec.setdefault("tags", [])
    if not any(tag.get("name") == "facts" for tag in tags):
        tags.append({"name": "facts", "description": "What the gateway learned about models"})
    return spec
